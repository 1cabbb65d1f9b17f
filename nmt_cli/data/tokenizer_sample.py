"""What SentencePiece learns from: ``tokenizer.sample_file`` (a file of sentences per language),
or a uniform random sample of the training pairs, cleaned and filtered as the corpus will be;
and the learning itself, with a multilingual recipe's tags as whole pieces."""

from __future__ import annotations

import time
from itertools import compress
from pathlib import Path

from nmt_cli.config.direction_keys import is_multilingual, recipe_directions
from nmt_cli.config.sections import Recipe
from nmt_cli.data import corpora
from nmt_cli.data.directions import languages, tag_symbols
from nmt_cli.data.pairs import Cleaning, Deduplicator, PairSource, chunks, clean_raw_pairs
from nmt_cli.data.reservoir import Reservoir
from nmt_cli.data.splits import local_path
from nmt_cli.data.tokenizer import Tokenizer, normalize, train_tokenizer
from nmt_cli.runtime.errors import DataError

TEXT_CHUNK = 20_000  # training pairs read, cleaned and encoded at a time (here and in preprocess)


def nothing_kept(recipe: Recipe, sources: list[PairSource]) -> DataError:
    return DataError(
        f"{sources[0].files[0]}: no training pair survives filtering "
        f"(data.max_len={recipe.data.max_len}, data.max_ratio={recipe.data.max_ratio})"
    )


def _sample_capacity(recipe: Recipe) -> int:
    """Pairs to sample: tokenizer.sample_sentences lines per SentencePiece model."""
    k = recipe.tokenizer.sample_sentences
    return (k + 1) // 2 if recipe.tokenizer.joint else k


def _draw_sample(recipe: Recipe, sources: list[PairSource]) -> tuple[list[str], list[str], str]:
    """SentencePiece's training sample: a uniform random sample of the training pairs (every
    corpus as one stream, Reservoir) drawn in a pass that only decompresses and counts lines,
    then cleaned, filtered and deduplicated as the corpus will be. Cleaning the whole corpus
    waits for the pass that also encodes it, so the corpus is cleaned once and never re-read
    from a stored copy. While the corpus fits the sample, the sample is the whole corpus in
    order."""
    d = recipe.data
    sample = Reservoir(_sample_capacity(recipe), recipe.train.seed)
    for source in sources:
        for block in source.raw_pairs(TEXT_CHUNK):
            if sample.wants(len(block)):
                sample.offer(block)
            else:
                sample.pass_over(len(block))
    cleaning = Cleaning(d.lowercase, d.max_len, d.max_ratio, numbers=d.filter_numbers)
    pairs = clean_raw_pairs(sample.items, cleaning).pairs()
    if d.dedup:
        pairs = list(compress(pairs, Deduplicator().fresh(pairs)))
    if not pairs:
        raise nothing_kept(recipe, sources)
    dropped = len(sample.items) - len(pairs)
    origin = f"a sample of {len(pairs)} of the {sample.seen} training pairs" + (
        f" ({dropped} more drawn, and dropped by the filters)" if dropped else ""
    )
    return [s for s, _ in pairs], [t for _, t in pairs], origin


def _sample_file_lines(recipe: Recipe) -> tuple[list[str], list[str]]:
    template = local_path(recipe.tokenizer.sample_file)
    if "{lang}" not in template:
        raise DataError(
            f"tokenizer.sample_file: '{recipe.tokenizer.sample_file}' must contain {{lang}} "
            "(one file of sentences per language)"
        )
    sides = []
    langs = languages(recipe_directions(recipe))
    for lang in langs if is_multilingual(recipe) else (recipe.src, recipe.tgt):
        sample = Reservoir(recipe.tokenizer.sample_sentences, recipe.train.seed)
        for chunk in chunks(corpora.iter_lines(Path(template.format(lang=lang))), TEXT_CHUNK):
            sample.offer([normalize(line, recipe.data.lowercase) for line in chunk])
        sides.append(sample.items)
    if len(sides) > 2:  # one joint model learns every language (check_directions)
        return [line for side in sides for line in side], []
    return sides[0], sides[1]


def learn_tokenizer(recipe: Recipe, sources: list[PairSource], log) -> Tokenizer:
    """SentencePiece learned from tokenizer.sample_file, or from a sample of the training pairs."""
    cfg = recipe.tokenizer
    started = time.perf_counter()
    if cfg.sample_file:
        (src, tgt), origin = _sample_file_lines(recipe), cfg.sample_file
    else:
        src, tgt, origin = _draw_sample(recipe, sources)
        log(f"sample drawn in {time.perf_counter() - started:.1f} s")
        started = time.perf_counter()
    log(
        f"training SentencePiece ({cfg.type}, {cfg.vocab_size} pieces, "
        f"{'joint' if cfg.joint else 'one per side'}) on {origin}"
    )
    symbols = tag_symbols(recipe)
    if symbols:
        log(f"tags: {' '.join(symbols)}")
    tokenizer = train_tokenizer(cfg, src, tgt, seed=recipe.train.seed, symbols=symbols)
    log(f"SentencePiece learned in {time.perf_counter() - started:.1f} s")
    return tokenizer
