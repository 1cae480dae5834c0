"""Speculative decoding (pyggml.models.speculative): Model.generate with a draft model or prompt
lookup gives the ids generation without a draft gives, greedy and sampled, stops inside an
accepted run exactly where it would, and leaves the target's KV cache as it would.

The identity holds to the bit when a step of k + 1 tokens gives each row the logits a one-token
step gives (speculative.py's docstring says where pyggml's kernels do not). The models here make
that so with their defaults: every matrix Q8_0 (n_ff = 96, a multiple of the block), and flash
attention's automatic choice, whose split-KV path takes a step of up to 16 rows one row after the
other. Then a draft with the target's own weights is always accepted, which the tests assert
exactly."""
import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("gguf")

from hf_models import hf_model

from pyggml import models
from pyggml.models.speculative import Lookup

N = 24


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    from pyggml.convert import convert_hf
    d = tmp_path_factory.mktemp("spec")
    out = {}
    for name, seed, over in [("target", 0, {}), ("other", 1, {}), ("small_vocab", 0, {"vocab_size": 96})]:
        out[name] = d / f"{name}.gguf"
        convert_hf(hf_model("llama-gqa", seed, intermediate_size=96, **over), out[name], outtype="q8_0")
    return out


def load(path, n_ctx=256):
    return models.load(path, n_ctx=n_ctx, n_threads=2)


@pytest.fixture(scope="module")
def target(files):
    return load(files["target"])


@pytest.fixture(scope="module")
def same(files):
    return load(files["target"])


@pytest.fixture(scope="module")
def other(files):
    return load(files["other"])


RANDOM = np.random.default_rng(0).integers(0, 128, 12).tolist()
REPEAT = RANDOM[:5] * 4


def gen(m, prompt, n=N, **kw):
    """m's new ids after prompt in an empty context (never stopping unless told)."""
    m.reset()
    return m.generate(prompt, n, stop=kw.pop("stop", ()), **kw)


