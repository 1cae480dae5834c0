"""Timing helpers shared by the benchmarks. Every case is timed against numpy (and PyTorch when it
is installed) in the same run: this machine is shared and noisy, so the ratios are what to read."""
import contextlib
import os
import platform
import subprocess
import sys
import time

import numpy as np

try:
    import torch
except ImportError:  # torch is optional
    torch = None


def best_time(fn, repeat=None, min_time=0.2):
    """Best of `repeat` timed calls (seconds), after one warm-up; repeat grows to fill min_time."""
    fn()
    t0 = time.perf_counter()
    fn()
    one = max(time.perf_counter() - t0, 1e-7)
    repeat = repeat or max(3, min(200, int(min_time / one)))
    best = one
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def raise_priority(nice=-15):
    """Put this process (and the threads it starts later) ahead of the machine's other work, so
    that a 2-thread run is not timing whose turn it is on a loaded machine. Needs root: lowers the
    process's nice value and, where the kernel groups processes by session (autogroup, which makes
    nice act within a session only), that of its group. Returns what it changed, for the header."""
    done = []
    try:
        with open("/proc/self/autogroup", "w") as f:
            f.write(str(nice))
        done.append(f"autogroup nice {nice}")
    except OSError:
        pass
    try:
        os.setpriority(os.PRIO_PROCESS, 0, nice)
        done.append(f"nice {nice}")
    except OSError:
        pass
    return done


def torch_threads(n):
    if torch is not None:
        torch.set_num_threads(n)


def machine():
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} cores, numpy {np.__version__}" + (
        f", torch {torch.__version__}" if torch is not None else ", no torch")


def report(rows, header=("case", "threads", "pyggml", "numpy", "torch", "np/pg", "torch/pg", "note")):
    """Print rows of (case, threads, t_pg, t_np, t_torch, note) as a markdown table with ratios
    (>1 means pyggml is faster)."""
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    def us(t):
        return "-" if t is None else f"{t * 1e6:.1f} us"

    def ratio(t, t_pg):
        return "-" if t is None or not t_pg else f"{t / t_pg:.2f}"

    for case, nth, t_pg, t_np, t_th, note in rows:
        print(f"| {case} | {nth} | {us(t_pg)} | {us(t_np)} | {us(t_th)} | {ratio(t_np, t_pg)} | {ratio(t_th, t_pg)} | {note} |")


def bandwidth_line(nbytes, threads=1):
    """(copy seconds, read seconds) for nbytes of float32 with numpy: the memory-bound yardstick.
    (copy moves 2*nbytes: read + write)."""
    a = np.ones(nbytes // 4, dtype=np.float32)
    b = np.empty_like(a)
    t_copy = best_time(lambda: np.copyto(b, a))
    t_read = best_time(lambda: a.sum())
    return t_copy, t_read


@contextlib.contextmanager
def busy_competitor(n=1):
    """n processes spinning on the CPU for the duration of the block (the load of another job on the
    machine); they are stopped at its end."""
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]
    try:
        time.sleep(0.2)     # let them reach the spin and the scheduler see them
        yield
    finally:
        for p in procs:
            p.kill()
            p.wait()
