"""What `nmt serve` answers without decoding: the suggestions it was sent (``--suggestions DB``,
a translation memory) and its recent sentence translations (``--cache-size``, an LRU), looked
up by the document layer before it decodes (nmt_cli/documents/recall.py), and
LibreTranslate's ``POST /suggest`` that fills the memory.
"""

from __future__ import annotations

import asyncio

from nmt_cli.documents.recall import Recall, Recollection
from nmt_cli.serving.request_body import RequestError
from nmt_cli.serving.suggestions import SuggestionStore
from nmt_cli.translation.cache import TranslationCache

DISABLED = "Suggestions are disabled on this server."


class ServiceRecall:
    """The service's memory (None without ``suggestions``, a file path) and cache (None with
    ``cache_size`` 0), and the metrics their lookups feed (None: no metrics)."""

    def __init__(self, suggestions: str | None, cache_size: int, metrics=None):
        self.store = None if suggestions is None else SuggestionStore(suggestions)
        self.cache = TranslationCache(cache_size) if cache_size else None
        self.metrics = metrics

    def of(self, route) -> Recall | None:
        """Where ``route``'s segments are looked up; None where there is nothing to look in."""
        if self.store is None and self.cache is None:
            return None
        model = tuple(m.id for m in route.steps)
        return Recall(route.source, route.target, model, self.store, self.cache)

    def observe(self, found: Recollection) -> None:
        """Count a plan's lookups in the metrics."""
        if self.metrics is None:
            return
        memory = len(found.memory)
        self.metrics.recalled(
            memory_hits=memory,
            memory_misses=found.remembering - memory,
            cache_hits=len(found.found) - memory,
            cache_misses=len(found.keys),
        )


def text_value(body: dict, key: str, most: int) -> str:
    """A /suggest field as LibreTranslate reads it: missing or empty is a 400, and so is a
    text longer than the server's character limit."""
    value = body.get(key)
    if value is None or value == "":
        raise RequestError(400, f"Invalid request: missing {key} parameter")
    if not isinstance(value, str):
        raise RequestError(400, f"Invalid request: {key} must be a string")
    if not value.strip():
        raise RequestError(400, f"Invalid request: missing {key} parameter")
    if len(value) > most:
        raise RequestError(
            400, f"Invalid request: request ({len(value)}) exceeds text limit ({most})"
        )
    return value


async def suggest(service, lt, request, body: dict) -> dict:
    """``POST /suggest``: q (a source text), s (its better translation), source and target (a
    pair the server translates), stored durably before the answer; the next request for that
    sentence gets ``s``. Charged to the client's rate limits as a translation of ``q``."""
    if service.recall.store is None:
        raise RequestError(403, DISABLED)
    most = service.settings.max_chars
    q, s = text_value(body, "q", most), text_value(body, "s", most)
    source = text_value(body, "source", most).strip().lower()
    target = text_value(body, "target", most).strip().lower()
    if source == "auto":
        raise RequestError(400, "Invalid request: source: give the language of q, not auto")
    lt.route(source, target, [q])  # a pair the server does not translate is a 400
    service.charge(request, body["api_key"], len(q))
    await asyncio.to_thread(service.recall.store.add, source, target, q, s)
    return {"success": True}
