"""What `nmt serve` is told: address, key, batching, limits and logging, one dataclass.

It has no dependency beyond the standard library, so the command line reads its defaults from
here without loading the service (FastAPI, torch) for `nmt --help`.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class FileSettings:
    """``/translate_file``'s limits: ``max_bytes`` an uploaded file's size, ``max_chars`` the
    characters it has to translate; ``kept_bytes`` the total size of the translated files waiting
    for their download (nmt_cli/serving/kept_files.py: per client, expiring by time)."""

    max_bytes: int = 20 << 20
    max_chars: int = 200_000
    kept_bytes: int = 256 << 20


@dataclass
class ServeSettings:
    host: str = "127.0.0.1"
    port: int = 5000
    api_key: str | None = None
    max_batch_tokens: int = 1024  # 0: no batching across requests, one request at a time
    max_wait_ms: float = 50.0
    max_chars: int = 5000  # characters of one text (LibreTranslate's char limit: 400 beyond)
    max_request_chars: int = 100_000  # characters of all texts of one request (413 beyond)
    max_queue: int = 1024  # sentences queued or decoding; a request that would pass it gets 503
    timeout_s: float = 30.0  # a request waiting longer for its translation gets 504
    threads: int = 1
    shortlist: bool | None = None  # None: the recipe's decode.shortlist
    cors: tuple[str, ...] = ()  # origins whose pages may call the API
    metrics: bool = False  # GET /metrics for Prometheus
    requests_per_minute: int = 0  # per client (api key or address); 0: no limit
    chars_per_minute: int = 0
    access_log: bool = False  # one line per request on stderr
    log_texts: bool = False  # the access log shows the texts too
    glossaries: tuple[str, ...] = ()  # --glossary [ID=]FILE (nmt_cli/translation/controlled.py)
    max_loaded: int = (
        0  # models whose weights stay loaded (0: no bound; nmt_cli/serving/model_pool.py)
    )
    min_confidence: float = 0.0  # the LibreTranslate route holds back translations below it
    files: FileSettings = field(default_factory=FileSettings)  # /translate_file's limits
    limit_concurrency: int = 512  # connections and requests at once; past it uvicorn's 503; 0: none
    keep_alive_s: float = 5.0  # an idle kept-alive connection is closed after this
    suggestions: str | None = None  # SQLite file of /suggest's corrections, served as a memory
    cache_size: int = 4096  # sentence translations kept (a few kilobytes each); 0: no cache
