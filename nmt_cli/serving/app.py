"""`nmt serve`: trained models over HTTP (FastAPI on uvicorn, the ``serve`` extra).

Routes: LibreTranslate's API as its clients use it (nmt_cli/serving/libretranslate.py), the native
``POST /v1/translate`` (n-best, word alignment, word attention), ``GET /v1/models``, liveness
``GET /health`` and readiness ``GET /ready``, ``GET /metrics`` with ``--metrics``, the OpenAPI
description at ``GET /spec`` and the web page at ``/``. Every request's sentences go through one
:class:`~nmt_cli.serving.job_queue.Batcher`, so concurrent requests are decoded together; a pair no
model translates may be served through a shared language (nmt_cli/serving/pivot.py).

Bad input never reaches the model: the request is checked (size, UTF-8, JSON or form, nesting,
valid Unicode, types, text length, markup depth, pair) and refused with a one-line JSON error,
``{"error": "..."}``; a failure of the service itself is a 500 with a request id
(nmt_cli/serving/http_guard.py). Nothing a request says is used as a path: models are chosen by
id among those loaded at start.
"""

# No `from __future__ import annotations`: FastAPI reads the route functions' annotations
# (Request) as objects.
import asyncio
import contextlib
import hmac
import json
from dataclasses import replace
from importlib import resources
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.middleware.cors import CORSMiddleware

from nmt_cli.serving import libretranslate, pivot
from nmt_cli.serving.body_limit import BodyLimit
from nmt_cli.serving.documents import filled, plan_texts, texts_json, translate_plan
from nmt_cli.serving.http_guard import HttpGuard
from nmt_cli.serving.job_queue import Batcher, Job, QueueFull
from nmt_cli.serving.kept_files import KeptFiles
from nmt_cli.serving.metrics import Metrics, RequestObserver
from nmt_cli.serving.models import ServedModel
from nmt_cli.serving.pivot import Route
from nmt_cli.serving.rate_limit import RateLimits
from nmt_cli.serving.recall import ServiceRecall
from nmt_cli.serving.request_body import (
    RequestError,
    given_key,
    read_bool,
    read_fields,
    read_int,
    read_texts,
)
from nmt_cli.serving.request_options import request_forcing, text_options
from nmt_cli.serving.settings import ServeSettings
from nmt_cli.translation.contract import TranslateOptions

MAX_BEAM = 32
WEB_FILES = {"index.html": "text/html", "app.js": "text/javascript", "style.css": "text/css"}


