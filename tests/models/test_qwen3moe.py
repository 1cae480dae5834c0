"""qwen3moe (pyggml/models/qwen3moe.py) and pyggml convert for Qwen3MoeForCausalLM, against small random
transformers Qwen3-MoE models (tests/hf_models.py KINDS_MOE: 8 experts, 2 per token, with and without
norm_topk_prob): logits over prefill + decode and other batch splits, the experts each token picks,
one expert per token, a fused-experts checkpoint, hostile hyper-parameters, and that a decode step
reads no byte of the experts it did not pick. Marked llama_cpp: the converter's file byte for byte
llama.cpp's (F32, F16, Q8_0) and pyggml's logits on that file against llama.cpp's."""
import dataclasses
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("gguf")

from conftest import EMULATED
from hf_models import (
    KINDS_MOE,
    assert_same_gguf,
    bpe_tokenizer,
    converted,
    hf_logits,
    hf_model,
    llama_cpp_quantize,
    random_ids,
    rel_err,
)

import pyggml as gg
from pyggml import gguf, models
from pyggml.convert import convert_hf
from pyggml.gguf import GGUFError

N_PREFILL, N_DECODE = 7, 8
N_LAYER, N_EXPERT, N_USED = 2, 8, 2


@pytest.fixture(scope="module")
def gguf_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("qwen3moe")


def run_chunks(m, ids, chunks):
    out, i = [], 0
    for n in chunks:
        out.append(m.eval(ids[i:i + n]))
        i += n
    assert i == len(ids)
    return np.concatenate(out)


# ---- against transformers ----

@pytest.mark.parametrize("flash_attn", [True, False])
@pytest.mark.parametrize("kind", list(KINDS_MOE))
def test_logits_match_hf(gguf_dir, kind, flash_attn):
    ids = random_ids(N_PREFILL + N_DECODE)
    ref = hf_logits(kind, ids)
    m = models.load(converted(kind, "f32", gguf_dir), n_ctx=64, n_threads=2, kv_type=gg.Type.F32,
                    flash_attn=flash_attn)
    assert m.arch == "qwen3moe"
    hp = m.hparams
    assert (hp.n_expert, hp.n_expert_used, hp.n_ff_exp) == (N_EXPERT, N_USED, 64)
    assert hp.expert_weights_norm is KINDS_MOE[kind][1]["norm_topk_prob"]
    got = run_chunks(m, ids, [N_PREFILL] + [1] * N_DECODE)
    assert rel_err(got, ref) < 1e-5


@pytest.mark.parametrize("chunks", [(15,), (1,) * 15, (4, 1, 6, 1, 3), (2, 13)])
def test_batch_sizes(gguf_dir, chunks):
    """Any split of the sequence into steps gives HF's logits: the experts are grouped per step
    however many tokens pick each."""
    ids = random_ids(N_PREFILL + N_DECODE)
    ref = hf_logits("qwen3moe", ids)
    m = models.load(converted("qwen3moe", "f32", gguf_dir), n_ctx=64, n_threads=2, kv_type=gg.Type.F32)
    assert rel_err(run_chunks(m, ids, chunks), ref) < 1e-5


def test_logits_last_row_only(gguf_dir):
    """logits="last": the last layer's MoE runs on the one row that reaches the head."""
    ids = random_ids(N_PREFILL + N_DECODE)
    ref = hf_logits("qwen3moe", ids)
    m = models.load(converted("qwen3moe", "f32", gguf_dir), n_ctx=64, kv_type=gg.Type.F32)
    last = m.eval(ids, logits="last")
    assert last.shape == (1, 128) and rel_err(last, ref[-1:]) < 1e-5


def hf_routing(model, ids):
    """HF's logits and, per layer, each token's chosen experts and the softmax margin between the
    last chosen expert and the next one."""
    picked, margin = {}, {}

    def hook(mod, args, out, il):
        p = torch.softmax(out[0].double(), -1).sort(-1, descending=True).values
        picked[il], margin[il] = out[2].numpy(), (p[:, mod.top_k - 1] - p[:, mod.top_k]).numpy()

    for il, layer in enumerate(model.model.layers):
        layer.mlp.gate.register_forward_hook(lambda mod, args, out, il=il: hook(mod, args, out, il))
    return hf_logits(model, ids), picked, margin


