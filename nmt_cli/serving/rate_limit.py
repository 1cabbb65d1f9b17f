"""Per-client rate limits of `nmt serve`: requests and characters per minute.

A client is its api_key where it gave one, else its address. The counting is the `limits`
library's sliding-window counter in memory (one process): each translation request costs one
request and as many characters as its texts hold. A request over either limit is refused with
429 and LibreTranslate's text, ``Slowdown: N per 1 minute``; what it would have cost is not
counted.
"""

from __future__ import annotations

from nmt_cli.serving.request_body import RequestError


class RateLimits:
    def __init__(self, requests_per_minute: int = 0, chars_per_minute: int = 0):
        # Imported only with a rate limit: a server without one need not load the library.
        from limits import RateLimitItemPerMinute
        from limits.storage import MemoryStorage
        from limits.strategies import SlidingWindowCounterRateLimiter

        self._limiter = SlidingWindowCounterRateLimiter(MemoryStorage())
        self._requests = (
            RateLimitItemPerMinute(requests_per_minute) if requests_per_minute else None
        )
        self._chars = RateLimitItemPerMinute(chars_per_minute) if chars_per_minute else None

    @property
    def active(self) -> bool:
        return self._requests is not None or self._chars is not None

    def charge(self, client: str, chars: int) -> None:
        """Count one request of ``chars`` characters for ``client``, or refuse it with 429."""
        chars = max(chars, 1)
        for item, cost in ((self._requests, 1), (self._chars, chars)):
            if item is not None and not self._limiter.test(item, client, cost=cost):
                raise RequestError(429, f"Slowdown: {item}")
        for item, cost in ((self._requests, 1), (self._chars, chars)):
            if item is not None:
                self._limiter.hit(item, client, cost=cost)
