"""pyggml [demo|info] (also python -m pyggml from outside the source tree)"""
import sys


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    cmd = argv[0] if argv else "demo"
    if cmd == "info":
        import pyggml
        for k, v in pyggml.build_info().items():
            print(f"{k}: {v}")
        return 0
    if cmd == "demo":
        from pyggml.demo import main as demo
        return demo(argv[1:])
    print(f"usage: pyggml [demo|info] (unknown command {cmd!r})", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
