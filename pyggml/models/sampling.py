"""Next-token sampling from a row of logits: llama.cpp's sampler chain (src/llama-sampler.cpp, in the
order common/sampling.cpp builds it), seeded as llama.cpp seeds it.

    s = Sampler(temperature=0.8, top_k=40, top_p=0.95, min_p=0.05, seed=0, repeat_penalty=1.1)
    s.accept(prompt_ids)          # the penalties' window sees the prompt, as llama.cpp's server
    tok = s(logits)               # sample (and accept) one id

The chain, each step over the candidates the previous one left (a candidate: an id and its logit):

 1. logit bias: adds logit_bias[id] (-inf bans an id).
 2. penalties over the last penalty_last_n accepted ids (-1: all): an id seen c > 0 times has its
    logit divided by repeat_penalty (multiplied when the logit is <= 0), then reduced by
    c * frequency_penalty + presence_penalty.
 3. top-k: the k largest logits, sorted (k <= 0: off; k >= the candidates: unchanged).
 4. typical (typical_p < 1): sorted by |-log p - H| (H: the entropy of the softmax), the
    shortest prefix whose probability exceeds typical_p.
 5. top-p (top_p < 1): sorted by probability, the shortest prefix whose probability reaches top_p.
 6. min-p (min_p > 0): the ids whose probability is at least min_p times the largest.
 7. temperature: logits / temperature; with dynatemp_range d > 0 the temperature is
    t - d + 2d * (H / log n) ** dynatemp_exponent (clamped at 0), H the entropy of the candidates;
    temperature <= 0 keeps only the largest logit (greedy).
 8. dist: one id drawn from the softmax of what is left, walking the candidates in their order
    with a uniform number from std::mt19937(seed) and std::uniform_real_distribution<double>
    (reproduced here), so a seed gives llama.cpp's draw from equal logits.

Steps 4-6 keep at least min_keep ids (at least one). Probabilities in steps 4-6 are the softmax of
the current candidates' logits (temperature 1: the temperature comes last). Among equal logits the
lower id comes first wherever the chain sorts. llama.cpp's DRY, XTC, top-n-sigma and mirostat are
not implemented.
"""
import collections

import numpy as np

__all__ = ["Candidates", "Sampler", "candidates", "dist", "logit_bias", "min_p", "penalties", "temperature",
           "top_k", "top_p", "typical"]


class Candidates:
    """ids (int64) and logits (float64) of the tokens still in the running; sorted: known to be in
    decreasing logit order."""

    __slots__ = ("ids", "logits", "sorted")

    def __init__(self, ids, logits, sorted=False):
        self.ids, self.logits, self.sorted = ids, logits, sorted

    @classmethod
    def of(cls, logits):
        x = np.asarray(logits, dtype=np.float64).reshape(-1)
        if x.size == 0:
            raise ValueError("sampling: the logits are empty")
        return cls(np.arange(x.size), x.copy())

    def __len__(self):
        return len(self.ids)

    def take(self, idx, sorted=False):
        return Candidates(self.ids[idx], self.logits[idx], sorted)

    def probs(self):
        """Softmax of the logits (float64; -inf gives 0)."""
        e = np.exp(self.logits - self.logits.max())
        return e / e.sum()


def _order(c, m=None):
    """Indices of c's m largest logits, largest first, the lower id first among equal logits."""
    n = len(c)
    m = n if m is None else min(m, n)
    x = c.logits
    if m < n:
        part = np.argpartition(-x, m - 1)[:m]
        part = np.flatnonzero(x >= x[part].min())      # the whole run of logits equal to the cut
    else:
        part = np.arange(n)
    return part[np.lexsort((c.ids[part], -x[part]))][:m]


def _sorted(c):
    return c if c.sorted else c.take(_order(c), sorted=True)


