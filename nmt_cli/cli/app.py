"""The `nmt` application: the typer app every command registers with, the options several commands
share, and main(), which turns errors and signals into one line and an exit code."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated

import typer

from nmt_cli import __version__
from nmt_cli.runtime import startup
from nmt_cli.runtime.errors import TrainingInterrupted, UserError, refusal_line
from nmt_cli.runtime.interrupts import Interrupted

app = typer.Typer(
    add_completion=False,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
    help="Attentional RNN encoder-decoder translation: preprocess, train, translate, evaluate.",
)

SetOption = Annotated[
    list[str] | None,
    typer.Option(
        "--set",
        metavar="KEY=VALUE",
        help="Override a recipe key by dotted path, e.g. model.hidden_dim=128 "
        "(repeatable; checked like the file).",
    ),
]
RunDirOption = Annotated[
    Path | None,
    typer.Option("--run-dir", help="Where the run's files go (default: runs/<recipe name>)."),
]
ModelOption = Annotated[
    list[str] | None,
    typer.Option(
        "-m",
        "--model",
        metavar="RUN",
        help="Run dir, checkpoint file, package (NAME.nmt) or installed model's name; repeat to "
        "ensemble several models.",
    ),
]
# How nmt_cli.runtime.device.resolve_threads decides, spelled out so that --help does not import
# torch.
ThreadsOption = Annotated[
    int | None,
    typer.Option(
        "--threads",
        min=1,
        metavar="N",
        help="CPU threads for torch (also $NMT_THREADS). Default: the cores "
        "not already busy with other processes, so that a busy machine does not slow nmt down many "
        "times over; OMP_NUM_THREADS, when set, is used as given.",
    ),
]


def _check_device(name: str) -> str:
    """--device checked as the command line is read (nmt_cli/runtime/device.py, check_device):
    auto and cpu need nothing of torch; any other name is held against this machine's devices."""
    if name not in ("auto", "cpu"):
        startup.import_torch()
        # here, not at the top: `nmt --help` and the commands without a model never import torch
        from nmt_cli.runtime.device import check_device

        check_device(name)
    return name


DeviceOption = Annotated[
    str,
    typer.Option(
        metavar="auto|cpu|cuda[:N]|mps",
        callback=_check_device,
        help="Where the model runs: auto (a GPU when there is one, else the CPU), cpu, cuda, "
        "cuda:N (the N-th GPU) or mps.",
    ),
]


def _version(value: bool) -> None:
    if value:
        typer.echo(f"nmt {__version__}")
        raise typer.Exit()


@app.callback(invoke_without_command=True)
def main_options(
    ctx: typer.Context,
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    if ctx.invoked_subcommand is None:  # a bare `nmt`: the help is the answer
        typer.echo(ctx.get_help(), err=True)
        raise typer.Exit(2)


def _recipe(path: Path, overrides: list[str] | None, extra: list[str] = ()):
    # here, not at the top: a recipe brings YAML, which `nmt --help` never needs
    from nmt_cli.config.recipes import load_recipe

    return load_recipe(path, list(overrides or []) + list(extra))


def _run_dir(recipe, run_dir: Path | None) -> Path:
    return run_dir if run_dir is not None else Path("runs") / recipe.name


def _read(path: Path) -> list[str]:
    # here, not at the top: the corpus readers bring numpy and the download code
    from nmt_cli.data.corpora import read_lines

    return read_lines(path)


def _close_stdout() -> None:
    """Flush what the command wrote to stdout, so that a reader who closed the pipe early is met
    here (BrokenPipeError, exit 141) rather than in the interpreter's teardown."""
    sys.stdout.flush()


def main() -> None:
    """Entry point: user errors become one line on stderr and exit code 2, never a traceback; a
    signal exits 128 + its number with one line saying what was left incomplete."""
    startup.prepare_process()
    try:
        code = app(standalone_mode=False, prog_name="nmt")
        _close_stdout()
    except UserError as exc:
        print(f"nmt: error: {exc}", file=sys.stderr)
        sys.exit(exc.exit_code)
    except typer.TyperException as exc:  # a bad option or value on the command line
        where = getattr(getattr(exc, "ctx", None), "command_path", "nmt")
        print(f"nmt: error: {exc.format_message()} (see {where} --help)", file=sys.stderr)
        sys.exit(exc.exit_code)
    except TrainingInterrupted as exc:
        print(f"nmt: {exc}; checkpoint written, run the same command to resume", file=sys.stderr)
        sys.exit(exc.exit_code)
    except Interrupted as exc:
        print(f"nmt: {exc}", file=sys.stderr)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        print("nmt: interrupted", file=sys.stderr)
        sys.exit(130)
    except BrokenPipeError:
        # the reader is gone: what is still buffered for stdout goes nowhere, not into an error
        # at exit (the signal module's documentation on SIGPIPE)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(141)
    except OSError as exc:  # a path the user gave that the system refuses: a run dir, an -o file
        print(f"nmt: error: {refusal_line(exc)}", file=sys.stderr)
        sys.exit(2)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except typer.Abort:
        print("nmt: aborted", file=sys.stderr)
        sys.exit(1)
    if isinstance(code, int) and code:  # typer hands back an Exit's code (130 for a stray Ctrl-C)
        if code == 130:
            print("nmt: interrupted", file=sys.stderr)
        sys.exit(code)
