import os

import pytest

from nmt_cli.data.workers import ordered_map


def _square_and_pid(x):
    return x * x, os.getpid()


def test_ordered_map_keeps_order_on_worker_processes():
    results = list(ordered_map(_square_and_pid, range(50), workers=2))
    assert [r for r, _ in results] == [x * x for x in range(50)]
    assert os.getpid() not in {pid for _, pid in results}
    assert [r for r, _ in ordered_map(_square_and_pid, range(5), workers=1)] == [0, 1, 4, 9, 16]
    # by default one worker per usable core, in order all the same
    assert [r for r, _ in ordered_map(_square_and_pid, range(20))] == [x * x for x in range(20)]


def test_ordered_map_reads_its_input_only_a_few_items_ahead():
    pulled = []

    def items():
        for i in range(1000):
            pulled.append(i)
            yield i

    results = ordered_map(_square_and_pid, items(), workers=2, ahead=3)
    assert next(results)[0] == 0
    assert len(pulled) <= 2 * 3 + 1  # not the whole stream, as Executor.map would submit
    assert [r for r, _ in results][-1] == 999**2


def _fail_on_three(x):
    if x == 3:
        raise ValueError("three")
    return x


def test_ordered_map_raises_a_worker_error_in_order():
    got = []
    with pytest.raises(ValueError, match="three"):
        for x in ordered_map(_fail_on_three, range(10), workers=2):
            got.append(x)
    assert got == [0, 1, 2]


_KILLED_PARENT = """
import os, sys, time
from pathlib import Path
from nmt_cli.data.workers import ordered_map

def work(i):
    Path(sys.argv[1], str(os.getpid())).touch()
    time.sleep(120)
    return i

for _ in ordered_map(work, range(4), workers=2):
    pass
"""


def _alive(pid: int) -> bool:
    try:
        status = open(f"/proc/{pid}/status").read()
    except FileNotFoundError:
        return False
    return "\\nState:\\tZ" not in status  # a zombie has exited, whoever reaps it


@pytest.mark.skipif(
    not os.path.exists("/proc"), reason="the kernel's parent-death signal is Linux's"
)
def test_workers_die_when_the_main_process_is_killed(tmp_path):
    # SIGKILL gives the main process no chance to stop its pool; the workers must not live on
    import signal
    import subprocess
    import sys
    import time

    proc = subprocess.Popen([sys.executable, "-c", _KILLED_PARENT, str(tmp_path)])
    deadline = time.time() + 60
    while len(list(tmp_path.iterdir())) < 2 and time.time() < deadline:
        time.sleep(0.05)
    workers = [int(p.name) for p in tmp_path.iterdir()]
    assert len(workers) == 2 and all(_alive(pid) for pid in workers)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    deadline = time.time() + 10
    while any(_alive(pid) for pid in workers) and time.time() < deadline:
        time.sleep(0.05)
    assert not any(_alive(pid) for pid in workers)