def _lookup(table, ids):
    """table[id] for each of ids (0 where absent): a dict of ids to numbers, vectorised."""
    keys = np.fromiter(table, np.int64, len(table))
    vals = np.fromiter(table.values(), np.float64, len(table))
    order = np.argsort(keys)
    keys, vals = keys[order], vals[order]
    at = np.minimum(np.searchsorted(keys, ids), len(keys) - 1)
    return np.where(keys[at] == ids, vals[at], 0.0)


def logit_bias(c, bias):
    """Add bias[id] to the logit of each id in c (ids not in c are ignored)."""
    if not bias:
        return c
    return Candidates(c.ids, c.logits + _lookup(bias, c.ids), False)


def penalties(c, counts, repeat=1.0, frequency=0.0, presence=0.0):
    """llama.cpp's repetition penalties: counts maps an id to its occurrences in the window."""
    if not counts or (repeat == 1.0 and frequency == 0.0 and presence == 0.0):
        return c
    n = _lookup(counts, c.ids)
    hit = n > 0
    x = c.logits.copy()
    x[hit] = np.where(x[hit] <= 0, x[hit] * repeat, x[hit] / repeat)
    x[hit] -= n[hit] * frequency + presence
    return Candidates(c.ids, x, False)


def top_k(c, k):
    """The k largest logits, sorted; k <= 0 or k >= len(c): unchanged."""
    if k <= 0 or k >= len(c):
        return c
    return c.take(_order(c, k), sorted=True)


def typical(c, p, min_keep=0):
    """Locally typical sampling: candidates ordered by how far their information -log p is from
    the entropy, the shortest prefix whose probability exceeds p (at least min_keep)."""
    if p >= 1.0:
        return c
    c = _sorted(c)
    prob = c.probs()
    with np.errstate(divide="ignore", invalid="ignore"):
        info = -np.log(prob)
        entropy = -np.sum(np.where(prob > 0, prob * np.log(np.where(prob > 0, prob, 1)), 0.0))
    shifted = np.abs(info - entropy)
    idx = np.argsort(shifted, kind="stable")
    cum = np.cumsum(prob[idx])
    ok = (cum > p) & (np.arange(1, len(c) + 1) >= max(min_keep, 1))
    keep = int(np.argmax(ok)) + 1 if ok.any() else len(c)
    return c.take(idx[:keep])


def top_p(c, p, min_keep=0):
    """Nucleus: sorted by probability, the shortest prefix whose probability reaches p (at least
    min_keep); p >= 1: unchanged."""
    if p >= 1.0:
        return c
    prob = c.probs()
    m = len(c) if c.sorted else min(len(c), 64)
    while True:
        idx = np.arange(len(c)) if c.sorted else _order(c, m)
        cum = np.cumsum(prob[idx])
        ok = (cum >= p) & (np.arange(1, len(idx) + 1) >= min_keep)
        if ok.any():
            return c.take(idx[:int(np.argmax(ok)) + 1], sorted=True)
        if len(idx) == len(c):
            return c.take(idx, sorted=True)
        m = min(len(c), 4 * m)      # grow the window: a full sort of a large vocabulary is rarely needed


def min_p(c, p, min_keep=0):
    """The candidates whose probability is at least p times the largest (logit >= max + log p), in
    their order; when fewer than min_keep pass, the min_keep most likely."""
    if p <= 0.0 or len(c) == 0:
        return c
    cut = c.logits.max() + np.log(p)
    keep = np.flatnonzero(c.logits >= cut)
    if len(keep) >= max(min_keep, 1):
        return c.take(keep, c.sorted)
    return c.take(_order(c, max(min_keep, 1)), sorted=True)


