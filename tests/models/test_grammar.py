"""Structured output (pyggml.models.grammar): on a tiny random qwen2 model with a byte-level BPE
vocabulary, JSON schemas give JSON that validates (greedy and sampled, several seeds), GBNF and Lark
grammars give sentences of their language, the token mask is exactly the tokens whose bytes extend
the text toward the language (computed here from transformers' vocabulary), max_tokens cutting the
text short is finish_reason "length", and bad input is a clear error."""
import json
import re
import sys

import numpy as np
import pytest

pytest.importorskip("llguidance")
pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("gguf")
pytest.importorskip("jinja2")
jsonschema = pytest.importorskip("jsonschema")

from hf_models import bpe_tokenizer, hf_model

from pyggml import models
from pyggml.models.chat import eog_ids
from pyggml.models.grammar import Grammar, grammar_spec
from pyggml.models.sampling import Sampler

MSGS = [{"role": "user", "content": "give me json"}]

SCHEMAS = {
    "required fields": {"type": "object", "additionalProperties": False, "required": ["name", "age"],
                        "properties": {"name": {"type": "string", "maxLength": 6},
                                       "age": {"type": "integer", "minimum": 0, "maximum": 120}}},
    "enum": {"type": "object", "additionalProperties": False, "required": ["color"],
             "properties": {"color": {"enum": ["red", "green", "blue"]}}},
    "array of integers": {"type": "array", "items": {"type": "integer", "minimum": -5, "maximum": 5},
                          "minItems": 1, "maxItems": 4},
    "nested": {"type": "object", "additionalProperties": False, "required": ["ok", "tags", "point"],
               "properties": {"ok": {"type": "boolean"},
                              "tags": {"type": "array", "items": {"enum": ["a", "b", "c"]}, "maxItems": 3},
                              "point": {"type": "object", "additionalProperties": False, "required": ["x", "y"],
                                        "properties": {"x": {"type": "integer", "minimum": 0, "maximum": 9},
                                                       "y": {"type": "integer", "minimum": 0, "maximum": 9}}}}},
}
# greedy, then sampled at two temperatures with several seeds
DECODING = [(0.0, 0), (0.8, 0), (0.8, 1), (1.5, 2)]


@pytest.fixture(scope="module")
def hf_tok(tmp_path_factory):
    return bpe_tokenizer(tmp_path_factory.mktemp("grammar") / "tok", vocab_size=300)


@pytest.fixture(scope="module")
def model(tmp_path_factory, hf_tok):
    from pyggml.convert import convert_hf
    path = convert_hf(hf_model("qwen2", vocab_size=320), tmp_path_factory.mktemp("grammar") / "m.gguf", "f16",
                      tokenizer=hf_tok)
    return models.load(path, n_ctx=1024, n_threads=2)


@pytest.mark.parametrize("name", list(SCHEMAS))
def test_json_schema_output_validates(model, name):
    schema = SCHEMAS[name]
    rf = {"type": "json_schema", "json_schema": {"name": "x", "schema": schema}}
    texts = set()
    for t, seed in DECODING:
        r = model.create_chat_completion(MSGS, max_tokens=600, temperature=t, seed=seed, response_format=rf)
        c = r["choices"][0]
        assert c["finish_reason"] == "stop", (t, seed, c)
        value = json.loads(c["message"]["content"])
        jsonschema.validate(value, schema)
        texts.add(c["message"]["content"])
    assert len(texts) > 1           # the sampled runs differ: the mask did not force one text


def test_json_object_mode(model):
    # any JSON object: greedy on this model closes it at once; sampled ones are steered to close by
    # a bias on "}" (the mask comes first, so the bias only acts where "}" is allowed)
    close = model.tokenizer.encode("}", add_bos=False)
    assert len(close) == 1
    for t, seed in DECODING:
        r = model.create_chat_completion(MSGS, max_tokens=400, temperature=t, seed=seed, logit_bias={close[0]: 6.0},
                                         response_format={"type": "json_object"})
        c = r["choices"][0]
        assert c["finish_reason"] == "stop", (t, seed, c)
        assert isinstance(json.loads(c["message"]["content"]), dict)
    # llama-cpp-python's form: json_object with a schema
    schema = SCHEMAS["enum"]
    r = model.create_chat_completion(MSGS, max_tokens=100, temperature=1.0, seed=4,
                                     response_format={"type": "json_object", "schema": schema})
    jsonschema.validate(json.loads(r["choices"][0]["message"]["content"]), schema)


def test_streamed_equals_whole(model):
    rf = {"type": "json_schema", "json_schema": {"schema": SCHEMAS["nested"]}}
    whole = model.create_chat_completion(MSGS, max_tokens=400, temperature=0.9, seed=7, response_format=rf)
    chunks = list(model.create_chat_completion(MSGS, max_tokens=400, temperature=0.9, seed=7, response_format=rf,
                                               stream=True))
    text = "".join(ch["choices"][0]["delta"].get("content", "") for ch in chunks)
    assert text == whole["choices"][0]["message"]["content"]
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"


