"""Batching across requests: a queue of translation jobs that decoding threads empty in batches.

A request becomes one job (its sentences and translate options). Decoding threads take the
oldest job and every queued job that can share its batch (same model and options but for the
alternatives and attention outputs asked for),
in arrival order, up to ``max_batch_tokens`` source subwords; the translator sorts the batch by
length. A thread waits up to ``max_wait_ms`` for the batch to fill, and goes at once when it is
full, in two cases where more requests are on their way: another thread is decoding (the wait
counts from the oldest job's arrival), or a batch was just answered and its clients have not all
sent their next request yet (the wait counts from that answer; with several threads, every batch
answered within the last ``max_wait_ms`` counts, see ``ReturningClients``). The second is what
keeps the batches whole under a steady load: a client answered by a batch sends its next request
a few milliseconds later, so a thread that took the queue at once would leave the clients it just
answered for the next batch, and two half batches would follow each other for as long as the
load lasts. On an idle server a request is decoded at once, and a lone client, whose answered
batch held one job, never waits. A thread takes at most its share of the sentences in the
server (queued or decoding, divided by the number of threads): otherwise the first thread to
wake would take nearly all the clients' requests, and the split, say 1 against 31, would repeat
itself as each group's clients answer their own thread's batch. The event loop only queues jobs
and awaits their futures, so it stays free while the threads decode.

With ``max_batch_tokens`` 0 there is one thread and every job is decoded alone, one at a time:
the behaviour of a server that translates inside a lock, kept as the benchmark's baseline.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from concurrent.futures import Future
from dataclasses import dataclass, field, replace

import torch

from nmt_cli.runtime.memory import HeapTrimmer, bound_primitive_cache
from nmt_cli.translation.contract import TranslateOptions, Translating

# Batches between two hand-backs of the freed heap: a server decodes for days, and batches of
# ever new shapes would otherwise leave their freed memory in pieces (nmt_cli/runtime/memory.py).
TRIM_EVERY_BATCHES = 16


class QueueFull(Exception):
    """The queue holds too many sentences to take a request now (HTTP 503)."""


@dataclass
class Job:
    """One request's sentences for one model (``model``: its id, for the metrics), with the
    options of their translate call."""

    translator: Translating
    sentences: list[str]
    tokens: int  # source subwords, for the batch budget
    options: TranslateOptions
    model: str = ""
    arrived: float = field(default_factory=time.monotonic)
    future: Future = field(default_factory=Future)

    def shares_batch_with(self, other: Job) -> bool:
        """Jobs decode in one call where their options differ at most in the alternatives and
        the attention outputs asked for (the attention weights kept or not alike); prefixes
        belong to their own sentences."""
        mine, theirs = self.options, other.options
        return (
            self.translator is other.translator
            and mine.prefixes is None
            and theirs.prefixes is None
            and mine.keeps_weights == theirs.keeps_weights
            and _batch_key(mine) == _batch_key(theirs)
        )


def _batch_key(options: TranslateOptions) -> TranslateOptions:
    """What must be alike to decode together (numbers are the document layer's, not decoding's)."""
    return replace(
        options,
        nbest=1,
        alignments=False,
        coverage=False,
        attention=False,
        weights=False,
        numbers="keep",
    )


def batch_options(jobs: list[Job]) -> TranslateOptions:
    """The options of one call for jobs that share a batch: the most alternatives any asks for,
    the alignment, its coverage and attention where any asks for them."""
    first = jobs[0].options
    return replace(
        first,
        nbest=max(job.options.nbest for job in jobs),
        alignments=any(job.options.alignments for job in jobs),
        coverage=any(job.options.coverage for job in jobs),
        attention=any(job.options.attention for job in jobs),
    )


class ReturningClients:
    """The clients answered within the last ``max_wait`` seconds who have not sent their next
    request yet, kept per answered batch so that two threads answering one after the other
    each have their clients waited for.

    A request that arrives is counted against the oldest answered batch still waiting: requests
    do not say which batch answered their client, and the oldest batch's clients are the first
    due back.
    """

    def __init__(self, max_wait: float):
        self.max_wait = max_wait
        self._batches: deque[list] = deque()  # [answered_at, clients not yet back], oldest first

    def answered(self, jobs: int, now: float) -> None:
        if jobs:
            self._batches.append([now, jobs])

    def arrived(self, now: float) -> None:
        self._expire(now)
        if self._batches:
            self._batches[0][1] -= 1
            if not self._batches[0][1]:
                self._batches.popleft()

    def deadline(self, now: float) -> float | None:
        """Until when to wait for them: max_wait after the latest answer still waited on; None
        when every answered client is back or their wait is over."""
        self._expire(now)
        return self._batches[-1][0] + self.max_wait if self._batches else None

    def _expire(self, now: float) -> None:
        while self._batches and self._batches[0][0] + self.max_wait <= now:
            self._batches.popleft()


class Batcher:
    """Decoding threads over one queue. ``capacity``: sentences queued or decoding at most."""

    def __init__(
        self,
        *,
        max_batch_tokens: int,
        max_wait_ms: float,
        capacity: int,
        threads: int,
        on_batch=None,
    ):
        self.max_batch_tokens = max_batch_tokens
        self.max_wait = max_wait_ms / 1000.0
        self.capacity = capacity
        self.batching = max_batch_tokens > 0
        self.workers = max(1, threads) if self.batching else 1
        # One core per decoding thread when several decode side by side (as `nmt translate
        # --workers`); the single thread of the one-at-a-time server gets all of them.
        self.torch_threads = 1 if self.workers > 1 else max(1, threads)
        self._queue: deque[Job] = deque()
        self._cond = threading.Condition()
        self._pending = 0  # sentences queued or being decoded
        self._decoding = 0  # threads decoding now
        # Clients answered lately: each is expected back within max_wait of its answer.
        self._returning = ReturningClients(self.max_wait)
        self._closing = False
        self.batches = 0  # decoded so far, for /health
        self.sentences = 0
        self._threads: list[threading.Thread] = []
        self._heap = HeapTrimmer(TRIM_EVERY_BATCHES)
        self.on_batch = on_batch  # called with each decoded batch's jobs (for metrics)

    def start(self) -> None:
        bound_primitive_cache()  # before the first decoding; see nmt_cli/runtime/memory.py
        torch.set_num_threads(self.torch_threads)
        for i in range(self.workers):
            t = threading.Thread(target=self._run, name=f"decode-{i}", daemon=True)
            t.start()
            self._threads.append(t)

    def submit(self, job: Job) -> Future:
        with self._cond:
            if self._closing:
                raise QueueFull("the server is shutting down")
            if self._pending + len(job.sentences) > self.capacity:
                raise QueueFull(
                    f"the queue is full ({self._pending} sentences waiting or decoding, "
                    f"at most {self.capacity}); retry later"
                )
            self._pending += len(job.sentences)
            self._queue.append(job)
            self._returning.arrived(job.arrived)
            self._cond.notify()
        return job.future

    @property
    def pending(self) -> int:
        return self._pending

    @property
    def running(self) -> bool:
        """Every decoding thread started and alive, and the queue still taking jobs."""
        return (
            not self._closing
            and len(self._threads) == self.workers
            and all(t.is_alive() for t in self._threads)
        )

    def close(self, timeout: float | None = None) -> None:
        """Decode what is queued, then stop the threads."""
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        for t in self._threads:
            t.join(timeout)

    # ------------------------------------------------------------------ decoding threads

    def _take(self) -> list[Job] | None:
        with self._cond:
            while not self._queue:
                if self._closing:
                    return None
                self._cond.wait()
            while (
                self.batching
                and not self._closing
                and self._queue
                and sum(j.tokens for j in self._queue) < self.max_batch_tokens
                and (deadline := self._fill_deadline()) is not None
                and (left := deadline - time.monotonic()) > 0
            ):
                self._cond.wait(left)
            if not self._queue:  # another thread took it while this one waited
                return []
            first = self._queue.popleft()
            batch, tokens, sentences = [first], first.tokens, len(first.sentences)
            if self.batching:
                share = -(-self._pending // self.workers)
                rest = deque()
                while self._queue:
                    job = self._queue.popleft()
                    if (
                        job.shares_batch_with(first)
                        and tokens + job.tokens <= self.max_batch_tokens
                        and sentences + len(job.sentences) <= share
                    ):
                        batch.append(job)
                        tokens += job.tokens
                        sentences += len(job.sentences)
                    else:
                        rest.append(job)
                self._queue = rest
            self._decoding += 1
            return batch

    def _fill_deadline(self) -> float | None:
        """When to stop waiting for more jobs to join the batch; None: take it now (lock held)."""
        deadlines = []
        if self._decoding:  # the server is busy, so more requests are on their way
            deadlines.append(self._queue[0].arrived + self.max_wait)
        if (returning := self._returning.deadline(time.monotonic())) is not None:
            deadlines.append(returning)  # answered clients still to come back
        return max(deadlines) if deadlines else None

    def _run(self) -> None:
        torch.set_num_threads(self.torch_threads)
        while True:
            batch = self._take()
            if batch is None:
                return
            if batch:
                self._decode(batch)
                self._heap.tick()

    def _decode(self, batch: list[Job]) -> None:
        # A job whose request gave up (timed out) while queued is dropped here.
        live = [job for job in batch if job.future.set_running_or_notify_cancel()]
        try:
            if live:
                first = live[0]
                sentences = [s for job in live for s in job.sentences]
                results = first.translator.translate(sentences, batch_options(live))
                start = 0
                for job in live:
                    job.future.set_result(results[start : start + len(job.sentences)])
                    start += len(job.sentences)
                self.batches += 1
                self.sentences += len(sentences)
                if self.on_batch is not None:
                    self.on_batch(live)
        except Exception as exc:  # reported to the requests of this batch, never kills the thread
            for job in live:
                if not job.future.done():
                    job.future.set_exception(exc)
        finally:
            with self._cond:
                self._pending -= sum(len(job.sentences) for job in batch)
                self._decoding -= 1
                self._returning.answered(len(batch), time.monotonic())
