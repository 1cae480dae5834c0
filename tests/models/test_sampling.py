"""Sampling: greedy, top-k, top-p and temperature semantics (llama.cpp's chain order), seeds."""
import numpy as np
import pytest

from pyggml.models import Sampler, candidates
from pyggml.models import sampling as S


def softmax(x):
    e = np.exp(x - x.max())
    return e / e.sum()


def test_greedy():
    logits = np.array([0.1, 3.0, -1.0, 3.0], np.float32)
    assert Sampler()(logits) == 1                     # the lowest id among equal maxima
    assert Sampler(temperature=0.0, top_k=1, top_p=0.1, seed=3)(logits) == 1
    ids, p = candidates(logits, temperature=0.0)
    assert ids.tolist() == [1] and p.tolist() == [1.0]


def test_top_k_keeps_the_k_largest_lower_ids_first_at_ties():
    logits = np.array([1.0, 5.0, 2.0, 5.0, 2.0, -3.0])
    ids, p = candidates(logits, 1.0, top_k=3)
    assert ids.tolist() == [1, 3, 2]
    np.testing.assert_allclose(p, softmax(logits[[1, 3, 2]]))
    assert candidates(logits, 1.0, top_k=100)[0].tolist() == list(range(6))    # k >= n: all


@pytest.mark.parametrize("n", [10, 5000])         # 5000: more than the first 64-id window
def test_top_p_keeps_the_smallest_set_reaching_p(n):
    rng = np.random.default_rng(0)
    logits = rng.standard_normal(n) * (3 if n > 10 else 1)
    p_all = softmax(logits)
    order = np.argsort(-p_all, kind="stable")
    for top_p in (0.05, 0.5, 0.9, 0.999):
        ids, p = candidates(logits, 1.0, top_p=top_p)
        cum = np.cumsum(p_all[order])
        k = int(np.argmax(cum >= top_p)) + 1
        assert ids.tolist() == order[:k].tolist()
        assert p_all[ids].sum() >= top_p and p_all[ids[:-1]].sum() < top_p
        np.testing.assert_allclose(p.sum(), 1.0)


def test_chain_order_top_k_then_top_p_then_temperature():
    """top_p sees the probabilities of the top_k survivors at temperature 1; the temperature only
    reshapes what is kept (llama.cpp's default sampler order)."""
    logits = np.log(np.array([0.4, 0.3, 0.2, 0.06, 0.04]))
    ids, p = candidates(logits, temperature=2.0, top_k=4, top_p=0.85)
    # after top_k: 0.4, 0.3, 0.2, 0.06 renormalised by 0.96: cumulative 0.417, 0.729, 0.938 -> 3 kept
    assert ids.tolist() == [0, 1, 2]
    np.testing.assert_allclose(p, softmax(logits[:3] / 2.0))
    # top_p at temperature 1: 0.4 + 0.3 + 0.2 -> 3 ids; had the temperature 0.25 come first
    # (p^4 renormalised: 0.72, 0.23, ...) 2 would have been kept
    assert len(candidates(logits, temperature=0.25, top_p=0.85)[0]) == 3


@pytest.mark.slow      # 20000 draws of Python: minutes under qemu, for nothing the host run misses
def test_temperature_draws_follow_the_distribution():
    logits = np.array([2.0, 1.0, 0.0, -1.0])
    for temp in (0.5, 1.0, 2.0):
        s = Sampler(temperature=temp, seed=1)
        counts = np.bincount([s(logits) for _ in range(20000)], minlength=4) / 20000
        np.testing.assert_allclose(counts, softmax(logits / temp), atol=0.015)


def test_seed_reproduces_and_differs():
    logits = np.random.default_rng(2).standard_normal(1000)
    def draws(seed):
        s = Sampler(temperature=1.0, top_k=50, top_p=0.9, seed=seed)
        return [s(logits) for _ in range(50)]
    assert draws(5) == draws(5) and draws(5) != draws(6)
    kept = set(candidates(logits, 1.0, 50, 0.9)[0].tolist())
    assert set(draws(5)) <= kept


def test_errors():
    with pytest.raises(ValueError, match=r"top_p must be in \(0, 1\], got 0.0"):
        Sampler(temperature=1.0, top_p=0.0)
    with pytest.raises(ValueError, match="top_k must be >= 0"):
        Sampler(top_k=-1)
    with pytest.raises(ValueError, match="temperature must be finite"):
        candidates([1.0], float("nan"))


