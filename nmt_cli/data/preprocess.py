"""Preprocessing: corpus text -> cleaned, filtered pairs -> SentencePiece ids in a run dir.

Preprocessing streams: a first pass over the training corpora only decompresses and counts
lines, drawing SentencePiece's training sample; once SentencePiece is learned, one pass reads
every corpus in blocks of lines and hands each block to a worker process (one per core,
nmt_cli/data/workers.py), which cleans, filters and encodes it; this process deduplicates
(optionally)
and stores the kept text and the ids in corpus order (nmt_cli/data/store.py). Memory is bounded by
the
block and sample sizes, whatever the corpus size. ``data/meta.json`` is removed first and written
last, so a preprocess stopped at any moment leaves nothing training takes for complete.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import chain, compress
from pathlib import Path

import numpy as np
import yaml

from nmt_cli.config.direction_keys import is_multilingual, recipe_directions
from nmt_cli.config.recipes import save_recipe
from nmt_cli.config.sections import Recipe
from nmt_cli.data import corpora
from nmt_cli.data.arrays import SideWriter, id_dtype
from nmt_cli.data.distilled import train_sources
from nmt_cli.data.multilingual import (
    directions_heldout,
    encode_tagged_source,
    is_tagged,
    train_groups,
    training_sources,
    with_prefix,
)
from nmt_cli.data.pairs import (
    CleanChunk,
    Cleaning,
    Deduplicator,
    PairSource,
    chunks,
    encoded_lines,
    split_block,
)
from nmt_cli.data.splits import pair_source, save_tok_references, split_names
from nmt_cli.data.store import DATA_FORMAT, count_split_shortlist, save_shortlist_arrays
from nmt_cli.data.tokenizer import Tokenizer, normalize
from nmt_cli.data.tokenizer_sample import TEXT_CHUNK, learn_tokenizer, nothing_kept
from nmt_cli.data.workers import ordered_map
from nmt_cli.runtime.cores import usable_cores
from nmt_cli.runtime.errors import DataError
from nmt_cli.runtime.output_file import AtomicFile, write_text_atomic

# Lines a worker encodes at a time: their Python ints stay bounded, whatever the corpus size.
ENCODE_CHUNK = 20_000


class _TextPairs:
    """``{name}.src.txt`` and ``{name}.tgt.txt`` written side by side, renamed into place on
    close."""

    def __init__(self, data_dir: Path, name: str):
        self.out = [AtomicFile(data_dir / f"{name}.{side}.txt") for side in ("src", "tgt")]
        self.pairs = 0  # written so far by write()

    def write(self, pairs: list[tuple[str, str]]) -> None:
        # Normalised lines hold no line break, so one line stays one line.
        self.pairs += len(pairs)
        self.write_text(
            "".join(s + "\n" for s, _ in pairs).encode("utf-8"),
            "".join(t + "\n" for _, t in pairs).encode("utf-8"),
        )

    def write_text(self, src: bytes, tgt: bytes) -> None:
        """Lines already joined and encoded, each ending in a line break."""
        self.out[0].file.write(src)
        self.out[1].file.write(tgt)

    def close(self) -> None:
        for out in self.out:
            out.commit()

    def abort(self) -> None:
        for out in self.out:
            out.abort()


def _prepare_data_dir(data_dir: Path, log) -> None:
    """Remove the completion mark (meta.json) before anything else changes, and leftovers of a
    stopped run; say which of the two this is."""
    meta = data_dir / "meta.json"
    if meta.exists():
        log(f"{data_dir}: replacing the preprocessed data there")
        meta.unlink()
    elif data_dir.is_dir() and any(data_dir.iterdir()):
        log(f"{data_dir}: an earlier nmt preprocess stopped before it finished; starting over")
    data_dir.mkdir(parents=True, exist_ok=True)
    for part in data_dir.glob("*.part"):
        part.unlink()


def _without_rows(chunk: CleanChunk, encoded: list, keep: np.ndarray) -> tuple[CleanChunk, list]:
    """A cleaned and encoded chunk less the pairs ``keep`` is False for (duplicates)."""
    pairs = list(compress(chunk.pairs(), keep.tolist()))
    chunk.src, chunk.src_starts = encoded_lines([s for s, _ in pairs])
    chunk.tgt, chunk.tgt_starts = encoded_lines([t for _, t in pairs])
    chunk.kept = len(pairs)
    return chunk, [(ids[np.repeat(keep, lengths)], lengths[keep]) for ids, lengths in encoded]


def _stream_train(
    recipe: Recipe,
    sources: list[PairSource],
    data_dir: Path,
    tokenizer: Tokenizer,
    dtype,
    log,
    workers: int | None = None,
) -> tuple[list[dict], dict]:
    """The one pass over every training corpus: clean, filter, encode, deduplicate, store the
    text and the arrays. Blocks of TEXT_CHUNK pairs are cleaned and encoded on ``workers``
    processes (every usable core by default) while this one decompresses and stores, in corpus
    order. Returns the counts per corpus and the split's sizes."""
    d = recipe.data
    workers = usable_cores() if workers is None else workers
    dedup = Deduplicator() if d.dedup else None
    encoders = BlockEncoder(tokenizer.src_proto, dtype), BlockEncoder(tokenizer.tgt_proto, dtype)
    report = []
    text = _TextPairs(data_dir, "train")
    sides = [SideWriter(data_dir, "train", side, dtype) for side in ("src", "tgt")]
    try:
        for source in sources:
            src_encoder = encoders[0]
            if (
                source.tags
            ):  # the direction's tokens start every source (nmt_cli/data/directions.py)
                src_encoder = BlockEncoder(
                    tokenizer.src_proto, dtype, tuple(tokenizer.symbol_ids(source.tags))
                )
            work = CleanAndEncode(
                Cleaning(
                    d.lowercase, d.max_len, d.max_ratio, tsv=source.tsv, numbers=d.filter_numbers
                ),
                src_encoder,
                encoders[1],
            )
            read, kept, dropped = 0, 0, Counter()
            for chunk, *encoded in ordered_map(work, source.blocks(TEXT_CHUNK), workers):
                read += chunk.read
                dropped.update(chunk.dropped)
                if dedup is not None and chunk.kept:
                    fresh = np.array(dedup.fresh(chunk.pairs()), dtype=bool)
                    if not fresh.all():
                        dropped["duplicate pair"] += int((~fresh).sum())
                        chunk, encoded = _without_rows(chunk, encoded, fresh)
                text.write_text(chunk.src, chunk.tgt)
                for writer, (ids, lengths) in zip(sides, encoded):
                    writer.append(ids, lengths)
                kept += chunk.kept
            report.append(
                {
                    "corpus": source.label,
                    "files": source.paths,
                    "read": read,
                    "kept": kept,
                    "dropped": dict(sorted(dropped.items())),
                }
            )
            log(f"train {source.label}: {read} pairs read, {kept} kept, {read - kept} dropped")
            for reason, count in sorted(dropped.items()):
                log(f"  dropped {count}: {reason}")
    except BaseException:
        text.abort()
        for writer in sides:
            writer.abort()
        raise
    text.close()
    sizes = {"src": sides[0].close(), "tgt": sides[1].close()}
    if len(report) > 1:
        read, kept = sum(r["read"] for r in report), sum(r["kept"] for r in report)
        log(
            f"train: {read} pairs read from {len(report)} corpora, {kept} kept, "
            f"{read - kept} dropped"
        )
    return report, sizes


