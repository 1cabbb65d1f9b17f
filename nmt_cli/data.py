"""Corpus text -> filtered pairs -> SentencePiece ids stored as flat int32 arrays; length-bucketed
token batches read straight from those arrays.

A split is stored as four ``.npy`` files (``{split}.{src,tgt}.{ids,offsets}.npy``): all token ids
of a side concatenated, and where each sentence starts. Training memory-maps them, so a large
corpus never becomes a list of Python objects.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Sequence

import numpy as np
import torch

from nmt_cli import corpora
from nmt_cli.config import Recipe, save_recipe
from nmt_cli.errors import DataError
from nmt_cli.shortlist import Shortlist, learn_shortlist
from nmt_cli.tokenizer import BOS, EOS, PAD, seed_sampling, train_tokenizer

DATA_FORMAT = 1


def normalize(line: str, lowercase: bool = False) -> str:
    """Collapse all whitespace runs (tabs, no-break spaces, ...) to one space and strip the ends;
    lowercase too for a recipe with data.lowercase. Training data and every line a trained model
    reads (translate, score) go through it alike."""
    line = " ".join(line.split())
    return line.lower() if lowercase else line


def split_files(recipe: Recipe, split: str) -> tuple[Path, Path]:
    """The (source, target) files of a split: from the corpus registry, or a path with {lang}."""
    if recipe.data.corpus:
        corpus = corpora.get_corpus(recipe.data.corpus)
        return (corpora.fetch(corpus.name, corpus.filename(split, recipe.src)),
                corpora.fetch(corpus.name, corpus.filename(split, recipe.tgt)))
    template = os.path.expanduser(os.path.expandvars(split))
    if "{lang}" not in template:
        raise DataError(f"data: '{split}' must contain {{lang}} (e.g. /data/train.{{lang}}.gz) "
                        "when data.corpus is null")
    if "$" in template:
        unset = re.search(r"\$\{?(\w+)", template).group(1)
        raise DataError(f"data: '{split}' needs the environment variable {unset}, which is not set "
                        "(export it, or give the path with --set)")
    return Path(template.format(lang=recipe.src)), Path(template.format(lang=recipe.tgt))


def read_pair(src_path: Path, tgt_path: Path, lowercase: bool = False) -> tuple[list[str], list[str]]:
    src, tgt = corpora.read_lines(src_path), corpora.read_lines(tgt_path)
    if len(src) != len(tgt):
        raise DataError(f"{src_path} has {len(src)} lines but {tgt_path} has {len(tgt)}; "
                        "line i of one must translate line i of the other")
    return [normalize(s, lowercase) for s in src], [normalize(t, lowercase) for t in tgt]


def filter_pairs(src: Sequence[str], tgt: Sequence[str], max_len: int,
                 max_ratio: float) -> tuple[list[int], Counter]:
    """Indices of the training pairs to keep, and how many were dropped for which reason."""
    keep, dropped = [], Counter()
    for i, (s, t) in enumerate(zip(src, tgt)):
        ns, nt = len(s.split()), len(t.split())
        if ns == 0 or nt == 0:
            dropped["empty side"] += 1
        elif ns > max_len or nt > max_len:
            dropped[f"longer than {max_len} words"] += 1
        elif max(ns, nt) > max_ratio * min(ns, nt) and max(ns, nt) > 3:
            dropped[f"length ratio over {max_ratio:g}"] += 1
        else:
            keep.append(i)
    return keep, dropped


# --------------------------------------------------------------------------- stored arrays

def _flat(seqs: Sequence[Sequence[int]]) -> tuple[np.ndarray, np.ndarray]:
    lengths = np.fromiter((len(s) for s in seqs), dtype=np.int64, count=len(seqs))
    offsets = np.zeros(len(seqs) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    ids = np.fromiter((t for s in seqs for t in s), dtype=np.int32, count=int(offsets[-1]))
    return ids, offsets


def encode_flat(encode, lines: Sequence[str], chunk: int = 50_000) -> tuple[np.ndarray, np.ndarray]:
    """Encode in chunks straight into int32 arrays: Python lists of ints cost ~36 bytes an id,
    which on a 10M-pair corpus would be most of the memory preprocessing needs."""
    parts = [_flat(encode(lines[i:i + chunk])) for i in range(0, len(lines), chunk)] or [_flat([])]
    ids = np.concatenate([p[0] for p in parts])
    lengths = np.concatenate([np.diff(p[1]) for p in parts])
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    return ids, offsets


def _atomic_save(path: Path, array: np.ndarray) -> None:
    tmp = path.with_name(path.name + ".part")
    with open(tmp, "wb") as fh:
        np.save(fh, array)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


@dataclass
class Side:
    ids: np.ndarray
    offsets: np.ndarray

    def __len__(self) -> int:
        return len(self.offsets) - 1

    @property
    def lengths(self) -> np.ndarray:
        return np.diff(self.offsets)

    def get(self, i: int) -> np.ndarray:
        return self.ids[self.offsets[i]:self.offsets[i + 1]]


@dataclass
class EncodedSplit:
    src: Side
    tgt: Side

    def __len__(self) -> int:
        return len(self.src)


def save_split(data_dir: Path, split: str, src: tuple[np.ndarray, np.ndarray],
               tgt: tuple[np.ndarray, np.ndarray]) -> dict:
    """Store both sides, each a flat (ids, offsets) pair from :func:`encode_flat`."""
    meta = {}
    for side, (ids, offsets) in (("src", src), ("tgt", tgt)):
        _atomic_save(data_dir / f"{split}.{side}.ids.npy", ids)
        _atomic_save(data_dir / f"{split}.{side}.offsets.npy", offsets)
        meta[side] = {"sentences": len(offsets) - 1, "tokens": int(offsets[-1])}
    return meta


def load_split(run_dir: Path, split: str) -> EncodedSplit:
    """Memory-map a stored split and check it against the lengths recorded at preprocess time."""
    data_dir = run_dir / "data"
    meta = load_meta(run_dir)
    expected = meta.get("splits", {}).get(split)
    if expected is None:
        raise DataError(f"{data_dir}: no preprocessed split '{split}'; re-run nmt preprocess")
    sides = []
    for side in ("src", "tgt"):
        arrays = []
        for part in ("ids", "offsets"):
            path = data_dir / f"{split}.{side}.{part}.npy"
            try:
                arrays.append(np.load(path, mmap_mode="r", allow_pickle=False))
            except FileNotFoundError:
                raise DataError(f"{path}: missing; re-run nmt preprocess") from None
            except (ValueError, OSError, EOFError) as exc:
                raise DataError(f"{path}: corrupt ({exc}); re-run nmt preprocess") from None
        ids, offsets = arrays
        want = expected[side]
        if (len(offsets) != want["sentences"] + 1 or len(ids) != want["tokens"]
                or (len(offsets) and int(offsets[-1]) != len(ids))):
            raise DataError(f"{data_dir / f'{split}.{side}.ids.npy'}: does not match its recorded "
                            "length (truncated?); re-run nmt preprocess")
        sides.append(Side(ids, offsets))
    return EncodedSplit(*sides)


def sampled_split(src_lines: Sequence[str], tgt_lines: Sequence[str], tokenizer, alpha: float,
                  seed: int, epoch: int) -> EncodedSplit:
    """The training pairs re-segmented by sampling (``train.subword_alpha``), one draw per epoch;
    the same (seed, epoch) gives the same draw."""
    seed_sampling(int(np.random.default_rng([seed, epoch]).integers(1, 2**31)))
    src = encode_flat(lambda lines: tokenizer.encode_sampled("src", lines, alpha), src_lines)
    tgt = encode_flat(lambda lines: tokenizer.encode_sampled("tgt", lines, alpha), tgt_lines)
    return EncodedSplit(Side(*src), Side(*tgt))


def learn_split_shortlist(data_dir: Path, tokenizer) -> Shortlist:
    """The vocabulary shortlist of the stored training split (nmt_cli/shortlist.py)."""
    arrays = [np.load(data_dir / f"train.{side}.{part}.npy", mmap_mode="r")
              for side in ("src", "tgt") for part in ("ids", "offsets")]
    return learn_shortlist(*arrays, tokenizer.src_vocab_size, tokenizer.tgt_vocab_size)


def save_shortlist(data_dir: Path, shortlist: Shortlist) -> None:
    # Ranked frequent pieces get their own file name, so an older id-sorted one is never misread.
    name = "shortlist.ranked.npy" if shortlist.ranked else "shortlist.frequent.npy"
    _atomic_save(data_dir / name, shortlist.frequent.numpy().astype(np.int32))
    _atomic_save(data_dir / "shortlist.table.npy", shortlist.table.numpy().astype(np.int32))


def load_shortlist(run_dir: Path) -> Shortlist | None:
    """The run's shortlist, or None for data preprocessed before shortlists existed."""
    data_dir = run_dir / "data"
    ranked = (data_dir / "shortlist.ranked.npy").exists()
    try:
        frequent = np.load(data_dir / ("shortlist.ranked.npy" if ranked else "shortlist.frequent.npy"),
                           allow_pickle=False)
        table = np.load(data_dir / "shortlist.table.npy", allow_pickle=False)
    except (FileNotFoundError, ValueError, OSError, EOFError):
        return None
    return Shortlist(torch.from_numpy(frequent.astype(np.int64)), torch.from_numpy(table.astype(np.int64)),
                     ranked=ranked)