@pytest.mark.parametrize("outtype, bound", [("f16", 1e-2), ("q8_0", 5e-2)] if not EMULATED else [("q8_0", 5e-2)])
def test_quantized_weights(gguf_dir, outtype, bound):
    """F16 and Q8_0 experts (3-D tensors through mul_mat_id), F16 cache. Rounding may flip a token's
    choice where two experts' probabilities nearly tie (with Q8_0 here: a margin of 2e-4 in HF's
    softmax), and that token's logits and the later ones (through attention) then leave HF's: the
    first choice that differs from HF's is at such a near-tie, and the logits before it are within
    the bound of the type."""
    ids = random_ids(N_PREFILL + N_DECODE)
    ref, picked, margin = hf_routing(hf_model("qwen3moe"), ids)
    keep = [f"ffn_moe_topk-{il}" for il in range(N_LAYER)]
    m = models.load(converted("qwen3moe", outtype, gguf_dir), n_ctx=64, n_threads=2, keep=keep)
    want = gg.Type.F16 if outtype == "f16" else gg.Type.Q8_0
    assert m.weight("blk.0.ffn_down_exps.weight").type == want
    assert m.weight("blk.0.ffn_gate_inp.weight").type == gg.Type.F32       # routers stay F32, as llama.cpp
    got = m.eval(ids)
    differ = np.array([(m.last_graph.get_tensor(k).numpy() != picked[il]).any(-1) for il, k in enumerate(keep)])
    n = int(np.argmax(differ.any(0))) if differ.any() else len(ids)          # the first token that flips
    if n < len(ids):
        il = int(np.argmax(differ[:, n]))                                      # its first layer that flips
        assert margin[il][n] < 1e-3, (n, il, margin[il][n])
    assert n >= N_PREFILL and rel_err(got[:n], ref[:n]) < bound


def test_experts_picked_as_hf(gguf_dir):
    """Each token's experts (ffn_moe_topk, best first) are those HF's router picks, the batch's
    tokens pick different ones, and the renormalised weights of each token sum to 1."""
    ids = random_ids(N_PREFILL + N_DECODE)
    _, picked, _ = hf_routing(hf_model("qwen3moe"), ids)
    keep = [f"ffn_moe_topk-{il}" for il in range(N_LAYER)] + ["ffn_moe_weights_norm-0"]
    m = models.load(converted("qwen3moe", "f32", gguf_dir), n_ctx=64, kv_type=gg.Type.F32, keep=keep)
    m.eval(ids)
    for il in range(N_LAYER):
        got = m.last_graph.get_tensor(f"ffn_moe_topk-{il}").numpy()
        np.testing.assert_array_equal(got, picked[il])
        assert len(np.unique(got)) >= 6 and len({tuple(sorted(r)) for r in got}) >= 5
    w = m.last_graph.get_tensor("ffn_moe_weights_norm-0").numpy()
    np.testing.assert_allclose(w.sum(-1), 1.0, rtol=1e-6)


def test_router_ties(tmp_path):
    """Experts 2 and 5 of layer 0 made identical (router rows and weights): their probabilities tie
    exactly, the lower index wins (argsort_top_k, as ggml's CPU sort of short rows) both when the
    two are chosen and when only one fits, and the logits are HF's whichever of the two it picks."""
    model = hf_model("qwen3moe")
    mlp = model.model.layers[0].mlp
    with torch.no_grad():
        for p in (mlp.gate.weight, mlp.experts.gate_up_proj, mlp.experts.down_proj):
            p[5] = p[2]
    convert_hf(model, tmp_path / "m.gguf", outtype="f32")
    m = models.load(tmp_path / "m.gguf", n_ctx=64, kv_type=gg.Type.F32, keep=["ffn_moe_topk-0", "ffn_moe_probs-0"])
    ids = random_ids(40, seed=4)
    got = m.eval(ids)
    probs, chosen = m.last_graph.get_tensor("ffn_moe_probs-0").numpy(), m.last_graph.get_tensor("ffn_moe_topk-0").numpy()
    np.testing.assert_array_equal(probs[:, 2], probs[:, 5])
    rows = chosen.tolist()
    assert [2, 5] in rows and any(2 in r and 5 not in r for r in rows)      # both chosen; only one fits
    assert all(5 not in r or r.index(2) == r.index(5) - 1 for r in rows), rows
    assert rel_err(got, hf_logits(model, ids)) < 1e-5


