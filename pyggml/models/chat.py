"""Chat templates and OpenAI-style completions, as llama.cpp and llama-cpp-python give them.

    m = pyggml.models.load("model.gguf")
    m.apply_chat_template([{"role": "user", "content": "Hi"}])          # the prompt text
    m.create_chat_completion([{"role": "user", "content": "Hi"}], max_tokens=64, seed=0)
    for chunk in m.create_completion("Once upon a time", stream=True): ...

Templates: the GGUF's `tokenizer.chat_template` (Jinja) rendered as transformers' apply_chat_template
renders it: Jinja2's ImmutableSandboxedEnvironment with trim_blocks, lstrip_blocks and the
loopcontrols extension, the helpers raise_exception, strftime_now, tojson (json.dumps, no HTML
escaping, ensure_ascii off), dict and namespace (no underscore names), `{% generation %}` passed
through; variables messages (None-valued keys dropped, plain JSON data, reasoning fields aliased as
transformers does), tools, documents, add_generation_prompt, bos_token and eos_token (the vocabulary's
text of its BOS and EOS ids). Templates are untrusted: besides the sandbox, a render is bounded in
loop iterations over range(), sizes made by `*` and `**`, widths given to padding methods and filters,
output length and recursion, and every failure is a ChatTemplateError naming the template.

Without a template (or with the name "chatml") the prompt is ChatML, llama.cpp's fallback
(common/chat.cpp); `tokenizer.chat_template.tool_use` is used when only it is present, as llama.cpp does.
As llama.cpp, a rendered prompt that starts with the BOS text loses it when the vocabulary adds BOS.

Completions reuse the KV cache: the cells that still hold the longest common prefix of the previous
completion's tokens and the new prompt are kept (at least the last prompt token is evaluated again),
as llama-cpp-python does, so a chat only prefills its new turn.
"""
import codecs
import datetime
import json
import time
import uuid
import weakref

import numpy as np

from pyggml.models.grammar import Grammar, grammar_spec
from pyggml.models.sampling import Sampler

__all__ = ["CHATML", "ChatTemplate", "ChatTemplateError", "apply_chat_template", "create_chat_completion",
           "create_completion", "eog_ids", "template_of"]

# llama.cpp's default template (common/chat.cpp, CHATML_TEMPLATE_SRC), written out the same way
CHATML = ("{%- for message in messages -%}\n"
          "  {{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' -}}\n"
          "{%- endfor -%}\n"
          "{%- if add_generation_prompt -%}\n"
          "  {{- '<|im_start|>assistant\\n' -}}\n"
          "{%- endif -%}")

# texts of the end-of-generation tokens llama.cpp finds by name (src/llama-vocab.cpp)
EOG_TEXTS = frozenset(["<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>",
                       "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]",
                       "<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
                       "<\uff5cend\u2581of\u2581sentence\uff5c>", "[e~["])

# limits of one render
MAX_ITERATIONS = 1_000_000          # range() items over the whole render
MAX_SIZE = 1 << 24                  # characters or items made by one `*`, width of one padding call
MAX_OUTPUT = 1 << 24                # characters of the rendered prompt
_POW_BITS = 1 << 16                 # bits of an integer made by `**`


class ChatTemplateError(ValueError):
    """A chat template that does not parse, raises, leaves the sandbox or exceeds a render limit."""


