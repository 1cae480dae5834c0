"""pyggml.distributed: the layer split by weight bytes (numpy only), then pipelines of 2 and 3 Ray
actors on a local cluster started here, against the single-process model on the same GGUF (a small
random llama from pyggml.demo): the same logits bit for bit for a prefill and decode steps, the
same generated ids, a stage killed mid-generation raising StageError that names it (no hang), and
reset() bringing it back. The Ray tests skip where Ray is not installed."""
import itertools
import os
import signal
import sys
import time

import numpy as np
import pytest

import pyggml as gg
from pyggml import distributed as dist
from pyggml import models
from pyggml.demo import write_random_llama

# 4 layers so that 3 stages split them unevenly; vocabulary of 300 (the demo writer's minimum is 259)
TINY = {"n_layer": 4, "n_embd": 64, "n_head": 4, "n_head_kv": 2, "n_ff": 128, "n_vocab": 300}
N_CTX = 64
PROMPT, DECODE = [1, 17, 42, 99, 7, 250, 3], [11, 120, 5, 299, 64]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    pytest.importorskip("gguf")            # the writer (requirements-dev.txt; the qemu sysroots lack it)
    path = str(tmp_path_factory.mktemp("distributed") / "tiny.gguf")
    write_random_llama(path, **TINY, type="f32", seed=3)
    return path


@pytest.fixture(scope="module")
def single(tiny):
    return models.load(tiny, n_ctx=N_CTX, n_threads=1, kv_type=gg.Type.F32)


# ---- the split (no Ray) ----

def largest_stage(per_layer, head, cuts):
    """Bytes of the largest stage when layers are cut before each index in cuts."""
    b = [0, *cuts, len(per_layer)]
    return max(sum(per_layer[b[i]:b[i + 1]]) + (head if i == len(b) - 2 else 0) for i in range(len(b) - 1))


def test_split_layers_minimises_the_largest_stage():
    rng = np.random.default_rng(0)
    for n, stages in [(1, 1), (4, 2), (5, 3), (7, 4), (8, 8)]:
        per_layer = rng.integers(1, 100, n).tolist()
        head = int(rng.integers(0, 150))
        got = dist.split_layers(per_layer, stages, head)
        assert got[0][0] == 0 and got[-1][1] == n and all(a[1] == b[0] for a, b in zip(got, got[1:]))
        assert all(r[1] > r[0] for r in got) and len(got) == stages
        best = min(largest_stage(per_layer, head, c) for c in itertools.combinations(range(1, n), stages - 1))
        assert largest_stage(per_layer, head, [r[0] for r in got[1:]]) == best
    # 8 equal layers, a head of 1.5 layers: the last stage takes 2 layers
    assert dist.split_layers([10] * 8, 3, 15) == [(0, 3), (3, 6), (6, 8)]
    with pytest.raises(ValueError, match=r"stages must be in \[1, n_layer = 4\], got 5"):
        dist.split_layers([1] * 4, 5)


def test_plan_counts_what_each_stage_model_reads(tiny):
    stages = dist.plan(tiny, 3)
    assert [s["layers"] for s in stages] == [(0, 1), (1, 3), (3, 4)]
    for s in stages:
        assert s["weight_bytes"] == models.load(tiny, n_ctx=8, layers=s["layers"]).weight_bytes
    assert sum(s["weight_bytes"] for s in stages) == models.load(tiny, n_ctx=8).weight_bytes


