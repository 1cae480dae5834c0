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
 3. DRY (dry_multiplier > 0, dry_base >= 1, dry_penalty_last_n > 0): over the last
    dry_penalty_last_n accepted ids, an id that would extend a repetition of n >= dry_allowed_length
    ids (a run that also occurs earlier, followed there by this id) loses
    dry_multiplier * dry_base ** (n - dry_allowed_length); a run does not reach back past a
    sequence breaker (dry_sequence_breakers: strings, matched as llama.cpp matches them against
    the vocabulary), and an id that is a breaker by itself is never penalised.
 4. top-k: the k largest logits, sorted (k <= 0: off; k >= the candidates: unchanged).
 5. typical (typical_p < 1): sorted by |-log p - H| (H: the entropy of the softmax), the
    shortest prefix whose probability exceeds typical_p.
 6. top-p (top_p < 1): sorted by probability, the shortest prefix whose probability reaches top_p.
 7. min-p (min_p > 0): the ids whose probability is at least min_p times the largest.
 8. XTC (xtc_probability > 0, xtc_threshold <= 0.5, two candidates or more): with probability
    xtc_probability (a float draw from its own std::mt19937(seed)), the candidates whose
    probability is at least xtc_threshold are removed, all but the least likely of them (when
    more than one is, and min_keep are left).
 9. temperature: logits / temperature; with dynatemp_range d > 0 the temperature is
    t - d + 2d * (H / log n) ** dynatemp_exponent (clamped at 0), H the entropy of the candidates;
    temperature <= 0 keeps only the largest logit (greedy).
10. dist: one id drawn from the softmax of what is left, walking the candidates in their order
    with a uniform number from std::mt19937(seed) and std::uniform_real_distribution<double>
    (reproduced here), so a seed gives llama.cpp's draw from equal logits.

Steps 5-8 keep at least min_keep ids (at least one). Probabilities in steps 5-8 are the softmax of
the current candidates' logits (temperature 1: the temperature comes last). Among equal logits the
lower id comes first wherever the chain sorts.