def _stream_heldout(
    recipe: Recipe, data_dir: Path, name: str, entry: str, out: _TextPairs | None = None
) -> PairSource:
    """A valid or test split, cleaned but not filtered: N lines in, N lines stored (appended to
    ``out`` when given, which the caller closes)."""
    source = pair_source(recipe, entry)
    own = out is None
    out = out if out is not None else _TextPairs(data_dir, name)
    try:
        line = 0
        for chunk in chunks(iter(source), TEXT_CHUNK):
            pairs = []
            for pair in chunk:
                line += 1
                if pair is None:
                    raise DataError(
                        f"{source.files[0]}: line {line} has no tab (data.format: tsv reads "
                        "source<TAB>target lines)"
                    )
                pairs.append(
                    (
                        normalize(pair[0], recipe.data.lowercase),
                        normalize(pair[1], recipe.data.lowercase),
                    )
                )
            out.write(pairs)
    except BaseException:
        out.abort()
        raise
    if own:
        out.close()
    return source


_PROCESSORS: dict[
    str, object
] = {}  # in each process: digest of a model's bytes -> the loaded model


class BlockEncoder:
    """A block of stored lines (corpora.LineBlocks) -> its ids, flat, and each line's length,
    with one side's SentencePiece model. Picklable (it carries the model's bytes, loaded once per
    process), so worker processes can encode blocks side by side."""

    def __init__(self, proto: bytes, dtype, prefix: tuple[int, ...] = ()):
        self.proto, self.dtype = proto, np.dtype(dtype)
        self.key = hashlib.sha1(proto).hexdigest()
        self.prefix = prefix  # ids before every line: a direction's tags

    def __call__(self, raw: bytes) -> tuple[np.ndarray, np.ndarray]:
        sp = _PROCESSORS.get(self.key)
        if sp is None:
            sp = _PROCESSORS[self.key] = Tokenizer(self.proto).src
        seqs = sp.encode(split_block(raw), num_threads=1)
        lengths = np.fromiter(map(len, seqs), dtype=np.int64, count=len(seqs))
        ids = np.fromiter(chain.from_iterable(seqs), dtype=self.dtype, count=int(lengths.sum()))
        return with_prefix(ids, lengths, self.prefix) if self.prefix else (ids, lengths)


