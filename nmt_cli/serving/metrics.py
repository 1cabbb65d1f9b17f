"""What `nmt serve` tells its operators: Prometheus metrics (``--metrics``, through
prometheus-client) and an access log line per request (``--access-log``).

Metrics, in a registry of their own: requests and errors by route and status, request latency
by route (a histogram), sentences per decoded batch (a histogram), sentences queued or decoding
(a gauge read when scraped), sentences and characters decoded, sentences found or not in the
translation memory and the cache (``result`` hit or miss). Routes are the route templates
("/translate", "/static/{name}"), so a client cannot grow the label set.

The access log is one line per request on stderr: time, client address, method, route, status,
milliseconds, and the characters the request asked to translate; the texts themselves only
with ``--log-texts``. Both come from one ASGI middleware, :class:`RequestObserver`, that sees
each response's status and end; routes leave what they know (characters, texts) in the
request's state.
"""

from __future__ import annotations

import json
import sys
import time

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256)


class Metrics:
    def __init__(self, pending_sentences):
        # Imported only with --metrics: a server without them need not load the client.
        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

        self.registry = CollectorRegistry()
        r = self.registry
        self.requests = Counter(
            "nmt_http_requests", "HTTP requests answered", ["route", "status"], registry=r
        )
        self.errors = Counter(
            "nmt_http_errors",
            "HTTP requests answered with an error",
            ["route", "status"],
            registry=r,
        )
        self.latency = Histogram(
            "nmt_http_request_duration_seconds",
            "Time from a request's arrival to the end of its answer",
            ["route"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.batch_size = Histogram(
            "nmt_batch_sentences",
            "Sentences in one decoded batch",
            buckets=BATCH_BUCKETS,
            registry=r,
        )
        self.queue = Gauge("nmt_queue_sentences", "Sentences waiting or decoding", registry=r)
        self.queue.set_function(pending_sentences)
        self.sentences = Counter(
            "nmt_decoded_sentences", "Sentences decoded", ["model"], registry=r
        )
        self.characters = Counter(
            "nmt_decoded_characters", "Characters of source text decoded", ["model"], registry=r
        )
        self.memory = Counter(
            "nmt_memory_lookups",
            "Sentences looked up in the suggestions (--suggestions)",
            ["result"],
            registry=r,
        )
        self.cache = Counter(
            "nmt_cache_lookups",
            "Sentences looked up in the translation cache (--cache-size)",
            ["result"],
            registry=r,
        )

    def batch(self, sentences: int) -> None:
        self.batch_size.observe(sentences)

    def decoded(self, model: str, sentences: int, characters: int) -> None:
        self.sentences.labels(model).inc(sentences)
        self.characters.labels(model).inc(characters)

    def recalled(
        self, *, memory_hits: int, memory_misses: int, cache_hits: int, cache_misses: int
    ) -> None:
        """A request's sentences found in the memory and the cache, or not."""
        for counter, hits, misses in (
            (self.memory, memory_hits, memory_misses),
            (self.cache, cache_hits, cache_misses),
        ):
            if hits:
                counter.labels("hit").inc(hits)
            if misses:
                counter.labels("miss").inc(misses)

    def exposition(self) -> tuple[bytes, str]:
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest  # as in __init__

        return generate_latest(self.registry), CONTENT_TYPE_LATEST


class RequestObserver:
    """ASGI middleware: metrics and the access log line of every HTTP request."""

    def __init__(self, app, metrics: Metrics | None, access_log: bool, log_texts: bool):
        self.app, self.metrics, self.access_log, self.log_texts = (
            app,
            metrics,
            access_log,
            log_texts,
        )

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        status = [500]

        async def sending(message):
            if message["type"] == "http.response.start":
                status[0] = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            self.observe(scope, status[0], time.perf_counter() - start)

    def observe(self, scope, status: int, seconds: float) -> None:
        route = scope.get("route")
        name = getattr(route, "path", None) or "other"
        if self.metrics is not None:
            self.metrics.requests.labels(name, str(status)).inc()
            if status >= 400:
                self.metrics.errors.labels(name, str(status)).inc()
            self.metrics.latency.labels(name).observe(seconds)
        if self.access_log:
            state = scope.get("state") or {}
            client = scope.get("client") or ("-", 0)
            line = (
                f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {client[0]} {scope['method']} "
                f"{scope['path'][:200]} {status} {1000 * seconds:.1f}ms "
                f"chars={state.get('log_chars', 0)}"
            )
            if self.log_texts and state.get("log_texts") is not None:
                line += " texts=" + json.dumps(state["log_texts"], ensure_ascii=False)
            print(line, file=sys.stderr, flush=True)