def _sandbox():
    import jinja2
    from jinja2 import ext, nodes
    from jinja2.exceptions import SecurityError
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    class Generation(ext.Extension):
        """`{% generation %}...{% endgeneration %}` (transformers' assistant mask marker): its body."""
        tags = frozenset(["generation"])

        def parse(self, parser):
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
            return nodes.Scope(body).set_lineno(lineno)

    def sized(n, what):
        if n > MAX_SIZE:
            raise SecurityError(f"{what} of {n} is over the chat template limit of {MAX_SIZE}")

    class Sandbox(ImmutableSandboxedEnvironment):
        intercepted_binops = frozenset(["*", "**"])

        def unsafe_undefined(self, obj, attribute):
            # jinja2 returns an undefined that raises only when used (printing it gives ""): refuse at once
            raise SecurityError(f"access to attribute {attribute!r} of a {type(obj).__name__} is not allowed")

        def call_binop(self, context, operator, left, right):
            if operator == "*":
                for seq, n in ((left, right), (right, left)):
                    if isinstance(seq, (str, list, tuple)) and isinstance(n, int):
                        sized(len(seq) * n, "a repetition")
                return left * right
            if (isinstance(left, int) and isinstance(right, int) and abs(left) > 1 and right > 0
                    and right * abs(left).bit_length() > _POW_BITS):
                raise SecurityError(f"{left} ** {right} is over the chat template limit of {_POW_BITS} bits")
            return left ** right

        def call(self, context, obj, /, *args, **kwargs):
            # str padding methods allocate their width: center, ljust, rjust, zfill, expandtabs
            if getattr(obj, "__self__", None).__class__ is str and getattr(obj, "__name__", "") in (
                    "center", "ljust", "rjust", "zfill", "expandtabs"):
                for a in (*args, *kwargs.values()):
                    if isinstance(a, int):
                        sized(a, "a padding width")
            return super().call(context, obj, *args, **kwargs)

    env = Sandbox(trim_blocks=True, lstrip_blocks=True, extensions=[Generation, ext.loopcontrols],
                  undefined=jinja2.Undefined)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    for name in ("center", "indent"):
        inner = env.filters[name]

        def bounded(s, width=80, *args, _inner=inner, **kwargs):
            if isinstance(width, int):
                sized(width, "a padding width")
            return _inner(s, width, *args, **kwargs)
        env.filters[name] = bounded
    env.filters["tojson"] = tojson

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    class TemplateDict:
        def __call__(self, *args, **kwargs):
            return dict(*args, **kwargs)

        def fromkeys(self, *args, **kwargs):
            return dict.fromkeys(*args, **kwargs)

    class Namespace(jinja2.utils.Namespace):
        """jinja2's namespace refusing underscore names (no way to shadow its internals)."""

        def __init__(*args, **kwargs):
            self, attrs = args[0], dict(*args[1:], **kwargs)
            for key in attrs:
                Namespace._check(key)
            jinja2.utils.Namespace.__init__(self, attrs)

        def __setitem__(self, key, value):
            Namespace._check(key)
            jinja2.utils.Namespace.__setitem__(self, key, value)

        @staticmethod
        def _check(key):
            if isinstance(key, str) and key.startswith("_"):
                raise SecurityError(f"a namespace attribute may not start with '_', got {key!r}")

    env.globals.update(raise_exception=raise_exception, dict=TemplateDict(), namespace=Namespace,
                       strftime_now=lambda fmt: datetime.datetime.now().strftime(fmt))
    return env


_ENV = None


def _environment():
    global _ENV
    if _ENV is None:
        _ENV = _sandbox()
    return _ENV


class _Budget:
    """range() for one render: the sandbox's range, counting the items against MAX_ITERATIONS."""

    def __init__(self, env):
        self.env, self.left = env, MAX_ITERATIONS

    def range(self, *args):
        from jinja2.exceptions import SecurityError
        r = range(*args)
        if len(r) > self.left:
            raise SecurityError(f"range() of {len(r)} items after {MAX_ITERATIONS - self.left} goes over the limit "
                                f"of {MAX_ITERATIONS} loop items per render")
        self.left -= len(r)
        return r


def _plain(value, where="messages"):
    """value as plain JSON data (dict, list, str, int, float, bool, None): what a template may see."""
    if value is None or type(value) in (str, int, float, bool):
        return value
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, int):
        return int.__int__(value)
    if isinstance(value, float):
        return float.__float__(value)
    if isinstance(value, np.generic):
        return _plain(value.item(), where)
    if isinstance(value, dict):
        return {_plain(k, where): _plain(v, where) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v, where) for v in value]
    raise TypeError(f"chat template: {where} must be JSON-like data (dict, list, str, numbers, bool, None), "
                    f"got a {type(value).__name__}")


_REASONING = ("reasoning_content", "thinking", "reasoning")