# ---- each sampler of the chain against a numpy reference of its definition (float64) ----


def by_logit(ids, x):
    """ids sorted by decreasing logit, the lower id first among equal ones."""
    ids = np.asarray(ids)
    return ids[np.lexsort((ids, -np.asarray(x)[ids]))]


def kept(c):
    return c.ids.tolist()


LOGITS = {"random": np.random.default_rng(7).standard_normal(50) * 2,
          "ties": np.array([1.0, 3.0, 3.0, -2.0, 1.0, 3.0, 0.5, 1.0]),
          "flat": np.zeros(6),
          "peaked": np.array([20.0, 0.0, -1.0, -1.0, -5.0])}


@pytest.mark.parametrize("name", list(LOGITS))
@pytest.mark.parametrize("k", [1, 2, 3, 5, 49])
def test_top_k_definition(name, k):
    x = LOGITS[name]
    got = S.top_k(S.Candidates.of(x), k)
    want = by_logit(np.arange(len(x)), x)[:k] if k < len(x) else np.arange(len(x))
    assert kept(got) == want.tolist()
    np.testing.assert_array_equal(got.logits, x[want])


@pytest.mark.parametrize("name", list(LOGITS))
@pytest.mark.parametrize("p", [1e-9, 0.3, 0.5, 0.9, 0.99])
@pytest.mark.parametrize("min_keep", [0, 3])
def test_top_p_definition(name, p, min_keep):
    x = LOGITS[name]
    prob = np.exp(x - x.max()) / np.exp(x - x.max()).sum()
    order = by_logit(np.arange(len(x)), x)
    n = 1
    while n < len(x) and (prob[order[:n]].sum() < p or n < min_keep):
        n += 1
    assert kept(S.top_p(S.Candidates.of(x), p, min_keep)) == order[:n].tolist()


def test_top_p_sees_only_the_candidates():
    x = np.log(np.array([0.4, 0.3, 0.2, 0.06, 0.04]))
    c = S.top_k(S.Candidates.of(x), 2)                     # renormalised: 4/7, 3/7
    assert kept(S.top_p(c, 0.55)) == [0] and kept(S.top_p(c, 0.6)) == [0, 1]


@pytest.mark.parametrize("name", list(LOGITS))
@pytest.mark.parametrize("p", [0.01, 0.2, 0.5, 1.0])
@pytest.mark.parametrize("min_keep", [0, 4])
def test_min_p_definition(name, p, min_keep):
    x = LOGITS[name]
    prob = np.exp(x - x.max()) / np.exp(x - x.max()).sum()
    passing = np.flatnonzero(prob >= p * prob.max() * (1 - 1e-12))
    got = kept(S.min_p(S.Candidates.of(x), p, min_keep))
    if len(passing) >= max(min_keep, 1):
        assert got == passing.tolist()                     # the candidates' order is kept
    else:
        assert got == by_logit(np.arange(len(x)), x)[:min_keep].tolist()


@pytest.mark.parametrize("name", list(LOGITS))
@pytest.mark.parametrize("p", [0.2, 0.5, 0.9, 0.999])
@pytest.mark.parametrize("min_keep", [0, 3])
def test_typical_definition(name, p, min_keep):
    x = LOGITS[name]
    prob = np.exp(x - x.max()) / np.exp(x - x.max()).sum()
    entropy = -(prob * np.log(prob)).sum()
    order = by_logit(np.arange(len(x)), x)
    score = np.abs(-np.log(prob[order]) - entropy)
    ranked = order[np.argsort(score, kind="stable")]       # equal scores: the more likely (sorted) first
    n = 1
    while n < len(x) and (prob[ranked[:n]].sum() <= p or n < min_keep):
        n += 1
    assert kept(S.typical(S.Candidates.of(x), p, min_keep)) == ranked[:n].tolist()


@pytest.mark.parametrize("t", [0.1, 0.7, 1.0, 2.5])
def test_temperature_definition(t):
    x = LOGITS["random"]
    got = S.temperature(S.Candidates.of(x), t)
    np.testing.assert_allclose(got.probs(), np.exp(x / t - (x / t).max()) / np.exp(x / t - (x / t).max()).sum(),
                               rtol=1e-12)
    assert kept(S.temperature(S.Candidates.of(LOGITS["ties"]), 0.0)) == [1]    # the first largest


