"""Denoising pairs: a language's training sentences, noised, to be rebuilt in the same language.

A multilingual recipe trained only through English (en-fr, fr-en, en-de, de-en) sees French and
German sources only with ``<2en>``, so the model learns to write English from them whatever token
it is given, and a zero-shot request fr -> de comes out English. Listing a language in
``data.denoise`` adds its sentences as pairs (noised sentence, sentence) tagged with the
language's own token, the denoising autoencoder task that Wang et al. (2021) found to reduce
off-target zero-shot output: each source language is then seen with more than one target token,
and the model has to read the token. The noise is that of Lample et al. (2018): every word is
dropped with probability ``data.denoise_drop`` (one word is always kept), and the words are
shuffled locally, word i moving to the rank of i + U(0, k + 1) with k = ``data.denoise_shuffle``,
so none moves more than k places.

The sentences are the target side of the first direction into the language; the noised copy is
written once, at preprocessing, into the run's ``data/`` folder, drawn with ``train.seed``.
"""

from __future__ import annotations

import random
from pathlib import Path

from nmt_cli.config.direction_keys import parse_direction
from nmt_cli.config.sections import Recipe
from nmt_cli.data.corpora import iter_lines
from nmt_cli.data.directions import denoising_tags
from nmt_cli.data.pairs import PairSource


def noised(words: list[str], rng: random.Random, drop: float, shuffle: int) -> list[str]:
    """The words with each dropped with probability ``drop`` (never all of them), then locally
    shuffled: word i sorted by i + U(0, shuffle + 1), so none moves more than ``shuffle`` places."""
    if not words:
        return []
    kept = [w for w in words if rng.random() >= drop] or [rng.choice(words)]
    if shuffle <= 0:
        return kept
    keys = [i + rng.uniform(0, shuffle + 1) for i in range(len(kept))]
    return [w for _, w in sorted(zip(keys, kept), key=lambda pair: pair[0])]


def denoising_sources(recipe: Recipe, real: list[PairSource], data_dir: Path) -> list[PairSource]:
    """One source per language of data.denoise: the noised target side of the first real
    direction into it, written to ``data_dir``, against that side itself."""
    data = recipe.data
    rng = random.Random(recipe.train.seed)
    sources = []
    for lang in data.denoise:
        into = next(
            s for s in real if parse_direction(s.direction).tgt == lang and not s.back_translated
        )
        clean = into.files[1]
        path = data_dir / f"denoise.{lang}.txt"
        with open(path, "w", encoding="utf-8", newline="\n") as out:
            for line in iter_lines(clean):
                words = noised(line.split(), rng, data.denoise_drop, data.denoise_shuffle)
                out.write(" ".join(words) + "\n")
        sources.append(
            PairSource(
                f"{lang}-{lang} denoising {clean}",
                (path, clean),
                tags=denoising_tags(recipe, lang),
                direction=f"{lang}-{lang}",
            )
        )
    return sources
