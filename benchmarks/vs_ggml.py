"""pyggml against ggml's CPU backend, op by op: the cases of issue 15's table, each built once from the
same numpy inputs in both libraries (ggml through the ggml-python package, see ggml_side.py), checked
once for the same numbers (NMSE against ggml's result below the case's bound) and timed alternately
in one run at 1 and 2 threads. The ratio is ggml time / pyggml time: > 1 means pyggml is faster.

    python -m benchmarks --vs-ggml [--quick] [--threads 1,2] [--cases SUBSTR[|SUBSTR...]] [--runs N] [--load]

Both sides are timed from Python: pyggml's CGraph.compute() and one ctypes call of
ggml_graph_compute() on a graph planned once (ggml_graph_plan; a disposable threadpool and the
OpenMP region per call, as llama.cpp's CPU backend does). The header prints what a bare ctypes call
costs, which the tiny-graph rows of ggml include. --load repeats the tiny-graph cases with a busy
process competing for the cores.

The GEMV rows also time a read of pyggml's weight tensor (pyggml._vec.stream_read_f32 over its bytes,
on the same threads, alternated with the two sides): the read column is that bandwidth, and pg/read
the fraction of it the GEMV reaches (read time / pyggml time; 1.0 = the GEMV streams its weights as
fast as a plain read does). The 4096x4096 weights stay in the 32 MB L3 of the test machine; the
[4096, 32768] rows (75-110 MB) do not.
"""
import argparse
import time

import numpy as np
from common import busy_competitor, machine

import pyggml as gg

F16, Q8_0, I32, I64 = gg.Type.F16, gg.Type.Q8_0, gg.Type.I32, gg.Type.I64
KQUANTS = [gg.Type.Q2_K, gg.Type.Q3_K, gg.Type.Q4_K, gg.Type.Q5_K, gg.Type.Q6_K]
NEOX = int(gg.RopeType.NEOX)


class Pyggml:
    """Builds a case with pyggml (same calls as ggml.h, without the context argument)."""
    name = "pyggml"

    def __init__(self):
        self.ctx = gg.Context()
        self.leaves = []

    def tensor(self, array, type=None):
        self.leaves.append(self.ctx.from_numpy(array, type=type))
        return self.leaves[-1]

    def new(self, type, ne):
        return self.ctx.new_tensor(type, ne)

    def op(self, name, *args):
        return getattr(gg, name)(*args)

    def computer(self, out, n_threads):
        g = gg.CGraph()
        g.build_forward_expand(out)
        return lambda: g.compute(n_threads)

    def read(self, t):
        return t.to_numpy().ravel()

    def close(self):
        pass


class Ggml:
    """Builds a case with ggml through ctypes (ggml_side.Context)."""
    name = "ggml"

    def __init__(self, ggml, mem_mib):
        import ggml_side
        self.g = ggml
        self.c = ggml_side.Context(ggml, mem_mib)

    def tensor(self, array, type=None):
        return self.c.tensor(array, None if type is None else int(type))

    def new(self, type, ne):
        return self.c.new(int(type), ne)

    def op(self, name, *args):
        return getattr(self.g, "ggml_" + name)(self.c.ctx, *args)

    def computer(self, out, n_threads):
        return self.c.computer(self.c.graph(out), n_threads)

    def read(self, t):
        return self.c.read(t)

    def close(self):
        self.c.close()


# ---- the cases: each builds its graph with a side (Pyggml or Ggml) from a seeded rng ----

D, HQ, HKV = 128, 32, 8


def attn_decode(L):
    def build(b, rng):
        q = b.tensor(rng.standard_normal((1, HQ, 1, D), dtype=np.float32))
        k = b.tensor(rng.standard_normal((1, HKV, L, D), dtype=np.float32), F16)
        v = b.tensor(rng.standard_normal((1, HKV, L, D), dtype=np.float32), F16)
        return b.op("flash_attn_ext", q, k, v, None, 1 / np.sqrt(D), 0.0, 0.0)
    return build


def attn_prefill(b, rng):
    n = 512
    q = b.tensor(rng.standard_normal((1, HQ, n, D), dtype=np.float32))
    k = b.tensor(rng.standard_normal((1, HKV, n, D), dtype=np.float32), F16)
    v = b.tensor(rng.standard_normal((1, HKV, n, D), dtype=np.float32), F16)
    mask = b.tensor(np.triu(np.full((n, n), -np.inf, np.float32), 1).astype(np.float16))
    return b.op("flash_attn_ext", q, k, v, mask, 1 / np.sqrt(D), 0.0, 0.0)


