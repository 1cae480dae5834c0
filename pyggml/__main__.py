"""The pyggml command: run, serve, convert, info, demo, profile (`pyggml CMD --help`; also python -m pyggml from
outside the source tree). Without a command it runs the demo."""
import argparse
import itertools
import os
import sys

_KV_TYPES = ("f16", "f32", "bf16", "q8_0", "q4_0")


class UserError(Exception):
    """A mistake in the command line or its files: one line on stderr, exit status 2."""


class _Parser(argparse.ArgumentParser):
    """argparse, with a usage error as one line `pyggml CMD: error: ...` (exit status 2)."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message}\n")


def _cmd_info(args):
    import pyggml
    for k, v in pyggml.build_info().items():
        print(f"{k}: {v}")
    for path in args.model:
        from pyggml import gguf
        f = gguf.load(path)
        types = {}
        for t in f.tensors.values():
            types[t.type.name] = types.get(t.type.name, 0) + 1
        print(f"\n{f.path}: {f.arch}, {len(f.tensors)} tensors ({', '.join(f'{n} {k}' for k, n in types.items())}), "
              f"{f.nbytes / 1e6:.1f} MB")
        from pyggml import models
        if f.arch in models.ARCHS:
            for k, v in models.read_hparams(f).as_dict().items():
                print(f"  {k}: {v}")
    return 0


def _parse_tokens(text):
    try:
        return [int(x) for x in text.replace(",", " ").split()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"--tokens: expected comma-separated integers, got {text!r}") from None


def _cmd_run(args):
    import pyggml
    from pyggml import models
    from pyggml.chat_cli import load_options, sampling_options
    from pyggml.progress import progress

    sampling = sampling_options(args)
    models.Sampler(**{**sampling, "dry_sequence_breakers": ()})   # bad values: an error before loading
    if args.image and not args.mmproj:
        raise UserError("--image needs --mmproj (the vision tower's GGUF)")
    m = models.load(args.model, n_ctx=args.ctx, n_threads=args.threads, kv_type=pyggml.Type[args.kv_type.upper()],
                    flash_attn=not args.no_flash_attn, n_batch=args.batch, mmproj=args.mmproj,
                    **load_options(args))
    tok = m.tokenizer
    if args.prompt is not None:
        if tok is None:
            raise UserError(f"{args.model} has no usable tokenizer (pip install pyggml[tokenizer]); pass --tokens")
        prompt = tok.encode(args.prompt)
    else:
        prompt = args.tokens
    if not prompt:
        raise UserError("the prompt is empty")
    if len(prompt) > m.n_ctx:
        raise UserError(f"the prompt is {len(prompt)} tokens, more than the context (--ctx {m.n_ctx})")
    images = None
    if args.image:
        images = [m.vision.preprocess(f) for f in args.image]
        if args.image_token is not None:
            m.image_token_id = args.image_token
        if m.image_token() not in prompt:           # as llama-mtmd-cli: the images before the text
            prompt = [m.image_token()] * len(images) + list(prompt)
    print(f"{m!r}, {m.n_threads} threads, prompt of {len(prompt)} tokens", file=sys.stderr)
    stream = tok.stream() if tok is not None and not args.ids else None
    show = args.progress
    with progress(len(prompt), "prefill", "tok", enable=show) as bar:
        gen = m.stream(prompt, args.n_predict, stop=() if args.ignore_eos else None, progress=bar.update,
                       images=images, **sampling)
        first = next(gen, None)
    # a bar under streamed text garbles the terminal: a decode bar only when the text goes elsewhere
    decode_bar = progress(args.n_predict, "decode", "tok",
                          enable=show if show is not None else (not sys.stdout.isatty() and sys.stderr.isatty()))
    with decode_bar:
        for i, t in enumerate(itertools.chain([] if first is None else [first], gen)):
            if stream is None:
                print(("" if i == 0 else " ") + str(t), end="", flush=True)
            else:
                print(stream.push(t), end="", flush=True)
            decode_bar.update()
    if stream is not None:
        print(stream.flush(), end="")
    print()
    tm = m.timings
    pp = tm["prefill_tokens"] / tm["prefill_s"] if tm["prefill_s"] else 0.0
    tg = tm["decode_tokens"] / tm["decode_s"] if tm["decode_s"] else 0.0
    print(f"prefill: {tm['prefill_tokens']} tokens in {tm['prefill_s'] * 1e3:.1f} ms, {pp:.2f} tokens/s\n"
          f"decode:  {tm['decode_tokens']} tokens in {tm['decode_s'] * 1e3:.1f} ms, {tg:.2f} tokens/s", file=sys.stderr)
    return 0


def _cmd_chat(args):
    from pyggml import chat_cli
    return chat_cli.main(args)


def _cmd_convert(args):
    from pyggml import convert
    return convert.main(args)


def _cmd_demo(args):
    from pyggml.demo import main as demo
    return demo(args)


def _cmd_serve(args):
    import pyggml
    from pyggml import chat_cli, models
    try:
        from pyggml import serve
    except ImportError as e:
        print(f"pyggml serve: needs the server extra (pip install 'pyggml[server]'): {e}", file=sys.stderr)
        return 2
    if args.ray:
        return _serve_ray(args)
    if args.replicas != 1:
        raise UserError("--replicas needs --ray")
    if args.stages is not None:
        return _serve_pipeline(args, serve)
    m = models.load(args.model, n_ctx=args.ctx, n_threads=args.threads, kv_type=pyggml.Type[args.kv_type.upper()],
                    n_batch=args.batch, **chat_cli.load_options(args))
    server = serve.Server(m, n_seq=args.parallel, api_key=args.api_key, name=args.alias, warmup=not args.no_warmup)
    print(f"pyggml serve: {args.model} on http://{args.host}:{args.port} ({args.parallel} sequences of "
          f"{server.engine.n_ctx_seq} tokens)", file=sys.stderr)
    serve.run(server, args.host, args.port)
    return 0


def _serve_pipeline(args, serve):
    """pyggml serve --stages N: the server over the model pipelined across N Ray actors."""
    import pyggml
    if args.stages < 1:
        raise UserError(f"--stages must be >= 1, got {args.stages}")
    try:
        import ray  # noqa: F401
    except ImportError as e:
        print(f"pyggml serve: --stages needs Ray (pip install 'pyggml[ray]'): {e}", file=sys.stderr)
        return 2
    from pyggml.serve.pipeline import pipeline_server
    server = pipeline_server(args.model, args.stages, n_ctx=args.ctx, n_threads=args.threads,
                             kv_type=pyggml.Type[args.kv_type.upper()], n_batch=args.batch, api_key=args.api_key,
                             name=args.alias, n_seq=args.parallel)
    print(f"pyggml serve: {args.model} on http://{args.host}:{args.port}, pipelined over {args.stages} Ray actors "
          f"({args.parallel} sequences of {server.engine.n_ctx_seq} tokens)", file=sys.stderr)
    serve.run(server, args.host, args.port)
    return 0


def _serve_ray(args):
    """pyggml serve --ray: the server as a Ray Serve deployment of --replicas replicas."""
    import pyggml
    from pyggml import chat_cli
    if args.stages is not None:
        raise UserError("--ray and --stages cannot go together (a replica of a pipelined model is not supported)")
    try:
        from pyggml.serve import ray_serve
    except ImportError as e:
        print(f"pyggml serve: --ray needs Ray Serve (pip install 'pyggml[ray]'): {e}", file=sys.stderr)
        return 2
    if args.replicas < 1:
        raise UserError(f"--replicas must be >= 1, got {args.replicas}")
    if not os.path.isfile(args.model):
        raise UserError(f"{args.model}: no such file")
    app = ray_serve.deployment(args.model, args.replicas, n_seq=args.parallel, n_ctx=args.ctx, n_threads=args.threads,
                               n_batch=args.batch, kv_type=pyggml.Type[args.kv_type.upper()], api_key=args.api_key,
                               name=args.alias, load_options=chat_cli.load_options(args))
    print(f"pyggml serve: {args.model} on http://{args.host}:{args.port}, {args.replicas} Ray Serve replicas of "
          f"{args.parallel} sequences", file=sys.stderr)
    ray_serve.run(app, args.host, args.port)
    return 0


def _cmd_profile(args):
    import os
    import pathlib
    import tempfile

    import numpy as np

    import pyggml
    from pyggml import models
    from pyggml.demo import DEMO, write_random_llama
    from pyggml.profile import profile_decode

    with tempfile.TemporaryDirectory(prefix="pyggml-profile-") as tmp:
        path = args.model
        if path is None:
            path = os.path.join(tmp, "random-llama-f16.gguf")
            write_random_llama(path, **dict(DEMO, n_layer=args.layers), type="f16", tied=True, seed=0)
        m = models.load(path, n_ctx=args.prompt + 8, n_threads=args.threads)
        prompt = np.random.default_rng(0).integers(0, m.n_vocab, args.prompt).tolist()
        prof, g = profile_decode(m, prompt)
    info = pyggml.build_info()
    print(f"{args.model or 'demo model'}: one decode step after {args.prompt} prompt tokens, {m.n_threads} threads "
          f"({info['simd']})\n")
    print(prof.table(top=args.top))
    os.makedirs(args.out, exist_ok=True)
    written = {"profile.svg": prof.save_svg, "profile.json": prof.save_json}
    if args.dot:
        written["graph.dot"] = lambda f: pathlib.Path(f).write_text(g.to_dot())
    for name, save in written.items():
        save(os.path.join(args.out, name))
    print(f"\nwrote {', '.join(os.path.join(args.out, n) for n in written)}")
    return 0


def parser():
    """The argparse parser of the pyggml command."""
    from pyggml.demo import add_arguments as demo_arguments

    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help="show a traceback on errors")
    p = _Parser(prog="pyggml", parents=[common], description="ggml's CPU backend in Python: run GGUF models, "
                "chat, convert Hugging Face models, show the build. Without a command: the demo. A user error "
                "prints one line and exits with status 2.")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    r = sub.add_parser("run", parents=[common], help="generate tokens with a GGUF model", description="Generate with a GGUF model "
                       "(llama, qwen2, qwen2vl): streams the new tokens (text when the file has a tokenizer) and "
                       "ends with prefill and decode tokens/s on stderr.")
    r.add_argument("model", help="the .gguf file")
    src = r.add_mutually_exclusive_group(required=True)
    src.add_argument("-p", "--prompt", help="prompt text (needs the optional tokenizer libraries)")
    src.add_argument("--tokens", type=_parse_tokens, help="prompt token ids, e.g. 1,15043,3186")
    r.add_argument("--mmproj", help="the vision tower's GGUF (Qwen2-VL's mmproj), for --image")
    r.add_argument("--image", action="append", help="an image file (needs Pillow); repeat for more. The prompt's "
                   "image tokens (<|image_pad|>) mark where they go, else they come before the text")
    r.add_argument("--image-token", type=int, help="the id marking an image in --tokens (default: the vocabulary's "
                   "<|image_pad|>)")
    r.add_argument("-n", "--n-predict", type=int, default=64, help="tokens to generate (default 64)")
    r.add_argument("-t", "--threads", type=int, help="threads (default: all cores, or OMP_NUM_THREADS)")
    r.add_argument("--ctx", type=int, default=512, help="context size in tokens (default 512)")
    r.add_argument("--batch", type=int, default=512, help="most prompt tokens per graph (default 512)")
    r.add_argument("--kv-type", choices=_KV_TYPES, default="f16", help="KV cache type (default f16)")
    r.add_argument("--no-flash-attn", action="store_true",
                   help="attention as mul_mat + soft_max_ext with V transposed (llama.cpp without -fa)")
    r.add_argument("--ignore-eos", action="store_true", help="do not stop at the end-of-sequence token")
    r.add_argument("--ids", action="store_true", help="print token ids even when there is a tokenizer")
    r.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                   help="progress bars on stderr (default: prefill bar on a terminal, decode bar when the "
                        "output is not one)")
    from pyggml import chat_cli
    chat_cli.add_load_arguments(r)
    chat_cli.add_sampling_arguments(r, temp=0.0, top_k=0, top_p=1.0, min_p=0.0)
    r.set_defaults(fn=_cmd_run)

    ch = sub.add_parser("chat", parents=[common], help="chat with a GGUF model in the terminal",
                        description="An interactive chat through the file's chat template: streams the answer, "
                                    "keeps the conversation in the KV cache (only the new turn is prefilled). "
                                    "/reset, /system TEXT, /stats, /help; Ctrl-C stops the answer (or drops the "
                                    "message being prefilled); Ctrl-D quits.")
    chat_cli.add_arguments(ch)
    ch.set_defaults(fn=_cmd_chat)

    from pyggml import convert
    c = sub.add_parser("convert", parents=[common], help="convert a Hugging Face model folder to GGUF",
                       description="Convert a Hugging Face model (llama, qwen2, qwen2-vl) to GGUF as llama.cpp's "
                                   "convert_hf_to_gguf.py lays it out.")
    convert.add_arguments(c)
    c.set_defaults(fn=_cmd_convert)

    i = sub.add_parser("info", parents=[common], help="what was compiled (and a GGUF file's hyper-parameters)",
                       description="Print the build (SIMD, OpenMP, compiler) and, for each MODEL, its architecture, "
                                   "tensor types and hyper-parameters.")
    i.add_argument("model", nargs="*", help=".gguf files to describe")
    i.set_defaults(fn=_cmd_info)

    d = sub.add_parser("demo", parents=[common], help="build, save, load and run a random llama model; report speed",
                       description="Build a small llama model with seeded random weights, write it to a temporary "
                                   "GGUF, load it back, prefill and decode, and print tokens/s and decode's share of "
                                   "the weight-read bandwidth measured in the same run. No download.")
    demo_arguments(d)
    d.set_defaults(fn=_cmd_demo)

    from pyggml.demo import DEMO
    pr = sub.add_parser("profile", parents=[common], help="profile one decode step: per-op tables, profile.svg, profile.json",
                        description="Profile one decode step of MODEL (default: the demo's random llama, written to "
                                    "a temporary GGUF) after a random prompt: print the time per op type, the top "
                                    "steps, the barrier wait per thread and the parallel efficiency, and write the "
                                    "timeline (profile.svg) and every step (profile.json). See docs/profiling.md.")
    pr.add_argument("model", nargs="?", help="a .gguf file (default: the demo model)")
    pr.add_argument("-t", "--threads", type=int, help="threads (default: all cores, or OMP_NUM_THREADS)")
    pr.add_argument("--prompt", type=int, default=32, help="prompt tokens before the step (default 32)")
    pr.add_argument("--layers", type=int, default=DEMO["n_layer"],
                    help=f"layers of the demo model (default {DEMO['n_layer']})")
    pr.add_argument("--top", type=int, default=15, help="steps in the top list (default 15)")
    pr.add_argument("--out", default=".", help="folder for profile.svg and profile.json (default: here)")
    pr.add_argument("--dot", action="store_true", help="also write the step's graph as graph.dot")
    pr.set_defaults(fn=_cmd_profile)

    sv = sub.add_parser("serve", help="an OpenAI-compatible HTTP server (needs pyggml[server])",
                        description="Serve a GGUF model over an OpenAI-compatible HTTP API (/v1/completions, "
                                    "/v1/chat/completions, /v1/embeddings, /v1/models, /health, /metrics) with "
                                    "continuous batching. See docs/serving.md.")
    sv.add_argument("model", help="the GGUF file")
    sv.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1: this machine only)")
    sv.add_argument("--port", type=int, default=8080, help="port (default 8080)")
    sv.add_argument("--parallel", type=int, default=4, help="sequences generated at once (default 4)")
    sv.add_argument("--ctx", type=int, default=4096, help="KV cache cells shared by the sequences (default 4096)")
    sv.add_argument("-t", "--threads", type=int, help="threads (default: all cores, or OMP_NUM_THREADS)")
    sv.add_argument("--batch", type=int, default=512, help="most tokens per graph step (default 512)")
    sv.add_argument("--kv-type", choices=_KV_TYPES, default="f16", help="KV cache type (default f16)")
    sv.add_argument("--api-key", default=os.environ.get("PYGGML_API_KEY"),
                    help="require Authorization: Bearer KEY (default $PYGGML_API_KEY; none: open)")
    sv.add_argument("--alias", help="the model name /v1/models reports (default the file name)")
    chat_cli.add_load_arguments(sv)
    sv.add_argument("--no-warmup", action="store_true",
                    help="skip the one-token step run at start (it reads the weights in and builds the decode graph)")
    sv.add_argument("--ray", action="store_true",
                    help="run as a Ray Serve deployment (needs pyggml[ray]; joins the Ray cluster of $RAY_ADDRESS "
                         "or this machine's, else starts a local one)")
    sv.add_argument("--replicas", type=int, default=1, help="with --ray: server replicas, requests balanced (default 1)")
    sv.add_argument("--stages", type=int,
                    help="pipeline the model's layers over N Ray actors (pyggml.distributed; needs pyggml[ray]): "
                         "a model larger than one machine")
    sv.set_defaults(fn=_cmd_serve)
    return p


def main(argv=None):
    """Run the pyggml command; returns the exit status. A user error (a missing or unusable file, an
    unsupported architecture, a bad option value, a prompt that does not fit) prints one line
    `pyggml CMD: error: ...` and returns 2; --debug shows the traceback instead."""
    argv = sys.argv[1:] if argv is None else list(argv)
    p = parser()
    args = p.parse_args(argv or ["demo"])
    try:
        return args.fn(args)
    except KeyboardInterrupt:
        if getattr(args, "debug", False):
            raise
        print(file=sys.stderr)
        return 130
    except (UserError, ValueError, TypeError, KeyError, IndexError, RuntimeError, OSError, ImportError) as e:
        if getattr(args, "debug", False):
            raise
        msg = e.args[0] if isinstance(e, KeyError) and e.args else e
        print(f"pyggml {args.command or 'demo'}: error: {msg}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
