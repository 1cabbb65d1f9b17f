"""`nmt serve`: trained models over HTTP (FastAPI on uvicorn, the ``serve`` extra).

Routes: ``POST /translate`` and ``GET /languages`` as LibreTranslate answers them, the native
``POST /v1/translate`` (n-best, word alignment, word attention), ``GET /health``,
``GET /v1/models`` and the web page at ``/``. Every request's sentences go through one
:class:`~nmt_cli.batching.Batcher`, so concurrent requests are decoded together.

Bad input never reaches the model: the body is checked (size, UTF-8, JSON, types, text length,
pair) and refused with a one-line JSON error, ``{"error": "..."}``. Nothing a request says is
used as a path: models are chosen by id among those loaded at start.
"""

# No `from __future__ import annotations`: FastAPI reads the route functions' annotations
# (Request) as objects.
import asyncio
import contextlib
import hmac
import json
import signal
import socket
import sys
from collections.abc import Sequence
from dataclasses import dataclass, replace
from importlib import resources
from typing import Any

from nmt_cli.batching import Batcher, Job, QueueFull
from nmt_cli.controlled import attach_glossaries, hold_back, request_translator, text_confidences
from nmt_cli.errors import UserError
from nmt_cli.request_body import RequestError, parse_body, read_bool, read_int, read_texts
from nmt_cli.served_models import ServedModel, load_models

MAX_BEAM = 32
LANGUAGE_NAMES = {
    "ar": "Arabic",
    "cs": "Czech",
    "de": "German",
    "en": "English",
    "es": "Spanish",
    "fi": "Finnish",
    "fr": "French",
    "it": "Italian",
    "ja": "Japanese",
    "nl": "Dutch",
    "pl": "Polish",
    "pt": "Portuguese",
    "ro": "Romanian",
    "ru": "Russian",
    "tr": "Turkish",
    "uk": "Ukrainian",
    "zh": "Chinese",
}
WEB_FILES = {"index.html": "text/html", "app.js": "text/javascript", "style.css": "text/css"}


@dataclass
class ServeSettings:
    host: str = "127.0.0.1"
    port: int = 5000
    api_key: str | None = None
    max_batch_tokens: int = 1024  # 0: no batching across requests, one request at a time
    max_wait_ms: float = 5.0
    max_chars: int = 5000  # characters of text in one request
    max_queue: int = 1024  # sentences queued or decoding; a request that would pass it gets 503
    timeout_s: float = 30.0  # a request waiting longer for its translation gets 504
    threads: int = 1
    shortlist: bool | None = None  # None: the recipe's decode.shortlist
    glossaries: tuple[str, ...] = ()  # --glossary [ID=]FILE (nmt_cli/controlled.py)
    min_confidence: float = 0.0  # the LibreTranslate route holds back translations below it