def rope_neox(b, rng):
    x = b.tensor(rng.standard_normal((512, 32, 128), dtype=np.float32))
    pos = b.tensor(np.arange(512, dtype=np.int32))
    return b.op("rope_ext", x, pos, None, 128, NEOX, 4096, 10000.0, 1.0, 0.0, 1.0, 32.0, 1.0)


def rms_norm_mul(b, rng):
    x = b.tensor(rng.standard_normal((512, 4096), dtype=np.float32))
    w = b.tensor(rng.standard_normal(4096, dtype=np.float32))
    return b.op("mul", b.op("rms_norm", x, 1e-5), w)


def row_norm(name):
    """rms_norm or norm alone over [4096, 256] (the row sums of vec/norm.h, without the fused multiply)"""
    def build(b, rng):
        return b.op(name, b.tensor(rng.standard_normal((256, 4096), dtype=np.float32)), 1e-5)
    return build


def swiglu(b, rng):
    return b.op("swiglu", b.tensor(rng.standard_normal((512, 2 * 11008), dtype=np.float32)))


def mul_mat(typ, n, m=4096):
    def build(b, rng):
        w = b.tensor(rng.standard_normal((m, 4096), dtype=np.float32), typ)
        return b.op("mul_mat", w, b.tensor(rng.standard_normal((n, 4096), dtype=np.float32)))
    return build


def set_rows(typ, in_graph):
    """512 rows of 1024 into a [1024, 4096] cache at rows 1024..1535; in_graph: the rows are the
    result of an add in the same graph (a KV write after the projection), else a leaf."""
    def build(b, rng):
        dst = b.new(typ, (1024, 4096))
        x = b.tensor(rng.standard_normal((512, 1024), dtype=np.float32))
        if in_graph:
            x = b.op("add", x, b.tensor(rng.standard_normal((512, 1024), dtype=np.float32)))
        return b.op("set_rows", dst, x, b.tensor(np.arange(1024, 1536, dtype=np.int64)))
    return build


def soft_max(b, rng):
    return b.op("soft_max_ext", b.tensor(rng.standard_normal((32, 4096), dtype=np.float32)), None, 0.125, 0.0)


def tiny_chain(n_pairs):
    """scale/add on 16 floats, n_pairs times: 2 * n_pairs nodes of almost no work (executor cost)"""
    def build(b, rng):
        x = b.tensor(np.ones(16, np.float32))
        t = x
        for _ in range(n_pairs):
            t = b.op("add", b.op("scale", t, 0.5), x)
        return t
    return build


def one_node(b, rng):
    return b.op("scale", b.tensor(np.ones(16, np.float32)), 0.5)


# GEMV and the 128-column product for each legacy quantized type and IQ4_XS: the same integer dot
# products as ggml, so the NMSE is float summation order only, except for IQ4_NL, whose weights ggml's
# ggml_quantize_chunk fits with 7 trial scales where pyggml's from_numpy (ggml's CPU from_float)
# takes one: different weights, compared at the quantisation error
QUANT_MUL_MAT = [(f"{'GEMV' if n == 1 else 'GEMM'} {t.name} 4096x4096{' x 128' if n > 1 else ''}", mul_mat(t, n),
                  5e-3 if t == gg.Type.IQ4_NL else 1e-6, 48, None)
                 for t in (gg.Type.Q4_0, gg.Type.Q4_1, gg.Type.Q5_0, gg.Type.Q5_1, gg.Type.IQ4_NL, gg.Type.IQ4_XS)
                 for n in (1, 128)]
QUANT_MUL_MAT.append(("GEMM Q8_0 4096x4096 x 128", mul_mat(Q8_0, 128), 1e-6, 48, None))

