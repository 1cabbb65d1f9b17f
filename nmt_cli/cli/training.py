"""`nmt preprocess`, `nmt train` and `nmt average`: from a recipe to a run dir's checkpoints."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from nmt_cli.cli.app import (
    DeviceOption,
    RunDirOption,
    SetOption,
    ThreadsOption,
    _recipe,
    _run_dir,
    app,
)
from nmt_cli.runtime import startup
from nmt_cli.runtime.errors import UserError
from nmt_cli.runtime.interrupts import task

if TYPE_CHECKING:
    from nmt_cli.config.sections import Recipe
    from nmt_cli.data.tokenizer import Tokenizer


def _inherited_tokenizer(recipe: Recipe) -> tuple[Tokenizer, Path] | None:
    """The initial model's tokenizer and checkpoint when the recipe fine-tunes, else None."""
    if not recipe.train.init_from:
        return None
    # reading a checkpoint imports torch, which preprocessing a fresh run never pays
    from nmt_cli.training.finetune import initial_tokenizer

    return initial_tokenizer(recipe)


def _distil(
    recipe: Recipe,
    out: Path,
    log,
    shard: str | None = None,
    threads: int | None = None,
    device: str = "auto",
) -> bool:
    """The teacher's translations of the training sources (data.teacher), made or resumed in
    ``out``/teacher before the data pipeline reads them; False when a --shard left the rest to
    other processes."""
    # here, not at the top: a teacher means torch, which preprocessing alone never loads
    startup.import_torch()
    from nmt_cli.runtime.device import configure_threads
    from nmt_cli.translation.distillation import distil
    from nmt_cli.translation.shards import parse_shard

    part = parse_shard(shard) if shard is not None else None
    configure_threads(threads)
    left = f"distillation into {out / 'teacher'} stopped; the same command resumes it"
    with task(left):
        progress = distil(recipe, out, log, shard=part, device=device)
    if progress.translated:
        log(
            f"teacher: {progress.lines} training sources translated in {progress.seconds:.0f} s "
            f"({progress.lines / max(progress.seconds, 1e-9):.1f} sentences/s); "
            f"{progress.found} chunks were already done"
        )
    if part is not None:
        log(
            f"shard {part[0]}/{part[1]}: its chunks are translated ({progress.others} belong to "
            "other shards); once every shard is done, nmt preprocess without --shard joins them "
            "and preprocesses"
        )
    return progress.complete


@app.command()
@startup.command("preprocessing stopped before it began; nothing was written", uses_torch=False)
def preprocess(
    recipe: Annotated[Path, typer.Argument(help="YAML recipe, e.g. recipes/en-fr.yaml")],
    run_dir: RunDirOption = None,
    shard: Annotated[
        str | None,
        typer.Option(
            help="I/N: with data.teacher, translate only the training sources' chunks k with k "
            "mod N = I into the run dir (shared by N processes or machines), then stop; 'rank' "
            "takes I/N from torchrun's RANK/WORLD_SIZE. A run without --shard translates what "
            "is left and preprocesses."
        ),
    ] = None,
    threads: ThreadsOption = None,
    device: DeviceOption = "auto",
    set_: SetOption = None,
) -> None:
    """Fetch the corpus, clean and filter it, learn SentencePiece, and store encoded splits in
    the run dir. With data.teacher, the teacher first translates the training sources (resumable:
    the same command continues where a stopped one left off), and the student trains on them."""
    # here, not at the top: numpy, SentencePiece and the corpus code load with the command
    from nmt_cli.data.preprocess import preprocess as run_preprocess

    r = _recipe(recipe, set_)
    out = _run_dir(r, run_dir)
    if shard is not None and not r.data.teacher:
        raise UserError(
            "--shard: shares a teacher's translations, and the recipe has no data.teacher"
        )
    log = lambda m: typer.echo(m, err=True)
    inherited = _inherited_tokenizer(r)
    if r.data.teacher and not _distil(r, out, log, shard, threads, device):
        return
    with task(f"preprocessing into {out} did not finish; run nmt preprocess again"):
        run_preprocess(r, out, log=log, inherited=inherited)
    typer.echo(f"preprocessed into {out}", err=True)


