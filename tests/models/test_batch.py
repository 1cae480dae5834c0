"""Continuous batching (pyggml.models.batch): a request's logits and tokens do not depend on what
else runs with it. Each request is run alone, then with companions joining at other steps, with
prefills chunked differently, after a defrag, through prefix reuse: the logits must be equal to
the bit and the ids equal. The cache memory is filled with NaN first, so a step that read a cell
its token may not see (another sequence's, a free one) would turn the logits into NaN."""
import asyncio
import subprocess
import sys
import time

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("gguf")

from hf_models import converted

from pyggml import models
from pyggml._enums import Op
from pyggml._ops import flash_attn_ext_set_path
from pyggml.kvcache import _bytes
from pyggml.models.batch import BatchEngine, EngineThread, agenerate, gemm_min_cols


@pytest.fixture(scope="module")
def gguf_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("models")


def load(gguf_dir, kind="qwen2", outtype="f16", n_ctx=256, **kw):
    return models.load(converted(kind, outtype, gguf_dir), n_ctx=n_ctx, n_threads=2, **kw)


# (prompt length, n_predict, temperature, seed): greedy and sampled, short and long prompts
SPECS = [(5, 6, 0.0, None), (23, 4, 0.9, 7), (2, 9, 1.2, 3), (40, 3, 0.0, None), (11, 7, 0.7, 11)]


def requests(seed=0):
    rng = np.random.default_rng(seed)
    return [{"prompt": rng.integers(0, 128, n).tolist(), "n_predict": k, "temperature": t, "top_k": 40, "seed": s}
            for n, k, t, s in SPECS]


def nan_cache(m):
    for t in m.cache.k + m.cache.v:
        _bytes(t)[:] = 0xFF            # F16 NaN in every byte pair


def run(eng, reqs, joins=None):
    """Submit reqs[i] before step joins[i] (default all at once) and step until all end."""
    joins = joins or [0] * len(reqs)
    out, step = [None] * len(reqs), 0
    while step <= max(joins) or eng.busy:
        for i, j in enumerate(joins):
            if j == step:
                out[i] = eng.submit(stop=(), keep_logits=True, logprobs=2, **reqs[i])
        eng.step()
        step += 1
    assert all(r.finish_reason == "length" for r in out), [r.finish_reason for r in out]
    return out


def alone(m, reqs):
    res = []
    for q in reqs:
        eng = BatchEngine(m, n_seq=1)
        res.append(run(eng, [q])[0])
    return res


def assert_same(got, want):
    for g, w in zip(got, want):
        assert g.tokens == w.tokens
        assert len(g.logits) == len(w.logits)
        for a, b in zip(g.logits, w.logits):
            assert np.array_equal(a, b)          # bit for bit (no NaN: NaN != NaN)
        assert g.logprobs == w.logprobs


@pytest.mark.parametrize("kind,outtype", [pytest.param("qwen2", "f16", marks=pytest.mark.slow), ("llama-gqa", "q8_0")])
def test_batched_equals_alone(gguf_dir, kind, outtype):
    m = load(gguf_dir, kind, outtype)
    reqs = requests()
    want = alone(m, reqs)
    for n_seq, n_batch, joins in [(4, 512, None), (4, 512, [0, 0, 1, 3, 2]), (2, 512, [2, 0, 0, 1, 0]),
                                  (3, 8, [0, 1, 0, 5, 2]), (5, 5, None)]:
        eng = BatchEngine(m, n_seq=n_seq, n_batch=n_batch)
        nan_cache(m)
        assert_same(run(eng, reqs, joins), want)
    # the engine's logits are the model's, to the bit, when the model replays the engine's steps
    # for the request alone (the prompt in chunks of its steps' budget, then one id per step, each
    # padded as the engine pads it: the same matmul paths) on the engine's attention path; a
    # short prompt and a long one (with float weights: the tiles' steps and the GEMM's)
    for i in (1, 3):
        replay(m, reqs[i], want[i])


