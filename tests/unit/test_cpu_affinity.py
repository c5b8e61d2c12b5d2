"""kernels/cpu_affinity.py (VOXFX_CPU_AFFINITY, helper s23f): the cpulist parsing, the sysfs bus
id, the GPU's local CPUs read from a real file, the candidates and the quickest CPU's choice, and
place()'s three ways on this machine's own CPUs (the thread's affinity restored after each)."""

import os

import pytest

from voxfx.kernels import cpu_affinity as ca


@pytest.fixture
def kept_affinity():
    start = os.sched_getaffinity(0)
    yield sorted(start)
    os.sched_setaffinity(0, start)


@pytest.mark.parametrize("text, cpus", [("0-3,8,10-11", [0, 1, 2, 3, 8, 10, 11]), ("0", [0]), ("5-5\n", [5]),
                                        ("", []), ("12-15,0-1", [0, 1, 12, 13, 14, 15]), ("2,2,1-2", [1, 2])])
def test_a_cpulist_reads_as_its_cpus_sorted_once_each(text, cpus):
    assert ca.parse_cpulist(text) == cpus


@pytest.mark.parametrize("text", ["3-1", "a", "1-", "-1", "0-2-4"])
def test_a_cpulist_that_is_none_is_refused(text):
    with pytest.raises(ValueError):
        ca.parse_cpulist(text)


@pytest.mark.parametrize("bus, name", [("00000000:1B:00.0", "0000:1b:00.0"), ("0000:1B:00.0", "0000:1b:00.0"),
                                       ("0001:c4:00.0", "0001:c4:00.0")])
def test_a_bus_id_is_named_as_sysfs_names_it(bus, name):
    assert ca.sysfs_bus_id(bus) == name


def test_the_gpus_local_cpus_come_from_its_devices_local_cpulist(tmp_path):
    device = tmp_path / "0000:1b:00.0"
    device.mkdir()
    (device / "local_cpulist").write_text("0-3,8-11\n")
    assert ca.local_cpus("00000000:1B:00.0", root=str(tmp_path)) == [0, 1, 2, 3, 8, 9, 10, 11]
    assert ca.local_cpus("0000:1C:00.0", root=str(tmp_path)) is None  # no such device
    (device / "local_cpulist").write_text("ff")  # a mask, not a list
    assert ca.local_cpus("0000:1B:00.0", root=str(tmp_path)) is None


def test_the_candidates_are_the_allowed_local_cpus_else_every_allowed_one():
    assert ca.candidates(range(8), [4, 5, 6, 7, 8, 9, 10, 11]) == [4, 5, 6, 7]
    assert ca.candidates([3, 1, 2], None) == [1, 2, 3]
    assert ca.candidates([0, 1], [6, 7]) == [0, 1]  # none of the local ones allowed


def test_the_quickest_cpu_is_the_least_time_the_lowest_among_equals():
    assert ca.quickest({0: 30.5, 1: 16.2, 2: 29.0}) == 1
    assert ca.quickest({7: 16.0, 3: 16.0, 5: 20.0}) == 3
    assert ca.quickest({9: 1.0}) == 9


def test_a_probe_times_the_python_on_the_cpu_and_leaves_the_thread_there(kept_affinity):
    cpu = kept_affinity[-1]
    us = ca.probe(cpu, repeats=2, calls=2)
    assert 0 < us < 1e5
    assert os.sched_getaffinity(0) == {cpu}


def test_place_off_leaves_the_thread_where_it_may_run(monkeypatch, kept_affinity):
    monkeypatch.delenv("VOXFX_CPU_AFFINITY", raising=False)
    assert ca.place() == "CPU affinity off"
    assert sorted(os.sched_getaffinity(0)) == kept_affinity


def test_place_local_without_a_gpu_keeps_every_allowed_cpu(monkeypatch, kept_affinity):
    monkeypatch.setenv("VOXFX_CPU_AFFINITY", "local")
    line = ca.place()
    assert sorted(os.sched_getaffinity(0)) == kept_affinity and line.startswith("CPU affinity local")


def test_place_quick_pins_the_thread_to_one_allowed_cpu_it_names(kept_affinity):
    line = ca.place(mode="quick")
    (cpu,) = os.sched_getaffinity(0)
    assert cpu in kept_affinity and line.startswith(f"CPU affinity quick: CPU {cpu} (")
    assert line.endswith(f"of {len(kept_affinity)} within 20%)")