class Service:
    """The models, the batcher and the rules every route shares."""

    def __init__(self, models: list[ServedModel], settings: ServeSettings):
        self.models, self.settings = models, settings
        self.routes = pivot.routes(models)
        self.metrics = Metrics(lambda: self.batcher.pending) if settings.metrics else None
        self.batcher = Batcher(
            max_batch_tokens=settings.max_batch_tokens,
            max_wait_ms=settings.max_wait_ms,
            capacity=settings.max_queue,
            threads=settings.threads,
            on_batch=self._decoded if self.metrics else None,
        )
        self.limits = RateLimits(settings.requests_per_minute, settings.chars_per_minute)
        self.recall = ServiceRecall(settings.suggestions, settings.cache_size, self.metrics)
        self.max_body = 64 * 1024 + 8 * settings.max_request_chars
        self.files = KeptFiles(
            most_bytes=settings.files.kept_bytes
        )  # translated files, for their download
        self.file_settings = settings.files
        self.max_file_body = max(self.max_body, settings.files.max_bytes + (64 << 10))

    def _decoded(self, jobs: list[Job]) -> None:
        self.metrics.batch(sum(len(job.sentences) for job in jobs))
        for job in jobs:
            chars = sum(len(s) for s in job.sentences)
            self.metrics.decoded(job.model, len(job.sentences), chars)

    async def fields(
        self, request, allow_form: bool = True, file: bool = False
    ) -> tuple[dict, dict]:
        """(fields, uploaded files) of a request: its body (JSON, or with ``allow_form`` an
        urlencoded or multipart form) and its query string, size-checked (``file``: a body
        that carries a file, up to the file limit)."""
        most = self.max_file_body if file else None
        return await read_fields(
            request, most or self.max_body, allow_form, self.settings.max_queue + 16
        )

    def check_key(self, body: dict, headers) -> str | None:
        """The api_key a request gave (body, query string, X-API-Key or a bearer token), checked
        against --api-key as LibreTranslate does: none 400, a wrong one 403."""
        key = given_key(body, headers)
        if self.settings.api_key is None:
            return None  # keys are not used: one given is ignored, as LibreTranslate does
        if key is None:
            raise RequestError(400, "Please contact the server operator to get an API key")
        if not isinstance(key, str) or not hmac.compare_digest(
            key.encode(), self.settings.api_key.encode()
        ):
            raise RequestError(403, "Invalid API key")
        return key

    def charge(self, request, key: str | None, chars: int) -> None:
        """Count the request against its client's rate limits (429 past them); note its size for
        the access log."""
        request.state.log_chars = chars
        if self.limits.active:
            self.limits.charge(self.client(request, key), chars)

    @staticmethod
    def client(request, key: str | None) -> str:
        """Who a request counts against: its api key, else its address."""
        return key or (request.client.host if request.client else "-")

    def pick(self, model_id: Any, source: Any, target: Any) -> Route:
        if model_id is not None:
            for m in self.models:
                if m.id == model_id:
                    return Route((m,))
            raise RequestError(
                400,
                f"model: no model {json.dumps(model_id)[:60]}; served: "
                f"{', '.join(m.id for m in self.models)}",
            )
        if source is None and target is None and len(self.models) == 1:
            return Route((self.models[0],))
        for key, value in (("source", source), ("target", target)):
            if not isinstance(value, str) or not value:
                raise RequestError(400, f"{key}: give a language code (a string)")
        if source == "auto":
            raise RequestError(400, "source: give a language code; /detect identifies one")
        if (source, target) in self.routes:
            return self.routes[source, target]
        raise RequestError(
            400,
            f"no model translates {source[:20]} to {target[:20]}; served pairs: "
            f"{', '.join(sorted(f'{s}-{t}' for s, t in self.routes))}",
        )

    def check_length(self, texts: list[str]) -> None:
        for text in texts:
            if len(text) > self.settings.max_chars:
                raise RequestError(
                    400,
                    f"Invalid request: request ({len(text)}) exceeds text limit "
                    f"({self.settings.max_chars})",
                )
        chars = sum(len(t) for t in texts)
        if chars > self.settings.max_request_chars:
            raise RequestError(
                413,
                f"the texts are too long: {chars} characters, at most "
                f"{self.settings.max_request_chars} in one request",
            )

    def check_count(self, sentences: int) -> None:
        """A request of more sentences than the queue holds is refused (413), whether or not
        they would be decoded."""
        if sentences > self.settings.max_queue:
            raise RequestError(
                413,
                f"too many sentences in one request: {sentences}, at most "
                f"{self.settings.max_queue}",
            )

    async def translate(
        self, model: ServedModel | Route, lines: list[str], options: TranslateOptions
    ) -> list:
        """One Translation per line (None for a blank one); through a pivot, the first model's
        best translations are the second's input, cut again as `nmt translate` cuts its input
        (sentences, then clauses past the second model's ``decode.max_segment_tokens``)."""
        self.check_count(len(lines))
        if isinstance(model, Route) and model.pivot is not None:
            return await self._pivoted(model, lines, options)
        if isinstance(model, Route):
            model = model.first
        return await self._decode(model, lines, options)

    async def _pivoted(self, route: Route, lines: list[str], options: TranslateOptions) -> list:
        first = route.first.translator.config.beam_size
        asked = TranslateOptions(beam_size=first, alignments=options.alignments, warn_cut=False)
        middle = await self._decode(route.first, lines, asked)
        between = [r.text if r else "" for r in middle]
        plan = plan_texts(Route((route.last,)), between, protect=False)
        pieces = await self._decode(route.last, plan.segments, replace(options, attention=False))
        last = pivot.rejoined(plan, filled(pieces), between)
        return [pivot.chained(a, b) for a, b in zip(middle, last)]

    async def _decode(self, model: ServedModel, lines: list[str], options: TranslateOptions):
        """``lines`` through the batcher with one model: one Translation a line, None for a
        blank one; ``options`` the request's (prefixes: one per line, blank lines included)."""
        todo = [i for i, line in enumerate(lines) if line.strip()]
        tokens = sum(
            len(x) for x in model.translator.tokenizer.encode_src([lines[i] for i in todo])
        )
        if options.prefixes is not None:
            options = replace(options, prefixes=tuple(options.prefixes[i] for i in todo))
        job = Job(
            model.translator, [lines[i] for i in todo], tokens, model.options(options), model.id
        )
        try:
            future = self.batcher.submit(job)
        except QueueFull as exc:
            raise RequestError(503, str(exc)) from None
        try:
            done = await asyncio.wait_for(asyncio.wrap_future(future), self.settings.timeout_s)
        except asyncio.TimeoutError:
            raise RequestError(
                504, f"the translation took longer than {self.settings.timeout_s:g} s"
            ) from None
        results: list = [None] * len(lines)
        for i, r in zip(todo, done):
            results[i] = r
        return results