# (name, build, NMSE bound, ggml context MiB, per-node divisor or None)
CASES = [
    ("flash attn decode L=4096 F16 K/V", attn_decode(4096), 5e-4, 64, None),
    ("flash attn decode L=512 F16 K/V", attn_decode(512), 5e-4, 16, None),
    ("flash attn prefill 512x512 causal F16 K/V", attn_prefill, 5e-4, 64, None),
    ("rope NEOX [128,32,512]", rope_neox, 1e-7, 32, None),
    ("rms_norm*w [4096,512]", rms_norm_mul, 1e-7, 32, None),
    ("rms_norm [4096,256]", row_norm("rms_norm"), 1e-7, 16, None),
    ("norm [4096,256]", row_norm("norm"), 1e-7, 16, None),
    ("swiglu [2x11008,512]", swiglu, 1e-7, 160, None),
    ("GEMV F16 4096x4096", mul_mat(F16, 1), 1e-6, 48, None),
    ("GEMV Q8_0 4096x4096", mul_mat(Q8_0, 1), 1e-6, 32, None),
    *[(f"GEMV {t.name} 4096x4096", mul_mat(t, 1), 1e-6, 32, None) for t in KQUANTS],
    *[(f"GEMV {t.name} [4096, 32768] (DRAM)", mul_mat(t, 1, 32768), 1e-6, 160, None) for t in (gg.Type.Q4_K, gg.Type.Q6_K)],
    *QUANT_MUL_MAT,
    ("set_rows F32->F16 512x1024", set_rows(F16, False), 1e-7, 16, None),
    ("set_rows F32->F16 512x1024 after an add", set_rows(F16, True), 1e-7, 24, None),
    ("set_rows F32->Q8_0 512x1024", set_rows(Q8_0, False), 1e-7, 16, None),
    ("set_rows F32->Q8_0 512x1024 after an add", set_rows(Q8_0, True), 1e-7, 24, None),
    ("soft_max_ext [4096,32]", soft_max, 1e-7, 8, None),
    ("GEMM F16 4096x4096 x 128", mul_mat(F16, 128), 1e-6, 48, None),
    *[(f"GEMM {t.name} 4096x4096 x 128", mul_mat(t, 128), 1e-6, 48, None) for t in KQUANTS],
    ("640-node graph, per node", tiny_chain(320), 1e-7, 4, 640),
    ("one-node graph, whole compute()", one_node, 1e-7, 1, None),
]
LOAD_CASES = [
    ("8-node graph, busy competitor", tiny_chain(4), 1e-7, 1, None),
    ("640-node graph, per node, busy competitor", tiny_chain(320), 1e-7, 4, 640),
]


def nmse(a, ref):
    a, ref = a.astype(np.float64), ref.astype(np.float64)
    return float(np.sum((a - ref) ** 2) / max(np.sum(ref ** 2), 1e-300))


def alternate(fns, min_time):
    """Best seconds per call of each fn, timed in turn round by round (a load that drifts during the
    run hits every side alike); each timing covers at least 0.2 ms of calls."""
    per = []
    for f in fns:
        f()
        t0 = time.perf_counter()
        f()
        per.append(max(time.perf_counter() - t0, 1e-8))
    batch = [max(1, int(2e-4 / t)) for t in per]
    rounds = max(5, min(3000, int(min_time / (sum(b * t for b, t in zip(batch, per))))))
    best = [float("inf")] * len(fns)
    for _ in range(rounds):
        for i, f in enumerate(fns):
            t0 = time.perf_counter()
            for _ in range(batch[i]):
                f()
            best[i] = min(best[i], (time.perf_counter() - t0) / batch[i])
    return best