def _messages(messages):
    """transformers' message normalisation: dicts with their None-valued keys dropped, the reasoning
    under all of its names."""
    if isinstance(messages, (str, bytes, dict)) or not hasattr(messages, "__iter__"):
        raise TypeError(f"chat template: messages must be a list of dicts, got a {type(messages).__name__}")
    out = []
    for i, m in enumerate(messages):
        if not isinstance(m, dict):
            raise TypeError(f"chat template: message {i} must be a dict with 'role' and 'content', got {m!r}")
        m = _plain({k: v for k, v in m.items() if v is not None}, f"message {i}")
        reasoning = next((m[k] for k in _REASONING if m.get(k) is not None), None)
        if reasoning is not None:
            m = {"thinking": reasoning, **m, "reasoning_content": reasoning}
        out.append(m)
    return out


class ChatTemplate:
    """A compiled chat template. render(messages, add_generation_prompt=True, tools=None, **extra)
    -> str. name: how errors call it (the model file)."""

    def __init__(self, source, bos_token="", eos_token="", name="chat template"):
        import jinja2
        if not isinstance(source, str):
            raise TypeError(f"{name}: a chat template is a str, got {type(source).__name__}")
        self.source, self.bos_token, self.eos_token, self.name = source, bos_token or "", eos_token or "", name
        try:
            self.template = _environment().from_string(source)
        except jinja2.TemplateSyntaxError as e:
            raise ChatTemplateError(f"{name}: the chat template does not parse: {e.message} (line {e.lineno})") from e
        except RecursionError as e:
            raise ChatTemplateError(f"{name}: the chat template nests too deeply") from e

    def render(self, messages, add_generation_prompt=True, tools=None, documents=None, **extra):
        """The prompt text of messages (OpenAI-style dicts) and tools (JSON schemas), as transformers'
        apply_chat_template(tokenize=False) renders it."""
        import jinja2
        from jinja2.exceptions import SecurityError
        msgs = _messages(messages)
        if tools is not None:
            if not all(isinstance(t, dict) for t in tools):
                raise TypeError(f"{self.name}: tools must be JSON schemas (dicts)")
            tools = _plain(list(tools), "tools")
        budget = _Budget(_environment())
        variables = {"bos_token": self.bos_token, "eos_token": self.eos_token, **_plain(extra, "extra variables"),
                     "messages": msgs, "tools": tools, "documents": _plain(documents, "documents"),
                     "add_generation_prompt": bool(add_generation_prompt), "range": budget.range}
        out, size = [], 0
        try:
            for piece in self.template.generate(**variables):
                size += len(piece)
                if size > MAX_OUTPUT:
                    raise SecurityError(f"the output is over the chat template limit of {MAX_OUTPUT} characters")
                out.append(piece)
        except SecurityError as e:
            raise ChatTemplateError(f"{self.name}: the chat template was stopped by the sandbox: {e}") from e
        except jinja2.TemplateError as e:
            raise ChatTemplateError(f"{self.name}: the chat template failed: {e.message or e}") from e
        except RecursionError as e:
            raise ChatTemplateError(f"{self.name}: the chat template recursed too deeply") from e
        except (MemoryError, OverflowError) as e:
            raise ChatTemplateError(f"{self.name}: the chat template's render is too large ({e})") from e
        except Exception as e:        # a template's own error (a TypeError, ...): name the template
            raise ChatTemplateError(f"{self.name}: the chat template failed: {type(e).__name__}: {e}") from e
        return "".join(out)


# ---- a model's template, special tokens and prompt ----

def _metadata(model):
    f = getattr(model, "gguf", None)
    return getattr(f, "metadata", None) or {}


def _token_text(model, tid):
    if tid is None:
        return ""
    tokens = _metadata(model).get("tokenizer.ggml.tokens")
    if tokens is not None and 0 <= tid < len(tokens):
        return str(tokens[tid])
    tok = model.tokenizer
    return "" if tok is None else tok.token_to_bytes(int(tid), special=True).decode("utf-8", errors="replace")


def _special_id(model, key, attr):
    md = _metadata(model)
    v = md.get(f"tokenizer.ggml.{key}")
    if v is None:
        v = getattr(model.tokenizer, attr, None)
    return None if v is None else int(v)


