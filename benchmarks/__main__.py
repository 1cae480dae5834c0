"""python -m benchmarks --vs-ggml [options]: pyggml against ggml's CPU backend (vs_ggml.py).
python -m benchmarks NAME: one of the bench_NAME.py scripts (core, mul_mat, norm, rope, flash_attn, rows).
python -m benchmarks --priority ...: either, run ahead of the machine's other work (root; see
common.raise_priority): on a shared machine the 2-thread rows then time the code, not the queue.

Run from the repository root after installing pyggml. The benchmarks import each other as top-level
modules (as when run as scripts), and the installed pyggml must win over the source folder that
`-m` puts first on sys.path."""
import os
import runpy
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def main(argv):
    sys.path[:] = [HERE] + [p for p in sys.path if os.path.abspath(p or os.curdir) != ROOT]
    if argv[:1] == ["--priority"]:
        from common import raise_priority
        print("priority: " + (", ".join(raise_priority()) or "unchanged (needs root)"))
        argv = argv[1:]
    if argv[:1] == ["--vs-ggml"]:
        import vs_ggml
        vs_ggml.main(argv[1:])
        return
    names = sorted(f[6:-3] for f in os.listdir(HERE) if f.startswith("bench_") and f.endswith(".py"))
    if not argv or argv[0] not in names:
        raise SystemExit(f"usage: python -m benchmarks [--priority] --vs-ggml [--quick] [--threads 1,2] [--cases TEXT] [--runs N] "
                         f"[--load]\n       python -m benchmarks [--priority] {{{','.join(names)}}} [args]")
    sys.argv = [os.path.join(HERE, f"bench_{argv[0]}.py")] + argv[1:]
    runpy.run_path(sys.argv[0], run_name="__main__")


main(sys.argv[1:])