def replay(m, q, want):
    eng = BatchEngine(m, n_seq=1)
    ids, n_prompt = q["prompt"] + want.tokens[:-1], len(q["prompt"])
    long = eng.long_prompt is not None and n_prompt >= eng.long_prompt
    build = m.graph_class

    def one_chunk(*args):
        sg = build(*args)
        for node in sg.graph.nodes:
            if node.op == Op.FLASH_ATTN_EXT:
                flash_attn_ext_set_path(node, "one_chunk")
        return sg

    m.graph_class = one_chunk
    try:
        m.reset()
        cuts = [*range(0, n_prompt, eng.n_batch if long else eng.tile_batch), *range(n_prompt, len(ids) + 1)]
        rows = []
        for a, b in zip(cuts[:-1], cuts[1:]):
            pad = eng.step_tokens(b - a, long and a < n_prompt) - (b - a)
            rows.append(m.eval(ids[a:b] + [1] * pad)[:b - a])
            m.truncate(b)
    finally:
        m.graph_class = build
    # (a long prompt's last row: the engine takes the LM head's rows out through the tiles, m.eval
    # all of the padded chunk's through the GEMM; the ids after it meet the chunk's cells)
    skip = 1 if long else 0
    assert np.array_equal(np.array(want.logits[skip:]), np.concatenate(rows)[n_prompt - 1 + skip:])


def test_prefix_reuse_keeps_the_bits(gguf_dir):
    """A prompt that starts like one in the cache reuses its cells: from a running sequence (the
    cells then shared, seq_cp) and from a slot whose request has ended (cache_prompt)."""
    m = load(gguf_dir, n_ctx=160)
    q = requests(1)
    base = q[1]["prompt"]                                              # 23 ids
    reqs = [q[1], q[0], dict(q[1], prompt=base[:15] + [3, 4, 5], seed=5), q[2],
            dict(q[1], prompt=base + [9, 8], seed=2)]
    want = alone(m, reqs)
    eng = BatchEngine(m, n_seq=4, n_batch=16)
    nan_cache(m)
    got = run(eng, reqs, [0, 0, 3, 1, 12])
    assert_same(got, want)
    assert got[0].done and got[2].n_reused == 15 and got[4].n_reused >= 23
    assert eng.stats["tokens_reused"] == got[2].n_reused + got[4].n_reused


def test_long_prompts_take_the_gemm_steps(gguf_dir):
    """Float weights: prompts of gemm_min_cols() ids or more are read in steps of the GEMM's class,
    the rest in the tiles' (each token's matmul path follows from its own request), and a prompt
    reuses only cells made by steps of its own class: a long prompt not a short prompt's cells,
    nor the cells of generated ids (the tiles' steps); the bits stay each request's own."""
    m = load(gguf_dir, n_ctx=512)
    g = gemm_min_cols()
    rng = np.random.default_rng(5)
    a, b = rng.integers(0, 128, g + 9).tolist(), rng.integers(0, 128, g - 2).tolist()
    first = [{"prompt": a, "n_predict": 5, "temperature": 0.0, "seed": None},
             {"prompt": b, "n_predict": 4, "temperature": 0.8, "seed": 1}]
    eng = BatchEngine(m, n_seq=4, n_batch=64)
    assert eng.long_prompt == g
    nan_cache(m)
    got = run(eng, first)
    assert any(key[0] >= g for key in eng.graphs.shapes) and any(key[0] < g for key in eng.graphs.shapes)
    more = [{"prompt": a + got[0].tokens + [4], "n_predict": 3, "temperature": 0.0, "seed": None},  # not a's answer
            {"prompt": a[:g + 3] + [1, 2], "n_predict": 3, "temperature": 0.0, "seed": None},   # a's prompt cells
            {"prompt": b + [7, 7, 7], "n_predict": 3, "temperature": 0.5, "seed": 2}]           # long: not b's
    got += run(eng, more)
    want = alone(m, first + more)
    assert_same(got, want)
    assert [r.n_reused for r in got[2:]] == [len(a), g + 3, 0]


def test_warmup_builds_the_graph_and_leaves_nothing(gguf_dir):
    """warmup() runs one step and forgets it: the one-token graph stays built, the cache, the slots
    and the stats are empty, and what comes next is what a cold engine gives, to the bit."""
    m = load(gguf_dir, "llama-gqa", "q8_0")
    reqs = requests(2)[:3]
    want = run(BatchEngine(m, n_seq=3), reqs)
    eng = BatchEngine(m, n_seq=3)
    eng.warmup()
    assert eng.n_graph_builds == 1 and not eng.busy
    assert m.cache.n_used == 0 and all(not s.cached for s in eng.slots)
    assert set(eng.stats.values()) == {0}
    nan_cache(m)
    assert_same(run(eng, reqs), want)
    eng.submit(prompt=[1, 2], n_predict=1)
    with pytest.raises(RuntimeError, match="warm it up before"):
        eng.warmup()