def template_of(model):
    """The ChatTemplate of a model: its GGUF's tokenizer.chat_template, else llama.cpp's fallbacks
    (the tool_use template, else ChatML), with the vocabulary's BOS and EOS texts. Cached on first use."""
    cached = _TEMPLATES.get(model)
    if cached is not None:
        return cached
    md = _metadata(model)
    source = md.get("tokenizer.chat_template")
    if not source or source == "chatml":
        source = md.get("tokenizer.chat_template.tool_use") or CHATML
    name = str(getattr(model, "source", "") or getattr(model, "arch", "model")) + ": tokenizer.chat_template"
    t = ChatTemplate(source, _token_text(model, _special_id(model, "bos_token_id", "bos_id")),
                     _token_text(model, _special_id(model, "eos_token_id", "eos_id")), name)
    _TEMPLATES[model] = t
    return t


_TEMPLATES = weakref.WeakKeyDictionary()
_CACHED_IDS = weakref.WeakKeyDictionary()        # model -> the ids its KV cache holds from the last completion


def apply_chat_template(model, messages, add_generation_prompt=True, tools=None, **extra):
    """The prompt text of messages for model (Model.apply_chat_template)."""
    return template_of(model).render(messages, add_generation_prompt=add_generation_prompt, tools=tools, **extra)


def eog_ids(model):
    """The end-of-generation ids: EOS, EOT, EOM from the metadata and the tokens llama.cpp treats as
    end of generation by their text."""
    md = _metadata(model)
    ids = {int(md[k]) for k in ("tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id",
                                "tokenizer.ggml.eom_token_id") if md.get(k) is not None}
    eos = model.hparams.eos_id
    if eos is None and model.tokenizer is not None:
        eos = model.tokenizer.eos_id
    if eos is not None:
        ids.add(int(eos))
    tokens = md.get("tokenizer.ggml.tokens") or getattr(model.tokenizer, "tokens", None) or []
    ids.update(i for i, t in enumerate(tokens) if t in EOG_TEXTS)
    return frozenset(ids)


def _needs_tokenizer(model, what):
    tok = model.tokenizer
    if tok is None:
        raise RuntimeError(f"{what}: {model.source or model.arch} has no tokenizer (install the optional tokenizer "
                           "dependency)")
    return tok


def _chat_prompt_ids(model, text):
    """Token ids of a rendered chat prompt, as llama.cpp tokenizes it: the BOS text the template wrote
    is dropped when the vocabulary adds BOS itself (no double BOS)."""
    tok = _needs_tokenizer(model, "Model.create_chat_completion")
    bos = template_of(model).bos_token
    if getattr(tok, "add_bos", False) and bos and text.startswith(bos):
        text = text[len(bos):]
    return tok.encode(text)


# ---- generation ----

def _logprob_entry(tok, logits, chosen, n_top, offset):
    x = np.asarray(logits, dtype=np.float64)
    m = x.max()
    lp = x - m - np.log(np.exp(x - m).sum())
    top = {}
    if n_top:
        order = np.argsort(-lp, kind="stable")[:n_top]
        top = {tok.token_to_piece(int(i)): float(lp[i]) for i in order}
    piece = tok.token_to_piece(int(chosen))
    top[piece] = float(lp[chosen])
    return {"token": piece, "logprob": float(lp[chosen]), "top": top, "offset": offset}


class _StopText:
    """Text held back while it may be the start of a stop string (matched across tokens)."""

    def __init__(self, stops):
        self.stops = [s for s in stops if s]
        self.pending = ""

    def push(self, text):
        """(text safe to emit, True when a stop string was found: the text before it is all that is left)."""
        self.pending += text
        hits = [i for i in (self.pending.find(s) for s in self.stops) if i >= 0]
        if hits:
            out, self.pending = self.pending[:min(hits)], ""
            return out, True
        hold = 0
        for s in self.stops:
            for n in range(min(len(s) - 1, len(self.pending)), hold, -1):
                if self.pending.endswith(s[:n]):
                    hold = n
                    break
        cut = len(self.pending) - hold
        out, self.pending = self.pending[:cut], self.pending[cut:]
        return out, False

    def flush(self):
        out, self.pending = self.pending, ""
        return out


