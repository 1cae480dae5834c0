"""compute(profile=True) and pyggml.profile: the records of every step and thread, their summaries,
the timeline SVG, the JSON, and CGraph.to_dot."""
import json
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest
from conftest import THREADS

import pyggml as gg
from pyggml.profile import Profile


def _graph(ctx, rng):
    """A small decode-like graph: a fused add -> rms_norm -> mul, a mat-mul, a swiglu, a
    flash-attention node (path "split" at 2+ threads), a view and a soft_max."""
    x = ctx.from_numpy(rng.standard_normal((8, 64), dtype=np.float32))
    r = ctx.from_numpy(rng.standard_normal((8, 64), dtype=np.float32))
    w = ctx.from_numpy(rng.standard_normal(64, dtype=np.float32))
    wm = ctx.from_numpy(rng.standard_normal((256, 64), dtype=np.float32), type=gg.Type.F16)
    h = gg.mul(gg.rms_norm(gg.add(x, r), 1e-5), w)
    h.name = "h"
    gate_up = gg.mul_mat(wm, h)
    ff = gg.swiglu(gate_up)
    q = gg.reshape_3d(gg.cont(gg.view_2d(ff, 64, 1, ff.nb[1], 0)), 16, 1, 4)
    k = ctx.from_numpy(rng.standard_normal((2, 96, 16), dtype=np.float32), type=gg.Type.F16)
    att = gg.flash_attn_ext(q, k, k, None, 0.25)
    att.name = "attn"
    sm = gg.soft_max_ext(ff, None, 1.0, 0.0)
    g = gg.CGraph()
    g.build_forward_expand(att)
    g.build_forward_expand(sm)
    return g, (att, sm, h)


@pytest.mark.parametrize("nth", THREADS)
def test_profile_records_every_step_on_every_thread(ctx, rng, nth):
    g, (att, *_) = _graph(ctx, rng)
    plan = g.plan(nth)
    p = g.compute(nth, profile=True)
    assert isinstance(p, Profile) and p.n_threads == plan.n_threads
    executed = [n for n in g.nodes if n.op not in (gg.Op.RESHAPE, gg.Op.VIEW)]
    assert sum(len(s["nodes"]) for s in p.steps) == len(executed)
    # the fused group is one step that names its three nodes
    fused = [s for s in p.steps if s["fused"]]
    assert [s["op"] for s in fused] == ["ADD+RMS_NORM+MUL"] and fused[0]["name"] == "h"
    assert any(s["op"] == "SWIGLU" for s in p.steps)
    fa = next(s for s in p.steps if s["name"] == "attn")
    assert fa["path"] == plan.paths[att] and fa["type"] == "F32" and fa["shape"] == [16, 4]
    for s in p.steps:
        assert len(s["start_ns"]) == len(s["work_ns"]) == len(s["wait_ns"]) == p.n_threads
        assert min(s["work_ns"]) >= 0 and min(s["wait_ns"]) >= 0
    for t in range(p.n_threads):
        # on each thread the steps follow each other: a step starts after the previous barrier
        ends = [s["start_ns"][t] + s["work_ns"][t] + s["wait_ns"][t] for s in p.steps]
        starts = [s["start_ns"][t] for s in p.steps]
        assert all(a <= b for a, b in zip(ends, starts[1:]))
        assert ends[-1] <= p.wall_ns
    # the spans of the steps are disjoint, so they add up within the wall; busy + wait likewise
    assert 0 < sum(s["span_ns"] for s in p.steps) <= p.wall_ns
    assert all(0 < b + w <= p.wall_ns for b, w in zip(p.busy_ns(), p.wait_ns()))
    assert 0 < p.efficiency <= 1
    rows = p.by_op()
    assert sum(r["count"] for r in rows) == len(p.steps)
    assert sum(r["total_ns"] for r in rows) == sum(s["span_ns"] for s in p.steps)
    assert rows == sorted(rows, key=lambda r: -r["total_ns"]) and sum(r["share"] for r in rows) <= 1
    assert [s["index"] for s in p.top(3)] == [s["index"] for s in sorted(p.steps, key=lambda s: -s["span_ns"])[:3]]


@pytest.mark.parametrize("nth", THREADS)
def test_profiling_does_not_change_results(ctx, rng, nth):
    g, outs = _graph(ctx, rng)
    assert g.compute(nth) is None
    plain = [o.to_numpy().copy() for o in outs]
    g.compute(nth, profile=True)
    for a, o in zip(plain, outs):
        np.testing.assert_array_equal(a, o.to_numpy())