def test_renormalisation_follows_the_file(gguf_dir):
    """norm_topk_prob false converts to expert_weights_norm = false (llama.cpp would renormalise):
    run with the renormalisation the logits leave HF's, so the flag is what makes them match."""
    with gguf.load(converted("qwen3moe-nonorm", "f32", gguf_dir)) as f:
        assert f.metadata["qwen3moe.expert_weights_norm"] is False
        hp = models.read_hparams(f)
        ids = random_ids(N_PREFILL + N_DECODE)
        ref = hf_logits("qwen3moe-nonorm", ids)
        m = models.Model(f.arch, dataclasses.replace(hp, expert_weights_norm=True), f.tensors, n_ctx=64,
                         kv_type=gg.Type.F32)
        assert rel_err(m.eval(ids), ref) > 1e-2
    with gguf.load(converted("qwen3moe", "f32", gguf_dir)) as f:
        assert "qwen3moe.expert_weights_norm" not in f.metadata      # as llama.cpp writes it


@pytest.mark.parametrize("k", [1, N_EXPERT])
def test_one_or_every_expert_per_token(tmp_path, k):
    """k = 1: the sum of the chosen experts is a copy of one (cont); k = n_expert: every expert."""
    model = hf_model("qwen3moe", num_experts_per_tok=k)
    convert_hf(model, tmp_path / "m.gguf", outtype="f32")
    m = models.load(tmp_path / "m.gguf", n_ctx=64, kv_type=gg.Type.F32)
    assert m.hparams.n_expert_used == k
    ids = random_ids(N_PREFILL + N_DECODE)
    assert rel_err(run_chunks(m, ids, [N_PREFILL] + [1] * N_DECODE), hf_logits(model, ids)) < 1e-5


def test_fused_experts_checkpoint(tmp_path):
    """A checkpoint with each layer's experts fused (mlp.experts.gate_up_proj [n_expert, 2 n_ff,
    n_embd], mlp.experts.down_proj) converts to the same file as the per-expert one."""
    from safetensors.numpy import load_file, save_file
    hf_model("qwen3moe").save_pretrained(tmp_path / "split")
    fused = tmp_path / "fused" / "split"              # the same folder name: the same general.name
    hf_model("qwen3moe").save_pretrained(fused)
    t = load_file(fused / "model.safetensors")
    for il in range(N_LAYER):
        p = f"model.layers.{il}.mlp.experts."
        stack = {w: np.stack([t.pop(f"{p}{e}.{w}.weight") for e in range(N_EXPERT)]) for w in ("gate_proj", "up_proj",
                                                                                                 "down_proj")}
        t[p + "gate_up_proj"] = np.concatenate([stack["gate_proj"], stack["up_proj"]], axis=1)
        t[p + "down_proj"] = stack["down_proj"]
    save_file(t, fused / "model.safetensors", metadata={"format": "pt"})
    a, b = gguf.load(convert_hf(tmp_path / "split", tmp_path / "a.gguf", "f32")), \
        gguf.load(convert_hf(fused, tmp_path / "b.gguf", "f32"))
    assert list(a.tensors) == list(b.tensors) and a.metadata == b.metadata
    for name, ta in a.tensors.items():
        assert ta.ne == b.tensors[name].ne and ta.tobytes() == b.tensors[name].tobytes(), name


# ---- hostile files ----

@pytest.mark.parametrize("edits, match", [
    ({"expert_used_count": 9}, r"expert_used_count: expected an integer in \[1, 8\], got 9"),
    ({"expert_used_count": 0}, r"expert_used_count: expected an integer in \[1, 8\], got 0"),
    ({"expert_used_count": [2, 2]}, r"expert_used_count: expected an integer in \[1, 8\], got \[2, 2\]"),
    ({"expert_count": 0}, r"expert_count: expected an integer in \[1, 1024\], got 0"),
    ({"expert_count": 4096}, r"expert_count: expected an integer in \[1, 1024\], got 4096"),
    ({"expert_count": None}, r"no 'qwen3moe.expert_count'"),
    ({"expert_count": 4}, r"'blk.0.ffn_gate_inp.weight' has ne=\(64, 8\) but the metadata gives \[n_embd=64, n_expert=4\]"),
    ({"expert_feed_forward_length": None},                 # n_ff / n_used = 80 / 2
     r"'blk.0.ffn_gate_exps.weight' has ne=\(64, 64, 8\) but the metadata gives \[n_embd=64, n_ff_exp=40, n_expert=8\]"),
    ({"expert_feed_forward_length": None, "feed_forward_length": 1},
     r"feed_forward_length: expected at least expert_used_count = 2 .*, got 1"),
    ({"expert_feed_forward_length": -1}, r"expert_feed_forward_length: expected an integer in \[1, "),
    ({"expert_weights_norm": 1}, r"expert_weights_norm: expected a bool, got 1"),
])
def test_hostile_hparams(gguf_dir, tmp_path, edits, match):
    with gguf.load(converted("qwen3moe", "f32", gguf_dir)) as f:
        md, tensors = dict(f.metadata), dict(f.tensors)
        for key, value in edits.items():
            if value is None:
                del md[f"qwen3moe.{key}"]
            else:
                md[f"qwen3moe.{key}"] = value
        gguf.save(tmp_path / "bad.gguf", tensors, md)
    with pytest.raises(GGUFError, match=match):
        models.load(tmp_path / "bad.gguf")


