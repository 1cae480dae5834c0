"""`pyggml demo`: a llama model with seeded random weights, written to a temporary GGUF, loaded back
(memory-mapped), run as a prefill and a greedy decode; prints tokens/s and how close decode comes to
the weight-stream limit measured in the same process. No download.

Also the helpers benchmarks/bench_model.py and the tests share: write_random_llama (a llama GGUF of
any size written with pyggml.gguf.save), random_model / write_random_model (a model of any registered
architecture with random weights, in memory or as a GGUF) and read_seconds (a streaming read of a
model's weights)."""
import os
import tempfile
import time

import numpy as np

# the demo's model: 8 layers of width 1024 (16 heads of 64, 4 KV heads), FFN 2816, a 32000-token
# vocabulary tied to the LM head: 156M parameters, 0.31 GB of F16, more than a CPU cache holds
DEMO = {"n_layer": 8, "n_embd": 1024, "n_head": 16, "n_head_kv": 4, "n_ff": 2816, "n_vocab": 32000}


def write_random_llama(path, n_layer, n_embd, n_head, n_head_kv, n_ff, n_vocab, type="f16", tied=False, seed=0,
                       show_progress=None):
    """Write a llama GGUF with seeded random weights (matrices N(0, 1/fan_in), norms near 1) of
    `type` ("f32", "f16", "q8_0", "q4_0", or the mixture "q4_k_m": Q4_K with Q6_K where llama-quantize puts
    it, pyggml._mixtures; quantised with pyggml's CPU quantisers, as ggml's) with pyggml.gguf.save.
    tied: no output.weight (the LM head is the token embedding). Returns the metadata written."""
    import pyggml as gg
    from pyggml._mixtures import FTYPES, tensor_types
    from pyggml.gguf import save
    from pyggml.progress import progress

    rng = np.random.default_rng(seed)
    ctx = gg.Context()
    typ = {"f32": gg.Type.F32, "f16": gg.Type.F16, "q8_0": gg.Type.Q8_0, "q4_0": gg.Type.Q4_0, "q4_k_m": None}[type]
    hd = n_embd // n_head
    shapes = {"token_embd.weight": (n_vocab, n_embd), "output_norm.weight": (n_embd,)}
    if not tied:
        shapes["output.weight"] = (n_vocab, n_embd)
    for i in range(n_layer):
        shapes.update({f"blk.{i}.attn_norm.weight": (n_embd,), f"blk.{i}.attn_q.weight": (n_embd, n_embd),
                       f"blk.{i}.attn_k.weight": (n_head_kv * hd, n_embd),
                       f"blk.{i}.attn_v.weight": (n_head_kv * hd, n_embd),
                       f"blk.{i}.attn_output.weight": (n_embd, n_embd), f"blk.{i}.ffn_norm.weight": (n_embd,),
                       f"blk.{i}.ffn_gate.weight": (n_ff, n_embd), f"blk.{i}.ffn_up.weight": (n_ff, n_embd),
                       f"blk.{i}.ffn_down.weight": (n_embd, n_ff)})
    if typ is None:
        plain = [(name, shape, gg.Type.F32 if len(shape) == 1 else gg.Type.F16) for name, shape in shapes.items()]
        types = dict(zip(shapes, tensor_types(plain, type, n_layer)))
    else:
        types = {name: gg.Type.F32 if len(shape) == 1 else typ for name, shape in shapes.items()}
    tensors = {}
    with progress(len(shapes), "random weights", "tensors", enable=show_progress) as bar:
        for name, shape in shapes.items():
            if len(shape) == 1:
                tensors[name] = (1 + 0.1 * rng.standard_normal(shape, dtype=np.float32)).astype(np.float32)
            else:
                a = rng.standard_normal(shape, dtype=np.float32)
                a *= 1 / np.sqrt(shape[1])
                t = types[name]
                tensors[name] = a.astype(np.float16) if t == gg.Type.F16 else ctx.from_numpy(a, type=t)
            bar.update()
    file_type = {"f32": 0, "f16": 1, "q8_0": 7, "q4_0": 2, "q4_k_m": FTYPES["q4_k_m"][1]}[type]
    metadata = {"general.architecture": "llama", "general.name": "pyggml random llama",
                "general.file_type": file_type,
                "llama.block_count": n_layer, "llama.context_length": 4096, "llama.embedding_length": n_embd,
                "llama.feed_forward_length": n_ff, "llama.attention.head_count": n_head,
                "llama.attention.head_count_kv": n_head_kv, "llama.rope.freq_base": 10000.0,
                "llama.rope.dimension_count": hd, "llama.attention.layer_norm_rms_epsilon": 1e-5,
                "llama.vocab_size": n_vocab, **_spm_vocab(n_vocab)}
    save(path, tensors, metadata)
    return metadata