@pytest.mark.parametrize("prompt", [RANDOM, REPEAT], ids=["random", "repetitive"])
@pytest.mark.parametrize("temperature", [0.0, 0.9])
def test_draft_model_same_ids(target, same, other, prompt, temperature):
    want = gen(target, prompt, temperature=temperature, seed=5, top_k=40)
    assert target.timings["decode_tokens"] == N - 1
    for draft, draft_max in [(same, 8), (same, 3), (other, 8), (other, 1)]:
        got = gen(target, prompt, draft=draft, draft_max=draft_max, temperature=temperature, seed=5, top_k=40)
        assert got == want, (draft.source, draft_max)
        t = target.timings
        assert t["decode_tokens"] == N - 1 and t["verify_steps"] <= N - 1
        if draft is same and temperature == 0:    # the draft's logits are the target's: all accepted
            assert t["accepted_tokens"] == t["draft_tokens"] > 0
            assert t["verify_steps"] == -(-(N - 1) // (draft_max + 1))
        elif draft is other:
            assert t["draft_tokens"] > 0 and t["accepted_tokens"] < t["draft_tokens"] / 2


@pytest.mark.parametrize("temperature", [0.0, 0.9])
def test_lookup_same_ids(target, temperature):
    for prompt in (RANDOM, REPEAT):
        want = gen(target, prompt, temperature=temperature, seed=2)
        for lookup in (True, 2, (1, 4)):
            got = gen(target, prompt, lookup=lookup, draft_max=4, temperature=temperature, seed=2)
            assert got == want, lookup
    # greedy decoding of this model falls into a loop, which lookup then drafts
    gen(target, REPEAT, lookup=True)
    assert target.timings["accepted_tokens"] > 0


def test_stop_and_n_predict_inside_accepted_run(target, same):
    want = gen(target, REPEAT)
    for n in range(1, 12):
        assert gen(target, REPEAT, n, draft=same, draft_max=8) == want[:n]
    stops = {t: want.index(t) for t in reversed(want) if 0 < want.index(t) <= 8}     # id -> its first index
    assert stops
    for stop, first in stops.items():
        assert gen(target, REPEAT, draft=same, stop=(stop,)) == want[:first + 1]
        t = target.timings     # one verify step, the stop id accepted as the draft's id `first`
        assert (t["verify_steps"], t["draft_tokens"], t["accepted_tokens"]) == (1, 8, first)


@pytest.mark.parametrize("kw", [{"draft": "same"}, {"draft": "other"}, {"lookup": True}], ids=lambda k: str(k))
def test_cache_after_generation(target, same, other, kw):
    """The target's cache holds what plain decoding leaves (prompt and new ids but the last):
    continuing gives the same logits to the bit."""
    kw = {"draft": {"same": same, "other": other}[kw["draft"]]} if "draft" in kw else kw
    for n in (1, 2, 9, 16):
        ids = gen(target, REPEAT, n)
        used, past = target.cache.n_used, target.n_past
        assert used == len(REPEAT) + n - 1 == past
        want = target.eval([ids[-1], 3, 4])
        assert gen(target, REPEAT, n, **kw) == ids
        assert (target.cache.n_used, target.n_past) == (used, past)
        np.testing.assert_array_equal(target.eval([ids[-1], 3, 4]), want)
        # and a second generation appended to that context
        target.reset()
        target.generate(REPEAT, n, stop=())
        want2 = target.generate([5, 6], 10, stop=())
        target.reset()
        target.generate(REPEAT, n, stop=(), **kw)
        assert target.generate([5, 6], 10, stop=(), **kw) == want2


def test_context_full(files):
    """A generation that outgrows the context ends with plain decoding's ValueError, after the
    same ids."""
    small, draft = load(files["target"], n_ctx=32), load(files["target"])

    def run(**kw):
        small.reset()
        got = []
        with pytest.raises(ValueError, match="do not fit in the context"):
            got.extend(small.stream(REPEAT, 40, stop=(), **kw))
        return got

    want = run()
    assert len(want) == 32 - len(REPEAT) + 1
    assert run(draft=draft) == want
    assert run(lookup=True) == want


def test_lookup_drafts():
    lk = Lookup(1, 3)
    assert lk.draft([1, 2, 3, 4, 1, 2], 8) == [3, 4, 1, 2]         # the 2-gram (1, 2) at 0
    assert lk.draft([1, 2, 3, 4, 1, 2], 1) == [3]
    assert lk.draft([7, 1, 9, 5, 1, 9, 6, 1, 9], 2) == [6, 1]       # the latest earlier (1, 9)
    assert lk.draft([4, 2, 8, 5, 3, 2, 8], 3) == [5, 3, 2]          # the 3-gram fails, the 2-gram not
    assert lk.draft([1, 2, 3], 4) == []
    assert lk.draft([5, 5], 4) == [5]
    assert Lookup(2, 3).draft([1, 2, 3, 4, 2], 4) == []            # only the 1-gram (2) occurs earlier


def test_errors(files, target, same):
    with pytest.raises(ValueError, match="n_vocab 96 and 128"):
        target.generate(RANDOM, 4, draft=models.load(files["small_vocab"], n_ctx=64))
    for bad in (0, -1, 1.5, True, None):
        with pytest.raises(ValueError, match="draft_max must be an int >= 1"):
            target.generate(RANDOM, 4, draft=same, draft_max=bad)
    with pytest.raises(ValueError, match="another Model than the target"):
        target.generate(RANDOM, 4, draft=target)
    with pytest.raises(TypeError, match="draft must be a pyggml.models.Model"):
        target.generate(RANDOM, 4, draft="small.gguf")
    with pytest.raises(ValueError, match="not both"):
        target.generate(RANDOM, 4, draft=same, lookup=True)
    for bad in (0, (3, 1), (0, 2), "yes", (1, 2, 3)):
        with pytest.raises(ValueError, match="lookup"):
            target.generate(RANDOM, 4, lookup=bad)
    half = models.load(files["target"], n_ctx=64, layers=(0, 1))
    with pytest.raises(ValueError, match="the draft needs the whole model"):
        target.generate(RANDOM, 4, draft=half)
    # the files' token texts, when both list them
    a, b = models.load(files["target"], n_ctx=64), models.load(files["target"], n_ctx=64)
    a.gguf.metadata["tokenizer.ggml.tokens"] = [f"t{i}" for i in range(128)]
    b.gguf.metadata["tokenizer.ggml.tokens"] = [f"t{i}" for i in range(100)] + ["x"] * 28
    with pytest.raises(ValueError, match="token 100 is 'x' and 't100'"):
        a.generate(RANDOM, 4, draft=b)


def engine_run(m, reqs, **kw):
    from pyggml.models.batch import BatchEngine
    eng = BatchEngine(m, n_seq=3, n_batch=16)
    out = [eng.submit(keep_logits=True, **q, **kw) for q in reqs]
    eng.run()
    last = {r.slot: r for r in out}     # each slot's last request
    for r in last.values():             # the slot holds its prompt and every new id but the last
        assert eng.slots[r.slot].cached == r.prompt + r.tokens[:-1]
        assert eng.cache.seq_pos_max(r.slot) == len(r.prompt + r.tokens) - 2
    return out, eng.stats


@pytest.mark.parametrize("f16", [False, True], ids=["q8_0", "f16"])
def test_batch_engine_lookup(files, tmp_path, f16):
    """BatchEngine with prompt lookup: each request's ids and logits are those it gets without (to
    the bit: the engine gives every row its bits whatever the step carries), stop ids and n_predict
    inside accepted runs included."""
    from hf_models import converted
    path = converted("llama-gqa", "f16", tmp_path) if f16 else files["target"]
    m = models.load(path, n_ctx=256, n_threads=2)
    reqs = [{"prompt": REPEAT, "n_predict": 20, "stop": ()},
            {"prompt": RANDOM, "n_predict": 9, "temperature": 0.9, "seed": 4, "stop": ()},
            {"prompt": REPEAT[3:] + REPEAT, "n_predict": 14, "stop": ()},
            {"prompt": RANDOM[:4] * 3, "n_predict": 12, "temperature": 0.7, "seed": 1, "stop": ()}]
    want, _ = engine_run(m, reqs)
    reqs += [dict(reqs[0], n_predict=n) for n in (1, 2, 7)]
    reqs += [dict(reqs[0], stop=(want[0].tokens[j],)) for j in (3, 9)]
    want, _ = engine_run(m, reqs)
    got, stats = engine_run(m, reqs, lookup=(1, 3), draft_max=4)
    assert stats["drafts_accepted"] > 0
    assert stats["steps"] < engine_run(m, reqs)[1]["steps"]
    for g, w in zip(got, want):
        assert g.tokens == w.tokens and g.finish_reason == w.finish_reason
        assert all(np.array_equal(a, b) for a, b in zip(g.logits, w.logits))
    from pyggml.models.batch import BatchEngine
    with pytest.raises(ValueError, match="BatchEngine.submit: draft_max"):
        BatchEngine(m, 1).submit(RANDOM, 4, lookup=True, draft_max=0)
