import os
import subprocess
import sys
import time

import pytest

from nmt_cli import cores

needs_proc_stat = pytest.mark.skipif(not os.path.exists("/proc/stat"), reason="reads /proc/stat")


@pytest.fixture(autouse=True)
def no_sample_left_over(monkeypatch):
    monkeypatch.setattr(cores, "_started", None)


def spin(seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass


@needs_proc_stat
def test_a_started_sample_sees_another_process_spin_without_waiting_again():
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.2)
        cores.start_sample()
        time.sleep(0.4)  # what the command line does meanwhile: import torch, parse options
        began = time.monotonic()
        busy = cores.busy_cores(0.25)
        assert time.monotonic() - began < 0.05  # the sample already spans 0.4 s
        assert 0.8 <= busy <= cores.usable_cores() + 0.05
    finally:
        spinner.kill()
        spinner.wait()


@needs_proc_stat
def test_this_process_own_work_during_a_started_sample_is_not_counted_as_busy():
    cores.start_sample()
    spin(0.4)  # one core held by this very process, as while importing torch
    assert cores.busy_cores(0.25) < 0.5


@needs_proc_stat
def test_without_a_started_sample_busy_cores_takes_a_sample_of_its_own():
    began = time.monotonic()
    cores.busy_cores(0.2)
    assert time.monotonic() - began >= 0.2


def test_usable_cores_is_at_least_one_and_at_most_the_affinity():
    assert 1 <= cores.usable_cores() <= len(os.sched_getaffinity(0))