def load_meta(run_dir: Path) -> dict:
    path = run_dir / "data" / "meta.json"
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DataError(f"{path}: missing; run nmt preprocess first") from None
    except (OSError, ValueError) as exc:
        raise DataError(f"{path}: unreadable ({exc}); re-run nmt preprocess") from None


def load_text(run_dir: Path, split: str, side: str) -> list[str]:
    return corpora.read_lines(run_dir / "data" / f"{split}.{side}.txt")


def _write_text(path: Path, lines: Sequence[str]) -> None:
    tmp = path.with_name(path.name + ".part")
    tmp.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    os.replace(tmp, path)


# --------------------------------------------------------------------------- preprocess

def split_names(recipe: Recipe) -> dict[str, str]:
    """Storage name -> split name or path; the first test set is also 'test'."""
    names = {"train": recipe.data.train, "valid": recipe.data.valid}
    for i, test in enumerate(recipe.data.test):
        names[f"test{i}" if i else "test"] = test
    return names


def save_tok_references(recipe: Recipe, data_dir: Path, log=print) -> dict[str, str]:
    """Copy the corpus's official tokenized references of the held-out splits into the run dir as
    ``{name}.ref.lc-tok.txt``, for ``nmt eval --lc-tok``. They only serve comparison with papers,
    so one that cannot be had is reported and skipped rather than failing preprocessing."""
    if not recipe.data.corpus:
        return {}
    corpus = corpora.get_corpus(recipe.data.corpus)
    saved = {}
    for name, split in split_names(recipe).items():
        if name == "train" or corpus.tok_reference_name(split, recipe.tgt) not in corpus.tok_references:
            continue
        try:
            lines = corpora.read_lines(corpora.fetch_tok_reference(corpus.name, split, recipe.tgt))
        except DataError as exc:
            log(f"note: no tokenized reference for {split} ({exc}); lc-tok scores will be unavailable")
            continue
        path = data_dir / f"{name}.ref.lc-tok.txt"
        _write_text(path, lines)
        saved[name] = path.name
    return saved