def _alternative_json(alternative, alignments: bool) -> dict:
    """One of a translation's n best: its text, scores and confidence, and its own word
    alignment where alignments are asked for."""
    out = {
        "text": alternative.text,
        "score": round(alternative.score, 4),
        "norm_score": round(alternative.norm_score, 4),
        "confidence": (
            None if alternative.confidence is None else round(alternative.confidence, 4)
        ),
    }
    if alignments:
        out["alignment"] = " ".join(f"{i}-{j}" for i, j in alternative.alignment or [])
    return out


def _translation_json(tr, nbest: int, alignments: bool, attention: bool) -> dict:
    out = {
        "text": tr.text,
        "score": round(tr.score, 4),
        "confidence": None if tr.confidence is None else round(tr.confidence, 4),
        "nbest": [_alternative_json(a, alignments) for a in tr.alternatives[:nbest]],
    }
    if alignments:
        out["alignment"] = " ".join(f"{i}-{j}" for i, j in tr.alignment or [])
    if attention:
        out["attention"] = (
            None
            if tr.attention is None
            else {
                **tr.attention.as_dict(),
                "weights": [[round(w, 4) for w in row] for row in tr.attention.weights],
                "piece_weights": [[round(w, 4) for w in row] for row in tr.attention.piece_weights],
            }
        )
    return out


def _web_file(name: str) -> bytes:
    return (resources.files("nmt_cli") / "web" / name).read_bytes()


def build_app(service: Service):
    """The FastAPI application; its lifespan starts and drains the decoding threads."""

    @contextlib.asynccontextmanager
    async def lifespan(_app):
        service.batcher.start()
        yield
        await asyncio.get_running_loop().run_in_executor(None, service.batcher.close)

    app = FastAPI(
        title="nmt",
        summary="LibreTranslate's API and nmt's own over trained attentional RNN models",
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
        openapi_url="/spec",
    )
    _add_error_handlers(app)
    _add_middleware(app, service)

    async def read(request: Request, allow_form: bool = False) -> dict:
        body, _files = await service.fields(request, allow_form)
        body["api_key"] = service.check_key(body, request.headers)
        return body

    _add_page_routes(app)
    _add_status_routes(app, service)
    libretranslate.add_routes(app, service, read)

    @app.post(
        "/v1/translate",
        summary="Translate sentences: n-best, word alignment, word attention",
        openapi_extra=libretranslate.body_schema(libretranslate.NativeRequest, forms=False),
    )
    async def native(request: Request):
        return await native_translate(service, request, await read(request))

    return app


def _error(status: int, message: str, headers: dict | None = None) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status, headers=headers)


def _add_error_handlers(app) -> None:
    """Every error a one-line JSON ``{"error": ...}``."""

    @app.exception_handler(RequestError)
    async def refused(_request, exc: RequestError):
        return _error(exc.status, str(exc), exc.headers)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_request, exc):
        return _error(exc.status_code, str(exc.detail))

    @app.exception_handler(RequestValidationError)
    async def invalid(_request, exc):
        first = exc.errors()[0] if exc.errors() else {}
        where = ".".join(str(p) for p in first.get("loc", ()))
        return _error(400, f"Invalid request: {where}: {first.get('msg', 'invalid')}"[:300])

    @app.exception_handler(Exception)
    async def failed(_request, exc):  # past HttpGuard: the middleware around it failed
        return _error(500, "internal error")


def _add_middleware(app, service: Service) -> None:
    """Outermost first: the metrics and the access log, CORS for --cors origins, security
    headers and internal errors (nmt_cli/serving/http_guard.py), the body limit."""
    app.add_middleware(
        BodyLimit, limit=service.max_body, by_path={"/translate_file": service.max_file_body}
    )
    app.add_middleware(HttpGuard)
    if service.settings.cors:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=list(service.settings.cors),
            allow_methods=["GET", "POST"],
            allow_headers=["Authorization", "Content-Type", "X-API-Key"],
            max_age=86400,
        )
    if service.metrics is not None or service.settings.access_log:
        app.add_middleware(
            RequestObserver,
            metrics=service.metrics,
            access_log=service.settings.access_log,
            log_texts=service.settings.log_texts,
        )


