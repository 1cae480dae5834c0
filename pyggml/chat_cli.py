"""`pyggml chat model.gguf`: an interactive chat in the terminal.

Each turn renders the whole history with the file's chat template and generates through
Model.create_chat_completion, which keeps the KV cache of the previous turns and prefills only the
new suffix. Commands: /reset (forget the conversation), /system TEXT (the system message; the
conversation starts again), /stats (prefill and decode speed of the last answer), /help. Ctrl-C stops
the answer being written (what was written stays in the history); Ctrl-C before the answer begins
(while the message is prefilled) drops the message, and the KV cache holds the conversation as before
it (the interrupt lands between two graph computes: --batch sets how many tokens one computes);
EOF (Ctrl-D) exits.
"""
import signal
import sys
import threading

HELP = ("/reset: forget the conversation  /system TEXT: set the system message (and reset)  "
        "/stats: speed of the last answer  /help: this  Ctrl-C: stop the answer (or the prefill)  "
        "Ctrl-D: quit")


# control characters of a model's text (not tab, newline, carriage return) as U+FFFD on a terminal:
# an escape sequence in the output would otherwise reprogram the user's terminal
_CONTROLS = dict.fromkeys([*range(0x09), 0x0B, 0x0C, *range(0x0E, 0x20), *range(0x7F, 0xA0)], "\ufffd")


def add_arguments(p):
    p.add_argument("model", help="the .gguf file")
    p.add_argument("-t", "--threads", type=int, help="threads (default: all cores, or OMP_NUM_THREADS)")
    p.add_argument("--ctx", type=int, default=2048, help="context size in tokens (default 2048)")
    p.add_argument("--batch", type=int, default=512, help="most prompt tokens per graph (default 512); Ctrl-C "
                   "during a prefill stops it after the graph running")
    p.add_argument("-n", "--n-predict", type=int, default=-1, help="most tokens per answer (default -1: until the "
                   "context is full)")
    p.add_argument("--system", help="a system message")
    add_load_arguments(p)
    add_sampling_arguments(p)


def add_load_arguments(p):
    """Add --no-repack and --no-mmap (how the weights are held: models.load's repack and mmap) to the
    parser p; load_options(args) reads them back."""
    p.add_argument("--no-repack", action="store_true",
                   help="read the weights in place (zero-copy) instead of the CPU kernels' repacked copies")
    p.add_argument("--no-mmap", action="store_true",
                   help="read the file into memory instead of mapping it (llama.cpp's --no-mmap): a slower "
                        "start and memory the file's size; decode faster where the cached file reads slower (docs/gguf.md)")


def load_options(args):
    """models.load's keyword options from add_load_arguments' flags."""
    return {"repack": not args.no_repack, "mmap": not args.no_mmap}


def add_sampling_arguments(p, temp=0.8, top_k=40, top_p=0.95, min_p=0.05):
    """Add the sampling options of `pyggml run` and `pyggml chat` to the parser p, with the command's
    defaults (the others are off by default); sampling_options(args) reads them back."""
    g = p.add_argument_group("sampling (llama.cpp's sampler chain, docs/models.md)")
    g.add_argument("--temp", type=float, default=temp, help="temperature; 0 = greedy (default %(default)s)")
    g.add_argument("--top-k", type=int, default=top_k, help="keep the k most likely tokens (default %(default)s; "
                   "0 = off)")
    g.add_argument("--top-p", type=float, default=top_p, help="keep the most likely tokens up to this mass "
                   "(default %(default)s; 1 = off)")
    g.add_argument("--min-p", type=float, default=min_p, help="keep the tokens at least this fraction as likely "
                   "as the most likely (default %(default)s; 0 = off)")
    g.add_argument("--repeat-penalty", type=float, default=1.0, help="repetition penalty (default %(default)s = off)")
    g.add_argument("--dry-multiplier", type=float, default=0.0, help="DRY repetition penalty (default %(default)s "
                   "= off)")
    g.add_argument("--dry-base", type=float, default=1.75, help="DRY's base (default %(default)s)")
    g.add_argument("--dry-allowed-length", type=int, default=2, help="repetitions DRY lets through (default "
                   "%(default)s tokens)")
    g.add_argument("--dry-penalty-last-n", type=int, default=64, help="tokens DRY looks back over (default "
                   "%(default)s)")
    g.add_argument("--dry-sequence-breaker", action="append", metavar="TEXT", help="a text that stops DRY's runs; "
                   "repeat for more; 'none': no breakers (default: newline, ':', '\"', '*')")
    g.add_argument("--xtc-probability", type=float, default=0.0, help="XTC's chance to remove the top tokens "
                   "(default %(default)s = off)")
    g.add_argument("--xtc-threshold", type=float, default=0.1, help="XTC's probability threshold (default "
                   "%(default)s)")
    g.add_argument("--mirostat", type=int, default=0, choices=(0, 1, 2), help="mirostat 1 or 2 instead of the "
                   "chain's cuts and penalties (default 0 = off)")
    g.add_argument("--mirostat-ent", type=float, default=5.0, help="mirostat's target entropy tau (default "
                   "%(default)s)")
    g.add_argument("--mirostat-lr", type=float, default=0.1, help="mirostat's learning rate eta (default "
                   "%(default)s)")
    g.add_argument("--seed", type=int, help="sampling seed (reproducible generations)")