def preprocess(recipe: Recipe, run_dir: Path, log=print) -> dict:
    """Fetch, clean, learn SentencePiece on the training split, encode and store every split.
    When it fails or is interrupted, the folders it created are removed: no run dir that looks
    started is left behind."""
    run_dir = Path(run_dir)
    created = [d for d in (run_dir, run_dir / "data") if not d.exists()]
    try:
        return _preprocess(recipe, run_dir, log)
    except BaseException:
        if created:
            shutil.rmtree(created[0], ignore_errors=True)
        raise


def _preprocess(recipe: Recipe, run_dir: Path, log) -> dict:
    data_dir = run_dir / "data"
    data_dir.mkdir(parents=True, exist_ok=True)
    texts: dict[str, tuple[list[str], list[str]]] = {}
    sources: dict[str, list[str]] = {}
    for name, split in split_names(recipe).items():
        src_path, tgt_path = split_files(recipe, split)
        texts[name] = read_pair(src_path, tgt_path, recipe.data.lowercase)
        sources[name] = [str(src_path), str(tgt_path)]

    train_src, train_tgt = texts["train"]
    keep, dropped = filter_pairs(train_src, train_tgt, recipe.data.max_len, recipe.data.max_ratio)
    log(f"train: {len(train_src)} pairs read, {len(keep)} kept, {len(train_src) - len(keep)} dropped")
    for reason, count in sorted(dropped.items()):
        log(f"  dropped {count}: {reason}")
    if not keep:
        raise DataError(f"{sources['train'][0]}: no training pair survives filtering "
                        f"(data.max_len={recipe.data.max_len}, data.max_ratio={recipe.data.max_ratio})")
    texts["train"] = ([train_src[i] for i in keep], [train_tgt[i] for i in keep])
    del train_src, train_tgt  # the unfiltered lines: on a large corpus, gigabytes

    log(f"training SentencePiece ({recipe.tokenizer.type}, {recipe.tokenizer.vocab_size} pieces, "
        f"{'joint' if recipe.tokenizer.joint else 'one per side'})")
    tokenizer = train_tokenizer(recipe.tokenizer, *texts["train"], seed=recipe.train.seed)
    tokenizer.save(run_dir)

    meta = {"format": DATA_FORMAT, "src": recipe.src, "tgt": recipe.tgt, "splits": {}, "files": sources,
            "dropped": dict(dropped), "src_vocab": tokenizer.src_vocab_size,
            "tgt_vocab": tokenizer.tgt_vocab_size}
    for name, (src, tgt) in texts.items():
        meta["splits"][name] = save_split(data_dir, name, encode_flat(tokenizer.encode_src, src),
                                          encode_flat(tokenizer.encode_tgt, tgt))
        # The training text too: subword regularisation re-segments it every epoch.
        _write_text(data_dir / f"{name}.src.txt", src)
        _write_text(data_dir / f"{name}.tgt.txt", tgt)
        s = meta["splits"][name]
        log(f"{name}: {s['src']['sentences']} pairs, {s['src']['tokens']} source and "
            f"{s['tgt']['tokens']} target subwords")
    save_shortlist(data_dir, learn_split_shortlist(data_dir, tokenizer))
    meta["tok_references"] = save_tok_references(recipe, data_dir, log)
    tmp = data_dir / "meta.json.part"
    tmp.write_text(json.dumps(meta, indent=1), encoding="utf-8")
    os.replace(tmp, data_dir / "meta.json")
    save_recipe(recipe, run_dir / "recipe.yaml")
    return meta


