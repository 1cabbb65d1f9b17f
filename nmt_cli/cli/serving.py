"""`nmt serve`: the HTTP service over one or several models."""

from __future__ import annotations

from typing import Annotated

import typer

from nmt_cli.cli.app import DeviceOption, app
from nmt_cli.runtime import startup
from nmt_cli.runtime.errors import UserError
from nmt_cli.serving.settings import FileSettings, ServeSettings

DEFAULTS = ServeSettings()
SERVE_EXTRA = ("fastapi", "uvicorn", "starlette", "pydantic", "multipart", "python_multipart")


@app.command()
@startup.command("the server stopped before it began listening")
def serve(
    model: Annotated[
        list[str] | None,
        typer.Option(
            "-m",
            "--model",
            metavar="RUN",
            help="Run dir, checkpoint file, package or installed model's name to serve; repeat "
            "to serve several models (each its recipe's language pair). None: every installed "
            "model (nmt models list), each loaded on its first request.",
        ),
    ] = None,
    max_loaded: Annotated[
        int,
        typer.Option(
            min=0,
            metavar="N",
            help="Keep at most N models loaded, unloading the least recently used; each is "
            "loaded on its first request, which waits for it (within --timeout). 0: no bound. "
            "With -m, the models must be packages.",
        ),
    ] = DEFAULTS.max_loaded,
    host: Annotated[
        str, typer.Option(help="Address to listen on; the default answers this machine only.")
    ] = DEFAULTS.host,
    port: Annotated[
        int, typer.Option(min=0, max=65535, help="TCP port (0: any free one, printed at start).")
    ] = DEFAULTS.port,
    api_key: Annotated[
        str | None,
        typer.Option(
            help="Translation requests must carry this key (api_key in the body or the query "
            "string, an X-API-Key header or a bearer token); none: 400, a wrong one: 403."
        ),
    ] = DEFAULTS.api_key,
    max_batch_tokens: Annotated[
        int,
        typer.Option(
            min=0,
            help="Source subwords decoded together at most; a full batch goes at once. 0: no "
            "batching, one request at a time.",
        ),
    ] = DEFAULTS.max_batch_tokens,
    max_wait_ms: Annotated[
        float,
        typer.Option(
            min=0.0,
            help="While the server is busy (another thread decoding, or the clients of the batch "
            "just answered still to send again), how long a batch waits for more requests.",
        ),
    ] = DEFAULTS.max_wait_ms,
    max_chars: Annotated[
        int,
        typer.Option(
            min=1, help="Characters of one text at most (more: 400, LibreTranslate's char limit)."
        ),
    ] = DEFAULTS.max_chars,
    max_request_chars: Annotated[
        int,
        typer.Option(min=1, help="Characters of all texts of one request at most (more: 413)."),
    ] = DEFAULTS.max_request_chars,
    max_file_bytes: Annotated[
        int,
        typer.Option(min=1, help="Bytes of a file sent to /translate_file at most (more: 413)."),
    ] = DEFAULTS.files.max_bytes,
    max_file_chars: Annotated[
        int,
        typer.Option(
            min=1,
            help="Characters a file sent to /translate_file has to translate at most (more: 413).",
        ),
    ] = DEFAULTS.files.max_chars,
    kept_files_bytes: Annotated[
        int,
        typer.Option(
            min=1,
            help="Bytes of translated files kept for /download_file at most, all clients "
            "together; past it the client holding most gives way first.",
        ),
    ] = DEFAULTS.files.kept_bytes,
    max_queue: Annotated[
        int,
        typer.Option(
            min=1,
            help="Sentences waiting or decoding at most; a request that would pass it gets 503.",
        ),
    ] = DEFAULTS.max_queue,
    timeout: Annotated[
        float,
        typer.Option(min=0.001, help="Seconds a request may wait for its translation (more: 504)."),
    ] = DEFAULTS.timeout_s,
    threads: Annotated[
        int | None,
        typer.Option(
            min=1,
            metavar="N",
            help="CPU threads for decoding (also $NMT_THREADS); with batching, one decoding "
            "thread per CPU thread. Default: the cores not already busy.",
        ),
    ] = None,
    shortlist: Annotated[
        bool | None,
        typer.Option(
            "--shortlist/--no-shortlist",
            help="Decode over the vocabulary shortlist (default: the recipe's "
            "decode.shortlist); each sentence keeps its own candidates, so an answer never "
            "depends on its batch.",
        ),
    ] = DEFAULTS.shortlist,
    cors: Annotated[
        list[str] | None,
        typer.Option(
            metavar="ORIGIN",
            help="Let pages from this origin (https://example.org, or *) call the API; repeat "
            "for several.",
        ),
    ] = None,
    metrics: Annotated[
        bool, typer.Option("--metrics", help="Prometheus metrics at GET /metrics.")
    ] = DEFAULTS.metrics,
    rate_limit: Annotated[
        int,
        typer.Option(
            min=0,
            metavar="N",
            help="Translation requests per minute per client (its api key, else its address); "
            "more: 429. 0: no limit.",
        ),
    ] = DEFAULTS.requests_per_minute,
    char_rate_limit: Annotated[
        int,
        typer.Option(
            min=0, metavar="N", help="Characters per minute per client (more: 429). 0: no limit."
        ),
    ] = DEFAULTS.chars_per_minute,
    access_log: Annotated[
        bool,
        typer.Option(
            "--access-log",
            help="One line per request on stderr: client, route, status, time, characters.",
        ),
    ] = DEFAULTS.access_log,
    log_texts: Annotated[
        bool, typer.Option("--log-texts", help="The access log shows the texts too.")
    ] = DEFAULTS.log_texts,
    limit_concurrency: Annotated[
        int,
        typer.Option(
            min=0,
            metavar="N",
            help="Open connections and requests at once, at most; past it a request gets 503 at "
            "once (docs/serve.md#slow-and-many-clients). 0: no limit.",
        ),
    ] = DEFAULTS.limit_concurrency,
    keep_alive: Annotated[
        float,
        typer.Option(
            min=0.1, metavar="SECONDS", help="An idle kept-alive connection is closed after this."
        ),
    ] = DEFAULTS.keep_alive_s,
    device: DeviceOption = "auto",
    glossary: Annotated[
        list[str] | None,
        typer.Option(
            metavar="[ID=]FILE",
            help="Force these terms in every request to model ID (FILE alone: every model); a "
            "file of 'source term<TAB>target term' lines; repeat for several.",
        ),
    ] = None,
    min_confidence: Annotated[
        float,
        typer.Option(
            min=0.0,
            max=1.0,
            help="LibreTranslate route: a translation whose confidence is below this comes back "
            "as its source text, with lowConfidence true (docs/serve.md).",
        ),
    ] = DEFAULTS.min_confidence,
    suggestions: Annotated[
        str | None,
        typer.Option(
            metavar="DB",
            help="Take LibreTranslate's POST /suggest and keep the corrections in this SQLite "
            "file (made if missing); a sentence corrected there is answered with its correction "
            "from then on, also after a restart (nmt suggestions export turns them into "
            "training pairs).",
        ),
    ] = DEFAULTS.suggestions,
    cache_size: Annotated[
        int,
        typer.Option(
            min=0,
            metavar="N",
            help="Sentence translations kept for repeats, the least recently used dropped "
            "first; each is kept per model, direction and decoding options. 0: no cache.",
        ),
    ] = DEFAULTS.cache_size,
) -> None:
    """Serve models over HTTP: a LibreTranslate-compatible API, a native one, and a web page at /.

    Each -m serves its recipe's language pair with its recipe's decoding settings; a pair no
    model has is served through a shared language where two models chain. Concurrent
    requests are decoded together in batches. SIGTERM or Ctrl-C stops accepting requests, finishes
    those in flight and exits 0. Needs the serve extra (pip install 'nmt[serve]').
    """
    # Imported here, not at the top: the serve extra is optional, and the other commands need
    # not load torch and FastAPI.
    try:
        from nmt_cli.serving.process import serve as run_serve
    except ModuleNotFoundError as exc:
        if exc.name not in SERVE_EXTRA:
            raise
        raise UserError("nmt serve needs the serve extra: pip install 'nmt[serve]'") from None

    run_serve(
        model,
        ServeSettings(
            host=host,
            port=port,
            api_key=api_key,
            max_batch_tokens=max_batch_tokens,
            max_wait_ms=max_wait_ms,
            max_chars=max_chars,
            max_request_chars=max_request_chars,
            max_queue=max_queue,
            timeout_s=timeout,
            threads=threads,
            shortlist=shortlist,
            cors=tuple(cors or ()),
            metrics=metrics,
            requests_per_minute=rate_limit,
            chars_per_minute=char_rate_limit,
            access_log=access_log,
            log_texts=log_texts,
            glossaries=tuple(glossary or ()),
            max_loaded=max_loaded,
            min_confidence=min_confidence,
            files=FileSettings(
                max_bytes=max_file_bytes, max_chars=max_file_chars, kept_bytes=kept_files_bytes
            ),
            limit_concurrency=limit_concurrency,
            keep_alive_s=keep_alive,
            suggestions=suggestions,
            cache_size=cache_size,
        ),
        device=device,
    )