def sampling_options(args):
    """The keyword arguments of Sampler (and of create_chat_completion) that add_sampling_arguments' options give."""
    breakers = args.dry_sequence_breaker
    out = {"temperature": args.temp, "top_k": args.top_k, "top_p": args.top_p, "min_p": args.min_p,
           "repeat_penalty": args.repeat_penalty, "seed": args.seed, "dry_multiplier": args.dry_multiplier,
           "dry_base": args.dry_base, "dry_allowed_length": args.dry_allowed_length,
           "dry_penalty_last_n": args.dry_penalty_last_n, "xtc_probability": args.xtc_probability,
           "xtc_threshold": args.xtc_threshold, "mirostat_mode": args.mirostat, "mirostat_tau": args.mirostat_ent,
           "mirostat_eta": args.mirostat_lr}
    if breakers is not None:
        out["dry_sequence_breakers"] = [] if breakers == ["none"] else breakers
    return out


def _stats(m):
    tm = m.timings
    if not tm:
        return "no answer yet"
    pp = tm["prefill_tokens"] / tm["prefill_s"] if tm["prefill_s"] else 0.0
    tg = tm["decode_tokens"] / tm["decode_s"] if tm["decode_s"] else 0.0
    return (f"prefill: {tm['prefill_tokens']} tokens in {tm['prefill_s'] * 1e3:.1f} ms, {pp:.2f} tokens/s; "
            f"decode: {tm['decode_tokens']} tokens in {tm['decode_s'] * 1e3:.1f} ms, {tg:.2f} tokens/s; "
            f"context: {m.cache.n_used}/{m.n_ctx}")


def main(args, stdin=None, out=None):
    """Run the chat loop; returns the exit status. User errors raise (the caller prints them)."""
    from pyggml import models
    from pyggml.models import chat
    from pyggml.models.sampling import Sampler

    stdin, out = stdin or sys.stdin, out or sys.stdout
    if threading.current_thread() is threading.main_thread():
        # Ctrl-C stops an answer or a prefill even when the chat was started with SIGINT ignored
        # (from a background job, where Python then leaves it ignored)
        signal.signal(signal.SIGINT, signal.default_int_handler)
    m = models.load(args.model, n_ctx=args.ctx, n_threads=args.threads, n_batch=args.batch, **load_options(args))
    if m.tokenizer is None:
        raise ValueError(f"{args.model} has no usable tokenizer (pip install pyggml[tokenizer])")
    chat.template_of(m)                            # a template that does not parse: an error now
    options = sampling_options(args)
    Sampler(**{**options, "dry_sequence_breakers": ()})          # bad values: an error now
    options["max_tokens"] = args.n_predict
    system = args.system
    tty = stdin.isatty()
    shown = _CONTROLS if getattr(out, "isatty", lambda: False)() else {}    # what the terminal is shown
    if tty:
        print(f"{m!r}. {HELP}", file=out)

    def start():
        return [{"role": "system", "content": system}] if system else []

    history = start()
    while True:
        if tty:
            print("> ", end="", file=out, flush=True)
        try:
            line = stdin.readline()
        except KeyboardInterrupt:
            print(file=out)
            continue
        if not line:
            if tty:
                print(file=out)
            return 0
        line = line.rstrip("\n")
        if not line.strip():
            continue
        if line.startswith("/"):
            cmd, _, rest = line.partition(" ")
            if cmd == "/reset":
                history = start()
                m.reset()
                print("(conversation reset)", file=out, flush=True)
            elif cmd == "/system":
                system = rest.strip() or None
                history = start()
                m.reset()
                print("(system message set; conversation reset)", file=out, flush=True)
            elif cmd == "/stats":
                print(_stats(m), file=out, flush=True)
            elif cmd == "/help":
                print(HELP, file=out, flush=True)
            else:
                print(f"unknown command {cmd}; {HELP}", file=out, flush=True)
            continue
        history.append({"role": "user", "content": line})
        answer = []
        try:
            for c in m.create_chat_completion(history, stream=True, **options):
                piece = c["choices"][0]["delta"].get("content", "")
                if piece:
                    answer.append(piece)
                    print(piece.translate(shown), end="", file=out, flush=True)
                if c["choices"][0]["finish_reason"] == "length" and m.cache.n_used >= m.n_ctx - 1:
                    print("\n(the context is full: /reset to start again)", end="", file=out)
        except KeyboardInterrupt:
            if not answer:                 # during the prefill (or before any text): as if never sent
                history.pop()
                print("(interrupted)", file=out, flush=True)
                continue
            print(" (stopped)", end="", file=out)
        except ValueError as e:                # the history no longer fits: say so, keep the program
            history.pop()
            print(f"pyggml chat: error: {e}", file=sys.stderr, flush=True)
            continue
        print(file=out, flush=True)
        history.append({"role": "assistant", "content": "".join(answer)})
