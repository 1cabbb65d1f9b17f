import os
import threading
import time
from types import SimpleNamespace

import pytest

from nmt_cli.serving.job_queue import Batcher, Job, QueueFull, ReturningClients
from nmt_cli.translation.contract import TranslateOptions


class RecordingTranslator:
    """Stands in for a Translator: records each batch and answers each sentence with its upper
    case."""

    def __init__(self, delay: float = 0.0):
        self.batches: list[list[str]] = []
        self.delay = delay
        self.release = threading.Event()
        self.release.set()

    def translate(self, sentences, options=None):
        self.release.wait(10)
        time.sleep(self.delay)
        self.batches.append(list(sentences))
        return [SimpleNamespace(text=s.upper(), options=options) for s in sentences]


def job(tr, sentences, beam=5, nbest=1):
    options = TranslateOptions(beam_size=beam, nbest=nbest)
    return Job(tr, sentences, sum(len(s.split()) for s in sentences), options)


def test_jobs_queued_together_share_one_batch_and_get_their_own_answers():
    tr = RecordingTranslator()
    tr.release.clear()
    b = Batcher(max_batch_tokens=100, max_wait_ms=50, capacity=100, threads=1)
    b.start()
    blocker = b.submit(job(tr, ["first"]))  # decoding, held
    time.sleep(0.05)
    futures = [b.submit(job(tr, [f"s{i} a", f"t{i}"], nbest=1 + i % 2)) for i in range(4)]
    tr.release.set()
    answers = [[r.text for r in f.result(10)] for f in futures]
    assert blocker.result(10)[0].text == "FIRST"
    assert answers == [[f"S{i} A", f"T{i}"] for i in range(4)]
    assert tr.batches[1] == [
        s for i in range(4) for s in (f"s{i} a", f"t{i}")
    ]  # one batch, arrival order
    b.close()
    assert b.pending == 0


def test_jobs_with_another_beam_or_over_the_token_budget_wait_for_the_next_batch():
    tr = RecordingTranslator()
    tr.release.clear()
    b = Batcher(max_batch_tokens=4, max_wait_ms=50, capacity=100, threads=1)
    b.start()
    b.submit(job(tr, ["x"]))
    time.sleep(0.05)
    fs = [
        b.submit(job(tr, ["a b"])),
        b.submit(job(tr, ["c"], beam=2)),
        b.submit(job(tr, ["d e"])),
        b.submit(job(tr, ["f g"])),
    ]
    tr.release.set()
    for f in fs:
        f.result(10)
    b.close()
    assert tr.batches[1:] == [["a b", "d e"], ["c"], ["f g"]]


def test_a_full_queue_refuses_and_a_cancelled_job_is_never_decoded():
    tr = RecordingTranslator()
    tr.release.clear()
    b = Batcher(max_batch_tokens=0, max_wait_ms=0, capacity=3, threads=2)
    assert b.workers == 1  # no batching: one request at a time
    b.start()
    b.submit(job(tr, ["one"]))
    time.sleep(0.05)
    waiting = b.submit(job(tr, ["two"]))
    with pytest.raises(QueueFull):
        b.submit(job(tr, ["three", "four"]))
    assert waiting.cancel()
    tr.release.set()
    b.close()
    assert tr.batches == [["one"]] and b.pending == 0


def test_each_decoding_thread_takes_at_most_its_share():
    tr = RecordingTranslator(delay=0.2)
    b = Batcher(max_batch_tokens=1000, max_wait_ms=20, capacity=100, threads=2)
    b.start()
    fs = [b.submit(job(tr, [f"s{i}"])) for i in range(8)]
    for f in fs:
        f.result(10)
    b.close()
    # 8 sentences, 2 threads: without the share the second thread would take all 7 still queued
    assert sum(map(len, tr.batches)) == 8 and max(map(len, tr.batches)) <= 4, tr.batches


def test_clients_answered_by_a_batch_are_waited_for_so_batches_stay_whole():
    tr = RecordingTranslator(delay=0.05)
    b = Batcher(max_batch_tokens=1000, max_wait_ms=500, capacity=100, threads=1)
    b.start()
    answers = []

    def client(c):  # a closed loop: the next request a moment after each answer
        for r in range(5):
            answers.append(b.submit(job(tr, [f"c{c} r{r}"])).result(10)[0].text)
            time.sleep(0.01)

    clients = [threading.Thread(target=client, args=(c,)) for c in range(4)]
    for t in clients:
        t.start()
    for t in clients:
        t.join(30)
    b.close()
    assert sorted(answers) == sorted(f"C{c} R{r}" for c in range(4) for r in range(5))
    # Taking the queue at once would leave the clients just answered for the next batch, and
    # batches of 1 and 3 (or 2 and 2) would follow each other to the end.
    assert [len(batch) for batch in tr.batches[1:-1]] == [4] * (len(tr.batches) - 2), tr.batches


def test_clients_of_every_batch_answered_lately_are_waited_for_not_only_the_last():
    returning = ReturningClients(max_wait=0.5)
    assert returning.deadline(now=10.0) is None  # nothing answered: take the queue at once
    returning.answered(4, now=10.0)  # one thread answers four clients
    returning.answered(1, now=10.1)  # the other thread, a moment later, one
    for t in (10.11, 10.12):
        returning.arrived(now=t)
    # Two of five are back: counting only the last batch (one client) would stop waiting here.
    assert returning.deadline(now=10.13) == 10.6
    for t in (10.14, 10.15, 10.16):
        returning.arrived(now=t)
    assert returning.deadline(now=10.17) is None  # all five back


def test_answered_clients_that_do_not_come_back_are_waited_for_max_wait_only():
    returning = ReturningClients(max_wait=0.5)
    returning.answered(3, now=10.0)
    returning.answered(2, now=10.3)
    returning.arrived(now=10.35)
    assert returning.deadline(now=10.4) == 10.8
    # The first batch's wait is over: its clients no longer count, and the arrival after it
    # counts against the second batch, which then waits for one more.
    returning.arrived(now=10.6)
    assert returning.deadline(now=10.6) == 10.8
    returning.arrived(now=10.7)
    assert returning.deadline(now=10.7) is None
    returning.answered(1, now=11.0)
    assert returning.deadline(now=11.5) is None  # gone quiet: a lone request never waits


def test_the_server_bounds_native_caches_and_hands_back_freed_heap(monkeypatch):
    import nmt_cli.serving.job_queue as batching
    from nmt_cli.runtime import memory

    monkeypatch.delenv(memory.PRIMITIVE_CACHE_ENV, raising=False)
    monkeypatch.delenv(memory.COMPUTATION_CACHE_ENV, raising=False)
    monkeypatch.setattr(batching, "TRIM_EVERY_BATCHES", 3)
    trims = []
    monkeypatch.setattr(memory, "release_free_heap", lambda: trims.append(1) or True)
    tr = RecordingTranslator()
    b = Batcher(max_batch_tokens=0, max_wait_ms=0, capacity=100, threads=1)
    b.start()
    assert os.environ[memory.PRIMITIVE_CACHE_ENV] == str(memory.PRIMITIVE_CACHE_CAPACITY)
    assert os.environ[memory.COMPUTATION_CACHE_ENV] == str(memory.COMPUTATION_CACHE_CAPACITY)
    for i in range(7):
        b.submit(job(tr, [f"s{i}"])).result(10)
    b.close()
    assert len(tr.batches) == 7
    assert len(trims) == 2  # after the third and the sixth batch