# --------------------------------------------------------------------------- batches

@dataclass
class Batch:
    src: torch.Tensor          # (B, S) source ids, padded with PAD
    src_lengths: torch.Tensor  # (B,) int64, on CPU (pack_padded_sequence wants them there)
    tgt_in: torch.Tensor       # (B, T) BOS y_1 .. y_{T-1}
    tgt_out: torch.Tensor      # (B, T) y_1 .. y_{T-1} EOS
    tgt_tokens: int            # real target tokens, EOS included, padding not

    def to(self, device: torch.device) -> "Batch":
        return Batch(self.src.to(device, non_blocking=True), self.src_lengths,
                     self.tgt_in.to(device, non_blocking=True),
                     self.tgt_out.to(device, non_blocking=True), self.tgt_tokens)


def make_batch(split: EncodedSplit, indices: Sequence[int], max_src: int | None = None) -> Batch:
    srcs = [split.src.get(i)[:max_src] if max_src else split.src.get(i) for i in indices]
    tgts = [split.tgt.get(i) for i in indices]
    return collate(srcs, tgts)


def collate(srcs: Sequence[np.ndarray], tgts: Sequence[np.ndarray]) -> Batch:
    n = len(srcs)
    src_len = np.array([len(s) for s in srcs], dtype=np.int64)
    tgt_len = np.array([len(t) + 1 for t in tgts], dtype=np.int64)
    src = np.full((n, max(1, int(src_len.max()))), PAD, dtype=np.int64)
    tgt_in = np.full((n, int(tgt_len.max())), PAD, dtype=np.int64)
    tgt_out = np.full_like(tgt_in, PAD)
    for i, (s, t) in enumerate(zip(srcs, tgts)):
        src[i, :len(s)] = s
        tgt_in[i, 0] = BOS
        tgt_in[i, 1:len(t) + 1] = t
        tgt_out[i, :len(t)] = t
        tgt_out[i, len(t)] = EOS
    # An empty source still gets one (padding) position so attention has something to read.
    return Batch(torch.from_numpy(src), torch.from_numpy(np.maximum(src_len, 1)),
                 torch.from_numpy(tgt_in), torch.from_numpy(tgt_out), int(tgt_len.sum()))