@dataclass(frozen=True)
class CleanAndEncode:
    """A raw training block (PairSource.blocks) cleaned and filtered (pairs.Cleaning), then each
    side's kept lines encoded: one worker call per block, so reading, cleaning and encoding
    share one pass. Gives (chunk, (source ids, lengths), (target ids, lengths))."""

    cleaning: Cleaning
    src: BlockEncoder
    tgt: BlockEncoder

    def __call__(self, block: tuple[bytes, ...]) -> tuple[CleanChunk, tuple, tuple]:
        chunk = self.cleaning(block)
        return chunk, self.src(chunk.src), self.tgt(chunk.tgt)


def _line_blocks(path: Path, n: int) -> Iterator[bytes]:
    with corpora.LineBlocks(path) as text:
        while (block := text.take(n))[1]:
            yield block[0]


def encode_text_file(
    tokenizer: Tokenizer,
    data_dir: Path,
    name: str,
    dtype,
    workers: int,
    sides: tuple[str, ...] = ("src", "tgt"),
) -> dict:
    """A stored split's text, ``{name}.{side}.txt`` -> ids and offsets arrays, ENCODE_CHUNK lines
    at a time, on ``workers`` processes with one SentencePiece thread each, stored in line order
    (the held-out splits; the training split is encoded as it is read, see CleanAndEncode)."""
    meta = {}
    for side in sides:
        encode = BlockEncoder(tokenizer.src_proto if side == "src" else tokenizer.tgt_proto, dtype)
        writer = SideWriter(data_dir, name, side, dtype)
        text = data_dir / f"{name}.{side}.txt"
        # A held-out split is one block: starting processes for it would cost more than it saves.
        single = text.stat().st_size < 2 * ENCODE_CHUNK * 100
        try:
            for ids, lengths in ordered_map(
                encode, _line_blocks(text, ENCODE_CHUNK), 1 if single else workers
            ):
                writer.append(ids, lengths)
        except BaseException:
            writer.abort()
            raise
        meta[side] = writer.close()
    return meta


def preprocess(
    recipe: Recipe, run_dir: Path, log=print, inherited: tuple[Tokenizer, Path] | None = None
) -> dict:
    """Preprocess ``recipe``'s corpora into ``run_dir`` (see _preprocess). A recipe that
    fine-tunes (``train.init_from``) gives the initial model's tokenizer and checkpoint as
    ``inherited`` (nmt_cli/training/finetune.py, ``initial_tokenizer``). When it fails or is
    interrupted, the folders it created are removed: no run dir that looks started is left
    behind."""
    if recipe.train.init_from and inherited is None:
        raise ValueError("train.init_from: preprocess needs the initial model's tokenizer")
    run_dir = Path(run_dir)
    created = [d for d in (run_dir, run_dir / "data") if not d.exists()]
    try:
        return _preprocess(recipe, run_dir, log, inherited)
    except BaseException:
        if created:
            shutil.rmtree(created[0], ignore_errors=True)
        raise


def _sizes_text(sizes: dict) -> str:
    return (
        f"{sizes['src']['sentences']} pairs, {sizes['src']['tokens']} source and "
        f"{sizes['tgt']['tokens']} target subwords"
    )


