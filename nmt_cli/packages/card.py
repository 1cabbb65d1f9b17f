"""A package's model card: what the model is, what it was trained on and how well it translates,
as ``card.json`` for programs and ``CARD.md`` for people (docs/packages.md lists the fields).

The card is built from the checkpoint's recipe (languages, directions, model shape, training
corpora with their source and licence: the corpus registry's, else the recipe's
``data.licence``), its training progress (step, validation BLEU), the run dir's recorded test
scores (nmt_cli/packages/scores_record.py) and the package's members (size, sha256).
"""

from __future__ import annotations

import re

from nmt_cli.config.sections import Recipe
from nmt_cli.data.corpora import REGISTRY
from nmt_cli.data.directions import is_multilingual, recipe_directions
from nmt_cli.runtime.errors import UserError

CARD_FORMAT = 1
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
VERSION = re.compile(r"[0-9]+(\.[0-9]+){0,3}")


def check_name(name: str, what: str = "--name") -> str:
    if not NAME.fullmatch(name):
        raise UserError(
            f"{what}: {name[:80]!r} is not a model name (letters, digits, '.', '_', '-'; "
            "at most 64, starting with a letter or digit)"
        )
    return name


def check_version(version: str, what: str = "--version") -> str:
    if not VERSION.fullmatch(version):
        raise UserError(f"{what}: {version[:40]!r} is not a version (1, 1.2, 1.2.3 or 1.2.3.4)")
    return version


def version_key(version: str) -> tuple[int, ...]:
    """A version's order: 1.10 after 1.9."""
    return tuple(int(part) for part in version.split("."))


def _as_list(value) -> list[str]:
    return [value] if isinstance(value, str) else list(value)


def corpora_of(recipe: Recipe) -> list[dict]:
    """The training corpora of ``recipe``, each with its source and licence."""
    data = recipe.data
    licence = data.licence
    out = []
    corpus = REGISTRY.get(data.corpus) if data.corpus else None
    if corpus is not None:
        out.append(
            {
                "name": corpus.name,
                "splits": _as_list(data.train),
                "source": corpus.source,
                "licence": licence.get(corpus.name, corpus.licence),
            }
        )
    else:
        for path in _as_list(data.train):
            out.append({"name": path, "source": path, "licence": licence.get(path, "not stated")})
    for kind, files in (("pairs", data.pairs), ("back-translated", data.back_translated)):
        for direction, path in files.items():
            entry = {"name": path, "source": path, "licence": licence.get(path, "not stated")}
            out.append({**entry, "direction": direction, "kind": kind})
    return out


def build_card(
    recipe: Recipe,
    *,
    name: str,
    version: str,
    parameters: int,
    quantized: str,
    training: dict,
    scores: list[dict],
    nmt_version: str,
    created: str,
    members: dict[str, dict],
) -> dict:
    """The card.json of a package (see the module docstring)."""
    directions = [d.name for d in recipe_directions(recipe)]
    languages = sorted({lang for d in directions for lang in d.split("-")})
    return {
        "format": CARD_FORMAT,
        "name": name,
        "version": version,
        "languages": languages,
        "directions": directions,
        "multilingual": is_multilingual(recipe),
        "parameters": parameters,
        "weights_bytes": members["model.safetensors"]["size"],
        "quantized": quantized,
        "model": {
            "rnn": recipe.model.rnn,
            "layers": recipe.model.layers,
            "hidden_dim": recipe.model.hidden_dim,
            "embed_dim": recipe.model.embed_dim,
            "vocab_size": recipe.tokenizer.vocab_size,
            "recipe": recipe.name,
        },
        "training": training,
        "test_scores": scores,
        "corpora": corpora_of(recipe),
        "nmt_version": nmt_version,
        "created": created,
        "members": members,
    }


def _mb(size: int) -> str:
    return f"{size / 1e6:.1f} MB"


def _cell(text: str) -> str:
    """``text`` in a Markdown table cell: its pipes (a sacreBLEU signature's) escaped."""
    return str(text).replace("|", "\\|")


def readable_card(card: dict) -> str:
    """CARD.md: the card for people, in Markdown."""
    lines = [
        f"# {card['name']} {card['version']}",
        "",
        f"Translates {', '.join(card['directions'])}"
        + (" (and, zero-shot, untrained directions)." if card["multilingual"] else "."),
        "",
        f"- Parameters: {card['parameters']:,}; weights {_mb(card['weights_bytes'])}"
        f" ({'int8' if card['quantized'] == 'int8' else 'as trained'})",
        f"- Model: {card['model']['layers']}-layer {card['model']['rnn'].upper()}, "
        f"hidden {card['model']['hidden_dim']}, vocabulary {card['model']['vocab_size']}",
        f"- Training: step {card['training'].get('step')}, "
        f"validation BLEU {card['training'].get('valid_bleu')}",
        f"- Made with nmt {card['nmt_version']} on {card['created']}",
        "",
        "## Test scores",
        "",
    ]
    if card["test_scores"]:
        if card["quantized"] == "int8":
            lines += ["Measured with the weights as trained, before they were rounded to int8.", ""]
        lines += ["| test set | direction | metric | score | signature |", "|---|---|---|---|---|"]
        lines += [
            f"| {s['test_set']} | {s['direction']} | {s['metric']} | {s['score']:.2f} | "
            f"`{_cell(s['signature'])}` |"
            for s in card["test_scores"]
        ]
    else:
        lines.append("None recorded (nmt eval -m RUN --record TESTSET records them).")
    lines += ["", "## Training corpora", "", "| corpus | source | licence |", "|---|---|---|"]
    lines += [
        f"| {_cell(c['name'])} | {_cell(c['source'])} | {_cell(c['licence'])} |"
        for c in card["corpora"]
    ]
    lines += ["", "## Files", "", "| file | bytes | sha256 |", "|---|---|---|"]
    lines += [f"| {n} | {m['size']} | `{m['sha256']}` |" for n, m in card["members"].items()]
    return "\n".join(lines) + "\n"
