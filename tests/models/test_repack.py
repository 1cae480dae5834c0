"""Models with repacked weights (Model(repack=True), the default of pyggml.models.load): the same
logits bit for bit and the same tokens as reading the weights in place (repack=False), the bytes
reported, and the mapped pages of repacked weights given back."""
import numpy as np
import pytest

pytest.importorskip("gguf")     # the random GGUFs are written with it

import pyggml as gg
from pyggml import models
from pyggml.demo import write_random_llama

REPACKED = set(gg.build_info()["repack"])     # the types with a repacked layout at this level
TINY = {"n_layer": 2, "n_embd": 256, "n_head": 4, "n_head_kv": 2, "n_ff": 512, "n_vocab": 320}


@pytest.mark.parametrize("typ,tied", [("q8_0", True), ("q4_k_m", False), ("q4_0", False)])
def test_repacked_model_matches_in_place(tmp_path, typ, tied):
    path = tmp_path / f"{typ}.gguf"
    write_random_llama(path, **TINY, type=typ, tied=tied, seed=5)
    ids = np.random.default_rng(1).integers(0, TINY["n_vocab"], 9).tolist()
    runs = {}
    for repack in (False, True):
        m = models.load(path, n_ctx=64, n_threads=2, repack=repack)
        logits = [m.eval(ids[:7]), m.eval(ids[7:8]), m.eval(ids[8:])]
        m.reset()
        runs[repack] = (m, np.concatenate(logits), m.generate(ids, 6))
    (flat, lf, tf), (packed, lp, tp) = runs[False], runs[True]
    np.testing.assert_array_equal(lp.view(np.uint32), lf.view(np.uint32))
    assert tp == tf
    assert flat.repacked_bytes == 0 and all(t.repacked == 0 for t in flat.tensors.values())
    done = {name for name, t in packed.tensors.items() if t.repacked}
    # every matrix of a type with a repacked layout the graph multiplies by (Q6_K's have none)
    want = {name for name, t in packed.tensors.items() if len(t.shape) == 2 and t.type.name in REPACKED
            and (name != "token_embd.weight" or tied)}
    assert done == want
    if not want:
        assert packed.repacked_bytes == 0
        return
    assert packed.repacked_bytes == sum(packed.tensors[n].repacked for n in done)
    assert "repacked=" in repr(packed)


def test_repacked_experts(tmp_path):
    """qwen3moe with Q8_0 experts (mul_mat_id over their repacked stacks): the logits of the weights
    in place, bit for bit, in prefill and decode"""
    from pyggml.demo import write_random_model

    keys = {"block_count": 2, "embedding_length": 256, "attention.head_count": 4, "attention.head_count_kv": 2,
            "feed_forward_length": 512, "vocab_size": 320, "context_length": 256,
            "attention.layer_norm_rms_epsilon": 1e-5, "expert_count": 8, "expert_used_count": 2,
            "expert_feed_forward_length": 96}
    path = tmp_path / "moe.gguf"
    write_random_model(path, "qwen3moe", keys, type="q8_0", seed=2)
    ids = np.random.default_rng(3).integers(0, 320, 9).tolist()
    out = {}
    for repack in (False, True):
        m = models.load(path, n_ctx=64, n_threads=2, repack=repack)
        out[repack] = np.concatenate([m.eval(ids[:7]), m.eval(ids[7:8]), m.eval(ids[8:])])
        if repack:
            assert (m.tensors["blk.0.ffn_up_exps.weight"].repacked > 0) == ("Q8_0" in REPACKED)
    np.testing.assert_array_equal(out[True].view(np.uint32), out[False].view(np.uint32))