@pytest.mark.parametrize("name", ["random", "peaked", "flat"])
@pytest.mark.parametrize("t, delta, exponent", [(0.8, 0.5, 1.0), (1.0, 0.3, 2.0), (0.2, 0.5, 0.5)])
def test_dynamic_temperature_definition(name, t, delta, exponent):
    x = LOGITS[name]
    prob = np.exp(x - x.max()) / np.exp(x - x.max()).sum()
    h = -(prob[prob > 0] * np.log(prob[prob > 0])).sum()
    lo, hi = max(0.0, t - delta), t + delta
    temp = lo + (hi - lo) * (h / np.log(len(x))) ** exponent
    got = S.temperature(S.Candidates.of(x), t, delta, exponent)
    ref = np.exp((x - x.max()) / temp)
    ref /= ref.sum()
    np.testing.assert_allclose(got.probs(), ref[got.ids], rtol=1e-9, atol=1e-300)


def test_penalties_definition():
    rng = np.random.default_rng(3)
    x = rng.standard_normal(20) * 3
    x[5] = 0.0                                   # a zero logit is multiplied (stays 0)
    seen = [3, 5, 3, 9, 11, 3, 5, 0, 19, 7]
    for last_n in (-1, 0, 1, 4, 64):
        s = Sampler(repeat_penalty=1.3, frequency_penalty=0.2, presence_penalty=0.5, penalty_last_n=last_n)
        s.accept(seen)
        window = seen if last_n == -1 else seen[len(seen) - last_n:] if last_n else []
        ref = x.copy()
        for t in set(window):
            n = window.count(t)
            ref[t] = ref[t] * 1.3 if ref[t] <= 0 else ref[t] / 1.3
            ref[t] -= n * 0.2 + 0.5
        np.testing.assert_allclose(s._biased(x).logits, ref, rtol=1e-15)
    # greedy sees the penalties: the repeated best id loses to the next
    s = Sampler(repeat_penalty=10.0)
    s.accept([int(np.argmax(x))])
    assert s(x) == int(np.argsort(-x)[1])


def test_logit_bias_definition():
    x = LOGITS["ties"]
    s = Sampler(logit_bias={0: 5.0, 2: -np.inf, 7: 0.25})
    np.testing.assert_array_equal(s._biased(x).logits, x + np.array([5.0, 0, -np.inf, 0, 0, 0, 0, 0.25]))
    assert s(x) == 0
    banned = Sampler(temperature=1.0, seed=1, logit_bias={1: -np.inf, 2: -np.inf, 5: -np.inf})
    assert not {banned(x) for _ in range(300)} & {1, 2, 5}
    with pytest.raises(IndexError, match="logit_bias has id 8, outside the vocabulary of 8"):
        Sampler(logit_bias={8: 1.0})(x)
    # bias applies to the candidates wherever they are (here after a top-k reordering)
    c = S.logit_bias(S.top_k(S.Candidates.of(x), 3), {5: 1.0})
    assert kept(c) == [1, 2, 5] and c.logits.tolist() == [3.0, 3.0, 4.0]


def test_mt19937_is_the_standard_generator():
    """C++ [rand.predef]: the 10000th output of a default-constructed std::mt19937 (seed 5489)
    is 4123659995; a double from uniform_real_distribution takes two outputs, low word first."""
    g = S._MT19937(5489)
    assert int(g.rs.randint(0, 2 ** 32, size=10000, dtype=np.uint64)[-1]) == 4123659995
    a, b = np.random.RandomState(42).randint(0, 2 ** 32, size=2, dtype=np.uint64)
    assert S._MT19937(42).uniform() == (int(a) + int(b) * 2 ** 32) / 2 ** 64


def test_dist_walks_the_candidates_in_order():
    x = np.log(np.array([0.1, 0.2, 0.3, 0.4]))
    c = S.Candidates.of(x)

    class Fixed:
        def __init__(self, u):
            self.u = u

        def uniform(self):
            return self.u
    for u, want in [(0.0, 0), (0.05, 0), (0.1 + 1e-9, 1), (0.35, 2), (0.61, 3), (0.999, 3)]:
        assert S.dist(c, Fixed(u)) == want
    c2 = S.top_k(c, 4)                                   # unchanged (k = n): vocabulary order
    assert S.dist(c2, Fixed(0.05)) == 0
    assert S.dist(S.top_k(c, 3), Fixed(0.05)) == 3        # sorted: the largest first