def test_defrag_keeps_the_bits(gguf_dir):
    """The cache compacted between steps (holes left by ended requests closed, every sequence's
    cells moved): the bits stay those of each request alone."""
    m = load(gguf_dir, n_ctx=160)
    reqs = requests(2)
    want = alone(m, reqs)
    eng = BatchEngine(m, n_seq=3, n_batch=16)
    nan_cache(m)
    moved = []
    step = eng.step

    def step_and_defrag():
        n = step()
        for slot in eng.slots:
            if slot.req is None:              # an ended request's cells: a hole
                m.cache.seq_rm(slot.seq)
                slot.cached = []
        old = m.cache.defrag()
        moved.append(not np.array_equal(old, np.arange(len(old))))
        return n
    eng.step = step_and_defrag
    assert_same(run(eng, reqs, [0, 2, 0, 4, 9]), want)
    assert sum(moved) >= 2


def test_alloc_defragments_when_a_sequence_has_no_cell_after_its_last(gguf_dir):
    m = load(gguf_dir, n_ctx=32)
    eng = BatchEngine(m, n_seq=2)
    c = eng.cache
    c.alloc(np.arange(4), seqs=0)
    c.alloc(np.arange(26), seqs=1)
    c.seq_rm(0, 0, 3)                     # sequence 0 now holds cell 3, sequence 1 cells 4..29
    cells = eng._alloc(np.array([4, 5, 6, 7]), np.zeros(4, np.int64))     # after cell 3 only 30, 31 are free
    assert list(cells) == [27, 28, 29, 30] and list(c.cell_pos[:2]) == [3, 0]


def test_cancel_frees_the_slot_within_a_step(gguf_dir):
    m = load(gguf_dir)
    eng = BatchEngine(m, n_seq=2)
    a = eng.submit([1, 2, 3], 50, stop=())
    b = eng.submit([4, 5, 6], 50, stop=())
    c = eng.submit([7, 8, 9], 3, stop=())             # waits for a slot
    eng.step()
    eng.step()
    assert eng.n_running == 2 and eng.n_waiting == 1
    a.cancel()
    eng.step()
    assert a.finish_reason == "cancelled" and eng.n_running == 2 and c.slot is not None
    eng.run()
    assert b.finish_reason == "length" and len(b.tokens) == 50 and c.tokens and len(c.tokens) == 3


def test_limits_and_errors(gguf_dir):
    m = load(gguf_dir, n_ctx=64)
    eng = BatchEngine(m, n_seq=4)                      # 15 cells per sequence (63 // 4)
    with pytest.raises(ValueError, match="the prompt has 15 tokens; a sequence holds at most 15"):
        eng.submit(list(range(15)), 4)
    with pytest.raises(ValueError, match=r"token id 128 is out of range \[0, 128\)"):
        eng.submit([1, 128], 4)
    with pytest.raises(ValueError, match="the prompt is empty"):
        eng.submit([], 4)
    with pytest.raises(ValueError, match="n_predict must be >= 0"):
        eng.submit([1], -1)
    with pytest.raises(ValueError, match=r"n_seq must be in \[1, 31\]"):
        BatchEngine(m, n_seq=32)
    r = eng.submit(list(range(10)), 100, stop=())
    z = eng.submit([1], 0)
    eng.run()
    assert r.finish_reason == "length" and len(r.tokens) == 5          # 10 + 5 = the slot's 15 cells
    assert z.finish_reason == "length" and z.tokens == []


def test_generate_batch_and_agenerate(gguf_dir):
    m = load(gguf_dir)
    prompts = [q["prompt"] for q in requests()]
    want = [m.generate(p, 5, stop=()) for p in prompts if not m.reset()]
    assert m.generate_batch(prompts, 5, stop=()) == want

    async def main():
        async def one(p):
            return [t async for t in m.agenerate(p, 5, stop=())]
        return await asyncio.gather(*(one(p) for p in prompts))
    assert asyncio.run(main()) == want


