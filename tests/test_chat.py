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