@pytest.mark.slow      # 20000 draws of Python: minutes under qemu, for nothing the host run misses
def test_chain_draws_follow_the_kept_distribution():
    x = LOGITS["random"]
    s = Sampler(temperature=0.7, top_k=10, top_p=0.9, min_p=0.05, seed=4)
    ids, p = candidates(x, 0.7, 10, 0.9, min_p=0.05)
    draws = np.array([s(x) for _ in range(20000)])
    assert set(draws.tolist()) <= set(ids.tolist())
    freq = np.array([(draws == i).mean() for i in ids])
    np.testing.assert_allclose(freq, p, atol=0.015)
    # the reference: top-k, top-p at temperature 1, min-p, then the temperature
    order = by_logit(np.arange(len(x)), x)[:10]
    q = np.exp(x[order] - x[order].max())
    q /= q.sum()
    n = int(np.argmax(np.cumsum(q) >= 0.9)) + 1
    order = order[:n]
    order = order[x[order] >= x[order].max() + np.log(0.05)]
    assert ids.tolist() == order.tolist()
    np.testing.assert_allclose(p, np.exp(x[order] / 0.7) / np.exp(x[order] / 0.7).sum())


def test_option_errors():
    for kw, msg in [({"min_p": 1.5}, "min_p must be in"), ({"typical_p": 0.0}, "typical_p must be in"),
                    ({"penalty_last_n": -2}, "penalty_last_n >= -1"), ({"repeat_penalty": 0.0}, "repeat_penalty"),
                    ({"logit_bias": {-1: 1.0}}, "logit_bias maps"), ({"presence_penalty": np.nan}, "finite")]:
        with pytest.raises(ValueError, match=msg):
            Sampler(**kw)
    with pytest.raises(ValueError, match="logits are empty"):
        Sampler(temperature=1.0)(np.zeros(0))


# ---- DRY, XTC, mirostat (their definitions; tests/models/test_sampling_llama_cpp.py: against llama.cpp) ----

def dry_reference(x, history, mult, base, allowed, last_n, breakers):
    """DRY by its definition, brute force: for each earlier place the window's last n ids occur
    (n as long as possible, not reaching back past the most recent breaker), the id that followed
    there loses mult * base ** (n - allowed) when n >= allowed; single-id breakers are spared."""
    w = list(history[-last_n:])
    n = len(w)
    out = np.array(x, np.float64)
    if n <= allowed:
        return out
    limit = n
    for i in range(n):                         # i ids back from the end
        head = w[n - 1 - i]
        tails = [t for t in breakers.get(head, []) if len(t) <= i and
                 all(w[n - 1 - i + 1 + o] == t[o] for o in range(len(t)))]
        if tails:
            limit = i - max(len(t) for t in tails)
            break
    if limit < allowed:
        return out
    best = {}
    for j in range(n - 1):                     # w[j + 1] followed the run ending at w[j]
        run = 0
        while run <= j and w[j - run] == w[n - 1 - run]:
            run += 1
        run = min(run, limit)
        if run >= allowed:
            best[w[j + 1]] = max(best.get(w[j + 1], 0), run)
    for t, run in best.items():
        if () not in breakers.get(t, []):
            out[t] -= mult * base ** (run - allowed)
    return out


def test_dry_definition():
    rng = np.random.default_rng(0)
    x = rng.standard_normal(8)
    breakers = {7: [()], 6: [(5,)]}            # 7 breaks alone, 6 then 5 breaks
    for trial in range(300):
        history = rng.integers(0, 5 if trial % 2 else 8, rng.integers(0, 40)).tolist()
        for mult, base, allowed, last_n in ((0.8, 1.75, 2, 64), (1.0, 2.0, 0, 10), (0.5, 1.1, 3, 30)):
            got = S.dry(S.Candidates.of(x), history[-last_n:], mult, base, allowed, breakers)
            np.testing.assert_allclose(got.logits, dry_reference(x, history, mult, base, allowed, last_n, breakers))
    # the example of llama.cpp's comment: a b c c b c y a b c -> c, b and y extend repetitions
    a, b, c, y = 0, 1, 2, 3
    got = S.dry(S.Candidates.of(np.zeros(4)), [a, b, c, c, b, c, y, a, b, c], 1.0, 2.0, 1, {})
    assert got.logits.tolist() == [0.0, -1.0, -4.0, -2.0]     # b: run 1 (c), c: run 3 (a b c), y: run 2 (b c)


