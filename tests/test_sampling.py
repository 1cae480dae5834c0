"""Sampling: greedy, top-k, top-p and temperature semantics (llama.cpp's chain order), seeds."""
import numpy as np
import pytest

from pyggml.models import Sampler, candidates


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