# ---- bytes read ----

READ_ONLY_CHOSEN = textwrap.dedent("""
    import ctypes, mmap, sys
    import numpy as np
    import pyggml as gg
    from pyggml import models
    path, protect = sys.argv[1], sys.argv[2]
    ids = [5, 17, 99, 3, 42, 77]
    keep = [f"ffn_moe_topk-{il}" for il in range(2)]
    twin = models.load(path, n_ctx=16, kv_type=gg.Type.F32, n_threads=2, keep=keep)
    twin.eval(ids[:5])
    want = twin.eval(ids[5:])
    chosen = [set(twin.last_graph.get_tensor(k).numpy().ravel().tolist()) for k in keep]
    m = models.load(path, n_ctx=16, kv_type=gg.Type.F32, n_threads=2)
    m.eval(ids[:5])                                        # the prefill reads every expert it picks
    libc = ctypes.CDLL(None)
    libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    page, guarded, picked, total = mmap.PAGESIZE, 0, 0, 0
    for il in range(2):
        for kind in ("gate", "up", "down"):
            w = m.weight(f"blk.{il}.ffn_{kind}_exps.weight")
            per = w.nb[2]
            total += w.nbytes
            for e in range(w.ne[2]):
                picked += per * (e in chosen[il])
                if (e in chosen[il]) != (protect == "chosen"):
                    continue
                lo = -(-(w.data_ptr + e * per) // page) * page
                hi = (w.data_ptr + (e + 1) * per) // page * page
                if hi > lo:
                    assert libc.mprotect(lo, hi - lo, 0) == 0        # PROT_NONE: a read faults
                    guarded += hi - lo
    got = m.eval(ids[5:])
    print(guarded, picked, total, float(np.abs(got - want).max()))
""")


@pytest.mark.subprocess
def test_decode_reads_only_the_chosen_experts(gguf_dir, tmp_path):
    """The pages of every expert a decode step did not pick are made unreadable (mprotect PROT_NONE)
    before the step: it runs and gives the same logits, so mul_mat_id read none of their bytes; the
    same with the chosen experts' pages faults (the guard works). Reported: the expert bytes the
    step needed (2 of 8 experts per layer) against all experts' bytes."""
    path = converted("qwen3moe", "f32", gguf_dir)
    script = tmp_path / "child.py"
    script.write_text(READ_ONLY_CHOSEN)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    r = subprocess.run([sys.executable, str(script), str(path), "others"], capture_output=True, text=True, env=env,
                       timeout=300, check=False)
    assert r.returncode == 0, r.stderr[-2000:]
    guarded, picked, total, diff = (float(x) for x in r.stdout.split())
    assert diff == 0.0
    # each unchosen expert's 16 KiB, but its partial first and last pages (F32 data is 32-byte aligned)
    assert picked == total * N_USED / N_EXPERT and guarded >= 0.7 * (total - picked)
    print(f"decode step: {picked:.0f} of {total:.0f} expert bytes needed; {guarded:.0f} bytes of the others unreadable")
    if "libasan" in os.environ.get("LD_PRELOAD", ""):
        return              # the control faults on purpose, which AddressSanitizer reports (its CI stage fails on a report)
    r = subprocess.run([sys.executable, str(script), str(path), "chosen"], capture_output=True, text=True, env=env,
                       timeout=300, check=False)
    assert r.returncode == -11, (r.returncode, r.stderr[-2000:])            # SIGSEGV