mirostat_mode 1 or 2 replaces steps 2-10, as llama.cpp does: after the logit bias, the
temperature (plain), then mirostat (v1: the top k ids, k from the Zipf exponent estimated on the
100 most likely and the target surprise mu; v2: the ids whose surprise -log2 p is at most mu, at
least one), one id drawn from their softmax (std::discrete_distribution), and mu, which starts at
2 * mirostat_tau, moves by -mirostat_eta * (the drawn id's surprise - mirostat_tau). llama.cpp's
top-n-sigma is not implemented.
"""
import collections
import math
import weakref

import numpy as np

__all__ = ["DRY_SEQUENCE_BREAKERS", "Candidates", "Sampler", "candidates", "dist", "dry", "dry_breakers", "logit_bias",
           "min_p", "mirostat_v1", "mirostat_v2", "penalties", "temperature", "top_k", "top_p", "typical", "xtc"]

DRY_SEQUENCE_BREAKERS = ("\n", ":", "\"", "*")     # llama.cpp's defaults


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


def dry(c, last, multiplier, base, allowed_length, breakers):
    """llama.cpp's DRY ("don't repeat yourself") penalty. last: the window's accepted ids, oldest
    first; breakers: {head id: [tail id tuples]} (dry_breakers); a tail () makes the head a breaker
    by itself. Each id that followed an earlier occurrence of the window's last n ids (n >=
    allowed_length; n stops at the most recent breaker) loses multiplier * base ** (n -
    allowed_length), n its longest such run; the exponent is capped where base ** it would
    overflow a float."""
    n = len(last)
    if multiplier == 0.0 or base < 1.0 or n <= allowed_length:
        return c
    r = [int(t) for t in reversed(last)]            # r[0]: the most recent id
    limit = n                                       # runs stop at the most recent breaker
    for i, head in enumerate(r):
        tails = breakers.get(head)
        if tails is None:
            continue
        found = [len(t) for t in tails if len(t) <= i and all(t[o] == r[i - o - 1] for o in range(len(t)))]
        if found:
            limit = i - max(found)
            break
    if limit < allowed_length:
        return c
    z, lo, hi = [0] * n, 0, 0                       # z[k]: how far r[k:] repeats r (Z-algorithm)
    for k in range(1, n):
        if k < hi:
            z[k] = min(hi - k, z[k - lo])
        while k + z[k] < n and r[z[k]] == r[k + z[k]]:
            z[k] += 1
        if k + z[k] > hi:
            lo, hi = k, k + z[k]
    longest = {}                                    # id -> the longest run it would extend
    for k in range(1, n):
        run = min(z[k], limit)
        if run >= allowed_length and longest.get(r[k - 1], -1) < run:
            longest[r[k - 1]] = run
    if not longest:
        return c
    cap = int(88.7228391 / math.log(base)) if base > 1.000001 else 0     # log of the largest float
    ids = c.ids.tolist()
    x = c.logits.copy()
    for j, t in enumerate(ids):
        run = longest.get(t)
        if run is None or () in breakers.get(t, ()):
            continue
        e = run - allowed_length
        if cap > 0 and e > cap:
            e = cap
        x[j] -= multiplier * base ** e
    return Candidates(c.ids, x, False)


_PIECES = weakref.WeakKeyDictionary()             # tokenizer -> (each id's text, {breakers: processed})


def dry_breakers(tokenizer, breakers):
    """DRY's sequence breakers as llama.cpp processes them against a vocabulary: {head id: [tail id
    tuples]}. A token whose text (detokenized alone, special tokens written) contains a breaker is a
    breaker by itself (tail ()); a token whose text ends with the start of a breaker is the head of
    the rest of the breaker tokenized (at most 20 ids). Breakers are cut to 40 bytes; empty ones are
    skipped. tokenizer: a pyggml.tokenizer.Tokenizer; breakers: strings."""
    breakers = tuple(breakers)
    for b in breakers:
        if not isinstance(b, str):
            raise TypeError(f"sampling: dry_sequence_breakers must be strings, got {b!r}")
    if tokenizer is None:
        if not breakers:
            return {}
        raise ValueError("sampling: DRY's sequence breakers need the vocabulary (tokenizer=...; "
                         "dry_sequence_breakers=() for none)")
    known = _PIECES.get(tokenizer)
    if known is None:
        known = _PIECES[tokenizer] = ([tokenizer.detokenize([i], unparse_special=True)
                                       for i in range(tokenizer.n_vocab)], {})
    words, done = known
    if breakers in done:
        return done[breakers]
    if len(done) >= 64:
        done.clear()            # the breakers come from requests too: keep the memo small
    out = {}
    for b in breakers:
        s = b.encode()[:40]
        if not s:
            continue
        for tid, word in enumerate(words):
            if s in word:
                seqs = [()]
            else:
                seqs = []
                pos = word.find(s[:1])
                while pos >= 0:
                    if s.startswith(word[pos:]):            # the word ends inside the breaker
                        rest = s[len(word) - pos:].decode("utf-8", errors="replace")
                        seqs.append(tuple(tokenizer.encode(rest, add_special=False, parse_special=False)[:20]))
                    pos = word.find(s[:1], pos + 1)
            have = out.setdefault(tid, []) if seqs else None
            for q in seqs:
                if q not in have:
                    have.append(q)
    done[breakers] = out
    return out


def xtc(c, threshold, min_keep=0):
    """llama.cpp's XTC ("exclude top choices") cut, applied: sorted by probability, the leading
    candidates whose probability is at least threshold are removed but the last of them, when
    there are two or more and at least min_keep candidates stay; threshold > 0.5 or fewer than
    two candidates: unchanged."""
    if threshold > 0.5 or len(c) < 2:
        return c
    c = _sorted(c)
    above = c.probs() >= threshold
    last = int(np.argmin(above)) - 1 if not above.all() else len(c) - 1    # the last of the leading run
    if last > 0 and len(c) - last >= min_keep:
        return c.take(slice(last, None), sorted=True)
    return c


def mirostat_v1(c, mu, n_vocab, m=100):
    """Mirostat 1.0's cut: the Zipf exponent s estimated from the m most likely candidates, then
    the top k with k = (e * 2**mu / (1 - n_vocab**-e)) ** (1/s), e = s - 1 (at least 1; a k that
    is not a finite int32 counts as 1, as llama.cpp's conversion gives on x86)."""
    c = _sorted(c)
    p = c.probs()
    j = np.arange(min(m - 1, len(c) - 1))
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        t = np.log((j + 2.0) / (j + 1.0))
        s_hat = np.sum(t * np.log(p[j] / p[j + 1])) / np.sum(t * t)
        e = s_hat - 1
        k = (e * 2.0 ** mu / (1 - float(n_vocab) ** -e)) ** (1 / s_hat)
    k = int(k) if np.isfinite(k) and -2 ** 31 < k < 2 ** 31 else 1
    return top_k(c, max(k, 1))


def mirostat_v2(c, mu):
    """Mirostat 2.0's cut: sorted by probability, the leading candidates whose surprise -log2 p is at
    most mu (at least one)."""
    c = _sorted(c)
    with np.errstate(divide="ignore"):
        over = -np.log2(c.probs()) > mu
    keep = int(np.argmax(over)) if over.any() else len(c)
    return c.take(slice(0, max(keep, 1)), sorted=True)


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

    def uniform_float(self):
        """std::uniform_real_distribution<float>(0, 1): one 32-bit output, rounded to a float, / 2**32."""
        u = np.float32(self.rs.randint(0, 2 ** 32, dtype=np.uint64)) / np.float32(2.0 ** 32)
        return u if u < 1 else np.nextafter(np.float32(1), np.float32(0))


def dist(c, rng):
    """Draw an id from the softmax of c, walking the candidates in their order until the running
    sum reaches u * total (u from rng.uniform(); one draw even for one candidate)."""
    u = rng.uniform()
    if len(c) == 1:
        return int(c.ids[0])
    e = np.exp(c.logits - c.logits.max())
    i = int(np.searchsorted(np.cumsum(e), e.sum() * u, side="left"))
    return int(c.ids[min(i, len(c) - 1)])


def _discrete(c, rng):
    """Index of the candidate std::discrete_distribution draws from the softmax of c (mirostat's draw:
    one uniform double, the first cumulative probability that reaches it; libstdc++ draws nothing
    for a single candidate)."""
    if len(c) == 1:
        return 0
    u = rng.uniform()
    cp = np.cumsum(c.probs())
    cp[-1] = 1.0
    return min(int(np.searchsorted(cp, u, side="left")), len(c) - 1)


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
    equal ones. seed: an int (llama.cpp's uint32 seed: the same draws), None: a random seed.
    grammar: None, or a constraint such as pyggml.models.grammar.Grammar set after construction:
    its mask(logits) comes before the whole chain and it accepts each sampled id (structured output)."""

    grammar = None

    def __init__(self, temperature=0.0, top_k=0, top_p=1.0, seed=None, *, min_p=0.0, typical_p=1.0, min_keep=0,
                 dynatemp_range=0.0, dynatemp_exponent=1.0, repeat_penalty=1.0, frequency_penalty=0.0,
                 presence_penalty=0.0, penalty_last_n=64, logit_bias=None, dry_multiplier=0.0, dry_base=1.75,
                 dry_allowed_length=2, dry_penalty_last_n=64, dry_sequence_breakers=DRY_SEQUENCE_BREAKERS,
                 xtc_probability=0.0, xtc_threshold=0.1, mirostat_mode=0, mirostat_tau=5.0, mirostat_eta=0.1,
                 tokenizer=None):
        _check(temperature, top_k, top_p)
        self._init_more(dry_multiplier, dry_base, dry_allowed_length, dry_penalty_last_n, dry_sequence_breakers,
                        xtc_probability, xtc_threshold, mirostat_mode, mirostat_tau, mirostat_eta, tokenizer)
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

    def _init_more(self, dry_multiplier, dry_base, dry_allowed_length, dry_penalty_last_n, dry_sequence_breakers,
                   xtc_probability, xtc_threshold, mirostat_mode, mirostat_tau, mirostat_eta, tokenizer):
        """The options of DRY, XTC and mirostat (checked; DRY's breakers processed against tokenizer)."""
        for name, v in (("dry_multiplier", dry_multiplier), ("dry_base", dry_base), ("xtc_threshold", xtc_threshold),
                        ("mirostat_tau", mirostat_tau), ("mirostat_eta", mirostat_eta)):
            if not np.isfinite(v):
                raise ValueError(f"sampling: {name} must be finite, got {v}")
        if dry_multiplier < 0 or int(dry_allowed_length) < 0 or int(dry_penalty_last_n) < 0:
            raise ValueError(f"sampling: dry_multiplier, dry_allowed_length and dry_penalty_last_n must be >= 0 "
                             f"(0: off), got {dry_multiplier}, {dry_allowed_length}, {dry_penalty_last_n}")
        if not 0.0 <= xtc_probability <= 1.0:
            raise ValueError(f"sampling: xtc_probability must be in [0, 1], got {xtc_probability}")
        if mirostat_mode not in (0, 1, 2):
            raise ValueError(f"sampling: mirostat_mode must be 0 (off), 1 or 2, got {mirostat_mode!r}")
        self.dry_multiplier, self.dry_base = float(dry_multiplier), float(dry_base)
        self.dry_allowed_length, self.dry_penalty_last_n = int(dry_allowed_length), int(dry_penalty_last_n)
        self.dry_on = self.dry_multiplier != 0.0 and self.dry_base >= 1.0 and self.dry_penalty_last_n > 0
        if isinstance(dry_sequence_breakers, str):
            raise TypeError("sampling: dry_sequence_breakers must be a list of strings, got a str")
        self.dry_breakers = dry_breakers(tokenizer, dry_sequence_breakers or ()) if self.dry_on else {}
        self.xtc_probability, self.xtc_threshold = float(xtc_probability), float(xtc_threshold)
        self.mirostat_mode, self.mirostat_tau, self.mirostat_eta = int(mirostat_mode), float(mirostat_tau), \
            float(mirostat_eta)

    def reset(self):
        """Forget the accepted ids and restart the random generators from the seed (mirostat's mu
        from 2 * mirostat_tau)."""
        self.rng = _MT19937(self.seed)
        self.history = collections.deque()
        self.counts = {}
        self.xtc_rng = _MT19937(self.seed)
        self.dry_last = collections.deque(maxlen=self.dry_penalty_last_n)
        self.mu = 2.0 * self.mirostat_tau

    def accept(self, ids):
        """Add ids (one or several) to the penalty windows."""
        ids = np.atleast_1d(np.asarray(ids, dtype=np.int64)).tolist()
        if self.penalty_last_n >= 0:                 # what falls out of both windows is not needed
            ids = ids[-max(self.penalty_last_n, self.dry_penalty_last_n, 1):]
        if self.dry_on:
            self.dry_last.extend(ids)
        for t in ids:
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

    def _biased(self, logits, penalised=True):
        """Candidates after the logit bias and the penalties (the chain's first two steps)."""
        c = Candidates.of(logits)
        for t in self.logit_bias:
            if t >= len(c):
                raise IndexError(f"sampling: logit_bias has id {t}, outside the vocabulary of {len(c)}")
        c = logit_bias(c, self.logit_bias)
        if penalised and self._penalised():
            c = penalties(c, self.counts, self.repeat_penalty, self.frequency_penalty, self.presence_penalty)
        return c

    def _cut(self, logits):
        """Steps 1-8: the candidates before the temperature."""
        c = self._biased(logits)
        if self.dry_on:
            c = dry(c, self.dry_last, self.dry_multiplier, self.dry_base, self.dry_allowed_length, self.dry_breakers)
        c = top_k(c, self.top_k)
        c = typical(c, self.typical_p, self.min_keep)
        c = top_p(c, self.top_p, self.min_keep)
        c = min_p(c, self.min_p, self.min_keep)
        if (self.xtc_probability > 0 and self.xtc_threshold <= 0.5 and len(c) >= 2
                and self.xtc_rng.uniform_float() <= np.float32(self.xtc_probability)):
            c = xtc(c, self.xtc_threshold, self.min_keep)
        return c

    def _mirostat_cut(self, logits):
        """Mirostat's chain before its draw: the logit bias, the temperature, the cut at mu."""
        c = temperature(self._biased(logits, penalised=False), self.temperature)
        if self.mirostat_mode == 1:
            return mirostat_v1(c, self.mu, len(logits))
        return mirostat_v2(c, self.mu)

    def chain(self, logits):
        """The candidates the chain leaves before the draw (their logits after every step; with
        mirostat, the cut at the current mu)."""
        if self.mirostat_mode:
            return self._mirostat_cut(logits)
        return temperature(self._cut(logits), self.temperature, self.dynatemp_range, self.dynatemp_exponent)

    def __call__(self, logits):
        """Sample one id from logits (a row of n_vocab) and accept it into the penalty windows."""
        if self.grammar is not None:
            logits = self.grammar.mask(logits)
        if self.mirostat_mode and self.temperature > 0:
            c = self._mirostat_cut(logits)
            i = _discrete(c, self.rng)
            self.mu -= self.mirostat_eta * (-np.log2(c.probs()[i]) - self.mirostat_tau)
            tok = int(c.ids[i])
        elif self.temperature > 0:
            tok = dist(self.chain(logits), self.rng)
        elif not self.logit_bias and (self.mirostat_mode or not (self._penalised() or self.dry_on
                                                                   or self.xtc_probability)):
            tok = int(np.argmax(logits))        # greedy: the cuts cannot change the largest logit
        else:       # the bias, the penalties and DRY move logits, XTC cuts the largest (not in mirostat's chain)
            c = self._biased(logits, penalised=False) if self.mirostat_mode else self._cut(logits)
            tok = int(c.ids[int(np.argmax(c.logits))])
        if self.grammar is not None:
            self.grammar.accept(tok)
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