def test_agenerate_cancels_when_left(gguf_dir):
    m = load(gguf_dir)
    th = EngineThread(BatchEngine(m, n_seq=2))

    async def main():
        got = []
        async for t in agenerate(th.engine, [1, 2, 3], 200, stop=()):
            got.append(t)
            if len(got) == 3:
                break
        return got
    try:
        assert len(asyncio.run(main())) == 3
        for _ in range(200):
            if not th.engine.busy:
                break
            time.sleep(0.01)
        assert not th.engine.busy and th.engine.stats["tokens_generated"] < 200
    finally:
        th.close()


def test_engine_thread_closed_at_exit(gguf_dir):
    """An EngineThread left open, mid-request, is closed by atexit before the interpreter tears down
    what its steps use: the process exits 0, the thread stopped and the request cancelled (a
    handler registered before the thread's runs after it, atexit being last in, first out)."""
    path = converted("qwen2", "f16", gguf_dir)
    code = f"""
import atexit, time
from pyggml import models
from pyggml.models.batch import BatchEngine, EngineThread
m = models.load({str(path)!r}, n_ctx=256, n_threads=2)
box = []
atexit.register(lambda: print("after", box[0].thread.is_alive(), box[1].cancelled, flush=True))
th = EngineThread(BatchEngine(m, n_seq=2))
box += [th, th.engine.submit([1, 2, 3], 200, stop=())]
while not box[1].tokens:
    time.sleep(0.01)
"""
    out = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=120,
                         cwd=gguf_dir)      # not the checkout: its pyggml/ would shadow the installed one
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["after", "False", "True"], out.stdout


# DRY, XTC and mirostat 1 and 2 per request, beside a plain one (the random model's greedy text
# repeats, which DRY breaks; the tight thresholds make XTC and mirostat cut)
CHAIN = [{"temperature": 0.0, "dry_multiplier": 3.0, "dry_allowed_length": 1, "dry_sequence_breakers": ()},
         {"temperature": 0.9, "seed": 5, "dry_multiplier": 1.5, "dry_base": 2.0, "dry_penalty_last_n": 32,
          "dry_sequence_breakers": ()},
         {"temperature": 1.0, "seed": 6, "xtc_probability": 0.7, "xtc_threshold": 0.01},
         {"temperature": 0.8, "seed": 7, "mirostat_mode": 1, "mirostat_tau": 2.0},
         {"temperature": 0.8, "seed": 8, "mirostat_mode": 2, "mirostat_tau": 1.5, "mirostat_eta": 0.3},
         {"temperature": 0.9, "seed": 9, "top_k": 40}]


def test_sampler_chain_options_per_sequence(gguf_dir):
    """Each request samples with its own DRY / XTC / mirostat state: batched (joining at other
    steps) it gives the bits it gives alone, its ids are those a fresh Sampler with the same options
    draws from its logits, and those of Model.generate; the options change the ids."""
    from pyggml.models.sampling import Sampler
    m = load(gguf_dir)            # F16: the engine's logits close to Model.generate's (the same ids)
    rng = np.random.default_rng(3)
    reqs = [dict(prompt=rng.integers(0, 128, n).tolist(), n_predict=8, **o)
            for n, o in zip([5, 9, 3, 14, 7, 4], CHAIN)]
    want = alone(m, reqs)
    eng = BatchEngine(m, n_seq=4, n_batch=16)
    nan_cache(m)
    assert_same(run(eng, reqs, [0, 1, 0, 2, 0, 3]), want)
    plain = alone(m, [{k: v for k, v in q.items() if k in ("prompt", "n_predict", "temperature", "seed")}
                      for q in reqs])
    for q, w, p in zip(reqs, want, plain):
        opts = {k: v for k, v in q.items() if k not in ("prompt", "n_predict")}
        s = Sampler(**opts)
        assert [s(x) for x in w.logits] == w.tokens
        m.reset()
        assert m.generate(q["prompt"], 8, stop=(), **opts) == w.tokens
    assert sum(w.tokens != p.tokens for w, p in zip(want[:5], plain)) >= 4
    # Model.generate_batch: per-prompt options
    got = m.generate_batch([q["prompt"] for q in reqs], 8, stop=(),
                           options=[{k: v for k, v in q.items() if k not in ("prompt", "n_predict")} for q in reqs])
    assert got == [w.tokens for w in want]
    with pytest.raises(TypeError, match="sampler= and Sampler options"):
        eng.submit([1, 2], 3, sampler=Sampler(), mirostat_mode=2)
    with pytest.raises(ValueError, match="mirostat_mode must be 0"):
        eng.submit([1, 2], 3, mirostat_mode=3)
