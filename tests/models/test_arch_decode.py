"""Every architecture decodes to the native build's greedy tokens, on every build and CPU.

A tiny model of each registered architecture with seeded random weights (pyggml.demo.random_model,
built in memory: no gguf package, so this runs in the qemu stages too) prefills a prompt and decodes
greedily. tests/data/arch_decode.json holds what the native x86 build gave: the tokens, and the logits
of the prompt's last position. Every build (scalar, AVX2, AVX-512, RVV at each VLEN, NEON) must give
the same tokens and logits within float32 summation-order error. The native run also checks that
each step's top-2 logit margin is far above that error, so a record cannot pass by luck on one CPU
and flip on another.

Regenerate the record (after a change meant to change the numbers) on the native build with
    PYGGML_RECORD=1 pytest tests/models/test_arch_decode.py
"""
import json
import os
from pathlib import Path

import numpy as np
import pytest

from pyggml.demo import random_model

RECORD = Path(__file__).resolve().parents[1] / "data" / "arch_decode.json"
BASE = {"block_count": 2, "embedding_length": 64, "feed_forward_length": 128, "attention.head_count": 4,
        "attention.head_count_kv": 2, "context_length": 256, "vocab_size": 300,
        "attention.layer_norm_rms_epsilon": 1e-5}
# arch -> (its keys beyond BASE, weight type, optional tensors[, weights seed]): F16, whose products
# differ across builds by float summation order only (a Q8_0 model's activations, rounded to int8,
# can move a logit by 0.03 on another CPU), and seeds where the greedy margins are wide (MARGIN)
CASES = {
    "llama": ({}, "f16", ("output.weight",)),
    "qwen2": ({}, "f16", (), 4),
    "qwen3": ({"attention.key_length": 16, "attention.value_length": 16}, "f16", ()),
    "gemma2": ({"attention.sliding_window": 4}, "f16", ()),      # windows shorter than the sequence
    "gemma3": ({"attention.sliding_window": 4}, "f16", ()),
    "phi3": ({"rope.dimension_count": 16}, "f16", ("attn_qkv.weight",)),
    "qwen3moe": ({"attention.key_length": 16, "attention.value_length": 16, "expert_count": 4, "expert_used_count": 2,
                  "expert_feed_forward_length": 64}, "f16", ()),
    "gpt-oss": ({"attention.key_length": 16, "attention.value_length": 16, "expert_count": 4, "expert_used_count": 2,
                 "expert_feed_forward_length": 64, "attention.sliding_window": 4}, "f16", ()),
}
PROMPT = [1, 5, 9, 17, 33, 65, 129, 257, 3, 4, 5]
N_DECODE = 10
MARGIN = 5e-3      # the smallest top-2 logit gap a recorded step may have (logits are ~4 in size)


def decode(arch):
    keys, typ, optional, *seed = CASES[arch]
    m = random_model(arch, {**BASE, **keys}, type=typ, seed=seed[0] if seed else 1, optional=optional, n_ctx=64,
                     n_threads=2)
    logits = np.asarray(m.eval(PROMPT))[-1]
    first, tokens, margins = logits.copy(), [], []
    for _ in range(N_DECODE):
        top2 = np.sort(logits)[-2:]
        margins.append(float(top2[1] - top2[0]))
        tokens.append(int(np.argmax(logits)))
        logits = np.asarray(m.eval([tokens[-1]]))[-1]
    return first, tokens, margins


@pytest.fixture(scope="module")
def record():
    if os.environ.get("PYGGML_RECORD"):
        out = {}
        for arch in CASES:
            first, tokens, _ = decode(arch)
            out[arch] = {"tokens": tokens, "logits": [round(float(x), 5) for x in first]}
        RECORD.write_text("{\n" + ",\n".join(f"{json.dumps(a)}: {json.dumps(v)}" for a, v in out.items()) + "\n}\n")
    return json.loads(RECORD.read_text())


def test_every_architecture_is_recorded(record):
    from pyggml.models import ARCHS
    missing = set(ARCHS) - set(record) - {"qwen2vl"}     # qwen2vl: qwen2's graph with M-RoPE positions
    assert not missing, f"add {sorted(missing)} to CASES and regenerate the record"


@pytest.mark.parametrize("arch", sorted(CASES))
def test_greedy_decode_matches_the_native_record(arch, record):
    from conftest import EMULATED
    first, tokens, margins = decode(arch)
    np.testing.assert_allclose(first, record[arch]["logits"], rtol=0, atol=2e-3)
    assert tokens == record[arch]["tokens"]
    if not EMULATED:
        assert min(margins) > MARGIN, f"{arch}: a greedy step has top-2 margin {min(margins):.2e}: choose another case"
