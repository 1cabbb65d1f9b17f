import os
import subprocess
import sys
import textwrap

import pytest

from nmt_cli.runtime import memory
from nmt_cli.runtime.memory import (
    COMPUTATION_CACHE_ENV,
    PRIMITIVE_CACHE_ENV,
    HeapTrimmer,
    bound_primitive_cache,
    release_free_heap,
)


def test_bounds_are_set_when_the_environment_has_none(monkeypatch):
    monkeypatch.delenv(PRIMITIVE_CACHE_ENV, raising=False)
    monkeypatch.delenv(COMPUTATION_CACHE_ENV, raising=False)
    assert bound_primitive_cache(32, 8) == 32
    assert os.environ[PRIMITIVE_CACHE_ENV] == "32"
    assert os.environ[COMPUTATION_CACHE_ENV] == "8"


def test_bounds_the_user_set_are_kept(monkeypatch):
    monkeypatch.setenv(PRIMITIVE_CACHE_ENV, "512")
    monkeypatch.setenv(COMPUTATION_CACHE_ENV, "100")
    assert bound_primitive_cache(32, 8) == 512
    assert os.environ[PRIMITIVE_CACHE_ENV] == "512"
    assert os.environ[COMPUTATION_CACHE_ENV] == "100"


def test_release_free_heap_answers_whether_it_released():
    blocks = [bytearray(1 << 16) for _ in range(200)]
    del blocks
    assert release_free_heap() in (True, False)


def test_trimmer_trims_every_nth_tick_and_never_at_zero(monkeypatch):
    calls = []
    monkeypatch.setattr(memory, "release_free_heap", lambda: calls.append(1) or True)
    trimmer = HeapTrimmer(3)
    assert [trimmer.tick() for _ in range(7)] == [False, False, True, False, False, True, False]
    assert len(calls) == 2
    never = HeapTrimmer(0)
    assert not any(never.tick() for _ in range(5))
    assert len(calls) == 2


CACHE_PROBE = textwrap.dedent(
    """
    import sys
    import torch
    from nmt_cli.runtime.memory import bound_primitive_cache

    if sys.argv[1] != "none":
        bound_primitive_cache(int(sys.argv[1]))
    w = torch.ones(64, 64, dtype=torch.bfloat16)
    for _ in range(3):
        for rows in (3, 5):
            torch.ones(rows, 64, dtype=torch.bfloat16) @ w
    """
)


def _cache_lookups(bound: str) -> tuple[int, int]:
    """(misses, hits) of oneDNN's primitive cache over bf16 products of two shapes, three times."""
    env = {
        k: v for k, v in os.environ.items() if k not in (PRIMITIVE_CACHE_ENV, COMPUTATION_CACHE_ENV)
    }
    env.update(ONEDNN_VERBOSE="profile_create", OMP_NUM_THREADS="1")
    out = subprocess.run(
        [sys.executable, "-c", CACHE_PROBE, bound],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout
    return out.count("create:cache_miss"), out.count("create:cache_hit")


def test_the_bound_takes_effect_when_set_after_importing_torch():
    unbounded = _cache_lookups("none")
    if unbounded == (0, 0):
        pytest.skip("bf16 products do not run through oneDNN on this CPU")
    assert unbounded == (2, 4)  # each shape compiled once, then found
    assert _cache_lookups("1") == (6, 0)  # one primitive kept: two shapes in turn always miss
