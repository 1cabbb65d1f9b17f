"""A bounded cache of sentence translations: the least recently used one is dropped when a new
one would pass ``size`` entries (an LRU). Clients such as translation-management tools send the
same strings again and again; each repeat is answered from here instead of being decoded.

A translation is kept under (model, options, sentence), where the options are every field of
the call's :class:`~nmt_cli.translation.contract.TranslateOptions` that can change its result
(direction, glossary terms, beam, n-best, alignments, decoding changes), so a translation made
with other options is never given back. Calls whose result is not a function of those are not
cached: sampling draws anew, a forced prefix belongs to one sentence, and attention matrices
would make an entry's memory depend on its length squared.
"""

from __future__ import annotations

import dataclasses
import threading
from collections import OrderedDict
from collections.abc import Hashable, Mapping

from nmt_cli.translation.contract import TranslateOptions
from nmt_cli.translation.glossary import Glossary
from nmt_cli.translation.results import Translation

_NOT_RESULTS = ("prefixes", "warn_cut")  # fields that never change a cached sentence's result


def options_key(options: TranslateOptions) -> tuple | None:
    """What of ``options`` a sentence's translation depends on, hashable; None where the call
    is not cached (sampling, prefixes, attention outputs)."""
    if options.sampling is not None or options.prefixes is not None:
        return None
    if options.attention or options.weights:
        return None
    key = []
    for f in dataclasses.fields(options):
        if f.name in _NOT_RESULTS:
            continue
        value = getattr(options, f.name)
        if isinstance(value, Glossary):
            value = tuple(sorted((t.source, t.target) for t in value.terms))
        elif isinstance(value, Mapping):
            value = tuple(sorted((str(k), repr(v)) for k, v in value.items()))
        key.append((f.name, value))
    return tuple(key)


def slim(translation: Translation) -> Translation:
    """``translation`` without its hypotheses' attention weights, which only computing the
    alignment needed (the alignment itself is kept)."""
    hypotheses = [dataclasses.replace(h, attention=None) for h in translation.hypotheses]
    return dataclasses.replace(translation, hypotheses=hypotheses)


class TranslationCache:
    """At most ``size`` sentence translations, the least recently used dropped first; ``hits``
    and ``misses`` count the lookups. Safe to share between threads."""

    def __init__(self, size: int):
        if size < 0:
            raise ValueError(f"cache size {size}: give 0 (off) or more")
        self.size = size
        self.hits = 0
        self.misses = 0
        self._entries: OrderedDict[Hashable, Translation] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: Hashable) -> Translation | None:
        with self._lock:
            found = self._entries.get(key)
            if found is None:
                self.misses += 1
                return None
            self._entries.move_to_end(key)
            self.hits += 1
            return found

    def put(self, key: Hashable, translation: Translation) -> None:
        if not self.size:
            return
        with self._lock:
            self._entries[key] = slim(translation)
            self._entries.move_to_end(key)
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)
