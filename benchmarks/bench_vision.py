"""Qwen2-VL: the vision encoding of one 448x448 image and the prefill of a prompt holding it, pyggml
(F32 and F16 files) against transformers (float32) on the same random weights, 1 and 2 threads.

    python benchmarks/bench_vision.py                      # depth 4, widths of Qwen2-VL-2B's vision tower
    python benchmarks/bench_vision.py --depth 2 --reps 2 --threads 1

The model: Qwen2-VL-2B's vision tower (embed_dim 1280, 16 heads, MLP 5120, patch 14, merge 2) with
--depth blocks (the real one has 32; the time per block is what to read), and a small text model
(4 layers, width 1536, 12 heads, 2 KV heads, FFN 4096, vocabulary 8192). A 448x448 image is 32x32
patches, 256 image tokens; the prompt is 8 text tokens around them. Timed in turn, engine after
engine, --reps rounds (the best of each reported): pyggml's VisionEncoder.encode of the preprocessed
image, and Model.eval_multimodal of the prompt (encode + prefill, logits of the last token); transformers'
model.visual on the same pixel_values and the model's forward over the prompt (logits of the last
token). Preprocessing is left out of both.
"""
import argparse
import math
import os
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from common import machine


def build(depth, directory):
    import torch
    import transformers

    from pyggml.convert import convert_hf
    text = {"vocab_size": 8192, "hidden_size": 1536, "intermediate_size": 4096, "num_hidden_layers": 4,
            "num_attention_heads": 12, "num_key_value_heads": 2, "max_position_embeddings": 4096,
            "rms_norm_eps": 1e-6, "bos_token_id": 1, "eos_token_id": 2, "rope_parameters": {"rope_type": "default", "rope_theta": 1e6,
                                                      "mrope_section": [16, 24, 24]}}
    vision = {"depth": depth, "embed_dim": 1280, "hidden_size": 1536, "num_heads": 16, "mlp_ratio": 4,
              "patch_size": 14, "spatial_merge_size": 2, "temporal_patch_size": 2}
    cfg = transformers.Qwen2VLConfig(text_config=text, vision_config=vision, image_token_id=8000,
                                     video_token_id=8001, vision_start_token_id=8002, vision_end_token_id=8003)
    torch.manual_seed(0)
    model = transformers.Qwen2VLForConditionalGeneration(cfg).eval()
    paths = {}
    for t in ("f32", "f16"):
        paths[t] = (os.path.join(directory, f"text-{t}.gguf"), os.path.join(directory, f"mmproj-{t}.gguf"))
        convert_hf(model, paths[t][0], outtype=t, mmproj=paths[t][1])
    return model, paths


def measure(hf, ms, im, prompt, reps):
    """{engine: [encode seconds, encode + prefill seconds]} for transformers ("hf") and each pyggml model."""
    import torch
    ids = prompt[:3] + [8000] * im.n_tokens + prompt[4:]
    pv, thw, ids_t = torch.from_numpy(im.pixel_values), torch.tensor([[1, *im.grid]]), torch.tensor([ids])

    def hf_encode():
        with torch.no_grad():
            hf.model.visual(pv, grid_thw=thw)

    def hf_prefill():
        with torch.no_grad():
            hf(input_ids=ids_t, pixel_values=pv, image_grid_thw=thw, mm_token_type_ids=(ids_t == 8000).int(),
               logits_to_keep=1)

    def pg_prefill(m):
        m.reset()
        m.eval_multimodal(prompt, [im], logits="last", image_token=8000)

    fns = {"hf": (hf_encode, hf_prefill)}
    for k, m in ms.items():
        fns[k] = (lambda m=m: m.vision.encode(im), lambda m=m: pg_prefill(m))
    t = {k: [math.inf, math.inf] for k in fns}
    for _ in range(reps):                   # the engines in turn, each rep: the best of each
        for k, pair in fns.items():
            for i, fn in enumerate(pair):
                t0 = time.perf_counter()
                fn()
                t[k][i] = min(t[k][i], time.perf_counter() - t0)
    return t


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--depth", type=int, default=4)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args(argv)
    import torch

    import pyggml as gg
    from pyggml import models
    rng = np.random.default_rng(0)
    img = rng.integers(0, 256, (448, 448, 3), dtype=np.uint8)
    prompt = [1, 2, 8002, 8000, 8003, 3, 4, 5, 6]
    with tempfile.TemporaryDirectory() as d:
        hf, paths = build(args.depth, d)
        rows = []
        for nth in [int(x) for x in args.threads.split(",")]:
            torch.set_num_threads(nth)
            ms = {t: models.load(paths[t][0], mmproj=paths[t][1], n_threads=nth, n_ctx=512,
                                 kv_type=gg.Type.F32 if t == "f32" else gg.Type.F16) for t in paths}
            im = ms["f32"].vision.preprocess(img)
            t = measure(hf, ms, im, prompt, args.reps)
            for i, what in enumerate(("vision encode", "encode + prefill")):
                rows.append((what, nth, t["f32"][i], t["f16"][i], t["hf"][i]))
    print(f"machine: {machine()}, pyggml {gg.build_info()['simd']}; vision depth {args.depth}, 448x448 "
          f"({im.grid[0]}x{im.grid[1]} patches, {im.n_tokens} tokens), prompt {len(prompt) - 1 + im.n_tokens} tokens; best of {args.reps}")
    print("| what | threads | pyggml F32 | pyggml F16 | transformers F32 | hf/pg F32 | hf/pg F16 |")
    print("|---|---|---|---|---|---|---|")
    for what, nth, a, b, h in rows:
        print(f"| {what} | {nth} | {a * 1e3:.0f} ms | {b * 1e3:.0f} ms | {h * 1e3:.0f} ms | {h / a:.2f} | {h / b:.2f} |")


if __name__ == "__main__":
    main()