def _prefill(model, ids):
    """Evaluate prompt ids after the longest cached prefix still valid; returns the last logits row."""
    cache = model.cache
    cached = _CACHED_IDS.get(model)
    keep = 0
    if (cached is not None and cache.n_used == len(cached) == model.n_past and model.pos_rows != 4
            and np.array_equal(cache.cell_pos[:cache.n_used], np.arange(cache.n_used))):
        limit = min(len(cached), len(ids) - 1)
        a, b = np.asarray(cached[:limit]), np.asarray(ids[:limit])
        diff = np.flatnonzero(a != b)
        keep = int(diff[0]) if len(diff) else limit
    if keep:
        model.truncate(keep)
    else:
        model.reset()
    if len(ids) > model.n_ctx:
        raise ValueError(f"Model.create_completion: the prompt is {len(ids)} tokens, more than the context "
                         f"(n_ctx={model.n_ctx})")
    _CACHED_IDS[model] = list(ids[:keep])
    return _extend(model, ids[keep:]), len(ids) - keep


def _extend(model, ids):
    """Evaluate ids after those _CACHED_IDS[model] holds and add them to it; returns the last logits
    row. The two stay equal when the evaluation stops part way (Ctrl-C raises KeyboardInterrupt
    between two graph computes, after some chunks are in the cache): what it added is removed again,
    so that an interrupted prompt is not half in the cache."""
    cached = _CACHED_IDS[model]
    n = len(cached)
    try:
        logits = model.eval(ids, logits="last")[0]
        cached.extend(ids)
    except BaseException:
        del cached[n:]
        if n and model.pos_rows != 4:
            model.truncate(n)
        else:                               # M-RoPE contexts are not cut: start again
            cached.clear()
            model.reset()
        raise
    return logits


def _events(model, ids, max_tokens, sampler, stop, n_logprobs, prompt_len):
    """The generation: yields (text, logprob entries, finish_reason or None); sets model.timings."""
    tok = _needs_tokenizer(model, "Model.create_completion")
    if not model.has_head or model.l0 != 0:
        raise ValueError("Model.create_completion: needs the whole model (layers from 0 to n_layer)")
    if not ids:
        raise ValueError("Model.create_completion: the prompt is empty")
    stops = [stop] if isinstance(stop, str) else list(stop or [])
    if not all(isinstance(s, str) for s in stops):
        raise TypeError(f"Model.create_completion: stop must be a str or a list of str, got {stop!r}")
    eog = eog_ids(model)
    utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")
    held = _StopText(stops)
    t0 = time.perf_counter()
    logits, n_eval = _prefill(model, ids)
    model.timings = {"prefill_tokens": n_eval, "prefill_s": time.perf_counter() - t0, "decode_tokens": 0,
                     "decode_s": 0.0, "prompt_tokens": len(ids), "completion_tokens": 0}
    sampler.accept(ids)
    limit = model.n_ctx - len(ids) if max_tokens is None or max_tokens <= 0 else int(max_tokens)
    made, emitted, waiting = 0, 0, []     # waiting: logprob entries whose text is not yet emitted

    def release(upto, final=False):
        out = [e for e in waiting if e["offset"] < upto or final]
        del waiting[:len(out)]
        return out

    while True:
        if made >= limit or len(_CACHED_IDS[model]) >= model.n_ctx:
            text = held.flush() + utf8.decode(b"", final=True)
            emitted += len(text)
            yield text, release(emitted, final=True), "length"
            return
        t = sampler(logits)
        made += 1
        model.timings["completion_tokens"] = made
        if t in eog:
            text = held.flush() + utf8.decode(b"", final=True)
            emitted += len(text)
            yield text, release(emitted, final=True), "stop"
            return
        piece = utf8.decode(tok.token_to_bytes(t))
        if n_logprobs is not None:
            waiting.append(_logprob_entry(tok, logits, t, n_logprobs, prompt_len + emitted + len(held.pending)))
        text, stopped = held.push(piece)
        emitted += len(text)
        if stopped:
            yield text, release(emitted), "stop"
            return
        if text or (waiting and waiting[0]["offset"] < emitted):
            yield text, release(emitted), None
        if made >= limit:
            continue
        t1 = time.perf_counter()
        logits = _extend(model, [t])
        model.timings["decode_s"] += time.perf_counter() - t1
        model.timings["decode_tokens"] += 1


