"""Structured output: a grammar that constrains generation token by token, through llguidance (the
optional extra ``pyggml[grammar]``).

    spec = grammar_spec(response_format={"type": "json_schema", "json_schema": {"schema": schema}})
    g = Grammar(model.tokenizer, spec, stop_ids=eog_ids(model), n_vocab=model.n_vocab)
    sampler.grammar = g           # Sampler masks the logits with g and feeds g each sampled id

A spec is what a request asks for, checked but not compiled: ("json_schema", schema) for JSON mode
(schema {"type": "object"}: any object) and JSON schemas, ("grammar", text) for a GBNF grammar (as
llama.cpp's grammars/README.md) or a Lark grammar (llguidance's syntax). Grammar compiles a spec
against the tokenizer's vocabulary. Before each sampled token, mask() sets the logit of every id that
cannot extend the text toward a sentence of the grammar to -inf; once the grammar is complete only the
generation's stop ids stay allowed, so the text ends exactly where the grammar does.

JSON whitespace is llama.cpp's (json-schema-to-grammar): between tokens of JSON at most one space or
one newline with up to 20 spaces or tabs, so a model cannot pad forever. Properties a schema does not
forbid (additionalProperties) are allowed, as JSON Schema says.
"""
import threading
import weakref

import numpy as np

__all__ = ["Grammar", "grammar_spec"]

EXTRA = "structured output needs llguidance: pip install 'pyggml[grammar]' (or pip install llguidance)"
JSON_WHITESPACE = r"(?: |\n[ \t]{0,20})?"

# llguidance tokenizers, built once per (tokenizer, n_vocab, stop ids): walking a large vocabulary
# takes a moment
_ENVS = weakref.WeakKeyDictionary()
_ENVS_LOCK = threading.Lock()


def _llguidance():
    try:
        import llguidance
    except ImportError as e:
        raise ImportError(EXTRA) from e
    return llguidance


def grammar_spec(response_format=None, grammar=None, json_schema=None, where="structured output"):
    """The spec of a request, or None when it asks for free text. response_format: OpenAI's
    {"type": "text" | "json_object" | "json_schema"} (json_object with an optional "schema", as
    llama-cpp-python; json_schema with {"json_schema": {"schema": {...}}}); grammar: GBNF or Lark
    text (llama-cpp-python's and llama-server's `grammar`); json_schema: a schema (llama-server's
    field). At most one of them may constrain. ValueError/TypeError on a malformed request."""
    specs = []
    if response_format is not None:
        if not isinstance(response_format, dict) or not isinstance(response_format.get("type"), str):
            raise TypeError(f"{where}: response_format must be an object with a type, got {response_format!r:.80}")
        kind = response_format["type"]
        if kind == "json_object":
            schema = response_format.get("schema")
            specs.append(("json_schema", {"type": "object"} if schema is None else _schema(schema, where)))
        elif kind == "json_schema":
            inner = response_format.get("json_schema")
            if not isinstance(inner, dict) or "schema" not in inner:
                raise ValueError(f"{where}: response_format json_schema needs {{\"json_schema\": {{\"schema\": "
                                 f"{{...}}}}}}, got {inner!r:.80}")
            specs.append(("json_schema", _schema(inner["schema"], where)))
        elif kind != "text":
            raise ValueError(f"{where}: response_format type must be 'text', 'json_object' or 'json_schema', "
                             f"got {kind!r}")
    if json_schema is not None:
        specs.append(("json_schema", _schema(json_schema, where)))
    if grammar is not None:
        if not isinstance(grammar, str) or not grammar.strip():
            raise TypeError(f"{where}: grammar must be GBNF or Lark text, got {grammar!r:.80}")
        specs.append(("grammar", grammar))
    if len(specs) > 1:
        raise ValueError(f"{where}: give one of response_format json_object/json_schema, json_schema and grammar")
    return specs[0] if specs else None


def _schema(schema, where):
    if not isinstance(schema, (dict, bool)):
        raise TypeError(f"{where}: a JSON schema must be an object (or a boolean), got {type(schema).__name__}")
    return schema