@app.command()
@startup.command(
    "training stopped before its first step; the run dir's checkpoints are as they were"
)
def train(
    recipe: Annotated[Path, typer.Argument(help="YAML recipe, e.g. recipes/en-fr.yaml")],
    run_dir: RunDirOption = None,
    max_steps: Annotated[
        int | None, typer.Option(help="Stop after this many steps (train.max_steps).")
    ] = None,
    max_minutes: Annotated[
        float | None,
        typer.Option(help="Stop after this much wall-clock time (train.max_minutes)."),
    ] = None,
    device: DeviceOption = "auto",
    restart: Annotated[
        bool, typer.Option("--restart", help="Ignore existing checkpoints and start over.")
    ] = False,
    threads: ThreadsOption = None,
    init_from: Annotated[
        str | None,
        typer.Option(
            "--init-from",
            metavar="RUN|CHECKPOINT",
            help="Fine-tune: start from this model's weights and tokenizer, with a fresh "
            "optimiser and schedule (train.init_from).",
        ),
    ] = None,
    set_: SetOption = None,
) -> None:
    """Train a model; resumes from the run dir's last checkpoint when there is one.

    Runs preprocessing first if the run dir has no data. Ctrl-C or SIGTERM writes a checkpoint and
    stops; running the same command again resumes exactly.
    """
    # here, not at the top: torch and the training loop load with the command, not with --help
    from nmt_cli.data.preprocess import ensure_preprocessed
    from nmt_cli.runtime.device import pick_device, resolve_precision
    from nmt_cli.training.loop import train as run_train

    extra = (
        ([f"train.max_steps={max_steps}"] if max_steps is not None else [])
        + ([f"train.max_minutes={max_minutes}"] if max_minutes is not None else [])
        + ([f"train.init_from={init_from}"] if init_from is not None else [])
    )
    r = _recipe(recipe, set_, extra)
    out = _run_dir(r, run_dir)
    # a device mismatch fails before preprocessing, and so does an initial model that cannot be used
    resolve_precision(r.train.precision, pick_device(device))
    inherited = _inherited_tokenizer(r)
    log = lambda m: typer.echo(m, err=True)
    if r.data.teacher and not (out / "data" / "meta.json").exists():
        _distil(r, out, log, threads=threads, device=device)
    with task(f"preprocessing into {out} did not finish; run the same command again"):
        ensure_preprocessed(r, out, log=log, inherited=inherited)
    summary = run_train(r, out, device=device, restart=restart)
    typer.echo(
        json.dumps(
            {
                k: summary[k]
                for k in ("steps", "final_step", "wall_s", "tgt_tokens_per_s", "peak_rss_mb")
            }
        )
    )


def _averaging_unfinished(output: Path, **_) -> str:
    return f"averaging stopped; {output} was not written"


@app.command()
@startup.command(_averaging_unfinished)
def average(
    run_dir: Annotated[Path, typer.Argument(help="Run dir whose numbered checkpoints to average.")],
    last: Annotated[int, typer.Option(min=1, help="Average the N newest checkpoints.")] = 5,
    output: Annotated[
        Path, typer.Option("-o", "--output", help="Where to write the averaged checkpoint.")
    ] = Path("averaged.pt"),
) -> None:
    """Average the weights of the last N checkpoints into one checkpoint that translate can use."""
    # here, not at the top: checkpoints need torch
    from nmt_cli.training.checkpoint import average as run_average
    from nmt_cli.training.checkpoint import step_checkpoints

    paths = step_checkpoints(run_dir)[-last:]
    if not paths:
        raise UserError(f"{run_dir}: no numbered checkpoints (checkpoints/step-N.pt) to average")
    if len(paths) < last:
        typer.echo(f"note: only {len(paths)} checkpoints found, averaging those", err=True)
    out = run_average(paths, output)
    typer.echo(f"averaged {len(paths)} checkpoints into {out}", err=True)