def token_batches(src_lengths: np.ndarray, tgt_lengths: np.ndarray, batch_tokens: int,
                  seed: int, epoch: int, shuffle: bool = True) -> list[np.ndarray]:
    """Group sentence indices into batches of about ``batch_tokens`` real target tokens.

    Sentences are sorted by (target, source) length with a random tie-break, so a batch holds
    sentences of nearly equal length and padding stays small; batch order is shuffled per epoch
    from ``seed`` and ``epoch``, which makes the sequence reproducible for exact resume.
    """
    rng = np.random.default_rng([seed, epoch])
    n = len(src_lengths)
    tie = rng.random(n) if shuffle else np.arange(n)
    order = np.lexsort((tie, src_lengths, tgt_lengths))
    costs = (tgt_lengths[order] + 1)
    batches, start, total = [], 0, 0
    for pos in range(n):
        cost = int(costs[pos])
        if total and total + cost > batch_tokens:
            batches.append(order[start:pos])
            start, total = pos, 0
        total += cost
    if start < n:
        batches.append(order[start:])
    if shuffle:
        perm = rng.permutation(len(batches))
        batches = [batches[i] for i in perm]
    return batches


def padding_fraction(split: EncodedSplit, batches: Sequence[np.ndarray]) -> float:
    """Share of padded positions over all source and target positions of the batches."""
    src_len, tgt_len = split.src.lengths, split.tgt.lengths + 1
    real = padded = 0
    for b in batches:
        real += int(src_len[b].sum() + tgt_len[b].sum())
        padded += len(b) * int(src_len[b].max() + tgt_len[b].max())
    return 1.0 - real / max(padded, 1)


def iterate_epoch(split: EncodedSplit, batch_tokens: int, seed: int, epoch: int, start: int = 0,
                  rank: int = 0, world: int = 1) -> Iterator[tuple[int, Batch]]:
    """Yield (position, batch) for one epoch from ``start``; rank r of w takes every w-th batch."""
    batches = token_batches(np.asarray(split.src.lengths), np.asarray(split.tgt.lengths),
                            batch_tokens, seed, epoch)
    usable = len(batches) - len(batches) % world if world > 1 else len(batches)
    for pos in range(start, usable, world):
        yield pos, make_batch(split, batches[pos + rank])



def ensure_preprocessed(recipe: Recipe, run_dir: Path, log=print) -> None:
    """Preprocess when the run dir has no data yet; refuse data made from a different recipe."""
    meta_path = run_dir / "data" / "meta.json"
    if not meta_path.exists():
        log(f"{run_dir}: no preprocessed data yet; running nmt preprocess first")
        preprocess(recipe, run_dir, log)
        return
    saved_path = run_dir / "recipe.yaml"
    if saved_path.exists():
        import yaml
        try:
            saved = yaml.safe_load(saved_path.read_text(encoding="utf-8")) or {}
        except yaml.YAMLError:
            raise DataError(f"{saved_path}: unreadable; re-run nmt preprocess") from None
        now = recipe.to_dict()
        changed = [f"{section}.{k}" for section in ("data", "tokenizer")
                   for k in now[section] if section != "data" or k != "test"
                   if (saved.get(section) or {}).get(k) != now[section][k]]
        changed += [k for k in ("src", "tgt") if saved.get(k) != now[k]]
        if changed:
            raise DataError(f"{run_dir}: data was preprocessed with different {', '.join(changed)}; "
                            "re-run nmt preprocess (or use another --run-dir)")
