"""`nmt export` and `nmt models`: a model as one package file with its card, and the installed
models (install, list, remove, index)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from nmt_cli.cli.app import app
from nmt_cli.runtime import startup

models_app = typer.Typer(
    add_completion=False,
    rich_markup_mode=None,
    no_args_is_help=True,
    help="Installed model packages: install (from a file, a URL or an index), list, remove, and "
    "index a folder of packages.",
)
app.add_typer(models_app, name="models")


@app.command()
@startup.command("the export stopped; no package was written")
def export(
    model: Annotated[str, typer.Argument(metavar="RUN", help="Run dir or checkpoint file.")],
    output: Annotated[
        Path | None,
        typer.Option("-o", "--output", help="The package file (default: NAME.nmt here)."),
    ] = None,
    name: Annotated[
        str | None, typer.Option(help="The model's name on its card (default: the recipe's).")
    ] = None,
    version: Annotated[str, typer.Option(help="The model's version on its card.")] = "1.0",
    quantize: Annotated[
        str,
        typer.Option(
            metavar="none|int8",
            help="int8: store the weights as int8 with a scale per row, about a quarter of "
            "the size; they are read back as float (docs/packages.md gives the BLEU cost).",
        ),
    ] = "none",
) -> None:
    """Write a model (a run dir's best checkpoint) as one package file: weights (safetensors),
    SentencePiece model(s), recipe, and its card with test scores, training corpora and the
    sha256 of every file. nmt translate, eval, score and serve take the package as -m."""
    from nmt_cli.packages.export import ExportOptions, export_package

    path = export_package(model, output, ExportOptions(name, version, quantize))
    typer.echo(f"wrote {path} ({path.stat().st_size / 1e6:.1f} MB)", err=True)


@models_app.command("install")
@startup.command("the install stopped; the installed models are as they were", uses_torch=False)
def install(
    source: Annotated[
        str,
        typer.Argument(
            metavar="PATH|URL|NAME",
            help="A package file or its file://, http:// or https:// URL; with --index, a "
            "model's name in the index.",
        ),
    ],
    index: Annotated[
        str | None,
        typer.Option(metavar="URL", help="An index (nmt models index) to find NAME in."),
    ] = None,
) -> None:
    """Install a package into NMT_HOME (default: the user's data folder), verified whole first;
    an installed older version of the same model is replaced in place."""
    from nmt_cli.packages.index import install as install_package

    model, replaced = install_package(source, index)
    was = f" (replacing {replaced})" if replaced else ""
    typer.echo(f"installed {model.name} {model.version}{was} in {model.path}", err=True)


@models_app.command("list")
@startup.command("listing stopped", uses_torch=False)
def list_models(
    json_out: Annotated[bool, typer.Option("--json", help="Print the cards as JSON.")] = False,
) -> None:
    """The installed models: name, version, directions, size (and with --json their cards)."""
    from nmt_cli.packages.store import installed, models_dir

    found = installed()
    if json_out:
        cards = [{"name": m.name, "card": m.card, "problem": m.problem} for m in found]
        typer.echo(json.dumps(cards, indent=1, ensure_ascii=False))
        return
    if not found:
        typer.echo(f"no models installed in {models_dir()}", err=True)
    for m in found:
        if m.card is None:
            typer.echo(f"{m.name}\tunreadable: {m.problem}")
            continue
        directions = ",".join(m.card.get("directions", []))
        typer.echo(f"{m.name}\t{m.version}\t{directions}\t{m.size / 1e6:.1f} MB")


@models_app.command("remove")
@startup.command("the removal stopped", uses_torch=False)
def remove(name: Annotated[str, typer.Argument(help="An installed model's name.")]) -> None:
    """Remove an installed model."""
    from nmt_cli.packages.store import remove as remove_model

    typer.echo(f"removed {remove_model(name)}", err=True)


@models_app.command("index")
@startup.command("indexing stopped; no index was written", uses_torch=False)
def index(
    folder: Annotated[Path, typer.Argument(metavar="DIR", help="A folder of packages.")],
) -> None:
    """Write DIR/index.json for the packages in DIR (name, version, languages, size, sha256,
    licences, URL relative to the index), for nmt models install --index."""
    from nmt_cli.packages.index import write_index

    path, entries = write_index(folder)
    typer.echo(f"wrote {path} ({len(entries)} packages)", err=True)
