"""The start-up decorator every `nmt` command is declared with, called in this process."""

import gc
import inspect

import pytest

from nmt_cli.runtime import device, interrupts, startup


@pytest.fixture(autouse=True)
def restored(monkeypatch):
    """Each test sees its own threads' configuration and leaves the collector as it found it."""
    configured = []
    monkeypatch.setattr(device, "configure_threads", lambda n: configured.append(n) or (n or 3))
    monkeypatch.setattr(interrupts, "_command", interrupts._command)
    yield configured
    gc.unfreeze()
    gc.enable()


def test_a_command_says_what_an_interruption_leaves_unfinished():
    @startup.command(lambda output, **_: f"{output} was not written", uses_torch=False)
    def write(output: str, lines: int = 1) -> str:
        return interrupts.unfinished()

    assert write(output="out.txt", lines=2) == "out.txt was not written"

    @startup.command("nothing was scored", uses_torch=False)
    def score() -> str:
        return interrupts.unfinished()

    assert score() == "nothing was scored"


def test_a_torch_command_gets_torch_imported_the_collector_on_and_its_threads(restored):
    seen = {}

    @startup.command("stopped", uses_torch=True)
    def translate(threads: int | None = None) -> int:
        import sys

        seen.update(torch="torch" in sys.modules, gc=gc.isenabled(), frozen=gc.get_freeze_count())
        return threads

    gc.unfreeze()
    assert translate(threads=None) == 3 and translate(threads=2) == 2
    assert restored == [None, 2]  # --threads as given, resolved by configure_threads
    assert seen["torch"] and seen["gc"] and seen["frozen"] > 0


def test_a_command_decides_from_its_options_whether_it_needs_torch(restored):
    @startup.command("stopped", uses_torch=lambda model, **_: bool(model))
    def evaluate(model: list[str] | None = None, threads: int | None = None):
        return threads

    assert evaluate(model=None, threads=None) is None  # scoring files: no torch, no threads
    assert restored == []
    assert evaluate(model=["run"], threads=None) == 3
    assert restored == [None]


def test_typer_reads_the_command_s_own_signature_and_help():
    def average(run_dir: str, last: int = 5) -> None:
        """Average the weights."""

    declared = startup.command("stopped")(average)
    assert inspect.signature(declared) == inspect.signature(average)
    assert declared.__doc__ == "Average the weights." and declared.__name__ == "average"