def temperature(c, t, delta=0.0, exponent=1.0):
    """Logits divided by t; with delta > 0 the temperature follows the normalised entropy (llama.cpp's
    dynamic temperature); t <= 0 keeps only the first largest logit."""
    if delta > 0:
        if len(c) <= 1:
            return c
        lo, hi = max(0.0, t - delta), t + delta
        c = _sorted(c)
        prob = c.probs()
        nz = prob[prob > 0]
        entropy = -np.sum(nz * np.log(nz))
        t = lo + (hi - lo) * (entropy / np.log(len(c))) ** exponent
    if t <= 0:
        return c.take(np.array([int(np.argmax(c.logits))]), True)
    return Candidates(c.ids, c.logits / t, c.sorted)


class _MT19937:
    """std::mt19937 with std::uniform_real_distribution<double>(0, 1), as llama.cpp's dist draws:
    numpy's RandomState has the same generator and seeding for a 32-bit seed; a double takes two
    32-bit outputs, the first as the low word (libstdc++'s generate_canonical)."""

    def __init__(self, seed):
        self.seed = int(seed) & 0xFFFFFFFF
        self.rs = np.random.RandomState(self.seed)

    def uniform(self):
        lo, hi = self.rs.randint(0, 2 ** 32, size=2, dtype=np.uint64)
        u = (float(lo) + float(hi) * 2.0 ** 32) / 2.0 ** 64
        return u if u < 1.0 else np.nextafter(1.0, 0.0)


def dist(c, rng):
    """Draw an id from the softmax of c, walking the candidates in their order until the running
    sum reaches u * total (u from rng.uniform(); one draw even for one candidate)."""
    u = rng.uniform()
    if len(c) == 1:
        return int(c.ids[0])
    e = np.exp(c.logits - c.logits.max())
    i = int(np.searchsorted(np.cumsum(e), e.sum() * u, side="left"))
    return int(c.ids[min(i, len(c) - 1)])


def _check(temperature, top_k, top_p):
    if not np.isfinite(temperature):
        raise ValueError(f"sampling: temperature must be finite, got {temperature}")
    if int(top_k) < 0:
        raise ValueError(f"sampling: top_k must be >= 0 (0: off), got {top_k}")
    if not 0.0 < top_p <= 1.0:
        raise ValueError(f"sampling: top_p must be in (0, 1], got {top_p}")


