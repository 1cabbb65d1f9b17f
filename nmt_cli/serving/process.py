"""Running `nmt serve`: load the models, listen, hand the socket to uvicorn, and stop on SIGTERM
or Ctrl-C once the requests in flight are answered."""

import signal
import socket
import sys
from collections.abc import Sequence

import torch
import uvicorn

from nmt_cli.runtime.errors import UserError
from nmt_cli.serving.app import ServeSettings, Service, build_app
from nmt_cli.serving.model_pool import PoolCollector
from nmt_cli.serving.models import serving_models
from nmt_cli.serving.request_options import attach_glossaries


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
    """Load the models (or, from packages, get ready to load them on first request), listen,
    serve until SIGTERM or Ctrl-C, then finish what is in flight."""
    if settings.api_key is not None and not settings.api_key:
        raise UserError("--api-key: give a non-empty key")
    torch.set_num_threads(settings.threads)
    models, pool = serving_models(
        model_paths, settings.max_loaded, device=device, shortlist=settings.shortlist
    )
    attach_glossaries(models, settings.glossaries)
    service = Service(models, settings)
    if pool is not None and service.metrics is not None:
        service.metrics.registry.register(PoolCollector(pool))
    app = build_app(service)
    sock = _listen(settings.host, settings.port)
    config = uvicorn.Config(
        app,
        log_level="warning",
        access_log=False,
        lifespan="on",
        timeout_graceful_shutdown=settings.timeout_s + 5,
        # Many and slow clients (docs/serve.md#slow-and-many-clients): past limit_concurrency
        # open connections and requests uvicorn answers 503 at once; an idle kept-alive
        # connection is closed after keep_alive_s. Uvicorn has no timeout for a request's
        # headers: facing the internet, a reverse proxy in front sets one.
        limit_concurrency=settings.limit_concurrency or None,
        timeout_keep_alive=settings.keep_alive_s,
        # A query string as long as the largest body (deep-translator sends the texts there)
        # reaches the application, which answers it in JSON.
        h11_max_incomplete_event_size=service.max_body + 16 * 1024,
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