class _Vocabulary:
    """What llguidance's TokenizerWrapper reads of a tokenizer: each id's bytes (control tokens and
    user-defined ones written <...> prefixed by 0xff, llguidance's mark of a special token, so
    grammar text never matches them), the EOS/BOS ids, and a tokenization of text (called with the
    bytes a grammar forces; the mask then keeps that tokenization of them)."""

    def __init__(self, tok):
        from pyggml.tokenizer import A_BYTE, A_CONTROL, A_UNKNOWN, A_USER_DEFINED
        self.tok = tok
        self.eos_token_id, self.bos_token_id = tok.eos_id, tok.bos_id
        self.tokens = []
        for i, a in enumerate(tok.attrs):
            b = tok.token_to_bytes(i, special=True)
            if a & (A_CONTROL | A_UNKNOWN) or (a & A_USER_DEFINED and b.startswith(b"<") and b.endswith(b">")):
                b = b"\xff" + b
            self.tokens.append(b)
        self.special_token_ids = [i for i, b in enumerate(self.tokens) if b[:1] == b"\xff"]
        self.by_bytes = None
        if tok.add_space_prefix:
            # the tokenizer writes a space before text it starts (SPM): the forced bytes continue a
            # text, so they are split greedily, longest token first (byte tokens last)
            order = sorted(range(len(self.tokens)), key=lambda i: bool(tok.attrs[i] & A_BYTE))
            self.by_bytes = {}
            for i in order:
                if self.tokens[i] and self.tokens[i][:1] != b"\xff":
                    self.by_bytes.setdefault(self.tokens[i], i)
            self.longest = max(map(len, self.by_bytes), default=1)

    def __call__(self, text):
        if self.by_bytes is None:
            if isinstance(text, bytes):
                text = text.decode("utf-8")
            return self.tok.encode(text, add_bos=False, parse_special=False)
        data = text if isinstance(text, bytes) else text.encode()
        out, at = [], 0
        while at < len(data):
            for n in range(min(self.longest, len(data) - at), 0, -1):
                t = self.by_bytes.get(data[at:at + n])
                if t is not None:
                    out.append(t)
                    at += n
                    break
            else:
                at += 1         # a byte no token spells: the grammar cannot force it either
        return out


def _environment(llg, tok, n_vocab, stop_ids):
    with _ENVS_LOCK:
        envs = _ENVS.setdefault(tok, {})
        key = (n_vocab, stop_ids)
        if key not in envs:
            envs[key] = llg.LLTokenizer(llg.TokenizerWrapper(_Vocabulary(tok)), n_vocab=n_vocab,
                                        eos_token=list(stop_ids))
        return envs[key]


class Grammar:
    """One generation's grammar state. tokenizer: a pyggml Tokenizer; spec: from grammar_spec;
    stop_ids: the ids that end the generation (allowed once the grammar is complete; at least one);
    n_vocab: the model's (ids past the tokenizer's are never allowed). ValueError names what is wrong
    with a bad schema or grammar; ImportError names the extra when llguidance is missing."""

    def __init__(self, tokenizer, spec, stop_ids, n_vocab=None):
        llg = _llguidance()
        if tokenizer is None:
            raise ValueError("structured output needs the model's tokenizer")
        stop_ids = tuple(sorted({int(t) for t in stop_ids}))
        if not stop_ids:
            raise ValueError("structured output needs an end-of-generation id to end the text with")
        self.n_vocab = int(n_vocab if n_vocab is not None else len(tokenizer.tokens))
        if self.n_vocab < len(tokenizer.tokens) or stop_ids[-1] >= self.n_vocab:
            raise ValueError(f"structured output: n_vocab {self.n_vocab} must cover the tokenizer's "
                             f"{len(tokenizer.tokens)} tokens and the stop ids (largest {stop_ids[-1]})")
        kind, body = spec
        if kind == "json_schema":
            try:
                text = llg.LLMatcher.grammar_from_json_schema(body, defaults={"whitespace_pattern": JSON_WHITESPACE})
            except (ValueError, TypeError) as e:
                raise ValueError(f"invalid JSON schema: {e}") from None
        elif kind == "grammar":
            try:
                text = llg.grammar_from("grammar", body)
            except ValueError as e:
                raise ValueError(f"invalid grammar: {e}") from None
        else:
            raise ValueError(f"structured output: unknown spec kind {kind!r} (json_schema or grammar)")
        self.env = _environment(llg, tokenizer, self.n_vocab, stop_ids)
        self.matcher = llg.LLMatcher(self.env, text, log_level=0)
        if self.matcher.is_error():
            what = "JSON schema" if kind == "json_schema" else "grammar"
            raise ValueError(f"invalid {what}: {self.matcher.get_error().strip()}")
        self.stop_ids = stop_ids

    def allowed(self):
        """A bool array over n_vocab: the ids that may come next."""
        bits = np.frombuffer(self.matcher.compute_bitmask(), np.uint8)
        ok = np.unpackbits(bits, bitorder="little")[:self.n_vocab].astype(bool)
        if not ok.any():
            raise RuntimeError(f"structured output: the grammar allows no token here "
                               f"({self.matcher.get_error() or self.matcher.stop_reason()})")
        return ok

    def mask(self, logits):
        """logits (a row over the vocabulary) as float64 with -inf on every id the grammar forbids
        next (ids past n_vocab included)."""
        x = np.array(logits, dtype=np.float64).reshape(-1)
        ok = self.allowed()
        n = min(len(x), len(ok))
        x[:n][~ok[:n]] = -np.inf
        x[n:] = -np.inf
        return x

    def accept(self, token):
        """Advance past a sampled id; ValueError if the grammar forbids it."""
        if not self.matcher.consume_token(int(token)):
            raise ValueError(f"structured output: token {int(token)} is not allowed by the grammar "
                             f"({self.matcher.get_error()})")

    @property
    def complete(self):
        """The text so far is a whole sentence of the grammar (a stop id may come next)."""
        return self.matcher.is_accepting()

    def reset(self):
        """Back to the start of the grammar."""
        self.matcher.reset()
