"""A bounded, uniform random sample of a stream of unknown length: the training pairs that
SentencePiece learns from, drawn in the same pass that counts them."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


class Reservoir:
    """A uniform random sample of at most ``capacity`` items from a stream of unknown length
    (Li 1994, Algorithm L: skips drawn from the geometric law, so a long stream costs few draws).
    While the stream is shorter than the capacity the sample is the whole stream, in order.

    The replacements are drawn ``DRAWS`` at a time with numpy (where each goes in the stream, and
    which slot it takes), and an offered block hands over the items it loses to them at once, not
    one Python step per replacement."""

    DRAWS = 4096

    def __init__(self, capacity: int, seed: int = 0):
        self.capacity = capacity
        self.items: list = []
        self.rng = np.random.default_rng(seed)
        self.seen = 0
        self._log_w = 0.0
        self._after = 0  # stream position after the last drawn
        self._positions = np.zeros(0, dtype=np.int64)  # the next replacements, ascending
        self._slots = np.zeros(0, dtype=np.int64)

    def _draw(self) -> None:
        """The next DRAWS replacements: W_i = W_(i-1) U_i^(1/k), and replacement i lies
        floor(log V_i / log(1 - W_i)) items after replacement i - 1 (U, V uniform on (0, 1])."""
        k = self.capacity
        log_w = self._log_w + np.cumsum(np.log1p(-self.rng.random(self.DRAWS)) / k)
        with np.errstate(divide="ignore"):
            skips = np.floor(np.log1p(-self.rng.random(self.DRAWS)) / np.log1p(-np.exp(log_w)))
        skips = np.minimum(skips, 2.0**40).astype(np.int64)  # no overflow, however long the stream
        positions = self._after + np.cumsum(skips) + np.arange(self.DRAWS)
        self._log_w, self._after = float(log_w[-1]), int(positions[-1]) + 1
        self._positions = np.concatenate([self._positions, positions])
        self._slots = np.concatenate([self._slots, self.rng.integers(0, k, self.DRAWS)])

    def _next(self) -> int:
        """The stream position of the next replacement (the sample being full)."""
        if not self._positions.size:
            self._draw()
        return int(self._positions[0])

    def wants(self, n: int) -> bool:
        """Whether offering the next ``n`` items would keep any of them (else :meth:`pass_over`
        them, and nobody need build them)."""
        return len(self.items) < self.capacity or self._next() < self.seen + n

    def pass_over(self, n: int) -> None:
        assert not self.wants(n), "pass_over would skip an item the sample takes"
        self.seen += n

    def offer(self, items: Sequence) -> None:
        """Items skipped by the drawn gaps cost nothing: only the ones taken are built, through
        ``items.take(indices)`` where the sequence has it (``RawPairs``)."""
        taken = 0
        if len(self.items) < self.capacity:
            taken = min(len(items), self.capacity - len(self.items))
            self.items.extend(items[:taken])
            self.seen += taken
            self._after = self.seen  # the first replacement comes after the items that filled it
        start = self.seen - taken  # the stream position of items[0]
        end = start + len(items)
        while len(self.items) == self.capacity and self._next() < end:
            here = int(np.searchsorted(self._positions, end))
            positions, slots = self._positions[:here] - start, self._slots[:here]
            self._positions, self._slots = self._positions[here:], self._slots[here:]
            # A slot replaced twice within the block keeps the later item
            last = len(slots) - 1 - np.unique(slots[::-1], return_index=True)[1]
            positions, slots = positions[last], slots[last]
            kept = (
                items.take(positions)
                if hasattr(items, "take")
                else [items[i] for i in positions.tolist()]
            )
            for slot, item in zip(slots.tolist(), kept):
                self.items[slot] = item
        self.seen = end
