"""The sampler chain's steps against llama.cpp's own samplers (llama-cpp-python's llama_sampler_* API)
on the same logits: the candidates each deterministic step leaves and their probabilities (top-k,
typical, top-p, min-p, temperature, the penalties, DRY with its sequence breakers on a real
vocabulary, XTC with probability 1), and the ids drawn by XTC at probability 0.5, mirostat 1 and 2
over many steps from one seed."""
import ctypes

import numpy as np
import pytest

pytestmark = pytest.mark.llama_cpp

L = pytest.importorskip("llama_cpp")

from pyggml.models import sampling as S

TOKEN_DATA = np.dtype([("id", np.int32), ("logit", np.float32), ("p", np.float32)])


def as_array(ids, logits, is_sorted=False):
    """A llama_token_data_array over these candidates (the buffer is kept alive with it)."""
    assert ctypes.sizeof(L.llama_token_data) == TOKEN_DATA.itemsize
    data = np.zeros(len(ids), TOKEN_DATA)
    data["id"], data["logit"] = ids, logits
    arr = L.llama_token_data_array(data.ctypes.data_as(L.llama_token_data_p), len(ids), -1, is_sorted)
    arr._keep = data
    return arr


def apply(smpl, c):
    """llama.cpp's sampler smpl applied to pyggml Candidates c: (ids, logits, selected id or None),
    the logits as float64 of the float32 llama.cpp holds."""
    arr = as_array(c.ids, c.logits, c.sorted)
    L.llama_sampler_apply(smpl, ctypes.byref(arr))
    ids = np.array([arr.data[i].id for i in range(arr.size)])
    logits = np.array([arr.data[i].logit for i in range(arr.size)], np.float64)
    selected = int(arr.data[arr.selected].id) if arr.selected >= 0 else None
    return ids, logits, selected


def same(ours, theirs_ids, theirs_logits, ordered, rtol=1e-5):
    """Same candidates, logits and softmax probabilities, and, when ordered, the logits in the same order
    (llama.cpp orders equal logits as its sort leaves them, pyggml the lower id first)."""
    assert sorted(ours.ids.tolist()) == sorted(theirs_ids.tolist())
    if ordered:
        np.testing.assert_allclose(ours.logits, theirs_logits, rtol=rtol, atol=1e-5)
    o, t = np.argsort(ours.ids), np.argsort(theirs_ids)
    a, b = ours.logits[o], theirs_logits[t]
    finite = np.isfinite(a)
    assert np.array_equal(finite, np.isfinite(b))
    np.testing.assert_allclose(a[finite], b[finite], rtol=rtol, atol=1e-5)
    np.testing.assert_allclose(ours.probs()[o], S.Candidates(theirs_ids, theirs_logits).probs()[t], rtol=1e-4,
                               atol=1e-7)


def logits_for(seed, n=2000, scale=3.0):
    """float32 logits (rounded: both sides see the same numbers; no ties, which the two order apart)."""
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(n) * scale).astype(np.float32)
    assert len(np.unique(x)) == n
    return x.astype(np.float64)


def cands(x):
    return S.Candidates.of(x)


def free_after(smpl):
    """A context manager freeing smpl."""
    class _Free:
        def __enter__(self):
            return smpl

        def __exit__(self, *exc):
            L.llama_sampler_free(smpl)
    return _Free()


@pytest.mark.parametrize("seed", range(4))
def test_cuts_as_llama_cpp(seed):
    x = logits_for(seed)
    c = cands(x)
    for k in (1, 5, 40, 1999):
        with free_after(L.llama_sampler_init_top_k(k)) as smpl:
            ids, lg, _ = apply(smpl, c)
        ours = S.top_k(c, k)
        same(ours, ids[:k], lg[:k], ordered=ours.sorted)
    pre = S.top_k(c, 200)                       # the later steps run on a cut, sorted list too
    for src in (c, pre):
        for p, mk in ((0.05, 0), (0.5, 0), (0.9, 3), (0.99, 1)):
            with free_after(L.llama_sampler_init_top_p(p, mk)) as smpl:
                ids, lg, _ = apply(smpl, src)
            same(S.top_p(src, p, mk), ids, lg, ordered=True)
            with free_after(L.llama_sampler_init_typical(p, mk)) as smpl:
                ids, lg, _ = apply(smpl, src)
            same(S.typical(src, p, mk), ids, lg, ordered=True)
        for p, mk in ((0.01, 0), (0.05, 0), (0.3, 2), (0.9, 5)):
            with free_after(L.llama_sampler_init_min_p(p, mk)) as smpl:
                ids, lg, _ = apply(smpl, src)
            ours = S.min_p(src, p, mk)
            same(ours, ids, lg, ordered=ours.sorted)
        for t, d, e in ((0.7, 0.0, 1.0), (1.5, 0.0, 1.0), (0.8, 0.5, 1.0), (1.0, 0.3, 2.0)):
            with free_after(L.llama_sampler_init_temp_ext(t, d, e)) as smpl:
                ids, lg, _ = apply(smpl, src)
            ours = S.temperature(src, t, d, e)
            same(ours, ids, lg, ordered=ours.sorted, rtol=1e-4)


