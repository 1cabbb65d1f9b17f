"""`nmt export`: a run dir's model (its best checkpoint, or a checkpoint file) as one package file
(nmt_cli/packages/archive.py) with its card (nmt_cli/packages/card.py).

The package carries the checkpoint's weights exactly (or rounded to int8 with ``quantize``), its
shortlist and language vocabularies, its recipe and SentencePiece models, so that it translates
as the run dir does. Training state (optimiser, data position, random states) stays behind: a
package is for translating, a run dir for training on.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import yaml

from nmt_cli.packages.archive import (
    READABLE_CARD,
    RECIPE,
    SOURCE_SPM,
    SUFFIX,
    TARGET_SPM,
    WEIGHTS,
    file_sha256,
    member_entries,
    write_package,
)
from nmt_cli.packages.card import build_card, check_name, check_version, readable_card
from nmt_cli.packages.scores_record import run_dir_of, scores_of
from nmt_cli.packages.weights import weights_bytes
from nmt_cli.runtime.errors import UserError
from nmt_cli.runtime.version import __version__
from nmt_cli.training.checkpoint import (
    load,
    model_from_payload,
    resolve,
    training_facts,
)


@dataclass
class ExportOptions:
    """What `nmt export` is asked for beyond the model: the card's name (default: the recipe's)
    and version, and how the weights are stored (none: as trained; int8)."""

    name: str | None = None
    version: str = "1.0"
    quantize: str = "none"


def _json(card: dict) -> bytes:
    return (json.dumps(card, indent=1, ensure_ascii=False) + "\n").encode("utf-8")


def export_package(model: str | Path, output: Path | None, options: ExportOptions) -> Path:
    """Write the package of ``model`` (a run dir or checkpoint file) to ``output`` (default:
    NAME.nmt here); the package's path."""
    if output is not None and Path(output).suffix != SUFFIX:
        raise UserError(f"-o/--output {output}: a package's name ends in {SUFFIX}")
    if output is not None and Path(output).is_dir():
        raise UserError(f"-o/--output {output}: is a folder; give the package's file name")
    if Path(model).suffix == SUFFIX and Path(model).is_file():
        raise UserError(f"{model}: is a package already; export takes a run dir or checkpoint")
    checkpoint = resolve(model)
    payload = load(checkpoint)
    loaded = model_from_payload(payload, checkpoint)
    recipe = loaded.recipe
    name = check_name(options.name if options.name is not None else recipe.name)
    version = check_version(options.version)
    output = Path(output) if output is not None else Path(f"{name}{SUFFIX}")
    tokenizer = loaded.tokenizer
    members = {
        RECIPE: yaml.safe_dump(payload["recipe"], sort_keys=False, allow_unicode=True).encode(),
        WEIGHTS: weights_bytes(
            payload["model"],
            loaded.shortlist.to_payload() if loaded.shortlist is not None else None,
            loaded.languages.to_payload() if loaded.languages is not None else None,
            options.quantize,
        ),
        SOURCE_SPM: tokenizer.src_proto,
    }
    if not tokenizer.joint:
        members[TARGET_SPM] = tokenizer.tgt_proto
    step, bleu = training_facts(checkpoint, payload)
    run_dir = run_dir_of(checkpoint)
    scores = scores_of(run_dir, file_sha256(checkpoint)) if run_dir is not None else []
    card = build_card(
        recipe,
        name=name,
        version=version,
        parameters=sum(p.numel() for p in loaded.model.parameters()),
        quantized=options.quantize,
        training={"step": step, "valid_bleu": bleu, "checkpoint": checkpoint.name},
        scores=scores,
        nmt_version=__version__,
        created=datetime.now(timezone.utc).replace(microsecond=0).isoformat(),
        members=member_entries(members),
    )
    members[READABLE_CARD] = readable_card(card).encode("utf-8")
    card["members"] = member_entries(members)
    write_package(output, _json(card), members)
    return output