class Sampler:
    """llama.cpp's sampler chain (module docstring) with its state: the penalty window and the
    random generator. Sampler(temperature, top_k, top_p, seed)(logits) -> id. temperature <= 0
    (the default) is greedy: the largest logit after the bias and penalties, the lowest id among
    equal ones. seed: an int (llama.cpp's uint32 seed: the same draws), None: a random seed."""

    def __init__(self, temperature=0.0, top_k=0, top_p=1.0, seed=None, *, min_p=0.0, typical_p=1.0, min_keep=0,
                 dynatemp_range=0.0, dynatemp_exponent=1.0, repeat_penalty=1.0, frequency_penalty=0.0,
                 presence_penalty=0.0, penalty_last_n=64, logit_bias=None):
        _check(temperature, top_k, top_p)
        if not 0.0 <= min_p <= 1.0:
            raise ValueError(f"sampling: min_p must be in [0, 1], got {min_p}")
        if not 0.0 < typical_p <= 1.0:
            raise ValueError(f"sampling: typical_p must be in (0, 1], got {typical_p}")
        if int(min_keep) < 0 or int(penalty_last_n) < -1:
            raise ValueError(f"sampling: min_keep must be >= 0 and penalty_last_n >= -1 (-1: all), got {min_keep}, "
                             f"{penalty_last_n}")
        for name, v in (("dynatemp_range", dynatemp_range), ("dynatemp_exponent", dynatemp_exponent),
                        ("repeat_penalty", repeat_penalty), ("frequency_penalty", frequency_penalty),
                        ("presence_penalty", presence_penalty)):
            if not np.isfinite(v):
                raise ValueError(f"sampling: {name} must be finite, got {v}")
        if repeat_penalty <= 0:
            raise ValueError(f"sampling: repeat_penalty must be > 0 (1: off), got {repeat_penalty}")
        self.temperature, self.top_k, self.top_p = float(temperature), int(top_k), float(top_p)
        self.min_p, self.typical_p, self.min_keep = float(min_p), float(typical_p), int(min_keep)
        self.dynatemp_range, self.dynatemp_exponent = float(dynatemp_range), float(dynatemp_exponent)
        self.repeat_penalty, self.frequency_penalty = float(repeat_penalty), float(frequency_penalty)
        self.presence_penalty, self.penalty_last_n = float(presence_penalty), int(penalty_last_n)
        self.logit_bias = {}
        for t, b in (logit_bias or {}).items():
            if int(t) < 0 or np.isnan(b):
                raise ValueError(f"sampling: logit_bias maps ids >= 0 to numbers, got {t}: {b}")
            self.logit_bias[int(t)] = float(b)
        if seed is None:
            seed = int(np.random.SeedSequence().generate_state(1)[0])
        self.seed = int(seed)
        self.reset()

    def reset(self):
        """Forget the accepted ids and restart the random generator from the seed."""
        self.rng = _MT19937(self.seed)
        self.history = collections.deque()
        self.counts = {}

    def accept(self, ids):
        """Add ids (one or several) to the penalty window."""
        for t in np.atleast_1d(np.asarray(ids, dtype=np.int64)).tolist():
            self.history.append(t)
            self.counts[t] = self.counts.get(t, 0) + 1
            if 0 <= self.penalty_last_n < len(self.history):
                old = self.history.popleft()
                self.counts[old] -= 1
                if not self.counts[old]:
                    del self.counts[old]

    def _penalised(self):
        return self.penalty_last_n != 0 and self.counts and (
            self.repeat_penalty != 1.0 or self.frequency_penalty != 0.0 or self.presence_penalty != 0.0)

    def _biased(self, logits):
        """Candidates after the logit bias and the penalties (the chain's first two steps)."""
        c = Candidates.of(logits)
        for t in self.logit_bias:
            if t >= len(c):
                raise IndexError(f"sampling: logit_bias has id {t}, outside the vocabulary of {len(c)}")
        c = logit_bias(c, self.logit_bias)
        if self._penalised():
            c = penalties(c, self.counts, self.repeat_penalty, self.frequency_penalty, self.presence_penalty)
        return c

    def chain(self, logits):
        """The candidates the chain leaves before the draw (their logits after every step)."""
        c = top_k(self._biased(logits), self.top_k)
        c = typical(c, self.typical_p, self.min_keep)
        c = top_p(c, self.top_p, self.min_keep)
        c = min_p(c, self.min_p, self.min_keep)
        return temperature(c, self.temperature, self.dynatemp_range, self.dynatemp_exponent)

    def __call__(self, logits):
        """Sample one id from logits (a row of n_vocab) and accept it into the penalty window."""
        if self.temperature > 0:
            tok = dist(self.chain(logits), self.rng)
        elif not self.logit_bias and not self._penalised():
            tok = int(np.argmax(logits))        # greedy: the cuts cannot change the largest logit
        else:
            c = self._biased(logits)
            tok = int(c.ids[int(np.argmax(c.logits))])
        self.accept(tok)
        return tok


def candidates(logits, temperature=1.0, top_k=0, top_p=1.0, **options):
    """The ids the chain keeps and their probabilities (float64, summing to 1): what Sampler draws
    from, in the chain's order (most likely first once a step sorted them; all ids in order when
    nothing cut). options: Sampler's keyword options (min_p, typical_p, logit_bias, ...; no penalty
    history). temperature <= 0: the greedy id with probability 1."""
    _check(temperature, top_k, top_p)
    s = Sampler(temperature, top_k, top_p, seed=0, **options)
    if temperature <= 0:
        return np.array([s(logits)]), np.ones(1)
    c = s.chain(logits)
    return c.ids, c.probs()