def test_step_read_bytes(gguf_dir):
    """a decode step's weight bytes: every weight but the experts', plus each layer's chosen experts'
    matrices (a slice of nb[2] bytes per expert and tensor), each distinct expert once"""
    path = converted("qwen3moe", "f32", gguf_dir)
    keep = [f"ffn_moe_topk-{il}" for il in range(N_LAYER)]
    m = models.load(path, n_ctx=16, kv_type=gg.Type.F32, n_threads=2, keep=keep)
    ids = random_ids(N_PREFILL + N_DECODE)
    m.eval(ids[:5])
    m.eval(ids[5:6])
    got = m.step_read_bytes()
    exps = {il: [m.weight(f"blk.{il}.ffn_{k}_exps.weight") for k in ("gate", "up", "down")] for il in range(N_LAYER)}
    chosen = {il: set(m.last_graph.get_tensor(k).numpy().ravel().tolist()) for il, k in enumerate(keep)}
    assert all(len(c) == N_USED for c in chosen.values())
    want = sum(w.nb[2] * len(chosen[il]) for il in exps for w in exps[il])
    dense = m.weight_bytes - sum(w.nbytes for ws in exps.values() for w in ws)
    assert got == {"dense": dense, "experts": want, "total": dense + want}
    assert m.expert_read_bytes({})["total"] == dense
    plain = models.load(path, n_ctx=16, kv_type=gg.Type.F32, n_threads=2)
    plain.eval(ids[:2])
    with pytest.raises(ValueError, match="step_read_bytes: the model does not keep ffn_moe_topk-0"):
        plain.step_read_bytes()


# ---- against llama.cpp ----

N_VOCAB = 320


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """A saved HF folder: the qwen3moe model and a byte-level BPE tokenizer."""
    d = tmp_path_factory.mktemp("hf") / "qwen3moe"
    hf_model("qwen3moe", vocab_size=N_VOCAB).save_pretrained(d)
    bpe_tokenizer(d, vocab_size=N_VOCAB)
    return d


def llama_cpp_convert(src, folder, out, outtype):
    """llama.cpp's converter, told that the test tokenizer's pre-tokenizer is qwen2 (its table of
    tokenizer hashes knows only released tokenizers; pyggml writes qwen2 for qwen3moe)."""
    code = ("import runpy, sys; sys.path.insert(0, sys.argv[1]); from conversion import base; "
            "base.TextModel.get_vocab_base_pre = lambda self, tokenizer: 'qwen2'; "
            "script = sys.argv[1] + '/convert_hf_to_gguf.py'; sys.argv = [script] + sys.argv[2:]; "
            "runpy.run_path(script, run_name='__main__')")
    env = dict(os.environ, PYTHONPATH=str(src / "gguf-py"))
    r = subprocess.run([sys.executable, "-c", code, str(src), str(folder), "--outfile", str(out), "--outtype", outtype],
                       env=env, capture_output=True, text=True, check=False)
    assert r.returncode == 0, r.stderr[-3000:]
    return out


@pytest.mark.slow
@pytest.mark.llama_cpp
@pytest.mark.parametrize("outtype", ["f32", "f16", "q8_0"])
def test_same_file_as_llama_cpp(llama_cpp_src, folder, tmp_path, outtype):
    ref = gguf.load(llama_cpp_convert(llama_cpp_src, folder, tmp_path / "ref.gguf", outtype))
    got = gguf.load(convert_hf(folder, tmp_path / "got.gguf", outtype=outtype))
    assert_same_gguf(got, ref)
    assert ref.tensors["blk.0.ffn_down_exps.weight"].ne == (64, 64, N_EXPERT, 1)