def _add_page_routes(app) -> None:
    """The web page and its files, read at start."""
    web = {name: (_web_file(name), kind) for name, kind in WEB_FILES.items()}

    @app.get("/", include_in_schema=False)
    async def page():
        return Response(web["index.html"][0], media_type="text/html; charset=utf-8")

    @app.get("/static/{name}", include_in_schema=False)
    async def static(name: str):
        if name not in web:  # only the page's own files, read at start; never a path
            raise RequestError(404, f"no such file: {name[:60]}")
        content, kind = web[name]
        return Response(content, media_type=f"{kind}; charset=utf-8")


def _add_status_routes(app, service: Service) -> None:
    """Liveness, readiness, the metrics and the served models."""

    @app.get("/health", summary="Liveness: the process answers")
    async def health():
        b = service.batcher
        return {
            "status": "ok",
            "models": [m.id for m in service.models],
            "pending_sentences": b.pending,
            "batching": b.batching,
            "decoded_batches": b.batches,
            "decoded_sentences": b.sentences,
        }

    @app.get("/ready", summary="Readiness: models loaded and the decoding threads running")
    async def ready():
        if not service.models or not service.batcher.running:
            return _error(503, "not ready: the decoding threads are not running")
        return {"status": "ready", "models": [m.id for m in service.models]}

    if service.metrics is not None:

        @app.get("/metrics", summary="Prometheus metrics", include_in_schema=True)
        async def metrics():
            content, kind = service.metrics.exposition()
            return Response(content, media_type=kind)

    @app.get("/v1/models", summary="The served models and pairs")
    async def models():
        return {
            "models": [m.describe() for m in service.models],
            "pairs": [
                {"source": s, "target": t, "pivot": r.pivot} for (s, t), r in service.routes.items()
            ],
            "api_key_required": service.settings.api_key is not None,
            "max_chars": service.settings.max_chars,
        }


async def native_translate(service: Service, request, body: dict) -> dict:
    """``POST /v1/translate``: each sentence (a text, cut as `nmt translate` cuts a line) with
    its n best, score, confidence and, when asked, word alignment and attention."""
    src = body.get("src")
    if not isinstance(src, list):
        raise RequestError(400, "src: expected a list of sentences")
    sentences = read_texts(src, "src")
    route = service.pick(body.get("model"), body.get("source"), body.get("target"))
    model = route.last
    beam = read_int(body, "beam_size", model.translator.config.beam_size, 1, MAX_BEAM)
    nbest = read_int(body, "nbest", 1, 1, beam)
    alignments, attention = read_bool(body, "alignments"), read_bool(body, "attention")
    if route.pivot is not None and attention:
        raise RequestError(400, f"attention: not given for a pair pivoted through {route.pivot}")
    service.check_length(sentences)
    service.charge(request, body["api_key"], sum(len(s) for s in sentences))
    request.state.log_texts = sentences
    fmt = body.get("format", "text")
    if fmt not in ("text", "html"):
        raise RequestError(400, f'format: "text" or "html", got {json.dumps(fmt)[:40]}')
    prefixed = body.get("prefix") is not None
    if route.pivot is not None and (prefixed or body.get("glossary") is not None):
        raise RequestError(
            400, f"glossary, prefix: not given for a pair pivoted through {route.pivot}"
        )
    asked = text_options(
        body,
        TranslateOptions(beam_size=beam, nbest=nbest, alignments=alignments, attention=attention),
    )
    # A prefix belongs to its sentence as sent: those are translated whole, one segment each.
    plan = plan_texts(
        route,
        sentences,
        fmt,
        split_sentences=not prefixed,
        numbers=asked.numbers,
        restore_case=asked.restore_case,
    )
    if prefixed and len(plan.segments) != len(sentences):
        raise RequestError(400, "prefix: give it for non-empty sentences of one line each")
    options = request_forcing(route.first, body, sentences, asked)
    results = await translate_plan(service, route, plan, options)
    out = {
        "model": model.id,
        "translations": texts_json(
            plan, results, lambda r: _translation_json(r, nbest, alignments, attention)
        ),
    }
    if route.pivot is not None:
        out.update(models=[m.id for m in route.steps], pivot=route.pivot)
    if any(m.zero_shot for m in route.steps):  # a multilingual model's untrained direction
        out["zero_shot"] = True
    return out
