"""The cores' load from /proc/stat samples: the arithmetic on made-up samples, so that no
assertion depends on what else the machine is running."""

import os

import pytest

from nmt_cli.runtime import cores
from nmt_cli.runtime.cores import Sample, busy_between, parse_cpu_times

STAT = """cpu  400 0 200 1400 0 0 0 0 0 0
cpu0 100 0 50 850 0 0 0 0 0 0
cpu1 300 0 150 550 0 0 0 0 0 0
intr 12345 0 0
ctxt 6789
"""


@pytest.fixture(autouse=True)
def no_sample_left_over(monkeypatch):
    monkeypatch.setattr(cores, "_started", None)


def test_proc_stat_gives_busy_and_total_jiffies_per_cpu():
    # user nice system idle iowait irq softirq steal: busy is all but idle and iowait
    text = "cpu  1 2 3 4 5 6 7 8 9 10\ncpu0 1 2 3 4 5 6 7 8 9 10\ncpu1 10 0 0 80 10 0 0 0\n"
    assert parse_cpu_times(text) == {"cpu0": (27, 36), "cpu1": (10, 100)}
    assert parse_cpu_times(STAT) == {"cpu0": (150, 1000), "cpu1": (450, 1000)}


def sample(at: float, own_cpu: float, **cpus: tuple[int, int]) -> Sample:
    return Sample(at, own_cpu, cpus)


def test_another_process_holding_one_core_counts_one():
    before = sample(0.0, 0.0, cpu0=(0, 0), cpu1=(0, 0))
    after = sample(1.0, 0.0, cpu0=(100, 100), cpu1=(0, 100))
    assert busy_between(before, after) == 1.0


def test_this_process_own_work_is_not_counted_as_busy():
    before = sample(0.0, 5.0, cpu0=(0, 0), cpu1=(0, 0))
    # cpu0 busy the whole second, all of it this process's own CPU time
    after = sample(1.0, 6.0, cpu0=(100, 100), cpu1=(10, 100))
    assert busy_between(before, after) == pytest.approx(0.1)
    assert busy_between(before, sample(1.0, 6.0, cpu0=(50, 100), cpu1=(0, 100))) == 0.0


def test_only_the_cores_this_process_may_use_count():
    before = sample(0.0, 0.0, cpu0=(0, 0), cpu1=(0, 0), cpu2=(0, 0))
    after = sample(2.0, 0.0, cpu0=(200, 200), cpu1=(100, 200), cpu2=(200, 200))
    assert busy_between(before, after) == 2.5
    assert busy_between(before, after, cores={"cpu1", "cpu2"}) == 1.5
    # a CPU that appears only afterwards (brought online meanwhile) has no interval to count
    assert busy_between(sample(0.0, 0.0, cpu0=(0, 0)), after) == 1.0


class FakeMachine:
    """A clock and /proc/stat in which another process holds one of two cores throughout."""

    def __init__(self):
        self.now = 10.0
        self.slept: list[float] = []

    def take(self) -> Sample:
        jiffies = int(self.now * 100)
        return Sample(self.now, 0.0, {"cpu0": (jiffies, jiffies), "cpu1": (0, jiffies)})

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def test_a_started_sample_waits_only_for_what_is_left_of_the_interval(monkeypatch):
    machine = FakeMachine()
    monkeypatch.setattr(cores, "_affinity", lambda: {"cpu0", "cpu1"})
    monkeypatch.setattr(cores, "take_sample", machine.take)
    cores.start_sample()
    machine.now += 0.1  # the command line imports and parses meanwhile
    busy = cores.busy_cores(0.25, take=machine.take, sleep=machine.sleep)
    assert busy == pytest.approx(1.0) and machine.slept == [pytest.approx(0.15)]
    machine.now += 1.0  # a sample already longer than asked for needs no pause at all
    machine.slept.clear()
    assert cores.busy_cores(0.25, take=machine.take, sleep=machine.sleep) == pytest.approx(1.0)
    assert machine.slept == []


def test_without_a_started_sample_busy_cores_takes_one_of_its_own():
    machine = FakeMachine()
    assert cores.busy_cores(0.2, take=machine.take, sleep=machine.sleep) == pytest.approx(1.0)
    assert machine.slept == [pytest.approx(0.2)]


def test_no_cpu_times_means_no_busy_cores():
    slept = []
    empty = lambda: Sample(0.0, 0.0, {})
    assert cores.busy_cores(0.2, take=empty, sleep=slept.append) == 0.0
    assert slept == []


@pytest.mark.skipif(not os.path.exists("/proc/stat"), reason="reads /proc/stat")
def test_the_load_read_on_this_machine_lies_between_no_core_and_every_core():
    times = cores.read_cpu_times()
    assert {f"cpu{i}" for i in os.sched_getaffinity(0)} <= set(times)
    assert all(0 <= busy <= total for busy, total in times.values())
    assert 0.0 <= cores.busy_cores(0.05) <= len(os.sched_getaffinity(0))


def test_usable_cores_is_at_least_one_and_at_most_the_affinity():
    assert 1 <= cores.usable_cores() <= len(os.sched_getaffinity(0))