@pytest.mark.slow
@pytest.mark.llama_cpp
@pytest.mark.parametrize("outtype, bound", [("f32", 1e-5), ("q8_0", 1e-6), ("q4_k_m", 1e-6)])
def test_logits_match_llama_cpp(llama_cpp_src, folder, tmp_path, outtype, bound):
    """pyggml on llama.cpp's own file (q4_k_m: llama-quantize's of its F32 file) against llama.cpp:
    F32 cache, llama.cpp without flash attention (its flash path rounds K/V to F16), prefill then
    decode. With quantized weights the activations are quantized too (Q8_0/Q8_1 blocks): a last-bit
    difference upstream (a sum taken in another order, as the AVX2 level's V product in the mul_mat
    attention form) can move one value across a rounding boundary of its block, and the rows from
    there on leave the bound by ~1e-2. The prompt's rows must be within the bound, every row within
    2e-2, and the greedy ids equal."""
    llama_cpp = pytest.importorskip("llama_cpp")
    if outtype == "q4_k_m":
        f32 = llama_cpp_convert(llama_cpp_src, folder, tmp_path / "f32.gguf", "f32")
        path = llama_cpp_quantize(f32, tmp_path / "m.gguf", 15)
    else:
        path = llama_cpp_convert(llama_cpp_src, folder, tmp_path / "m.gguf", outtype)
    ids = np.random.default_rng(0).integers(3, N_VOCAB, N_PREFILL + N_DECODE).tolist()
    llm = llama_cpp.Llama(str(path), n_ctx=64, n_batch=64, logits_all=True, type_k=0, type_v=0, flash_attn=False,
                          n_threads=1, verbose=False)
    llm.eval(ids[:N_PREFILL])
    for t in ids[N_PREFILL:]:
        llm.eval([t])
    ref = np.array(llm.scores[:len(ids)], dtype=np.float64)
    for flash_attn in (True, False):
        m = models.load(path, n_ctx=64, kv_type=gg.Type.F32, flash_attn=flash_attn)
        got = run_chunks(m, ids, [N_PREFILL] + [1] * N_DECODE)
        err = np.abs(got - ref).max(-1) / np.abs(ref).max(-1)
        n = int(np.argmax(err >= bound)) if (err >= bound).any() else len(ids)    # the first row off the bound
        assert (n == len(ids)) if outtype == "f32" else (n >= N_PREFILL and err.max() < 2e-2), (flash_attn, err)
        assert (got.argmax(-1) == ref.argmax(-1)).all()


@pytest.mark.slow
@pytest.mark.llama_cpp
def test_greedy_tokens_match_llama_cpp(llama_cpp_src, folder, tmp_path):
    """pyggml's greedy generation on llama.cpp's Q8_0 file with the F16 cache is llama.cpp's, the
    prompt tokenized alike (both in the mul_mat attention form: llama.cpp's flash attention
    accumulates V in fp16)."""
    llama_cpp = pytest.importorskip("llama_cpp")
    path = llama_cpp_convert(llama_cpp_src, folder, tmp_path / "m.gguf", "q8_0")
    llm = llama_cpp.Llama(str(path), n_ctx=64, flash_attn=False, n_threads=1, verbose=False)
    prompt = llm.tokenize(b"hello world, the quick brown fox", add_bos=True, special=False)
    want = []
    for t in llm.generate(prompt, temp=0.0, top_k=1):
        want.append(t)
        if len(want) == 16:
            break
    m = models.load(path, n_ctx=64, flash_attn=False)
    assert m.tokenizer.encode("hello world, the quick brown fox") == prompt
    assert m.generate(prompt, 16, stop=()) == want


def test_batched_generation(gguf_dir):
    """Several sequences decoded together in one KV cache (generate_batch): each gets what it gets
    alone, its tokens routed independently of the others'."""
    m = models.load(converted("qwen3moe", "f32", gguf_dir), n_ctx=128, kv_type=gg.Type.F32)
    prompts = [random_ids(5, seed=1), random_ids(9, seed=2), random_ids(3, seed=3)]
    alone = []
    for p in prompts:
        m.reset()
        alone.append(m.generate(p, 8, stop=()))
    assert m.generate_batch(prompts, 8, stop=()) == alone


@pytest.mark.slow
@pytest.mark.llama_cpp
def test_q4_k_m_is_llama_quantize_s(folder, tmp_path):
    """outtype q4_k_m: each tensor's type and bytes are what llama-quantize Q4_K_M makes of the F32
    conversion (its MoE rules: routers kept F32; with 8 experts attn_k/attn_v Q8_0 and attn_output
    Q5_K, here through the fallbacks for rows of 64 and 96; ffn_down_exps by layer)."""
    ref = gguf.load(llama_cpp_quantize(convert_hf(folder, tmp_path / "f32.gguf", outtype="f32"), tmp_path / "ref.gguf", 15))
    got = gguf.load(convert_hf(folder, tmp_path / "got.gguf", outtype="q4_k_m"))
    assert sorted(got.tensors) == sorted(ref.tensors)                     # llama-quantize writes them by layer
    T = gg.Type
    assert ref.tensors["blk.0.ffn_gate_inp.weight"].type == T.F32 and ref.tensors["blk.0.attn_k.weight"].type == T.Q8_0
    for name, t in ref.tensors.items():
        assert got.tensors[name].type == t.type, name
        assert got.tensors[name].tobytes() == t.tobytes(), name