def _preprocess(
    recipe: Recipe, run_dir: Path, log, inherited: tuple[Tokenizer, Path] | None
) -> dict:
    """Store the held-out splits' cleaned text; learn SentencePiece on a sample of the training
    pairs (or take the initial model's, ``inherited``); then read, clean, filter and encode the
    training corpora in one streaming pass, and encode the held-out splits."""
    data_dir = run_dir / "data"
    _prepare_data_dir(data_dir, log)
    if is_tagged(recipe):  # several directions, or a back-translated corpus
        sources = training_sources(recipe, data_dir)
    else:  # one pair: data.train, or its teacher's translations (nmt_cli/data/distilled.py)
        sources = train_sources(recipe, run_dir)
    for path in (
        path for source in sources for path in source.files
    ):  # fail now, not after a long pass
        if not path.is_file():
            raise DataError(f"{path}: file not found")
    files, groups = {}, {}
    if is_multilingual(recipe):
        files, groups = directions_heldout(recipe, data_dir, _TextPairs, _stream_heldout)
    for name, entry in split_names(recipe).items():  # small, and checked before the long pass
        if name != "train" and not is_multilingual(recipe):
            files[name] = _stream_heldout(recipe, data_dir, name, entry).paths
    if inherited:
        tokenizer = inherited[0]
        log(f"using the tokenizer of {inherited[1]} ({tokenizer.src_vocab_size} pieces)")
    else:
        tokenizer = learn_tokenizer(recipe, sources, log)
    tokenizer.save(run_dir)

    dtype = id_dtype(max(tokenizer.src_vocab_size, tokenizer.tgt_vocab_size))
    threads = usable_cores()
    started = time.perf_counter()
    report, sizes = _stream_train(recipe, sources, data_dir, tokenizer, dtype, log, threads)
    seconds = time.perf_counter() - started
    read = sum(r["read"] for r in report)
    if not sizes["src"]["sentences"]:
        raise nothing_kept(recipe, sources)
    log(
        f"train: {_sizes_text(sizes)} (read, cleaned and encoded in {seconds:.1f} s on "
        f"{threads} cores, "
        f"{2 * read / max(seconds, 1e-9):.0f} lines/s)"
    )
    dropped = Counter()
    for r in report:
        dropped.update(r["dropped"])
    files = {"train": [f for r in report for f in r["files"]], **files}
    meta = {
        "format": DATA_FORMAT,
        "src": recipe.src,
        "tgt": recipe.tgt,
        "splits": {"train": sizes},
        "files": files,
        "dropped": dict(dropped),
        "corpora": report,
        "id_dtype": dtype.name,
        "src_vocab": tokenizer.src_vocab_size,
        "tgt_vocab": tokenizer.tgt_vocab_size,
        "tokenizer_from": str(inherited[1]) if inherited else None,
    }
    if is_tagged(recipe):
        meta["directions"] = [d.name for d in recipe_directions(recipe)]
        groups["train"] = train_groups(sources, [r["kept"] for r in report])
        meta["groups"] = groups
    for name in split_names(recipe):
        if name == "train":
            continue
        if is_multilingual(recipe):
            meta["splits"][name] = {
                "src": encode_tagged_source(tokenizer, data_dir, name, dtype, groups[name], recipe),
                **encode_text_file(tokenizer, data_dir, name, dtype, threads, ("tgt",)),
            }
        else:
            meta["splits"][name] = encode_text_file(tokenizer, data_dir, name, dtype, threads)
        log(f"{name}: {_sizes_text(meta['splits'][name])}")
    started = time.perf_counter()
    save_shortlist_arrays(data_dir, *count_split_shortlist(data_dir, tokenizer))
    log(f"shortlist learned in {time.perf_counter() - started:.1f} s")
    # A multilingual split's references are of several languages: none to compare with papers.
    meta["tok_references"] = (
        {} if is_multilingual(recipe) else save_tok_references(recipe, data_dir, log)
    )
    save_recipe(recipe, run_dir / "recipe.yaml")
    write_text_atomic(data_dir / "meta.json", json.dumps(meta, indent=1))
    return meta


def ensure_preprocessed(
    recipe: Recipe, run_dir: Path, log=print, inherited: tuple[Tokenizer, Path] | None = None
) -> None:
    """Preprocess when the run dir has no data yet (``inherited`` as for :func:`preprocess`);
    refuse data made from a different recipe."""
    meta_path = run_dir / "data" / "meta.json"
    if not meta_path.exists():
        log(f"{run_dir}: no preprocessed data yet; running nmt preprocess first")
        preprocess(recipe, run_dir, log, inherited)
        return
    saved_path = run_dir / "recipe.yaml"
    if saved_path.exists():
        try:
            saved = yaml.safe_load(saved_path.read_text(encoding="utf-8")) or {}
        except yaml.YAMLError:
            raise DataError(f"{saved_path}: unreadable; re-run nmt preprocess") from None
        now, default = recipe.to_dict(), Recipe().to_dict()
        # A key the saved recipe lacks predates that key: it had the default's meaning.
        # The epoch's mix (data.temperature, weights, back_translated_ratio) is drawn when
        # training.
        was = lambda section, k: (saved.get(section) or {}).get(k, default[section][k])
        changed = [
            f"{section}.{k}"
            for section in ("data", "tokenizer")
            for k in now[section]
            if section != "data"
            or k not in ("test", "temperature", "weights", "back_translated_ratio")
            if was(section, k) != now[section][k]
        ]
        changed += [k for k in ("src", "tgt") if saved.get(k) != now[k]]
        if was("train", "init_from") != now["train"]["init_from"]:
            changed.append("train.init_from (the tokenizer comes from it)")
        if changed:
            raise DataError(
                f"{run_dir}: data was preprocessed with different {', '.join(changed)}; "
                "re-run nmt preprocess (or use another --run-dir)"
            )
