"""A progress display for long loads and generations: tqdm when it is installed, a one-line
counter otherwise; off when the stream is not a terminal unless asked for.

    with progress(total=128, desc="prefill", unit="tok") as bar:
        bar.update(64)
"""
import sys
import time

__all__ = ["progress"]


class _Off:
    def update(self, n=1):
        pass

    def close(self):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class _Line(_Off):
    """desc: done/total unit (rate unit/s), redrawn in place at most 10 times a second."""

    def __init__(self, total, desc, unit, file):
        self.total, self.desc, self.unit, self.file = total, desc, unit, file
        self.n, self.t0, self.shown = 0, time.perf_counter(), 0.0

    def update(self, n=1):
        self.n += n
        now = time.perf_counter()
        if now - self.shown >= 0.1 or self.n >= self.total:
            self.shown = now
            rate = self.n / max(now - self.t0, 1e-9)
            self.file.write(f"\r{self.desc}: {self.n}/{self.total} {self.unit} ({rate:.1f} {self.unit}/s)")
            self.file.flush()

    def close(self):
        self.file.write("\r\033[K")
        self.file.flush()


def progress(total, desc, unit="it", enable=None, file=None):
    """A progress bar over `total` steps on `file` (default stderr) with update(n) and close(),
    also a context manager. enable: None shows it only when file is a terminal; True/False force."""
    file = sys.stderr if file is None else file
    if enable is None:
        enable = file.isatty()
    if not enable:
        return _Off()
    try:
        from tqdm import tqdm
    except ImportError:
        return _Line(total, desc, unit, file)
    return tqdm(total=total, desc=desc, unit=unit, file=file, leave=False)
