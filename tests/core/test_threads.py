"""n_threads=None: pyggml.default_threads() counts physical cores among the CPUs the process may
run on (pyggml/_threads.py), OMP_NUM_THREADS wins when set; a plan uses no more threads than its
widest node can split work for."""
import os
import subprocess
import sys

import numpy as np
import pytest

import pyggml as gg
from pyggml import _threads


def fake_sysfs(root, siblings, name="core_cpus_list"):
    """A /sys/devices/system/cpu tree: siblings maps each logical CPU to its core's list."""
    for cpu, lst in siblings.items():
        d = root / f"cpu{cpu}" / "topology"
        d.mkdir(parents=True)
        (d / name).write_text(lst + "\n")
    return str(root)


def test_smt_siblings_count_once(tmp_path):
    # 4 logical CPUs on 2 cores, as Linux lists them on an SMT machine: 0,2 and 1,3 are siblings
    sysfs = fake_sysfs(tmp_path, {0: "0,2", 1: "1,3", 2: "0,2", 3: "1,3"})
    assert _threads.physical_cores([0, 1, 2, 3], sysfs) == 2
    assert _threads.physical_cores([0, 2], sysfs) == 1          # affinity on one core's siblings
    assert _threads.physical_cores([0, 1], sysfs) == 2
    assert _threads.count_threads(True, environ={}, cpus=[0, 1, 2, 3], sysfs=sysfs) == 2
    assert _threads.count_threads(True, environ={}, cpus=[1, 3], sysfs=sysfs) == 1


def test_older_kernels_topology_file(tmp_path):
    sysfs = fake_sysfs(tmp_path, {0: "0-1", 1: "0-1", 2: "2-3", 3: "2-3"}, name="thread_siblings_list")
    assert _threads.physical_cores(range(4), sysfs) == 2


def test_unreadable_topology_falls_back_to_logical_cpus(tmp_path):
    assert _threads.physical_cores([0, 1, 2], str(tmp_path)) is None
    assert _threads.count_threads(True, environ={}, cpus=[0, 1, 2], sysfs=str(tmp_path)) == 3


@pytest.mark.parametrize("value, want", [("3", 3), ("4,2", 4), (" 2 ", 2), ("", None), (None, None),
                                         ("0", None), ("-1", None), ("two", None)])
def test_omp_num_threads(value, want):
    assert _threads.omp_num_threads(value) == want


def test_omp_num_threads_wins_and_no_openmp_is_one(tmp_path):
    sysfs = fake_sysfs(tmp_path, {0: "0", 1: "1"})
    assert _threads.count_threads(True, environ={"OMP_NUM_THREADS": "5"}, cpus=[0, 1], sysfs=sysfs) == 5
    assert _threads.count_threads(False, environ={"OMP_NUM_THREADS": "5"}, cpus=[0, 1], sysfs=sysfs) == 1


def test_default_matches_this_machine():
    want = _threads.count_threads(gg.build_info()["openmp"])
    assert gg.default_threads() == want == gg.build_info()["max_threads"]
    if gg.build_info()["openmp"] and not os.environ.get("OMP_NUM_THREADS"):
        assert 1 <= want <= len(_threads.allowed_cpus())


def test_plan_capped_at_what_the_graph_can_use(ctx):
    # a one-row softmax splits rows only: one thread, whatever the default is
    g = gg.CGraph()
    g.build_forward_expand(gg.soft_max_ext(ctx.from_numpy(np.ones((1, 64), np.float32)), None, 1.0, 0.0))
    assert g.plan().n_threads == 1
    g.compute()
    np.testing.assert_allclose(g.nodes[-1].numpy(), 1 / 64)
    wide = gg.CGraph()
    wide.build_forward_expand(gg.scale(ctx.from_numpy(np.ones((64, 64), np.float32)), 2.0))
    assert wide.plan().n_threads == gg.default_threads()


def _child_threads(cwd, env=None, cpus=None):
    code = ("import os, sys\n"
            f"cpus = {cpus!r}\n"
            "if cpus is not None: os.sched_setaffinity(0, cpus)\n"
            "import numpy as np, pyggml as gg\n"
            "g = gg.CGraph(); ctx = gg.Context()\n"
            "g.build_forward_expand(gg.scale(ctx.from_numpy(np.ones((64, 64), np.float32)), 2.0))\n"
            "g.compute(); print(gg.default_threads(), g.plan().n_threads)\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True,
                       env={**os.environ, **(env or {})}, cwd=cwd)
    return tuple(int(x) for x in p.stdout.split())


@pytest.mark.subprocess
@pytest.mark.skipif(not gg.build_info()["openmp"], reason="always one thread without OpenMP")
@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="no CPU affinity on this OS")
def test_affinity_and_environment_in_a_new_process(tmp_path):
    assert _child_threads(tmp_path, {"OMP_NUM_THREADS": ""}, cpus=[min(os.sched_getaffinity(0))]) == (1, 1)
    assert _child_threads(tmp_path, {"OMP_NUM_THREADS": "3"}) == (3, 3)
