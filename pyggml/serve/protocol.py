"""The OpenAI request bodies the server accepts, checked field by field: a wrong type, a value out of
range or an unknown field is an ApiError (HTTP 400 with OpenAI's {"error": {...}} body), never an
exception from deeper down."""

import math

from pyggml.models.grammar import grammar_spec

__all__ = ["ApiError", "parse_chat", "parse_completion", "parse_embeddings"]

MAX_TOKENS_LIMIT = 1 << 20
MAX_CHOICES = 16          # n: completions of one request, each a request of the engine


class ApiError(Exception):
    """An error answered as OpenAI does: status, {"error": {"message", "type", "param", "code"}}."""

    def __init__(self, status, message, param=None, type="invalid_request_error", code=None):
        super().__init__(message)
        self.status, self.message, self.param, self.type, self.code = status, message, param, type, code

    def body(self):
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}


def _bad(param, message):
    return ApiError(400, f"{param}: {message}", param)


def _is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def _is_num(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _int(body, key, default, lo, hi):
    v = body.get(key, default)
    if v is None:
        return default
    if not _is_int(v):
        raise _bad(key, f"expected an integer, got {type(v).__name__}")
    if not lo <= v <= hi:
        raise _bad(key, f"must be in [{lo}, {hi}], got {v}")
    return v


def _num(body, key, default, lo, hi, lo_open=False):
    """body[key] as a float in [lo, hi] ((lo, hi] with lo_open; hi None: any finite number >= lo, or > lo
    with lo_open)."""
    v = body.get(key, default)
    if v is None:
        return default
    if not _is_num(v):
        raise _bad(key, f"expected a number, got {type(v).__name__}")
    above = lo < v if lo_open else lo <= v          # False for NaN
    if hi is None:
        if not above or v == math.inf:                 # Infinity (which json.loads accepts) fails too
            raise _bad(key, f"must be a finite number {'>' if lo_open else '>='} {lo}, got {v}")
    elif not above or v > hi:
        raise _bad(key, f"must be in {'(' if lo_open else '['}{lo}, {hi}], got {v}")
    return float(v)


def _bool(body, key, default):
    v = body.get(key, default)
    if v is None:
        return default
    if not isinstance(v, bool):
        raise _bad(key, f"expected a boolean, got {type(v).__name__}")
    return v


def _stop(body):
    v = body.get("stop")
    if v is None:
        return []
    if isinstance(v, str):
        v = [v]
    if not isinstance(v, list) or not all(isinstance(s, str) and s for s in v) or len(v) > 16:
        raise _bad("stop", "expected a non-empty string or a list of at most 16 non-empty strings")
    return v


def _check_keys(body, allowed):
    if not isinstance(body, dict):
        raise ApiError(400, f"the request body must be a JSON object, got {type(body).__name__}")
    unknown = sorted(set(body) - allowed)
    if unknown:
        raise _bad(unknown[0], "unknown field")


# fields every generation endpoint takes; those OpenAI defines that the server does not implement
# are accepted only at their no-op values (n = 1)
_SAMPLING = {"model", "max_tokens", "temperature", "top_p", "top_k", "seed", "stop", "stream", "stream_options",
             "n", "presence_penalty", "frequency_penalty", "logit_bias", "user"}
# llama-server's fields for min-p, the repetition penalty, DRY, XTC and mirostat (pyggml.models.
# sampling.Sampler's options)
_CHAIN = {"min_p", "repeat_penalty", "repeat_last_n", "dry_multiplier", "dry_base", "dry_allowed_length",
          "dry_penalty_last_n", "dry_sequence_breakers", "xtc_probability", "xtc_threshold", "mirostat", "mirostat_tau",
          "mirostat_eta"}
_INT32_MAX = (1 << 31) - 1


def _logit_bias(body, n_vocab):
    """logit_bias as Sampler takes it ({id: bias}): OpenAI's object of token ids (JSON keys are
    strings) to numbers, or llama-server's list of [id, bias] pairs; a bias of false bans the id."""
    v = body.get("logit_bias")
    if v is None:
        return None
    if isinstance(v, dict):
        pairs = list(v.items())
    elif isinstance(v, list) and all(isinstance(p, list) and len(p) == 2 for p in v):
        pairs = v
    else:
        raise _bad("logit_bias", "expected an object of token ids to numbers, or a list of [id, bias] pairs")
    out = {}
    for t, b in pairs:
        if isinstance(t, str) and t.strip().lstrip("-").isdigit():
            t = int(t)
        if not _is_int(t) or not 0 <= t < n_vocab:
            raise _bad("logit_bias", f"token ids must be integers in [0, {n_vocab}), got {t!r}")
        if b is False:
            b = -math.inf
        elif not _is_num(b) or not -math.inf < b < math.inf:
            raise _bad("logit_bias", f"the bias of token {t} must be a finite number or false, got {b!r}")
        out[t] = float(b)
    return out


def _breakers(body):
    v = body.get("dry_sequence_breakers")
    if v is None:
        return None
    if (not isinstance(v, list) or not v or len(v) > 16
            or not all(isinstance(s, str) and 0 < len(s.encode()) <= 40 for s in v)):
        raise _bad("dry_sequence_breakers", "expected a non-empty list of at most 16 non-empty strings of at most "
                                            "40 bytes")
    return v


def _chain(body, n_vocab):
    """Sampler's keyword options for the min-p, penalty, logit bias, DRY, XTC and mirostat fields
    given (OpenAI's and llama-server's names and ranges; repeat_last_n and dry_penalty_last_n -1:
    the whole sequence, as older llama-servers took it)."""
    out = {
        "min_p": _num(body, "min_p", None, 0.0, 1.0),
        "repeat_penalty": _num(body, "repeat_penalty", None, 0.0, None, lo_open=True),
        "penalty_last_n": _int(body, "repeat_last_n", None, -1, _INT32_MAX),
        "frequency_penalty": _num(body, "frequency_penalty", None, -2.0, 2.0),
        "presence_penalty": _num(body, "presence_penalty", None, -2.0, 2.0),
        "logit_bias": _logit_bias(body, n_vocab),
        "dry_multiplier": _num(body, "dry_multiplier", None, 0.0, None),
        "dry_base": _num(body, "dry_base", None, 1.0, None),
        "dry_allowed_length": _int(body, "dry_allowed_length", None, 0, _INT32_MAX),
        "dry_penalty_last_n": _int(body, "dry_penalty_last_n", None, -1, _INT32_MAX),
        "dry_sequence_breakers": _breakers(body),
        "xtc_probability": _num(body, "xtc_probability", None, 0.0, 1.0),
        "xtc_threshold": _num(body, "xtc_threshold", None, 0.0, 1.0),
        "mirostat_mode": _int(body, "mirostat", None, 0, 2),
        "mirostat_tau": _num(body, "mirostat_tau", None, 0.0, None),
        "mirostat_eta": _num(body, "mirostat_eta", None, 0.0, None),
    }
    return {k: v for k, v in out.items() if v is not None}


def _sampling(body, n_vocab):
    out = {
        "max_tokens": _int(body, "max_tokens", 16, 0, MAX_TOKENS_LIMIT),
        "temperature": _num(body, "temperature", 1.0, 0.0, 2.0),
        "top_p": _num(body, "top_p", 1.0, 0.0, 1.0, lo_open=True),
        "top_k": _int(body, "top_k", 0, 0, n_vocab),
        "seed": _int(body, "seed", None, -(1 << 63), (1 << 64) - 1),
        "stop": _stop(body),
        "stream": _bool(body, "stream", False),
        "sampling": _chain(body, n_vocab),
    }
    if out["seed"] is not None and out["seed"] < 0:
        out["seed"] &= (1 << 64) - 1
    out["n"] = _int(body, "n", 1, 1, MAX_CHOICES)
    opts = body.get("stream_options")
    if opts is not None:
        if not isinstance(opts, dict) or set(opts) - {"include_usage"}:
            raise _bad("stream_options", "expected an object with include_usage")
        out["include_usage"] = _bool(opts, "include_usage", False)
    else:
        out["include_usage"] = False
    if body.get("model") is not None and not isinstance(body["model"], str):
        raise _bad("model", "expected a string")
    return out


def _structured(body, fields):
    """(the structured-output spec (pyggml.models.grammar.grammar_spec), the field that gave it) of
    the given fields of body: response_format (OpenAI's), grammar (GBNF or Lark text) and
    json_schema (llama-server's)."""
    given = {k: body.get(k) for k in fields if body.get(k) is not None}
    param = next(iter(given), None)
    try:
        return grammar_spec(**given), param
    except (TypeError, ValueError) as e:
        raise ApiError(400, str(e), param) from None


def _token_list(v):
    return isinstance(v, list) and len(v) > 0 and all(_is_int(t) for t in v)


def parse_completion(body, n_vocab):
    """/v1/completions: prompt (a string, token ids, or a list of one of them), the sampling
    fields (with the penalties, logit bias, min-p, DRY, XTC and mirostat's), logprobs (0..20), echo (false),
    grammar / json_schema (structured output)."""
    _check_keys(body, _SAMPLING | _CHAIN | {"prompt", "logprobs", "echo", "best_of", "suffix", "grammar",
                                            "json_schema"})
    out = _sampling(body, n_vocab)
    p = body.get("prompt")
    if isinstance(p, list) and len(p) == 1 and (isinstance(p[0], str) or _token_list(p[0])):
        p = p[0]
    if not (isinstance(p, str) or _token_list(p)):
        raise _bad("prompt", "expected a string or a non-empty list of token ids (one prompt per request)")
    if isinstance(p, list):
        bad = [t for t in p if not 0 <= t < n_vocab]
        if bad:
            raise _bad("prompt", f"token id {bad[0]} is outside the vocabulary [0, {n_vocab})")
    out["prompt"] = p
    out["logprobs"] = _int(body, "logprobs", None, 0, 20)
    if _bool(body, "echo", False):
        raise _bad("echo", "echo is not supported")
    _int(body, "best_of", 1, 1, 1)
    if body.get("suffix") is not None:
        raise _bad("suffix", "suffix is not supported")
    out["structured"], out["structured_param"] = _structured(body, ("grammar", "json_schema"))
    return out


def _content(i, m):
    c = m.get("content")
    if isinstance(c, str):
        return c
    if c is None and m.get("role") == "assistant":
        return ""
    if isinstance(c, list) and all(isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str)
                                   for p in c):
        return "".join(p["text"] for p in c)
    raise _bad(f"messages[{i}].content", "expected a string or a list of text parts")


