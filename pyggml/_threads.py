"""The thread count that compute(n_threads=None) uses (pyggml.default_threads()).

Physical cores, not logical CPUs: two SMT siblings share one core's vector units, and the kernels
are bound by those or by memory, so a second thread on a core only adds barrier waits. Counted
among the CPUs this process may run on (its affinity mask: taskset, cgroups cpusets, a container's
CPU set), from the kernel's topology files, where each core lists the logical CPUs it holds.
OMP_NUM_THREADS, when set, is taken as it is (its first entry, as OpenMP reads a list).
"""
import os

SYSFS_CPU = "/sys/devices/system/cpu"


def omp_num_threads(value):
    """The first entry of an OMP_NUM_THREADS value as a positive int, or None (unset, empty, invalid)."""
    first = (value or "").split(",")[0].strip()
    return int(first) if first.isdigit() and int(first) > 0 else None


def allowed_cpus():
    """Logical CPU numbers this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return sorted(os.sched_getaffinity(0))
    return list(range(os.cpu_count() or 1))


def physical_cores(cpus, sysfs=SYSFS_CPU):
    """How many physical cores the logical CPUs `cpus` belong to (siblings of one core count once),
    or None where the topology is not readable (not Linux, a restricted /sys)."""
    cores = set()
    for c in cpus:
        for name in ("core_cpus_list", "thread_siblings_list"):   # the second on kernels before 5.8
            try:
                with open(os.path.join(sysfs, f"cpu{c}", "topology", name)) as f:
                    cores.add(f.read().strip())
                break
            except OSError:
                continue
        else:
            return None
    return len(cores) or None


def count_threads(have_openmp, environ=None, cpus=None, sysfs=SYSFS_CPU):
    """The default thread count: 1 without OpenMP, else OMP_NUM_THREADS if set, else the physical
    cores among the allowed CPUs (all allowed CPUs where the topology cannot be read)."""
    if not have_openmp:
        return 1
    n = omp_num_threads((os.environ if environ is None else environ).get("OMP_NUM_THREADS"))
    if n is not None:
        return n
    cpus = allowed_cpus() if cpus is None else list(cpus)
    return max(1, physical_cores(cpus, sysfs) or len(cpus))
