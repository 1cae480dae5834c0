"""Next-token sampling from a row of logits: greedy, top-k, top-p, temperature; seeded.

The chain is llama.cpp's default order: top_k keeps the k largest logits, top_p keeps the smallest
set of the most likely of those whose probability (softmax at temperature 1, as llama.cpp's top-p
sees them) sums to at least top_p, then the kept logits are divided by the temperature and one id
is drawn from their softmax. temperature <= 0 is greedy: the largest logit (the lowest id among
equal ones), whatever top_k and top_p say. Ties at the top-k boundary keep the lower ids. Draws come
from a numpy Generator seeded with `seed`, so a seed reproduces a generation.
"""
import numpy as np

__all__ = ["Sampler", "candidates"]


def _check(temperature, top_k, top_p):
    if not np.isfinite(temperature):
        raise ValueError(f"sampling: temperature must be finite, got {temperature}")
    if int(top_k) < 0:
        raise ValueError(f"sampling: top_k must be >= 0 (0: off), got {top_k}")
    if not 0.0 < top_p <= 1.0:
        raise ValueError(f"sampling: top_p must be in (0, 1], got {top_p}")


def _softmax(x):
    e = np.exp(x - x.max())
    return e / e.sum()


def _top_order(logits, m):
    """Ids of the m largest logits, largest first (lower id first among equal logits)."""
    n = len(logits)
    if m < n:
        part = np.argpartition(-logits, m - 1)[:m]
        # argpartition may cut through a run of equal logits: widen to the whole run, then keep m
        part = np.flatnonzero(logits >= logits[part].min())
    else:
        part = np.arange(n)
    order = part[np.lexsort((part, -logits[part]))]
    return order[:m]


def _nucleus(cum, top_p):
    """How many of the sorted candidates with cumulative probabilities cum top_p keeps."""
    return min(int(np.searchsorted(cum, top_p)) + 1, len(cum))


def candidates(logits, temperature=1.0, top_k=0, top_p=1.0):
    """The ids the chain keeps and their probabilities (float64, summing to 1): what Sampler draws
    from. Most likely first when top_k or top_p cut; all ids in order otherwise. temperature <= 0:
    the greedy id with probability 1."""
    _check(temperature, top_k, top_p)
    x = np.asarray(logits, dtype=np.float64).reshape(-1)
    n = len(x)
    if temperature <= 0:
        return np.array([int(np.argmax(x))]), np.ones(1)
    k = n if top_k <= 0 else min(int(top_k), n)
    if k < n:
        ids = _top_order(x, k)
        if top_p < 1.0:
            ids = ids[:_nucleus(np.cumsum(_softmax(x[ids])), top_p)]
    elif top_p < 1.0:
        # grow a top-m window until it holds top_p of the mass (a full sort of a 32k vocabulary
        # costs more than the rest of a decode step's Python work)
        p = _softmax(x)
        m = min(n, 64)
        while True:
            ids = _top_order(x, m)
            cum = np.cumsum(p[ids])
            if cum[-1] >= top_p or m == n:
                ids = ids[:_nucleus(cum, top_p)]
                break
            m = min(n, 4 * m)
    else:
        ids = np.arange(n)
    return ids, _softmax(x[ids] / temperature)


class Sampler:
    """Draws next ids: Sampler(temperature, top_k, top_p, seed)(logits) -> int."""

    def __init__(self, temperature=0.0, top_k=0, top_p=1.0, seed=None):
        _check(temperature, top_k, top_p)
        self.temperature, self.top_k, self.top_p = float(temperature), int(top_k), float(top_p)
        self.rng = np.random.default_rng(seed)

    def __call__(self, logits):
        if self.temperature <= 0:
            return int(np.argmax(logits))
        ids, p = candidates(logits, self.temperature, self.top_k, self.top_p)
        return int(ids[0]) if len(ids) == 1 else int(ids[self.rng.choice(len(ids), p=p)])