def test_dry_breakers_against_a_vocabulary():
    class Vocab:                               # what dry_breakers asks of a tokenizer
        words = (b"a", b"b:", b":c", b"x", b"\n", b"ab", b"yz:", b"z")
        n_vocab = len(words)

        def detokenize(self, ids, unparse_special=False):
            return b"".join(self.words[i] for i in ids)

        def encode(self, text, add_special=False, parse_special=False):
            return {"x": [3], ":x": [2, 3]}[text]

    got = S.dry_breakers(Vocab(), [":", "\n", "b:x", "yz:", ""])
    # a word containing a breaker breaks alone; a word ending inside one (b: and ab in b:x) heads the
    # rest of it, tokenized
    assert got == {1: [(), (3,)], 2: [()], 4: [()], 5: [(2, 3)], 6: [()]}
    assert S.dry_breakers(None, []) == {}


def test_xtc_definition():
    x = np.log(np.array([0.4, 0.25, 0.15, 0.1, 0.06, 0.04]))
    c = S.Candidates.of(x)
    ids = S.xtc(c, 0.1).ids.tolist()
    assert ids == [3, 4, 5]                         # 0.4, 0.25, 0.15 removed; 0.1, the last >= 0.1, stays
    assert S.xtc(c, 0.3).ids.tolist() == [0, 1, 2, 3, 4, 5]      # only one above: nothing removed
    assert S.xtc(c, 0.1, min_keep=4).ids.tolist() == list(range(6))
    assert S.xtc(c, 0.6).ids.tolist() == list(range(6))          # > 0.5: off
    s = Sampler(1.0, seed=1, xtc_probability=1.0, xtc_threshold=0.1)
    assert {s(x) for _ in range(200)} == {3, 4, 5}
    greedy = Sampler(0.0, xtc_probability=1.0, xtc_threshold=0.1)
    assert greedy(x) == 3                           # greedy picks among what XTC leaves, as llama.cpp's chain
    half = Sampler(1.0, seed=2, xtc_probability=0.5, xtc_threshold=0.1)
    cut = sum(len(half.chain(x)) == 3 for _ in range(2000)) / 2000
    assert 0.45 < cut < 0.55


def test_mirostat_definitions():
    rng = np.random.default_rng(1)
    x = rng.standard_normal(300) * 2
    c = S.Candidates.of(x)
    p = np.sort(S.Candidates.of(x).probs())[::-1]
    for mu in (1.0, 3.0, 6.0, 10.0):
        got = S.mirostat_v2(c, mu)
        n = max(1, int(np.sum(-np.log2(p) <= mu)))
        assert got.ids.tolist() == np.argsort(-x, kind="stable")[:n].tolist()
        i = np.arange(99)
        t = np.log((i + 2) / (i + 1))
        s_hat = np.sum(t * np.log(p[i] / p[i + 1])) / np.sum(t * t)
        k = ((s_hat - 1) * 2 ** mu / (1 - 300.0 ** (1 - s_hat))) ** (1 / s_hat)
        assert len(S.mirostat_v1(c, mu, 300)) == max(1, int(k))
    for mode in (1, 2):
        s = Sampler(1.0, seed=0, mirostat_mode=mode, mirostat_tau=3.0, mirostat_eta=0.5)
        assert s.mu == 6.0
        for _ in range(50):                     # mu moves by eta times the drawn id's surprise minus tau
            mu, cut = s.mu, s.chain(x)
            tok = s(x)
            assert tok in cut.ids
            p_tok = cut.probs()[cut.ids.tolist().index(tok)]
            assert s.mu == pytest.approx(mu - 0.5 * (-np.log2(p_tok) - 3.0))
        s.reset()
        assert s.mu == 6.0


def test_new_option_errors():
    for kw, msg in [({"dry_multiplier": -1.0}, "dry_multiplier"), ({"dry_penalty_last_n": -1}, "dry_penalty_last_n"),
                    ({"xtc_probability": 1.5}, "xtc_probability must be in"), ({"mirostat_mode": 3}, "mirostat_mode"),
                    ({"mirostat_tau": np.inf}, "finite"),
                    ({"dry_multiplier": 0.8}, "sequence breakers need the vocabulary")]:
        with pytest.raises(ValueError, match=msg):
            Sampler(**kw)
    with pytest.raises(TypeError, match="list of strings"):
        Sampler(dry_multiplier=0.8, dry_sequence_breakers="\n")
    s = Sampler(dry_multiplier=0.8, dry_sequence_breakers=())       # no breakers: no vocabulary needed
    s.accept([1, 2, 3, 1, 2])
    assert s(np.zeros(5)) != 3                                       # 3 would repeat "1 2 3"