GBNF = r'''root ::= answer " " num "."
answer ::= "yes" | "no" | "maybe"
num ::= [0-9] [0-9]?'''


@pytest.mark.parametrize("grammar,pattern", [
    (GBNF, r"(yes|no|maybe) [0-9][0-9]?\."),
    ('start: "id-" /[a-f]{2,4}/ ("!" | "?")', r"id-[a-f]{2,4}[!?]"),        # Lark
])
def test_grammar_restricts_output(model, grammar, pattern):
    seen = set()
    for t, seed in DECODING:
        r = model.create_completion("the quick brown fox", max_tokens=50, temperature=t, seed=seed, grammar=grammar)
        c = r["choices"][0]
        assert c["finish_reason"] == "stop" and re.fullmatch(pattern, c["text"]), (t, seed, c)
        seen.add(c["text"])
    assert len(seen) > 2
    # the same through the chat API
    r = model.create_chat_completion(MSGS, max_tokens=50, temperature=1.0, seed=3, grammar=grammar)
    assert re.fullmatch(pattern, r["choices"][0]["message"]["content"])


def test_max_tokens_cut_is_length(model):
    rf = {"type": "json_schema", "json_schema": {"schema": SCHEMAS["nested"]}}
    full = model.create_chat_completion(MSGS, max_tokens=600, temperature=0, response_format=rf)
    n = full["usage"]["completion_tokens"]
    assert n > 6
    cut = model.create_chat_completion(MSGS, max_tokens=5, temperature=0, response_format=rf)
    c = cut["choices"][0]
    assert c["finish_reason"] == "length" and cut["usage"]["completion_tokens"] == 5
    assert full["choices"][0]["message"]["content"].startswith(c["message"]["content"])
    with pytest.raises(ValueError):
        json.loads(c["message"]["content"])


def hf_bytes(hf_tok):
    """Each id's bytes from transformers' vocabulary (byte-level BPE: a character per byte);
    None for special tokens."""
    # GPT-2's byte-to-character table: printable Latin-1 bytes are themselves, the others 256 + n in order
    keep = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), 256)]
    back = {chr(b): b for b in keep}
    back.update({chr(256 + n): b for n, b in enumerate(b for b in range(256) if b not in keep)})
    special = set(hf_tok.all_special_tokens)
    return {i: None if s in special else bytes(back[ch] for ch in s) for s, i in hf_tok.get_vocab().items()}


def test_mask_is_exact(model, hf_tok):
    """Along sampled paths of a finite grammar, the allowed ids at every step are ids whose bytes extend
    the text toward a word of the language (the stop ids exactly when the text is a word): never empty
    while the language goes on, never a special token, never an id past the vocabulary. Where the
    next byte is open, every such id is allowed; where the grammar forces the next bytes, llguidance
    may keep only the tokenizer's own tokenization of them."""
    words = [b"yes", b"no", b"maybe", b"none", b"the quick"]
    grammar = "root ::= " + " | ".join(f'"{w.decode()}"' for w in words)
    vocab = hf_bytes(hf_tok)
    stop = eog_ids(model)
    assert len(vocab) < model.n_vocab       # ids past the tokenizer's: never allowed
    rng = np.random.default_rng(0)
    for _ in range(20):
        g = Grammar(model.tokenizer, ("grammar", grammar), stop, model.n_vocab)
        text = b""
        while True:
            want = {i for i, b in vocab.items() if b and any(w.startswith(text + b) for w in words)}
            if text in words:
                want |= set(stop)
            got = set(np.flatnonzero(g.allowed()).tolist())
            assert got and got <= want and (text in words) == bool(got & set(stop)), text
            if text in words or len({w[len(text)] for w in words if w.startswith(text) and w != text}) > 1:
                assert got == want, text
            t = int(rng.choice(sorted(got)))
            g.accept(t)
            if t in stop:
                break
            text += vocab[t]
        assert text in words


def test_sampler_hook(model):
    """The mask comes before the whole chain: greedy, sampled, biased, penalised, mirostat, XTC and
    DRY samplers all keep to the grammar, and a forbidden id fed to the grammar is a ValueError."""
    tok = model.tokenizer
    stop = eog_ids(model)
    rng = np.random.default_rng(1)
    for kw in ({}, {"temperature": 1.0, "top_k": 5, "seed": 2}, {"temperature": 0.7, "top_p": 0.5, "seed": 3},
               {"logit_bias": {5: 50.0}}, {"repeat_penalty": 1.3},
               {"temperature": 1.0, "seed": 4, "mirostat_mode": 1}, {"temperature": 1.0, "seed": 4, "mirostat_mode": 2},
               {"temperature": 0.9, "seed": 5, "xtc_probability": 1.0, "xtc_threshold": 0.05},
               {"temperature": 0.9, "seed": 6, "dry_multiplier": 0.8, "tokenizer": tok}):
        s = Sampler(**kw)
        s.grammar = Grammar(tok, ("grammar", GBNF), stop, model.n_vocab)
        out = []
        for _ in range(40):
            t = s(rng.normal(size=model.n_vocab) * 3)
            if t in stop:
                break
            out.append(t)
        assert re.fullmatch(r"(yes|no|maybe) [0-9][0-9]?\.", tok.decode(out)), kw
        assert s.grammar.complete
    g = Grammar(tok, ("grammar", GBNF), stop, model.n_vocab)
    with pytest.raises(ValueError, match="not allowed"):
        g.accept(tok.encode("x", add_bos=False)[0])


