"""Chat templates against transformers' apply_chat_template (llama.cpp's template files and
templates written here), the sandbox and its limits, and the OpenAI-style completions on a tiny
random model with a vocabulary."""
import os
from pathlib import Path

import numpy as np
import pytest

from pyggml.models.chat import CHATML, ChatTemplate, ChatTemplateError

jinja2 = pytest.importorskip("jinja2")

TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "The weather in a city",
                                           "parameters": {"type": "object", "properties": {
                                               "city": {"type": "string", "description": "the city"}},
                                               "required": ["city"]}}}]
CALL = {"role": "assistant", "content": "", "tool_calls": [
    {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]}
CONVERSATIONS = {
    "user": [{"role": "user", "content": "Hello!"}],
    "system": [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Hi there"}],
    "multi-turn": [{"role": "system", "content": "Be kind."}, {"role": "user", "content": "2+2?"},
                   {"role": "assistant", "content": "4"}, {"role": "user", "content": "and 3+3?"},
                   {"role": "assistant", "content": "6"}, {"role": "user", "content": "Thanks ünïcødé 你好"}],
    "tool-call": [{"role": "user", "content": "Weather in Paris?"}, CALL,
                  {"role": "tool", "tool_call_id": "call_1", "name": "get_weather", "content": "{\"temp\": 21}"}],
}

# templates written here: the helpers, loop controls, whitespace control, namespaces, tools
OWN = {
    "chatml": CHATML,
    "helpers": ("{{ bos_token }}{% for m in messages %}{% if m.role == 'system' and not loop.first %}"
                "{{ raise_exception('system only first') }}{% endif %}"
                "[{{ m.role | upper }}] {{ m.content | trim }}{{ eos_token }}\n{% endfor %}"
                "{% if tools %}TOOLS {{ tools | tojson }} {{ tools[0] | tojson(indent=2) }}{% endif %}"
                "{% if add_generation_prompt %}[ASSISTANT]{% endif %}"),
    "controls": ("{%- set ns = namespace(n=0, last='') -%}\n"
                 "{%- for m in messages %}\n"
                 "  {%- if m.role == 'assistant' %}{% continue %}{% endif %}\n"
                 "  {%- set ns.n = ns.n + 1 %}{% set ns.last = m.content %}\n"
                 "  <{{ loop.index }}|{{ m['role'] }}>{{ m.content }}\n"
                 "  {%- if ns.n > 3 %}{% break %}{% endif %}\n"
                 "{%- endfor %}\n"
                 "count={{ ns.n }} last={{ ns.last | tojson }} d={{ dict(a=1, b=[1, 2]) | tojson(sort_keys=True) }}\n"
                 "{% generation %}gen{% endgeneration %}{{ '%02d' % 7 }}{{ strftime_now('%Y') | length }}"),
    "tool-calls": ("{% for m in messages %}{{ m.role }}:{% if m.tool_calls is defined %}{% for c in m.tool_calls %}"
                   "{{ c.function.name }}({{ c.function.arguments | tojson }}){% endfor %}{% else %}{{ m.content }}"
                   "{% endif %}|{% endfor %}{% if add_generation_prompt %}assistant:{% endif %}"),
}


def llama_cpp_templates():
    root = os.environ.get("PYGGML_LLAMA_CPP")
    if not root or not (Path(root) / "models" / "templates").is_dir():
        return []
    return sorted((Path(root) / "models" / "templates").glob("*.jinja"))


@pytest.fixture(scope="module")
def hf_tokenizer():
    pytest.importorskip("transformers")
    from tokenizers import Tokenizer, models
    from transformers import PreTrainedTokenizerFast
    tok = Tokenizer(models.WordLevel({"<s>": 0, "</s>": 1, "<unk>": 2}, unk_token="<unk>"))
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>")


def hf_render(hf, source, messages, tools, add):
    """transformers' rendering, or the exception it raises."""
    try:
        return hf.apply_chat_template(messages, tools=tools, chat_template=source, add_generation_prompt=add,
                                      tokenize=False)
    except Exception as e:  # noqa: BLE001 (the template's own error, compared below)
        return e


def check_same(hf, source, name):
    """Render every conversation, with and without tools and a generation prompt, with both; returns
    how many rendered (the others raised in transformers and here)."""
    t = ChatTemplate(source, "<s>", "</s>", name)
    n = 0
    for conv_name, messages in CONVERSATIONS.items():
        for tools in (None, TOOLS):
            for add in (True, False):
                want = hf_render(hf, source, messages, tools, add)
                if isinstance(want, Exception):
                    with pytest.raises(ChatTemplateError, match=name):
                        t.render(messages, add_generation_prompt=add, tools=tools)
                    continue
                got = t.render(messages, add_generation_prompt=add, tools=tools)
                assert got == want, (name, conv_name, tools is not None, add)
                n += 1
    return n


@pytest.mark.parametrize("name", list(OWN))
def test_own_templates_render_as_transformers(hf_tokenizer, name):
    assert check_same(hf_tokenizer, OWN[name], name) == 16


@pytest.mark.parametrize("path", llama_cpp_templates(), ids=lambda p: p.stem)
def test_llama_cpp_templates_render_as_transformers(hf_tokenizer, path):
    check_same(hf_tokenizer, path.read_text(encoding="utf-8"), path.stem)


def test_llama_cpp_templates_present_when_configured():
    if os.environ.get("PYGGML_LLAMA_CPP"):
        assert len(llama_cpp_templates()) > 20
    else:
        pytest.skip("PYGGML_LLAMA_CPP is not set")


def test_chatml_is_llama_cpps_fallback():
    msgs = CONVERSATIONS["multi-turn"]
    want = "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in msgs) + "<|im_start|>assistant\n"
    assert ChatTemplate(CHATML).render(msgs) == want
    assert ChatTemplate(CHATML).render(msgs, add_generation_prompt=False) == want[:-len("<|im_start|>assistant\n")]


ESCAPES = {
    "{{ ''.__class__.__mro__ }}": "__class__",
    "{{ messages.__class__.__base__.__subclasses__() }}": "__class__",
    "{{ cycler.__init__.__globals__.os }}": "__init__",
    "{{ raise_exception.__globals__ }}": "__globals__",
    "{{ messages.append(1) }}": "append",
    "{{ messages[0].update({'a': 1}) }}": "update",
    "{% set ns = namespace(__class__=1) %}": "may not start with '_'",
    "{{ lipsum.__globals__['os'] }}": "__globals__",
    "{{ messages.pop() }}": "pop",
    "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}": "loop items",
    "{{ 'x' * 10 ** 9 }}": "repetition",
    "{{ [1] * 10 ** 9 }}": "repetition",
    "{{ 2 ** 100000 }}": "bits",
    "{{ 'x'.ljust(10 ** 9) }}": "padding width",
    "{{ 'x' | center(10 ** 9) }}": "padding width",
    "{% for i in range(4) %}{{ 'x' * 10 ** 7 }}{% endfor %}": "output is over",
    "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}": "recursed too deeply",
}


@pytest.mark.parametrize("source", list(ESCAPES))
def test_sandbox_escapes_and_bombs_raise_clearly(source):
    with pytest.raises(ChatTemplateError, match=f"evil.gguf: .*{ESCAPES[source]}"):
        ChatTemplate(source, name="evil.gguf").render(CONVERSATIONS["user"])


def test_template_errors():
    with pytest.raises(ChatTemplateError, match=r"T: the chat template does not parse: .* \(line 2\)"):
        ChatTemplate("ok\n{% for %}", name="T")
    with pytest.raises(ChatTemplateError, match="T: the chat template failed: no tools"):
        ChatTemplate("{{ raise_exception('no tools') }}", name="T").render([])
    with pytest.raises(TypeError, match="message 0 must be a dict"):
        ChatTemplate(CHATML).render(["hi"])
    with pytest.raises(TypeError, match="messages must be a list of dicts, got a str"):
        ChatTemplate(CHATML).render("hi")
    with pytest.raises(TypeError, match="message 0 must be JSON-like data"):
        ChatTemplate(CHATML).render([{"role": "user", "content": object()}])
    # numpy scalars and tuples become plain data; None-valued keys are dropped as transformers does
    out = ChatTemplate("{{ messages[0].n + 1 }}{{ messages[0].t | tojson }}{{ messages[0].c is defined }}").render(
        [{"role": "user", "n": np.int64(2), "t": (1, 2), "c": None}])
    assert out == "3[1, 2]False"


# ---- completions on a tiny random model with a vocabulary ----

QWEN_LIKE = ("{% for m in messages %}{{ '<|im_start|>' + m.role + '\\n' + m.content + '<|im_end|>' + '\\n' }}"
             "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")


@pytest.fixture(scope="module")
def chat_model(tmp_path_factory):
    pytest.importorskip("gguf")
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from hf_models import bpe_tokenizer, hf_model

    from pyggml import models
    from pyggml.convert import convert_hf
    d = tmp_path_factory.mktemp("chat")
    tok = bpe_tokenizer(d / "tok", vocab_size=300)
    tok.chat_template = QWEN_LIKE
    convert_hf(hf_model("qwen2", vocab_size=320), d / "m.gguf", "f32", tokenizer=tok)
    convert_hf(hf_model("qwen2", vocab_size=320), d / "plain.gguf", "f32", tokenizer=bpe_tokenizer(d / "t2", 300))
    return models.load(d / "m.gguf", n_ctx=256, n_threads=1), models.load(d / "plain.gguf", n_ctx=256, n_threads=1)


MSGS = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hello world"}]


def test_apply_chat_template_uses_the_files_template(chat_model):
    m, plain = chat_model
    assert m.gguf.metadata["tokenizer.chat_template"] == QWEN_LIKE
    want = "<|im_start|>system\nbe brief<|im_end|>\n<|im_start|>user\nhello world<|im_end|>\n<|im_start|>assistant\n"
    assert m.apply_chat_template(MSGS) == want
    assert m.apply_chat_template(MSGS, add_generation_prompt=False) == want[:-len("<|im_start|>assistant\n")]
    assert "tokenizer.chat_template" not in plain.gguf.metadata
    assert plain.apply_chat_template(MSGS) == want                 # llama.cpp's ChatML fallback


def test_chat_completion_dict(chat_model):
    m, _ = chat_model
    m.reset()
    out = m.create_chat_completion(MSGS, max_tokens=12, temperature=0.9, top_k=0, top_p=1.0, min_p=0.0, seed=3,
                                   logprobs=True, top_logprobs=3)
    assert out["object"] == "chat.completion" and out["id"].startswith("chatcmpl-")
    assert isinstance(out["created"], int) and out["model"].endswith("m.gguf")
    (choice,) = out["choices"]
    assert choice["index"] == 0 and choice["message"]["role"] == "assistant"
    assert choice["finish_reason"] in ("stop", "length")
    prompt_ids = m.tokenizer.encode(m.apply_chat_template(MSGS))
    usage = out["usage"]
    assert usage["prompt_tokens"] == len(prompt_ids)
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    # the same draws by hand: the sampler over the model's logits, stopping at an end-of-generation id
    from pyggml.models import Sampler
    from pyggml.models.chat import eog_ids
    m.reset()
    s = Sampler(0.9, 0, 1.0, 3, min_p=0.0)
    s.accept(prompt_ids[-64:])
    logits, ids, lps = m.eval(prompt_ids, logits="last")[0], [], []
    for _ in range(12):
        t = s(logits)
        lp = logits.astype(np.float64) - logits.max() - np.log(np.exp(logits.astype(np.float64) - logits.max()).sum())
        if t in eog_ids(m):
            break
        ids.append(t)
        lps.append(lp[t])
        logits = m.eval([t], logits="last")[0]
    assert choice["message"]["content"] == m.tokenizer.decode(ids)
    assert usage["completion_tokens"] == len(ids) + (choice["finish_reason"] == "stop")
    content = choice["logprobs"]["content"]
    assert [c["token"] for c in content] == [m.tokenizer.token_to_piece(t) for t in ids]
    np.testing.assert_allclose([c["logprob"] for c in content], lps, rtol=1e-5, atol=1e-5)
    assert all(1 <= len(c["top_logprobs"]) <= 4 for c in content)     # keyed by text: equal pieces merge
    assert all(max(t["logprob"] for t in c["top_logprobs"]) >= c["logprob"] for c in content)


@pytest.mark.parametrize("stop", [None, "o", ["zz", "lo w"]])
def test_streaming_chunks_concatenate_to_the_text(chat_model, stop):
    m, _ = chat_model
    kw = {"max_tokens": 24, "temperature": 1.5, "top_k": 0, "top_p": 1.0, "min_p": 0.0, "seed": 11, "stop": stop, "logprobs": True}
    m.reset()
    whole = m.create_chat_completion(MSGS, **kw)
    m.reset()
    chunks = list(m.create_chat_completion(MSGS, stream=True, **kw))
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant"}
    assert all(c["object"] == "chat.completion.chunk" and c["id"] == chunks[0]["id"] for c in chunks)
    assert [c["choices"][0]["finish_reason"] for c in chunks][:-1] == [None] * (len(chunks) - 1)
    assert chunks[-1]["choices"][0]["finish_reason"] == whole["choices"][0]["finish_reason"]
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks)
    assert text == whole["choices"][0]["message"]["content"]
    tokens = [t for c in chunks if c["choices"][0]["logprobs"] for t in c["choices"][0]["logprobs"]["content"]]
    assert tokens == whole["choices"][0]["logprobs"]["content"]


def test_stop_strings_cut_the_text_across_tokens(chat_model):
    m, _ = chat_model
    kw = {"max_tokens": 40, "temperature": 1.5, "top_k": 0, "top_p": 1.0, "min_p": 0.0, "seed": 5}
    m.reset()
    free = m.create_completion("hello world", **kw)["choices"][0]["text"]
    assert len(free) > 6
    stop = free[3:6]                                    # likely spans a token boundary; its first occurrence
    cut = free.index(stop)
    m.reset()
    out = m.create_completion("hello world", stop=[stop, "\x00never"], **kw)
    assert out["choices"][0]["text"] == free[:cut] and out["choices"][0]["finish_reason"] == "stop"
    m.reset()
    streamed = list(m.create_completion("hello world", stop=stop, stream=True, **kw))
    assert "".join(c["choices"][0]["text"] for c in streamed) == free[:cut]
    assert all(stop not in c["choices"][0]["text"] for c in streamed)


def test_stop_text_holds_back_partial_matches():
    from pyggml.models.chat import _StopText
    s = _StopText(["</end>", "xyz"])
    assert s.push("abc</") == ("abc", False)
    assert s.push("en") == ("", False)
    assert s.push("x") == ("</en", False)               # not "</end>" after all; "x" may start "xyz"
    assert s.pending == "x" and s.push("yz!") == ("", True)
    s = _StopText(["</end>"])
    assert s.push("a</e") == ("a", False) and s.push("nd>tail") == ("", True)
    s = _StopText(["ab"])
    assert s.push("xa") == ("x", False) and s.flush() == "a"


def test_completion_reuses_the_cached_prefix(chat_model):
    m, _ = chat_model
    m.reset()
    kw = {"max_tokens": 6, "temperature": 0.0}
    first = m.create_completion("hello world, this is", **kw)
    assert m.timings["prefill_tokens"] == first["usage"]["prompt_tokens"]
    again = m.create_completion("hello world, this is", **kw)
    assert again["choices"][0]["text"] == first["choices"][0]["text"]
    assert m.timings["prefill_tokens"] == 1                        # only the last prompt token again
    longer = m.create_completion("hello world, this is a test", **kw)
    n_common = len(m.tokenizer.encode("hello world, this is"))
    assert m.timings["prefill_tokens"] <= longer["usage"]["prompt_tokens"] - n_common + 2
    m.reset()
    assert m.create_completion("hello world, this is a test", **kw)["choices"][0]["text"] == \
        longer["choices"][0]["text"]


@pytest.mark.parametrize("where", ["prefill", "answer"])
def test_an_interrupted_completion_keeps_the_cache_consistent(chat_model, where):
    """Ctrl-C (KeyboardInterrupt between or inside graph computes, here raised by a hook) in the
    prefill of a new turn (in its third chunk) or in the answer (its second token) leaves the KV
    cache holding what chat's record of it says: the next turn reuses the conversation before it
    and answers as a fresh model does."""
    from pyggml.models.chat import _CACHED_IDS
    m, _ = chat_model
    m.reset()
    kw = {"max_tokens": 4, "temperature": 0.0}
    h = [{"role": "user", "content": "hello world"}]
    h.append({"role": "assistant", "content": m.create_chat_completion(h, **kw)["choices"][0]["message"]["content"]})
    n_turn = m.cache.n_used
    long = h + [{"role": "user", "content": "the quick brown fox jumps over the lazy dog"}]
    ids, cached = m.tokenizer.encode(m.apply_chat_template(long)), _CACHED_IDS[m]
    keep = next(i for i, (a, b) in enumerate(zip(cached + [-1], ids)) if a != b)
    n_chunks = -(-(len(ids) - keep) // 8)
    assert n_chunks > 3
    at = 3 if where == "prefill" else n_chunks + 2
    calls = []

    def interrupt(t):
        calls.append(1)
        if len(calls) == at:
            raise KeyboardInterrupt

    m.n_batch = 8
    try:
        with m.hooks({"l_out-1": interrupt}), pytest.raises(KeyboardInterrupt):
            for _ in m.create_chat_completion(long, stream=True, **kw):
                pass
    finally:
        m.n_batch = 512
    assert len(calls) == at
    cached = _CACHED_IDS[m]
    assert m.cache.n_used == len(cached) == m.n_past
    assert np.array_equal(np.sort(m.cache.cell_pos[m.cache.cell_pos >= 0]), np.arange(len(cached)))
    assert cached[:len(ids)] == ids[:len(cached)]
    if where == "prefill":                                     # the turn is not half in the cache
        assert len(cached) == keep
    else:
        assert len(cached) == len(ids) + 1                     # the prompt and the first answer token
    nxt = h + [{"role": "user", "content": "this is a test"}]
    got = m.create_chat_completion(nxt, **kw)
    assert m.timings["prefill_tokens"] < got["usage"]["prompt_tokens"] - n_turn + 8     # the conversation reused
    m.reset()
    assert m.create_chat_completion(nxt, **kw)["choices"][0]["message"] == got["choices"][0]["message"]


def test_completion_logprobs_and_errors(chat_model):
    m, _ = chat_model
    m.reset()
    out = m.create_completion("hello", max_tokens=5, temperature=0.0, logprobs=2)
    lp = out["choices"][0]["logprobs"]
    assert set(lp) == {"tokens", "text_offset", "token_logprobs", "top_logprobs"}
    assert "".join(lp["tokens"]) == out["choices"][0]["text"]
    assert lp["text_offset"][0] == len("hello")
    assert all(max(d.values()) == pytest.approx(v) for d, v in zip(lp["top_logprobs"], lp["token_logprobs"]))
    with pytest.raises(ValueError, match="the prompt is empty"):
        m.create_completion([], max_tokens=2)
    with pytest.raises(ValueError, match="the prompt is 300 tokens, more than the context"):
        m.create_completion([5] * 300, max_tokens=2)
    with pytest.raises(TypeError, match="stop must be a str or a list of str"):
        m.create_completion("hi", stop=[3])
    with pytest.raises(ValueError, match="top_p must be in"):
        m.create_chat_completion(MSGS, top_p=0.0)
    m.reset()
    out = m.create_completion("hi", max_tokens=None, temperature=0.0, logit_bias={i: -np.inf for i in eog_list(m)})
    assert out["choices"][0]["finish_reason"] == "length"
    assert out["usage"]["total_tokens"] == m.n_ctx


def eog_list(m):
    from pyggml.models.chat import eog_ids
    return sorted(eog_ids(m))


@pytest.mark.parametrize("options", [{"temperature": 0.0, "dry_multiplier": 3.0, "dry_allowed_length": 1},
                                     {"temperature": 0.0, "xtc_probability": 1.0, "xtc_threshold": 0.02},
                                     {"temperature": 0.9, "seed": 5, "mirostat_mode": 2, "mirostat_tau": 4.0},
                                     {"temperature": 0.9, "seed": 5, "mirostat_mode": 1, "dry_multiplier": 1.0}])
def test_completion_samples_with_dry_xtc_mirostat(chat_model, options):
    """create_completion's DRY, XTC and mirostat options reach its Sampler: the same ids as a loop over
    eval with that Sampler (the prompt in its windows, DRY's breakers from the vocabulary)."""
    from pyggml.models import Sampler
    from pyggml.models.chat import eog_ids
    m, _ = chat_model
    options = dict(options)
    prompt = "hello world hello world hello world hello"
    m.reset()
    got = m.create_completion(prompt, max_tokens=12, **options)["choices"][0]["text"]
    m.reset()
    ids = m.tokenize(prompt)
    s = Sampler(options.pop("temperature"), 40, 0.95, options.pop("seed", None), min_p=0.05,
                tokenizer=m.tokenizer if options.get("dry_multiplier") else None, **options)
    s.accept(ids)
    logits, out = m.eval(ids, "last")[0], []
    for _ in range(12):
        t = s(logits)
        if t in eog_ids(m):
            break
        out.append(t)
        logits = m.eval([t], "last")[0]
    assert got == m.tokenizer.decode(out)
    m.reset()
    plain = m.create_completion(prompt, max_tokens=12, temperature=0.0)["choices"][0]["text"]
    if "xtc_probability" in options or "dry_multiplier" in options:
        assert got != plain                     # the option changed the answer