FILE_TYPES = {"f32": 0, "f16": 1, "q8_0": 7}    # general.file_type (llama_ftype) of random_weights' types


def random_weights(arch, keys, type="f16", seed=0, optional=()):
    """The metadata and tensors of a model of the registered architecture `arch` with seeded random
    weights, every tensor of its table (pyggml.models.Decoder.hparams_class.tensor_table) with the
    shape its hyper-parameters give. keys: the architecture's GGUF keys without the "{arch}." prefix
    (block_count, embedding_length, feed_forward_length, attention.head_count, context_length,
    vocab_size, ...; "general."/"tokenizer." keys as written). Matrices N(0, 1/fan_in) of `type`
    ("f32", "f16", "q8_0": pyggml's quantiser) where their rows allow it, else F32 (a MoE router
    always, as llama.cpp keeps it); norms near 1; biases (F32) and other vectors small, RoPE frequency factors in [1, 2). optional: the optional tensors to
    include, by name or by the part after "blk.N." (then in every layer); the others are left out. Returns (metadata dict, name -> pyggml.Tensor);
    the tensors live in a Context that they keep alive."""
    from types import SimpleNamespace

    import pyggml as gg
    from pyggml.models import architecture
    from pyggml.models.blocks import Keys

    cls = architecture(arch).hparams_class
    if type not in FILE_TYPES:
        raise ValueError(f"random_weights: type must be one of {', '.join(FILE_TYPES)}, got {type!r}")
    metadata = {"general.architecture": arch, "general.name": f"pyggml random {arch}",
                "general.file_type": FILE_TYPES[type]}
    for key, value in keys.items():
        metadata[key if key.startswith(("general.", "tokenizer.")) else f"{arch}.{key}"] = value
    if f"{arch}.vocab_size" not in metadata or f"{arch}.block_count" not in metadata:
        raise ValueError(f"random_weights: keys must give vocab_size and block_count, got {sorted(keys)}")
    # the hyper-parameters say which tensors there are (a file's blocks are counted from its tensors)
    n_layer = int(metadata[f"{arch}.block_count"])
    view = SimpleNamespace(path=f"<random {arch}>", arch=arch, metadata=metadata,
                           tensors={f"blk.{n_layer - 1}.": None})
    r = Keys(view)
    hp = cls(**cls.read(r))
    hp.check(r)
    rng = np.random.default_rng(seed)
    ctx = gg.Context(f"random {arch}")
    typ = {"f32": gg.Type.F32, "f16": gg.Type.F16, "q8_0": gg.Type.Q8_0}[type]
    tensors = {}
    for name, spec in hp.tensor_table().items():
        if not spec.required and name not in optional and name.split(".", 2)[-1] not in optional:
            continue
        shape = spec.shape[::-1]                      # numpy order
        if len(shape) == 1 or name.endswith(".bias"):
            if name.endswith("norm.weight"):
                a = 1 + 0.1 * rng.standard_normal(shape)
            elif "rope_" in name:
                a = 1 + rng.random(shape)
            else:
                a = 0.1 * rng.standard_normal(shape)
            tensors[name] = ctx.from_numpy(a.astype(np.float32))
            continue
        a = (rng.standard_normal(shape) / np.sqrt(shape[-1])).astype(np.float32)
        # a MoE router stays F32, as llama.cpp's converter and quantizer keep it
        t = typ if shape[-1] % gg.blck_size(typ) == 0 and "ffn_gate_inp" not in name else gg.Type.F32
        tensors[name] = ctx.from_numpy(a, type=t)
    return metadata, tensors