def weight_reader(w, n_threads):
    """A stream_read_f32 of tensor w (a GEMV's weights) on n_threads"""
    from pyggml._vec import stream_read_f32
    return lambda: stream_read_f32([w.data_ptr], [w.nbytes // 4], n_threads)


class Prepared:
    """One case built in both libraries, checked, with a compute callable per thread count (and a
    read of the weights for a GEMV: times pyggml, ggml[, read])."""

    def __init__(self, ggml, case, threads, seed=0):
        self.name, build, bound, mem_mib, self.per_node = case
        self.sides = [Pyggml(), Ggml(ggml, mem_mib)]
        outs = [build(s, np.random.default_rng(seed)) for s in self.sides]
        self.runs = {nth: [s.computer(o, nth) for s, o in zip(self.sides, outs)] for nth in threads}
        if self.name.startswith("GEMV"):
            w = max(self.sides[0].leaves, key=lambda t: t.nbytes)     # the largest leaf: the weights
            for nth in threads:
                self.runs[nth].append(weight_reader(w, nth))
            self.nbytes = w.nbytes
        for f in self.runs[threads[0]][:2]:
            f()
        self.nmse = nmse(self.sides[0].read(outs[0]), self.sides[1].read(outs[1]))
        if not self.nmse <= bound:
            raise AssertionError(f"{self.name}: pyggml and ggml differ, NMSE {self.nmse:.3g} > {bound:g}")
        self.best = {nth: [float("inf")] * len(fns) for nth, fns in self.runs.items()}

    def time(self, min_time):
        for nth, fns in self.runs.items():
            self.best[nth] = [min(a, b) for a, b in zip(self.best[nth], alternate(fns, min_time))]

    def close(self):
        for s in self.sides:
            s.close()


def ctypes_floor(ggml):
    """Seconds of one bare ctypes call into ggml (a one-pointer getter): the floor under ggml's tiny rows."""
    import ggml_side
    c = ggml_side.Context(ggml, 1)
    gf = c.graph(c.new(ggml.GGML_TYPE_F32, (16,)))
    n_nodes = ggml.ggml_graph_n_nodes
    t = alternate([lambda: n_nodes(gf)], 0.1)[0]
    c.close()
    return t


def table(ggml, cases, threads, min_time, runs):
    """Time every case `runs` times over, the cases in turn (a burst of load on this shared machine
    then spoils one pass of a case, not its result), and print each side's best."""
    prepared = [Prepared(ggml, case, threads) for case in cases]
    try:
        for _ in range(runs):
            for p in prepared:
                p.time(min_time / runs)
        print("| case | threads | pyggml | ggml | ggml/pyggml | NMSE | read | pg/read |")
        print("|---|---|---|---|---|---|---|---|")
        for p in prepared:
            div, unit = (p.per_node, " per node") if p.per_node else (1, "")
            for nth, (t_pg, t_gg, *t_read) in p.best.items():
                read = f" {p.nbytes / t_read[0] / 1e9:.1f} GB/s | {t_read[0] / t_pg:.2f} |" if t_read else " | |"
                print(f"| {p.name} | {nth} | {t_pg / div * 1e6:.3f} us{unit} | {t_gg / div * 1e6:.3f} us{unit} | "
                      f"{t_gg / t_pg:.2f} | {p.nmse:.1e} |{read}", flush=True)
    finally:
        for p in prepared:
            p.close()


def main(argv=None):
    import ggml_side
    ap = argparse.ArgumentParser(prog="python -m benchmarks --vs-ggml", description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="shorter timing (0.3 s per case and thread count)")
    ap.add_argument("--threads", default="1,2", help="comma-separated thread counts (default 1,2)")
    ap.add_argument("--cases", default="", help="only the cases whose name contains this text (or one of "
                    "several, separated by |)")
    ap.add_argument("--runs", type=int, default=3, help="passes over all cases (default 3); each side's best counts")
    ap.add_argument("--load", action="store_true", help="also time the tiny graphs with a busy competitor")
    args = ap.parse_args(argv)
    try:
        ggml = ggml_side.load()
    except ImportError as e:
        raise SystemExit(str(e)) from None
    threads = tuple(int(x) for x in args.threads.split(","))
    min_time = 0.3 if args.quick else 1.5
    level, flags = ggml_side.isa(ggml)
    print(machine())
    info = gg.build_info()
    print(f"pyggml {info['version']}: simd {info['simd']}, openmp {info['openmp']}, {info['compiler']}")
    print(f"ggml (ggml-python {getattr(ggml, '__version__', '?')}): {level} ({' '.join(flags)}), "
          f"ctypes call {ctypes_floor(ggml) * 1e6:.3f} us")
    if "llamafile" not in flags:
        print("note: this ggml was built without GGML_LLAMAFILE (llama.cpp's builds have it): its legacy-quant\n"
              "and F16 GEMM rows are slower than llama.cpp's; see benchmarks/ggml_side.py to rebuild it")
    print()
    table(ggml, [c for c in CASES if any(s in c[0] for s in args.cases.split("|"))], threads, min_time, args.runs)
    if args.load:
        print("\nwith a busy process competing for the cores:\n")
        with busy_competitor():
            table(ggml, [c for c in LOAD_CASES if any(s in c[0] for s in args.cases.split("|"))], threads, min_time, args.runs)
