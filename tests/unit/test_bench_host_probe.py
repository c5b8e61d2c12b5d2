"""bench/_host_probe.py (helper s23f): the row's host probe moves the calling thread to the CPU it
names and reads where the thread runs (/proc/thread-self/stat), on this machine's own CPUs."""

import os
import sys

import pytest

from tests.conftest import ROOT

sys.path.insert(0, str(ROOT / "bench"))
import _host_probe  # noqa: E402


@pytest.fixture
def allowed():
    start = os.sched_getaffinity(0)
    yield sorted(start)
    os.sched_setaffinity(0, start)


def test_a_probe_leaves_the_thread_on_its_cpu_and_on_cpu_reads_it(allowed):
    for cpu in allowed[:2]:
        assert _host_probe.probe(cpu, repeats=1, calls=1) > 0
        assert os.sched_getaffinity(0) == {cpu}
        assert _host_probe.on_cpu() == cpu


def test_the_probes_work_is_fixed():
    assert _host_probe.work() == {k: sum(i for i in range(200) if i & 31 == k) for k in range(32)}