def test_profile_table_json_and_svg(ctx, rng, tmp_path):
    g, _ = _graph(ctx, rng)
    p = g.compute(2, profile=True)
    text = p.table(top=4)
    for part in ("ADD+RMS_NORM+MUL", "FLASH_ATTN_EXT", "parallel efficiency", "top steps", "busy us"):
        assert part in text
    p.save_json(tmp_path / "p.json")
    d = json.loads((tmp_path / "p.json").read_text())
    assert d["n_threads"] == p.n_threads and len(d["steps"]) == len(p.steps) and d["by_op"] == p.by_op()
    p.save_svg(tmp_path / "p.svg")
    root = ET.parse(tmp_path / "p.svg").getroot()
    ns = {"s": "http://www.w3.org/2000/svg"}
    lanes = root.findall("s:g[@class='lane']", ns)
    assert [int(ln.get("data-thread")) for ln in lanes] == list(range(p.n_threads))
    for ln in lanes:
        # one work box per step, its tooltip naming the step; a wait box only where a wait was recorded
        boxes = ln.findall("s:rect[@class='work']", ns)
        assert len(boxes) == len(p.steps)
        assert boxes[0].find("s:title", ns).text.startswith("#0 ")
        t = int(ln.get("data-thread"))
        assert len(ln.findall("s:rect[@class='wait']", ns)) == sum(s["wait_ns"][t] > 0 for s in p.steps)


def test_to_dot_parses_and_outlines_fused_groups(ctx, rng):
    pydot = pytest.importorskip("pydot")
    g, _ = _graph(ctx, rng)
    dot = g.to_dot()
    (parsed,) = pydot.graph_from_dot_data(dot)
    names = {n.get_name() for n in parsed.get_nodes()} - {"node"}
    clusters = parsed.get_subgraphs()
    names |= {n.get_name() for c in clusters for n in c.get_nodes()}
    assert len(names) == g.n_nodes + len(g.leafs)
    assert len(clusters) == len(g.plan(2).fused) == 1
    assert len(clusters[0].get_nodes()) == 3 and "ADD+RMS_NORM+MUL" in clusters[0].get("label")
    n_edges = sum(s is not None for n in g.nodes for s in n.src)
    assert len(parsed.get_edges()) == n_edges
    assert 'label="FLASH_ATTN_EXT\\nattn\\nF32 [16, 4]"' in dot


def _pyggml_cli(*args, cwd):
    return subprocess.run([sys.executable, "-m", "pyggml", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, check=False, timeout=300)


def _small_llama(path):
    pytest.importorskip("gguf")            # the writer (requirements-dev.txt; the qemu sysroots lack it)
    from pyggml.demo import write_random_llama
    write_random_llama(path, n_layer=2, n_embd=64, n_head=4, n_head_kv=2, n_ff=96, n_vocab=300, type="f16")


def test_profile_decode_is_one_step_of_the_model(tmp_path):
    """profile_decode's profiled rerun of the step leaves the model where one decode step leaves it:
    the next step gives the logits of a model that decoded without profiling."""
    from pyggml import models
    from pyggml.profile import profile_decode
    _small_llama(tmp_path / "m.gguf")
    m, ref = (models.load(tmp_path / "m.gguf", n_ctx=32, n_threads=2) for _ in range(2))
    prompt = [1, 5, 9, 4]
    prof, g = profile_decode(m, prompt)
    assert g is m.last_graph and m.n_past == len(prompt) + 1
    # q, k, v, output, gate, up, down per layer, and the head
    assert sum(s["op"] == "MUL_MAT" for s in prof.steps) == 2 * 7 + 1
    assert any(s["op"] == "FLASH_ATTN_EXT" and s["path"] for s in prof.steps)
    ref.eval([int(np.argmax(ref.eval(prompt, logits="last")[-1]))], logits="last")
    np.testing.assert_array_equal(m.eval([7], logits="last"), ref.eval([7], logits="last"))


@pytest.mark.subprocess
def test_profile_command_on_a_gguf(tmp_path):
    _small_llama(tmp_path / "m.gguf")
    p = _pyggml_cli("profile", tmp_path / "m.gguf", "-t", 2, "--prompt", 4, "--out", tmp_path / "out", "--dot",
                    cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert "one decode step after 4 prompt tokens" in p.stdout and "parallel efficiency" in p.stdout
    assert "MUL_MAT" in p.stdout and "top steps" in p.stdout
    d = json.loads((tmp_path / "out" / "profile.json").read_text())
    assert d["steps"] and sum(r["count"] for r in d["by_op"]) == len(d["steps"])
    ET.parse(tmp_path / "out" / "profile.svg")
    assert (tmp_path / "out" / "graph.dot").read_text().startswith("digraph pyggml {")


@pytest.mark.subprocess
def test_profile_command_on_the_demo_model(tmp_path):
    p = _pyggml_cli("profile", "--layers", 1, "--prompt", 2, "-t", 1, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("demo model: one decode step") and "FLASH_ATTN_EXT" in p.stdout
    assert (tmp_path / "profile.svg").exists() and (tmp_path / "profile.json").exists()


def test_core_imports_run_one_way():
    """The executor's module imports nothing from above it: pyggml.profile installs what
    compute(profile=True) returns (and _graph never names the model layer either)."""
    src = (Path(__file__).resolve().parents[2] / "pyggml" / "_graph.pyx").read_text()
    imported = set(re.findall(r"^\s*(?:from|import|cimport)\s+(pyggml[\w.]*)", src, re.MULTILINE))
    assert imported <= {"pyggml._openmp", "pyggml._tensor", "pyggml._typedefs", "pyggml._enums", "pyggml._tables",
                        "pyggml._threads"}, imported