def _sampler(model, temperature, top_k, top_p, min_p, typical_p, seed, repeat_penalty, frequency_penalty,
             presence_penalty, penalty_last_n, logit_bias, more):
    """The Sampler of a completion; more: the DRY, XTC and mirostat options (DRY's sequence breakers
    are matched against the model's vocabulary)."""
    if more.get("dry_sequence_breakers") is None:
        more = {k: v for k, v in more.items() if k != "dry_sequence_breakers"}
    return Sampler(temperature, top_k, top_p, seed, min_p=min_p, typical_p=typical_p, repeat_penalty=repeat_penalty,
                   frequency_penalty=frequency_penalty, presence_penalty=presence_penalty,
                   penalty_last_n=penalty_last_n, logit_bias=logit_bias,
                   tokenizer=model.tokenizer if more.get("dry_multiplier") else None, **more)


_MORE = ("mirostat_mode", "mirostat_tau", "mirostat_eta", "dry_multiplier", "dry_base", "dry_allowed_length",
         "dry_penalty_last_n", "dry_sequence_breakers", "xtc_probability", "xtc_threshold")


def _more(args):
    """The DRY, XTC and mirostat options among a completion's arguments."""
    return {k: args[k] for k in _MORE}


def _grammar(model, spec):
    """The Grammar of a spec (None: none) for model, ending at its end-of-generation ids."""
    if spec is None:
        return None
    return Grammar(_needs_tokenizer(model, "structured output"), spec, eog_ids(model), model.n_vocab)


def _logprobs_block(entries):
    if entries is None:
        return None
    return {"tokens": [e["token"] for e in entries], "text_offset": [e["offset"] for e in entries],
            "token_logprobs": [e["logprob"] for e in entries], "top_logprobs": [e["top"] for e in entries]}


def _completion(model, ids, prompt_len, max_tokens, sampler, stop, stream, n_logprobs, name):
    cid, created = f"cmpl-{uuid.uuid4()}", int(time.time())
    events = _events(model, ids, max_tokens, sampler, stop, n_logprobs, prompt_len)
    want = n_logprobs is not None

    def chunk(text, entries, reason):
        return {"id": cid, "object": "text_completion", "created": created, "model": name,
                "choices": [{"text": text, "index": 0, "logprobs": _logprobs_block(entries) if want else None,
                             "finish_reason": reason}]}

    if stream:
        def chunks():
            for text, entries, reason in events:
                if reason is None:
                    yield chunk(text, entries, None)
                else:
                    if text or entries:
                        yield chunk(text, entries, None)
                    yield chunk("", [] if want else None, reason)
        return chunks()
    parts, entries, reason = [], [], None
    for text, es, reason in events:
        parts.append(text)
        entries += es
    tm = model.timings
    out = chunk("".join(parts), entries, reason)
    out["usage"] = {"prompt_tokens": tm["prompt_tokens"], "completion_tokens": tm["completion_tokens"],
                    "total_tokens": tm["prompt_tokens"] + tm["completion_tokens"]}
    return out


def create_completion(model, prompt, max_tokens=16, temperature=0.8, top_p=0.95, top_k=40, min_p=0.05, typical_p=1.0,
                      stop=None, seed=None, stream=False, logprobs=None, repeat_penalty=1.0, frequency_penalty=0.0,
                      presence_penalty=0.0, penalty_last_n=64, logit_bias=None, mirostat_mode=0, mirostat_tau=5.0,
                      mirostat_eta=0.1, dry_multiplier=0.0, dry_base=1.75, dry_allowed_length=2, dry_penalty_last_n=64,
                      dry_sequence_breakers=None, xtc_probability=0.0, xtc_threshold=0.1, grammar=None):
    """llama-cpp-python's Llama.create_completion (Model.create_completion; see docs/models.md); DRY
    and XTC take llama.cpp server's option names. grammar: GBNF or Lark text the completion must
    follow (structured output, pyggml.models.grammar; the optional extra pyggml[grammar]); the text
    ends where the grammar does."""
    more = _more(locals())
    if isinstance(prompt, str):
        ids = _needs_tokenizer(model, "Model.create_completion").encode(prompt)
        prompt_len = len(prompt)
    else:
        ids = [int(i) for i in prompt]
        prompt_len = len(_needs_tokenizer(model, "Model.create_completion").decode(ids))
    if logprobs is not None and int(logprobs) < 0:
        raise ValueError(f"Model.create_completion: logprobs must be >= 0 (the top ids to list), got {logprobs}")
    s = _sampler(model, temperature, top_k, top_p, min_p, typical_p, seed, repeat_penalty, frequency_penalty,
                 presence_penalty, penalty_last_n, logit_bias, more)
    s.grammar = _grammar(model, grammar_spec(grammar=grammar, where="Model.create_completion"))
    return _completion(model, ids, prompt_len, max_tokens, s, stop, stream, None if logprobs is None else int(logprobs),
                       _name(model))


