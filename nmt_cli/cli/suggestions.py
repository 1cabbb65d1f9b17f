"""`nmt suggestions list` and `nmt suggestions export`: the corrections `nmt serve --suggestions`
took, checked (nmt_cli/serving/suggestion_export.py), and the usable ones written as training
pairs for `nmt train --init-from` (docs/serve.md#from-corrections-to-a-better-model)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from nmt_cli.cli.app import app
from nmt_cli.runtime.errors import UserError

suggestions_app = typer.Typer(
    help="The corrections nmt serve --suggestions took: list them, export the usable ones.",
    no_args_is_help=True,
)
app.add_typer(suggestions_app, name="suggestions")

DatabaseArgument = Annotated[
    Path, typer.Argument(metavar="DB", help="The SQLite file given to nmt serve --suggestions.")
]
SourceOption = Annotated[str | None, typer.Option(help="Only the suggestions from this language.")]
TargetOption = Annotated[str | None, typer.Option(help="Only the suggestions into this language.")]
MaxRatioOption = Annotated[
    float,
    typer.Option(
        min=1.0,
        help="Drop a pair whose one side has more than this many times the words of the other.",
    ),
]


def _verdicts(db: Path, source: str | None, target: str | None, max_ratio: float):
    # here, not at the top: the checks need the serve extra (the language identifier)
    try:
        from nmt_cli.serving.suggestion_export import SuggestionFilter, Tally
        from nmt_cli.serving.suggestions import SuggestionStore
    except ModuleNotFoundError as exc:
        raise UserError(
            f"nmt suggestions needs the serve extra ({exc.name}): pip install 'nmt[serve]'"
        ) from None
    store = SuggestionStore(db, readonly=True)
    return SuggestionFilter(max_ratio).verdicts(store.suggestions(source, target)), Tally()


@suggestions_app.command("list")
def list_suggestions(
    db: DatabaseArgument,
    source: SourceOption = None,
    target: TargetOption = None,
    max_ratio: MaxRatioOption = 3.0,
) -> None:
    """Every suggestion, oldest first, one line each: id, pair, 'kept' or why export drops it,
    source text, suggested translation (tab-separated); the counts on stderr."""
    verdicts, tally = _verdicts(db, source, target, max_ratio)
    for v in verdicts:
        tally.add(v)
        s = v.suggestion
        fields = [str(s.id), f"{s.source}-{s.target}", v.dropped or "kept", s.q, s.s]
        typer.echo("\t".join(" ".join(f.split()) for f in fields))
    for line in tally.lines(str(db)):
        typer.echo(line, err=True)


@suggestions_app.command("export")
def export(
    db: DatabaseArgument,
    output: Annotated[
        Path, typer.Option("-o", "--output", help="The source<TAB>target file to write.")
    ],
    source: SourceOption = None,
    target: TargetOption = None,
    max_ratio: MaxRatioOption = 3.0,
) -> None:
    """Write the usable suggestions of one language pair as source<TAB>target lines (a
    data.format: tsv training file); say how many each check dropped."""
    from nmt_cli.runtime.output_file import atomic_text_output

    verdicts, tally = _verdicts(db, source, target, max_ratio)  # checks the serve extra first
    from nmt_cli.serving.suggestion_export import training_line

    pairs: set[tuple[str, str]] = set()
    with atomic_text_output(output) as out:
        for v in verdicts:
            tally.add(v)
            pairs.add((v.suggestion.source, v.suggestion.target))
            if len(pairs) > 1:
                named = ", ".join(sorted("-".join(p) for p in pairs))
                raise UserError(f"{db} holds suggestions of {named}: give --source and --target")
            if v.dropped is None:
                out.write(training_line(v.suggestion))
    for line in tally.lines(str(db)):
        typer.echo(line, err=True)
    typer.echo(f"{tally.kept} pairs written to {output}", err=True)