def parse_chat(body, n_vocab):
    """/v1/chat/completions: messages ({role, content}), the sampling fields, max_completion_tokens,
    logprobs (bool) and top_logprobs (0..20), structured output: response_format (text,
    json_object, json_schema), grammar, json_schema."""
    _check_keys(body, _SAMPLING | _CHAIN | {"messages", "max_completion_tokens", "logprobs", "top_logprobs",
                                   "response_format", "grammar", "json_schema"})
    if "max_completion_tokens" in body and body["max_completion_tokens"] is not None:
        body = dict(body, max_tokens=body["max_completion_tokens"])
    out = _sampling(body, n_vocab)
    if "max_tokens" not in body or body["max_tokens"] is None:
        out["max_tokens"] = None        # until the context ends
    msgs = body.get("messages")
    if not isinstance(msgs, list) or not msgs:
        raise _bad("messages", "expected a non-empty list of messages")
    clean = []
    for i, m in enumerate(msgs):
        if not isinstance(m, dict) or m.get("role") not in ("system", "developer", "user", "assistant", "tool"):
            raise _bad(f"messages[{i}]", "expected an object with role system, developer, user, assistant or tool")
        clean.append({"role": m["role"], "content": _content(i, m)})
    out["messages"] = clean
    top = _int(body, "top_logprobs", None, 0, 20)
    out["logprobs"] = (top or 0) if _bool(body, "logprobs", False) else None
    out["structured"], out["structured_param"] = _structured(body, ("response_format", "grammar", "json_schema"))
    return out


def parse_embeddings(body, n_vocab):
    """/v1/embeddings: input (a string, token ids, or a list of either), encoding_format float or base64."""
    _check_keys(body, {"model", "input", "encoding_format", "user", "dimensions"})
    v = body.get("input")
    items = v if isinstance(v, list) and v and isinstance(v[0], (str, list)) else [v]
    for i, x in enumerate(items):
        if not ((isinstance(x, str) and x) or _token_list(x)):
            raise _bad("input", f"item {i}: expected a non-empty string or a non-empty list of token ids")
        if isinstance(x, list) and any(not 0 <= t < n_vocab for t in x):
            raise _bad("input", f"item {i}: a token id is outside the vocabulary [0, {n_vocab})")
    if len(items) > 256:
        raise _bad("input", f"at most 256 inputs per request, got {len(items)}")
    fmt = body.get("encoding_format", "float")
    if fmt not in ("float", "base64"):
        raise _bad("encoding_format", f"expected 'float' or 'base64', got {fmt!r}")
    if body.get("dimensions") is not None:
        raise _bad("dimensions", "dimensions is not supported")
    return {"input": items, "encoding_format": fmt}