def _name(model):
    return str(getattr(model, "source", "") or model.arch)


def create_chat_completion(model, messages, max_tokens=None, temperature=0.2, top_p=0.95, top_k=40, min_p=0.05,
                           typical_p=1.0, stop=None, seed=None, stream=False, logprobs=False, top_logprobs=None,
                           tools=None, repeat_penalty=1.0, frequency_penalty=0.0, presence_penalty=0.0,
                           penalty_last_n=64, logit_bias=None, mirostat_mode=0, mirostat_tau=5.0, mirostat_eta=0.1,
                           dry_multiplier=0.0, dry_base=1.75, dry_allowed_length=2, dry_penalty_last_n=64,
                           dry_sequence_breakers=None, xtc_probability=0.0, xtc_threshold=0.1,
                           response_format=None, grammar=None):
    """llama-cpp-python's Llama.create_chat_completion (Model.create_chat_completion; see docs/models.md);
    DRY and XTC take llama.cpp server's option names.

    Structured output (the optional extra pyggml[grammar]; pyggml.models.grammar), enforced token by
    token, the reply ending where the grammar does:
    response_format={"type": "json_object"} (any JSON object; with "schema": that schema),
    response_format={"type": "json_schema", "json_schema": {"schema": {...}}} (OpenAI's form), or
    grammar= GBNF or Lark text. A bad schema or grammar is a ValueError; a reply max_tokens cut
    short has finish_reason "length"."""
    more = _more(locals())
    text = apply_chat_template(model, messages, add_generation_prompt=True, tools=tools)
    ids = _chat_prompt_ids(model, text)
    if top_logprobs is not None and not 0 <= int(top_logprobs) <= 20:
        raise ValueError(f"Model.create_chat_completion: top_logprobs must be in [0, 20], got {top_logprobs}")
    n_logprobs = (int(top_logprobs or 0)) if logprobs else None
    s = _sampler(model, temperature, top_k, top_p, min_p, typical_p, seed, repeat_penalty, frequency_penalty,
                 presence_penalty, penalty_last_n, logit_bias, more)
    s.grammar = _grammar(model, grammar_spec(response_format, grammar, where="Model.create_chat_completion"))
    out = _completion(model, ids, len(text), max_tokens, s, stop, stream, n_logprobs, _name(model))
    return _chat_chunks(out) if stream else _chat(out)


def _chat_logprobs(block):
    if block is None:
        return None
    return {"content": [{"token": t, "logprob": lp, "bytes": None,
                         "top_logprobs": [{"token": k, "logprob": v, "bytes": None} for k, v in top.items()]}
                        for t, lp, top in zip(block["tokens"], block["token_logprobs"], block["top_logprobs"])],
            "refusal": None}


def _chat(c):
    ch = c["choices"][0]
    return {"id": "chat" + c["id"], "object": "chat.completion", "created": c["created"], "model": c["model"],
            "choices": [{"index": 0, "message": {"role": "assistant", "content": ch["text"]},
                         "logprobs": _chat_logprobs(ch["logprobs"]), "finish_reason": ch["finish_reason"]}],
            "usage": c["usage"]}


def _chat_chunks(chunks):
    for i, c in enumerate(chunks):
        head = {"id": "chat" + c["id"], "model": c["model"], "created": c["created"], "object": "chat.completion.chunk"}
        if i == 0:
            yield {**head, "choices": [{"index": 0, "delta": {"role": "assistant"}, "logprobs": None,
                                        "finish_reason": None}]}
        ch = c["choices"][0]
        yield {**head, "choices": [{"index": 0, "delta": {"content": ch["text"]} if ch["finish_reason"] is None else {},
                                    "logprobs": _chat_logprobs(ch["logprobs"]), "finish_reason": ch["finish_reason"]}]}