def test_grammar_spec_shapes():
    assert grammar_spec() is None and grammar_spec({"type": "text"}) is None
    assert grammar_spec({"type": "json_object"}) == ("json_schema", {"type": "object"})
    s = {"type": "integer"}
    assert grammar_spec({"type": "json_object", "schema": s}) == ("json_schema", s)
    assert grammar_spec({"type": "json_schema", "json_schema": {"name": "n", "schema": s}}) == ("json_schema", s)
    assert grammar_spec(json_schema=s) == ("json_schema", s)
    assert grammar_spec(grammar=GBNF) == ("grammar", GBNF)
    for bad, err in [({"response_format": {"type": "xml"}}, ValueError), ({"response_format": "json"}, TypeError),
                     ({"response_format": {"type": "json_schema"}}, ValueError),
                     ({"response_format": {"type": "json_schema", "json_schema": {"schema": [1]}}}, TypeError),
                     ({"grammar": 5}, TypeError), ({"grammar": "  "}, TypeError), ({"json_schema": "x"}, TypeError),
                     ({"grammar": GBNF, "json_schema": s}, ValueError)]:
        with pytest.raises(err):
            grammar_spec(**bad)


@pytest.mark.parametrize("kw,match", [
    ({"response_format": {"type": "json_schema", "json_schema": {"schema": {"type": "objectx"}}}}, "invalid JSON schema"),
    ({"response_format": {"type": "json_schema", "json_schema": {"schema": {"$ref": "#/nowhere"}}}},
     "invalid JSON schema"),
    ({"response_format": {"type": "json_object", "schema": {"type": "string", "pattern": "(("}}}, "invalid JSON schema"),
    ({"grammar": 'root ::= "yes'}, "invalid grammar"),
    ({"grammar": 'root ::= "a" undefined'}, "invalid grammar"),
    ({"grammar": "start: nothing"}, "invalid grammar"),
    ({"response_format": {"type": "json_object"}, "grammar": GBNF}, "one of"),
])
def test_bad_schema_or_grammar(model, kw, match):
    with pytest.raises(ValueError, match=match):
        model.create_chat_completion(MSGS, max_tokens=4, **kw)


def test_missing_engine_names_the_extra(model, monkeypatch):
    monkeypatch.setitem(sys.modules, "llguidance", None)
    with pytest.raises(ImportError, match=re.escape("pyggml[grammar]")):
        model.create_completion("hi", max_tokens=4, grammar=GBNF)
    # free text needs no engine
    assert model.create_completion("hi", max_tokens=2)["choices"]


@pytest.fixture(scope="module")
def spm_model(tmp_path_factory):
    pytest.importorskip("sentencepiece")
    from hf_models import spm_tokenizer

    from pyggml.convert import convert_hf
    d = tmp_path_factory.mktemp("grammar-spm")
    spm_tokenizer(d / "tok", vocab_size=320)
    path = convert_hf(hf_model("llama-gqa", vocab_size=320), d / "m.gguf", "f16", tokenizer=d / "tok")
    return models.load(path, n_ctx=512, n_threads=2)


def test_sentencepiece_vocabulary(spm_model):
    """An SPM vocabulary (the tokenizer writes a space before text it starts; byte tokens): where the
    grammar forces bytes mid-word, the allowed ids still spell them without that space."""
    m = spm_model
    words = ["hello world", "hello wörld", "the lazy dog", "the quick brown fox"]
    grammar = "root ::= (" + " | ".join(f'"{w}"' for w in words) + ') "."'
    pattern = "(" + "|".join(words) + r")\."
    stop = eog_ids(m)
    rng = np.random.default_rng(0)
    for _ in range(30):
        g = Grammar(m.tokenizer, ("grammar", grammar), stop, m.n_vocab)
        out = []
        while True:
            t = int(rng.choice(np.flatnonzero(g.allowed())))
            g.accept(t)
            if t in stop:
                break
            out.append(t)
        assert re.fullmatch(pattern, b"".join(m.tokenizer.token_to_bytes(t) for t in out).decode())
    for t, seed in DECODING:
        r = m.create_completion("the quick", max_tokens=40, temperature=t, seed=seed, grammar=grammar)
        assert r["choices"][0]["finish_reason"] == "stop" and re.fullmatch(pattern, r["choices"][0]["text"])