def random_model(arch, keys, type="f16", seed=0, optional=(), **options):
    """A pyggml.models.Model of the registered architecture `arch` with random_weights(arch, keys,
    type, seed, optional), built in memory (no file, no gguf package); options: Model's (n_ctx,
    n_threads, flash_attn, ...). Its hyper-parameters are validated as a file's would be."""
    from types import SimpleNamespace

    from pyggml.models import Model, read_hparams

    metadata, tensors = random_weights(arch, keys, type, seed, optional)
    f = SimpleNamespace(path=f"<random {arch}>", arch=arch, metadata=metadata, tensors=tensors)
    return Model(arch, read_hparams(f), tensors, source=f.path, **options)


def write_random_model(path, arch, keys, type="f16", seed=0, optional=()):
    """Write random_weights(arch, keys, type, seed, optional) as a GGUF at path, with a
    sentencepiece-style vocabulary (vocab_size >= 259) so that llama.cpp and pyggml's tokenizer
    accept it. Returns the metadata written."""
    from pyggml.gguf import save

    metadata, tensors = random_weights(arch, keys, type, seed, optional)
    metadata.update(_spm_vocab(int(metadata[f"{arch}.vocab_size"])))
    if arch == "phi3":      # llama.cpp sets phi3's token attributes by name and needs this one
        metadata["tokenizer.ggml.tokens"][-1], metadata["tokenizer.ggml.token_type"][-1] = "<|endoftext|>", 3
    save(path, tensors, metadata)
    return metadata


def _spm_vocab(n_vocab):
    """A sentencepiece-style vocabulary of n_vocab (>= 259) tokens, so that llama.cpp and pyggml's
    tokenizer accept the file: <unk>, <s>, </s>, the 256 byte tokens, then pieces "▁w<i>"."""
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    tokens += [f"\u2581w{i}" for i in range(n_vocab - len(tokens))]
    types = [2, 3, 3] + [6] * 256 + [1] * (n_vocab - 259)          # unknown, control, byte, normal
    return {"tokenizer.ggml.model": "llama", "tokenizer.ggml.tokens": tokens,
            "tokenizer.ggml.scores": [0.0] * 259 + [-float(i) for i in range(n_vocab - 259)],
            "tokenizer.ggml.token_type": types, "tokenizer.ggml.bos_token_id": 1, "tokenizer.ggml.eos_token_id": 2}