def test_load_without_ray_names_the_package(tiny, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(ImportError, match=r"needs Ray: pip install ray"):
        dist.load(tiny, stages=2)


def test_load_checks_its_arguments_before_starting_anything(tiny):
    with pytest.raises(ValueError, match="stages must be >= 1, got 0"):
        dist.load(tiny, stages=0)
    with pytest.raises(TypeError, match=r"unknown options \['layers'\]"):
        dist.load(tiny, stages=2, layers=(0, 1))


# ---- pipelines on a local Ray cluster ----

@pytest.fixture(scope="module")
def ray_local(tmp_path_factory):
    ray = pytest.importorskip("ray")
    # Ray puts the driver's working directory first on its workers' sys.path; from the repository
    # root that is the source folder, which has no compiled modules: start the cluster elsewhere.
    # Its workers run at niceness 15 by default, slow on a machine shared with other jobs: 0.
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(tmp_path_factory.mktemp("ray"))
        mp.setenv("RAY_worker_niceness", "0")
        ray.init(num_cpus=6, include_dashboard=False, logging_level="ERROR")
    yield ray
    ray.shutdown()


@pytest.fixture(scope="module")
def pipe3(ray_local, tiny):
    with dist.load(tiny, stages=3, n_ctx=N_CTX, n_threads=1, kv_type=gg.Type.F32, timeout=60,
                   start_timeout=120) as p:
        yield p


def run_steps(m):
    m.reset()
    out = [m.eval(PROMPT)] + [m.eval([t]) for t in DECODE] + [m.eval([8, 9], logits="last")]
    return out


@pytest.mark.subprocess
@pytest.mark.parametrize("stages", [2, 3])
def test_logits_equal_the_single_process_model(request, ray_local, tiny, single, tmp_path, stages):
    """3 stages: F32 weights and cache, flash attention; 2 stages: F16 weights and cache, mul_mat +
    soft_max attention over a transposed V."""
    if stages == 3:
        p = request.getfixturevalue("pipe3")
    else:
        tiny = str(tmp_path / "tiny-f16.gguf")
        write_random_llama(tiny, **TINY, type="f16", seed=4)
        single = models.load(tiny, n_ctx=N_CTX, n_threads=1, flash_attn=False)
        p = dist.load(tiny, stages=2, n_ctx=N_CTX, n_threads=1, flash_attn=False, timeout=60, start_timeout=120)
    assert [s["layers"] for s in p.stages] == [s["layers"] for s in dist.plan(tiny, stages)]
    assert len({s["pid"] for s in p.stages}) == stages
    assert (p.arch, p.n_vocab, p.n_ctx, p.hparams.n_layer) == ("llama", 300, N_CTX, 4)
    p.stage_timings()
    for got, ref in zip(run_steps(p), run_steps(single)):
        assert got.shape == ref.shape and got.dtype == np.float32
        assert np.array_equal(got, ref)
    # every stage ran each step and built 3 graphs (7 tokens, 1 token reused for every decode, 2 tokens)
    stats = p.stage_timings()
    assert [s["calls"] for s in stats] == [len(DECODE) + 2] * stages
    assert [s["graph_builds"] for s in stats] == [3] * stages
    if stages == 2:
        p.close()
        with pytest.raises(RuntimeError, match="closed"):
            p.eval([1])


@pytest.mark.subprocess
def test_generate_gives_the_same_ids(pipe3, single):
    for kw in ({}, {"temperature": 0.9, "top_k": 40, "top_p": 0.95, "seed": 5}):
        single.reset()
        pipe3.reset()
        ref = single.generate(PROMPT, 12, stop=(), **kw)
        assert pipe3.generate(PROMPT, 12, stop=(), **kw) == ref
        assert pipe3.timings["decode_tokens"] == 11
    # the context goes on: a second generation appends, as the single-process model's
    assert pipe3.generate([5], 4, stop=()) == single.generate([5], 4, stop=())


@pytest.mark.subprocess
def test_a_stage_that_cannot_start_is_named(ray_local, tmp_path, tiny):
    with pytest.raises(dist.StageError, match=r"stage 0 \(layers not yet assigned\) did not start: .*missing.gguf"):
        dist.load(str(tmp_path / "missing.gguf"), stages=2, start_timeout=120)
    with pytest.raises(ValueError, match=r"split must be 2 contiguous non-empty ranges covering \[0, 4\)"):
        dist.load(tiny, stages=2, split=[(0, 2), (3, 4)], start_timeout=120)


@pytest.mark.subprocess
def test_bad_input_raises_and_the_pipeline_goes_on(pipe3, single):
    pipe3.reset()
    with pytest.raises(ValueError, match=r"token id 300 is out of range \[0, 300\)"):
        pipe3.eval([1, 300])
    with pytest.raises(ValueError, match="do not fit in the context"):
        pipe3.eval(list(range(N_CTX + 1)))
    with pytest.raises(ValueError, match="logits must be 'all' or 'last'"):
        pipe3.eval([1], logits="first")
    single.reset()
    assert np.array_equal(pipe3.eval(PROMPT), single.eval(PROMPT))     # nothing was appended before


@pytest.mark.subprocess
def test_a_stage_killed_mid_generation_raises_and_reset_recovers(pipe3, single):
    pipe3.reset()
    victim = dict(pipe3.stages[1])
    ids = pipe3.stream(PROMPT, 20, stop=())
    assert [next(ids) for _ in range(3)]
    os.kill(victim["pid"], signal.SIGKILL)          # as the kernel's OOM killer would
    t0 = time.perf_counter()
    with pytest.raises(dist.StageError, match=r"stage 1 \(layers \[1, 3\)\) failed: .*died") as e:
        list(ids)
    assert time.perf_counter() - t0 < 30
    assert (e.value.stage, e.value.layers) == (1, victim["layers"])
    with pytest.raises(dist.StageError, match=r"stage 1 \(layers \[1, 3\)\) failed earlier .*call reset\(\)"):
        pipe3.eval([1])
    pipe3.reset()                                   # a new actor for stage 1
    assert pipe3.stages[1]["pid"] != victim["pid"] and pipe3.stages[1]["layers"] == (1, 3)
    for got, ref in zip(run_steps(pipe3), run_steps(single)):
        assert np.array_equal(got, ref)
    # a stage that hangs (its process stopped, as on a stalled node) is named after the timeout
    timeout, pipe3.timeout = pipe3.timeout, 2.0
    os.kill(pipe3.stages[0]["pid"], signal.SIGSTOP)
    try:
        with pytest.raises(dist.StageError, match=r"stage 0 \(layers \[0, 1\)\) gave no answer within 2.0 s"):
            pipe3.eval(PROMPT)
    finally:
        pipe3.timeout = timeout
        os.kill(pipe3.stages[0]["pid"], signal.SIGCONT)
    pipe3.reset()
    single.reset()
    assert np.array_equal(pipe3.eval(PROMPT), single.eval(PROMPT))


# ---- BatchEngine over the pipeline (pyggml.serve.pipeline.PipelineEngine) ----

ENGINE_REQUESTS = [
    {"prompt": PROMPT, "n_predict": 6},
    {"prompt": [3, 4, 5], "n_predict": 8, "temperature": 0.9, "seed": 1},
    {"prompt": list(range(40, 52)), "n_predict": 5, "temperature": 0.7, "top_k": 20, "seed": 2},
    {"prompt": PROMPT + [5, 6], "n_predict": 6},                     # PROMPT's cells reused
    {"prompt": [200, 201], "n_predict": 12, "temperature": 1.1, "seed": 3},
    {"prompt": list(range(60, 69)), "n_predict": 7},
    {"prompt": [3, 4, 5, 6], "n_predict": 6, "temperature": 0.9, "seed": 4},
]


def engine_run(eng, reqs, defrag_every=3):
    """Submit reqs together and step until done, defragmenting the cache every few steps (as a step
    does when a sequence's cells run out); the Requests and the number of defrags that moved cells."""
    out = [eng.submit(keep_logits=True, stop=(), **r) for r in reqs]
    moved = 0
    while eng.busy:
        eng.step()
        if eng.stats["steps"] % defrag_every == 0:
            before = eng.cache.cell_pos.copy()
            eng._defrag()
            moved += not np.array_equal(before, eng.cache.cell_pos)
    return out, moved


@pytest.mark.subprocess
def test_pipeline_engine_batches_as_the_single_process_engine(pipe3, single, tiny):
    """Three sequences at a time through 3 stages: prefix reuse, lookup drafts, sampling and
    defrags planned here and mirrored by the stages give each request the tokens and logits (bit
    for bit) of the single-process BatchEngine."""
    from pyggml.models.batch import BatchEngine
    from pyggml.serve.pipeline import PipelineEngine, PipelineModel

    # a prompt that repeats its start after the model's own continuation of it: lookup drafts that continuation
    cont = engine_run(BatchEngine(single, n_seq=1), [{"prompt": [9, 8, 7], "n_predict": 6}])[0][0].tokens
    reqs = ENGINE_REQUESTS + [{"prompt": [9, 8, 7, *cont, 9, 8, 7], "n_predict": 8, "lookup": True}]
    eng = PipelineEngine(PipelineModel(pipe3, tiny), n_seq=3)
    got, n_defrag = engine_run(eng, reqs)
    want, n_defrag_local = engine_run(BatchEngine(single, n_seq=3), reqs)
    assert n_defrag == n_defrag_local > 0
    assert eng.stats["tokens_reused"] >= len(PROMPT) and eng.stats["drafts_accepted"] > 0
    for g, w in zip(got, want):
        assert g.finish_reason == w.finish_reason == "length" and g.tokens == w.tokens
        assert all(np.array_equal(a, b) for a, b in zip(g.logits, w.logits))
    # a stage killed mid-step: the running requests end with an error, the next ones run on restarted stages
    victim = pipe3.stages[1]["pid"]
    reqs = [eng.submit(r["prompt"], 30, stop=()) for r in ENGINE_REQUESTS[:2]]
    for _ in range(3):
        eng.step()
    os.kill(victim, signal.SIGKILL)
    eng.run()
    assert [r.finish_reason for r in reqs] == ["error", "error"]
    assert isinstance(reqs[0].error, (dist.StageError, RuntimeError))
    assert pipe3.stages[1]["pid"] != victim
    again, _ = engine_run(eng, ENGINE_REQUESTS[:3])
    assert [r.tokens for r in again] == [w.tokens for w in want[:3]]