class Service:
    """The models, the batcher and the rules every route shares."""

    def __init__(self, models: list[ServedModel], settings: ServeSettings):
        self.models, self.settings = models, settings
        self.batcher = Batcher(
            max_batch_tokens=settings.max_batch_tokens,
            max_wait_ms=settings.max_wait_ms,
            capacity=settings.max_queue,
            threads=settings.threads,
        )
        self.max_body = 64 * 1024 + 8 * settings.max_chars

    def check_key(self, body: dict, headers) -> None:
        if self.settings.api_key is None:
            return
        given = body.get("api_key") or headers.get("x-api-key") or ""
        auth = headers.get("authorization", "")
        if not given and auth.lower().startswith("bearer "):
            given = auth[7:]
        if not isinstance(given, str) or not hmac.compare_digest(
            given.encode(), self.settings.api_key.encode()
        ):
            raise RequestError(403, "invalid or missing api_key")

    def pick(self, model_id: Any, source: Any, target: Any) -> ServedModel:
        if model_id is not None:
            for m in self.models:
                if m.id == model_id:
                    return m
            raise RequestError(
                400,
                f"model: no model {json.dumps(model_id)[:60]}; served: "
                f"{', '.join(m.id for m in self.models)}",
            )
        if source is None and target is None and len(self.models) == 1:
            return self.models[0]
        if source == "auto":
            raise RequestError(
                400,
                "source: 'auto' is not supported (no language identification); "
                f"give one of: {', '.join(sorted({m.source for m in self.models}))}",
            )
        for key, value in (("source", source), ("target", target)):
            if not isinstance(value, str) or not value:
                raise RequestError(400, f"{key}: give a language code (a string)")
        for m in self.models:
            if m.source == source and m.target == target:
                return m
        raise RequestError(
            400,
            f"no model translates {source[:20]} to {target[:20]}; served pairs: "
            f"{', '.join(sorted({f'{m.source}-{m.target}' for m in self.models}))}",
        )

    def check_length(self, texts: list[str]) -> None:
        chars = sum(len(t) for t in texts)
        if chars > self.settings.max_chars:
            raise RequestError(
                413,
                f"the text is too long: {chars} characters, at most "
                f"{self.settings.max_chars} in one request",
            )

    async def translate(
        self,
        model: ServedModel,
        lines: list[str],
        *,
        beam_size: int,
        nbest: int,
        alignments: bool = False,
        attention: bool = False,
    ) -> list:
        if len(lines) > self.settings.max_queue:
            raise RequestError(
                413,
                f"too many sentences in one request: {len(lines)}, at most "
                f"{self.settings.max_queue}",
            )
        todo = [i for i, line in enumerate(lines) if line.strip()]
        tokens = sum(
            len(x) for x in model.translator.tokenizer.encode_src([lines[i] for i in todo])
        )
        job = Job(
            model.translator,
            [lines[i] for i in todo],
            tokens,
            beam_size,
            nbest,
            alignments,
            attention,
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


def _translation_json(tr, nbest: int, alignments: bool, attention: bool) -> dict:
    out = {
        "text": tr.text,
        "score": round(tr.score, 4),
        "confidence": None if tr.confidence is None else round(tr.confidence, 4),
        "nbest": [
            {"text": a.text, "score": round(a.score, 4), "norm_score": round(a.norm_score, 4)}
            for a in tr.alternatives[:nbest]
        ],
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
    from fastapi import FastAPI, Request
    from fastapi.responses import JSONResponse, Response
    from starlette.exceptions import HTTPException as StarletteHTTPException

    @contextlib.asynccontextmanager
    async def lifespan(_app):
        service.batcher.start()
        yield
        await asyncio.get_running_loop().run_in_executor(None, service.batcher.close)

    app = FastAPI(title="nmt", lifespan=lifespan, docs_url=None, redoc_url=None, openapi_url=None)
    web = {name: (_web_file(name), kind) for name, kind in WEB_FILES.items()}

    def error(status: int, message: str) -> JSONResponse:
        return JSONResponse({"error": message}, status_code=status)

    @app.exception_handler(RequestError)
    async def refused(_request, exc: RequestError):
        return error(exc.status, str(exc))

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_request, exc):
        return error(exc.status_code, str(exc.detail))

    @app.exception_handler(Exception)
    async def failed(_request, exc):
        first = str(exc).splitlines()[0][:200] if str(exc) else ""
        return error(500, f"internal error: {type(exc).__name__}: {first}")

    async def read(request: Request, allow_form: bool = False) -> dict:
        declared = request.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > service.max_body:
            raise RequestError(
                413, f"the request body is too large ({declared} bytes, at most {service.max_body})"
            )
        raw = await request.body()
        if len(raw) > service.max_body:
            raise RequestError(
                413, f"the request body is too large ({len(raw)} bytes, at most {service.max_body})"
            )
        body = parse_body(raw, request.headers.get("content-type", ""), allow_form)
        service.check_key(body, request.headers)
        return body

    @app.get("/")
    async def page():
        return Response(web["index.html"][0], media_type="text/html; charset=utf-8")

    @app.get("/static/{name}")
    async def static(name: str):
        if name not in web:  # only the page's own files, read at start; never a path
            raise RequestError(404, f"no such file: {name[:60]}")
        content, kind = web[name]
        return Response(content, media_type=f"{kind}; charset=utf-8")

    @app.get("/health")
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

    @app.get("/v1/models")
    async def models():
        return {
            "models": [m.describe() for m in service.models],
            "api_key_required": service.settings.api_key is not None,
            "max_chars": service.settings.max_chars,
        }

    @app.get("/languages")
    async def languages():
        out: dict[str, dict] = {}
        for m in service.models:
            entry = out.setdefault(
                m.source,
                {"code": m.source, "name": LANGUAGE_NAMES.get(m.source, m.source), "targets": []},
            )
            if m.target not in entry["targets"]:
                entry["targets"].append(m.target)
        return list(out.values())

    @app.post("/translate")
    async def libretranslate(request: Request):
        body = await read(request, allow_form=True)
        q = body.get("q")
        texts = read_texts(q, "q")
        fmt = body.get("format", "text")
        if fmt != "text":
            raise RequestError(400, f'format: only "text" is supported, got {json.dumps(fmt)[:40]}')
        model = service.pick(None, body.get("source"), body.get("target"))
        beam = model.translator.config.beam_size
        alternatives = read_int(body, "alternatives", 0, 0, beam - 1)
        service.check_length(texts)
        # A text may hold several lines: each is translated as a sentence and the lines kept.
        lines = [line for text in texts for line in text.split("\n")]
        results = await service.translate(model, lines, beam_size=beam, nbest=alternatives + 1)
        threshold = service.settings.min_confidence
        results, held = hold_back(results, lines, threshold)
        translated, alts, start = [], [], 0
        for text in texts:
            part = results[start : start + text.count("\n") + 1]
            start += len(part)
            translated.append("\n".join(r.text if r else "" for r in part))
            alts.append(
                [
                    "\n".join(
                        r.alternatives[k].text if r and k < len(r.alternatives) else ""
                        for r in part
                    )
                    for k in range(1, alternatives + 1)
                ]
            )
        single = not isinstance(q, list)
        out: dict = {"translatedText": translated[0] if single else translated}
        if alternatives:
            out["alternatives"] = alts[0] if single else alts
        fields = text_confidences(results, held, texts, threshold)
        out.update({k: v[0] if single else v for k, v in fields.items()})
        return out

    @app.post("/v1/translate")
    async def native(request: Request):
        body = await read(request)
        src = body.get("src")
        if not isinstance(src, list):
            raise RequestError(400, "src: expected a list of sentences")
        sentences = read_texts(src, "src")
        model = service.pick(body.get("model"), body.get("source"), body.get("target"))
        beam = read_int(body, "beam_size", model.translator.config.beam_size, 1, MAX_BEAM)
        nbest = read_int(body, "nbest", 1, 1, beam)
        alignments, attention = read_bool(body, "alignments"), read_bool(body, "attention")
        service.check_length(sentences)
        forcing = replace(model, translator=request_translator(model.translator, body, sentences))
        results = await service.translate(
            forcing,
            sentences,
            beam_size=beam,
            nbest=nbest,
            alignments=alignments,
            attention=attention,
        )
        return {
            "model": model.id,
            "translations": [_translation_json(r, nbest, alignments, attention) for r in results],
        }

    return app


# ---------------------------------------------------------------------- running


def _listen(host: str, port: int) -> socket.socket:
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise UserError(f"--host {host}: cannot resolve ({exc.strerror})") from None
    family, _, _, _, address = infos[0]
    # IPPROTO_TCP named explicitly: asyncio turns Nagle's algorithm off (TCP_NODELAY) only on
    # connections whose socket says TCP; with proto 0 a response's header and body segments wait
    # for the client's delayed ACK on every request of a kept-alive connection.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        raise UserError(f"--port {port}: cannot listen on {host}:{port} ({exc.strerror})") from None
    sock.setblocking(False)
    return sock


def serve(model_paths: Sequence[str], settings: ServeSettings, *, device: str = "auto") -> None:
    """Load the models, listen, serve until SIGTERM or Ctrl-C, then finish what is in flight."""
    try:
        import fastapi  # noqa: F401
        import uvicorn
    except ImportError:
        raise UserError("nmt serve needs the serve extra: pip install 'nmt[serve]'") from None
    if settings.api_key is not None and not settings.api_key:
        raise UserError("--api-key: give a non-empty key")
    import torch

    torch.set_num_threads(settings.threads)
    models = load_models(model_paths, device=device, shortlist=settings.shortlist)
    attach_glossaries(models, settings.glossaries)
    service = Service(models, settings)
    app = build_app(service)
    sock = _listen(settings.host, settings.port)
    config = uvicorn.Config(
        app,
        log_level="warning",
        access_log=False,
        lifespan="on",
        timeout_graceful_shutdown=settings.timeout_s + 5,
    )
    server = uvicorn.Server(config)

    def stop(signum, frame) -> None:
        server.should_exit = True

    # While the server runs, uvicorn answers SIGINT and SIGTERM itself: it stops accepting
    # requests, finishes those in flight (the lifespan drains the batcher) and, once done, raises
    # the signal again for the handlers it found. Those are these, so that the stop it has just
    # made ends the process with exit code 0 rather than as a stopped command; a signal arriving
    # once the address is announced but before uvicorn takes over stops it as soon as it starts.
    stop_signals = (signal.SIGINT, signal.SIGTERM)
    before = {signum: signal.signal(signum, stop) for signum in stop_signals}
    try:
        host, port = sock.getsockname()[:2]
        shown = f"[{host}]" if ":" in host else host
        print(
            f"nmt serve: {', '.join(f'{m.id} ({m.source}-{m.target})' for m in models)} on "
            f"http://{shown}:{port}/ (batching {'on' if service.batcher.batching else 'off'}, "
            f"{service.batcher.workers} decoding thread(s))",
            file=sys.stderr,
            flush=True,
        )
        server.run(sockets=[sock])
    finally:
        for signum, handler in before.items():
            signal.signal(signum, handler)
    print("nmt serve: stopped", file=sys.stderr, flush=True)