def read_seconds(model, n_threads, repeat=3):
    """Seconds of the fastest of `repeat` streaming reads of the weights a decode step reads
    (Model.weight_bytes), tensor by tensor in place, on n_threads threads."""
    from pyggml._vec import stream_read_f32

    embd = model.tensors.get("token_embd.weight")
    skip_embd = embd is not None and model.output_weight is not embd
    tensors = {id(t): t for n, t in model.tensors.items() if n in model._expected() and not (skip_embd and t is embd)}
    addr = [t.data_ptr for t in tensors.values()]
    n = [t.nbytes // 4 for t in tensors.values()]
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        stream_read_f32(addr, n, n_threads)
        best = min(best, time.perf_counter() - t0)
    return best


def add_arguments(parser):
    parser.add_argument("-t", "--threads", type=int, help="threads (default: all cores, or OMP_NUM_THREADS)")
    parser.add_argument("--prefill", type=int, default=64, help="prompt tokens (default 64)")
    parser.add_argument("--decode", type=int, default=64, help="generated tokens (default 64)")
    parser.add_argument("--layers", type=int, default=DEMO["n_layer"], help=f"layers (default {DEMO['n_layer']})")
    parser.add_argument("--seed", type=int, default=0, help="weights and prompt seed (default 0)")
    return parser


def main(args=None):
    """Run the demo; args: the parsed add_arguments namespace (None: defaults). Returns 0, or 1 when
    the decode logits disagree with a batched prefill of the same tokens."""
    import argparse

    import pyggml as gg
    from pyggml import models

    if args is None or isinstance(args, (list, tuple)):
        args = add_arguments(argparse.ArgumentParser()).parse_args(list(args or []))
    info = gg.build_info()
    nth = gg.default_threads() if args.threads is None else args.threads
    print(f"pyggml {info['version']} ({info['simd']}, openmp={info['openmp']}, {nth} threads)")
    spec = dict(DEMO, n_layer=args.layers)
    with tempfile.TemporaryDirectory(prefix="pyggml-demo-") as tmp:
        path = os.path.join(tmp, "random-llama-f16.gguf")
        t0 = time.perf_counter()
        write_random_llama(path, **spec, type="f16", tied=True, seed=args.seed)
        t_write = time.perf_counter() - t0
        t0 = time.perf_counter()
        m = models.load(path, n_ctx=args.prefill + args.decode, n_threads=nth)
        t_load = time.perf_counter() - t0
        gb = m.weight_bytes / 1e9
        print(f"model: llama, {spec['n_layer']} layers, width {spec['n_embd']}, {spec['n_head']} heads "
              f"({spec['n_head_kv']} KV), FFN {spec['n_ff']}, vocabulary {spec['n_vocab']}, F16: {gb:.2f} GB read "
              f"per token; written in {t_write:.1f} s, memory-mapped in {t_load * 1e3:.0f} ms")
        prompt = np.random.default_rng(args.seed).integers(0, spec["n_vocab"], args.prefill).tolist()
        m.generate(prompt, 2, stop=())                      # first touch of the weights, graphs built
        m.reset()
        # decode steps and streaming reads of the same weights alternate, so both see the same
        # machine (a shared machine is noisy); their medians are compared
        gen = m.stream(prompt, args.decode, stop=())
        ids, t_step, t_read = [next(gen)], [], []
        while True:
            t_read.append(read_seconds(m, nth, repeat=1))
            t0 = time.perf_counter()
            t = next(gen, None)
            if t is None:
                break
            t_step.append(time.perf_counter() - t0)
            ids.append(t)
        tm = dict(m.timings)
        m.reset()
        batched = m.eval(prompt + ids[:-1])[args.prefill - 1:]
        m.reset()
        m.eval(prompt, logits="last")
        stepped = np.concatenate([m.eval([t], logits="last") for t in ids[:-1]])
        diff = float(np.abs(stepped - batched[1:]).max() / np.abs(batched[1:]).max())
    pp = tm["prefill_tokens"] / tm["prefill_s"]
    ms = tm["decode_s"] / tm["decode_tokens"] * 1e3
    bw_read, bw_decode = gb / float(np.median(t_read)), gb / float(np.median(t_step))
    print(f"prefill: {tm['prefill_tokens']} tokens in {tm['prefill_s'] * 1e3:.0f} ms: {pp:.1f} tokens/s")
    print(f"decode:  {tm['decode_tokens']} tokens in {tm['decode_s'] * 1e3:.0f} ms: {1e3 / ms:.1f} tokens/s "
          f"({ms:.1f} ms/token)")
    print(f"weights: decode streams {bw_decode:.1f} GB/s, a streaming read of them between the steps "
          f"{bw_read:.1f} GB/s (medians): decode at {100 * bw_decode / bw_read:.0f}% of the weight-stream limit")
    print(f"check: decode logits against a batched prefill of the same tokens: max rel diff {diff:.1e}")
    return 0 if diff < 1e-2 else 1