@pytest.mark.parametrize("seed", range(3))
def test_penalties_as_llama_cpp(seed):
    rng = np.random.default_rng(seed)
    x = logits_for(seed, n=300)
    history = rng.integers(0, 40, 100).tolist()
    for last_n, rep, freq, pres in ((64, 1.3, 0.0, 0.0), (16, 1.1, 0.2, 0.5), (100, 0.8, -0.1, 0.3)):
        s = S.Sampler(repeat_penalty=rep, frequency_penalty=freq, presence_penalty=pres, penalty_last_n=last_n)
        s.accept(history)
        with free_after(L.llama_sampler_init_penalties(len(x), last_n, rep, freq, pres)) as smpl:
            for t in history:
                L.llama_sampler_accept(smpl, t)
            ids, lg, _ = apply(smpl, cands(x))
        same(S.penalties(cands(x), s.counts, rep, freq, pres), ids, lg, ordered=False)


@pytest.mark.parametrize("seed", range(3))
def test_xtc_as_llama_cpp(seed):
    x = logits_for(seed, n=500, scale=4.0)
    for src in (cands(x), S.top_k(cands(x), 30)):
        for t, mk in ((0.01, 0), (0.05, 0), (0.1, 1), (0.2, 0), (0.5, 0), (0.6, 0), (0.02, 480)):
            with free_after(L.llama_sampler_init_xtc(1.0, t, mk, 0)) as smpl:
                ids, lg, _ = apply(smpl, src)
            ours = S.xtc(src, t, mk)
            same(ours, ids, lg, ordered=ours.sorted)
    # probability 0.5: which steps cut comes from XTC's own float draws, as llama.cpp's
    s = S.Sampler(1.0, seed=seed, xtc_probability=0.5, xtc_threshold=0.05)
    with free_after(L.llama_sampler_init_xtc(0.5, 0.05, 0, seed)) as smpl:
        for _ in range(64):
            ids, lg, _ = apply(smpl, cands(x))
            assert s._cut(x).ids.tolist() == ids.tolist()


@pytest.mark.parametrize("mode", [1, 2])
@pytest.mark.parametrize("seed", range(3))
def test_mirostat_draws_as_llama_cpp(mode, seed):
    """Mirostat's draw and its mu over 50 steps (the logits change each step)."""
    rng = np.random.default_rng(seed)
    n, tau, eta = 400, 3.0, 0.2
    s = S.Sampler(1.0, seed=seed, mirostat_mode=mode, mirostat_tau=tau, mirostat_eta=eta)
    init = (lambda: L.llama_sampler_init_mirostat(n, seed, tau, eta, 100)) if mode == 1 else \
        (lambda: L.llama_sampler_init_mirostat_v2(seed, tau, eta))
    with free_after(init()) as smpl:
        for _ in range(50):
            x = (rng.standard_normal(n) * 2.5).astype(np.float32).astype(np.float64)
            _, _, want = apply(smpl, cands(x))
            assert s(x) == want


# ---- DRY on a real vocabulary ----

@pytest.fixture(scope="module", params=["llama-spm", "gpt-2"])
def vocab(request, llama_cpp_src):
    import pyggml.gguf as G
    from pyggml.tokenizer import Tokenizer
    path = llama_cpp_src / "models" / f"ggml-vocab-{request.param}.gguf"
    if not path.exists():
        pytest.skip(f"{path} is not in this llama.cpp tree")
    llm = L.Llama(model_path=str(path), vocab_only=True, verbose=False)
    return llm, L.llama_model_get_vocab(llm._model.model), Tokenizer(G.load(path).metadata)


def dry_oracle(vocab_p, mult, base, allowed, last_n, breakers):
    raw = [b.encode() for b in breakers]
    arr = (ctypes.c_char_p * max(1, len(raw)))(*raw)
    return L.llama_sampler_init_dry(vocab_p, mult, base, allowed, last_n, arr, len(raw))


TEXTS = ["the cat sat on the mat. the cat sat on the mat. the cat sat on the",
         "a: one two three\na: one two three\na: one two",
         "x = \"abc abc abc\" * 3; x = \"abc abc abc\" * 3; x = \"abc",
         "hello world hello world hello world hello world hello world hello world hello",
         "**bold** text **bold** text **bold** te",
         "1 2 3 4 5 6 1 2 3 4 5 6 1 2 3 4 5 6 1 2 3"]


@pytest.mark.parametrize("breakers", [list(S.DRY_SEQUENCE_BREAKERS), [], ["world hello", "o t", "\n"]])
def test_dry_as_llama_cpp(vocab, breakers):
    _, vocab_p, tok = vocab
    rng = np.random.default_rng(0)
    x = (rng.standard_normal(tok.n_vocab) * 2).astype(np.float32).astype(np.float64)
    for text in TEXTS:
        history = tok.encode(text, add_bos=False)
        for mult, base, allowed, last_n in ((0.8, 1.75, 2, 64), (1.0, 2.0, 1, 16), (0.5, 3.0, 3, 1000),
                                            (2.0, 1e10, 0, 40)):
            s = S.Sampler(dry_multiplier=mult, dry_base=base, dry_allowed_length=allowed, dry_penalty_last_n=last_n,
                          dry_sequence_breakers=breakers, tokenizer=tok)
            s.accept(history)
            with free_after(dry_oracle(vocab_p, mult, base, allowed, last_n, breakers)) as smpl:
                for t in history:
                    L.llama_sampler_accept(smpl, t)
                ids, lg, _ = apply(smpl, cands(x))
            ours = S.dry(cands(x), s.dry_last, mult, base, allowed, s.dry_breakers)
            same(ours, ids, lg, ordered=False, rtol=1e-4)
            assert (ours.logits < x).any() == (lg < x).any()
