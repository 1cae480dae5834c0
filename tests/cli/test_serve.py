"""pyggml serve: the OpenAI-compatible server, started in-process on 127.0.0.1 with a free port over a
tiny random qwen2 model with a BPE vocabulary, driven by the real openai client and raw HTTP: both
endpoints streaming and not, the error cases (always a 4xx with an OpenAI error body), concurrency
(each response equal to the same request run alone), a disconnect freeing its sequence, the
embeddings against transformers' last hidden state, the API key."""
import asyncio
import json
import random
import re
import socket
import sys
import threading
import time

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("gguf")
pytest.importorskip("starlette")
uvicorn = pytest.importorskip("uvicorn")
httpx = pytest.importorskip("httpx")
openai = pytest.importorskip("openai")

from hf_models import bpe_tokenizer, hf_model

from pyggml import models, serve


@pytest.fixture(scope="module")
def model_path(tmp_path_factory):
    from pyggml.convert import convert_hf
    d = tmp_path_factory.mktemp("serve")
    tok = bpe_tokenizer(d / "tok", vocab_size=300)
    return convert_hf(hf_model("qwen2", vocab_size=320), d / "m.gguf", "f16", tokenizer=tok)


class Running:
    """A Server run by uvicorn in a thread on a free port of 127.0.0.1."""

    def __init__(self, path, n_ctx=512, n_seq=4, **kw):
        self.server = serve.Server(models.load(path, n_ctx=n_ctx, n_threads=2), n_seq=n_seq, **kw)
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        self.uv = uvicorn.Server(uvicorn.Config(self.server.app, log_level="warning"))
        self.thread = threading.Thread(target=self.uv.run, kwargs={"sockets": [sock]}, daemon=True)
        self.thread.start()
        for _ in range(500):
            if self.uv.started:
                break
            time.sleep(0.01)
        assert self.uv.started

    def close(self):
        self.uv.should_exit = True
        self.thread.join(10)
        self.server.close()

    def client(self, key="none"):
        return openai.OpenAI(base_url=self.url + "/v1", api_key=key, max_retries=0, timeout=60)


@pytest.fixture(scope="module")
def srv(model_path):
    r = Running(model_path)
    yield r
    r.close()


def wait_idle(engine, timeout=5.0):
    t0 = time.time()
    while engine.busy and time.time() - t0 < timeout:
        time.sleep(0.01)
    return not engine.busy


def test_completions_openai_client(srv):
    c = srv.client()
    a = c.completions.create(model="m", prompt="hello world, this", max_tokens=12, temperature=0.8, seed=3,
                             logprobs=2)
    assert a.object == "text_completion" and a.choices[0].finish_reason in ("length", "stop")
    assert a.usage.prompt_tokens > 0 and a.usage.total_tokens == a.usage.prompt_tokens + a.usage.completion_tokens
    lp = a.choices[0].logprobs
    assert len(lp.token_logprobs) == len(lp.tokens) and all(v <= 0 for v in lp.token_logprobs)
    assert all(len(t) <= 2 for t in lp.top_logprobs)
    b = c.completions.create(model="m", prompt="hello world, this", max_tokens=12, temperature=0.8, seed=3,
                             logprobs=2)
    assert b.choices[0].text == a.choices[0].text and b.choices[0].logprobs.token_logprobs == lp.token_logprobs
    chunks = list(c.completions.create(model="m", prompt="hello world, this", max_tokens=12, temperature=0.8, seed=3,
                                       stream=True, stream_options={"include_usage": True}))
    assert "".join(ch.choices[0].text for ch in chunks if ch.choices) == a.choices[0].text
    assert chunks[-1].usage.completion_tokens == a.usage.completion_tokens
    # token ids as the prompt; greedy equals the model's own greedy generation
    ids = [5, 17, 42, 99]
    g = c.completions.create(model="m", prompt=ids, max_tokens=6, temperature=0)
    m = srv.server.model
    want = models.load(m.source, n_ctx=64).generate(ids, 6)
    assert g.choices[0].text == m.tokenizer.decode([t for t in want if t != m.hparams.eos_id])


def test_stop_strings(srv):
    c = srv.client()
    full = c.completions.create(model="m", prompt="the quick", max_tokens=24, temperature=0).choices[0].text
    if len(full) < 4:
        pytest.skip("the random model stopped early")
    stop = full[len(full) // 2: len(full) // 2 + 2]
    cut = full[:full.index(stop)]
    got = c.completions.create(model="m", prompt="the quick", max_tokens=24, temperature=0, stop=[stop])
    assert got.choices[0].text == cut and got.choices[0].finish_reason == "stop"
    chunks = c.completions.create(model="m", prompt="the quick", max_tokens=24, temperature=0, stop=stop, stream=True)
    assert "".join(ch.choices[0].text for ch in chunks) == cut


def test_chat_openai_client(srv):
    c = srv.client()
    msgs = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hello world"}]
    a = c.chat.completions.create(model="m", messages=msgs, max_tokens=10, temperature=0.7, seed=1, logprobs=True,
                                  top_logprobs=3)
    assert a.object == "chat.completion" and a.choices[0].message.role == "assistant"
    assert len(a.choices[0].logprobs.content) == a.usage.completion_tokens
    assert all(len(e.top_logprobs) == 3 for e in a.choices[0].logprobs.content)
    s = list(c.chat.completions.create(model="m", messages=msgs, max_tokens=10, temperature=0.7, seed=1, stream=True))
    assert s[0].choices[0].delta.role == "assistant"
    assert "".join(ch.choices[0].delta.content or "" for ch in s) == a.choices[0].message.content
    assert s[-1].choices[0].finish_reason == a.choices[0].finish_reason
    # the prompt is the ChatML rendering (no chat template in this GGUF)
    tok = srv.server.model.tokenizer
    assert a.usage.prompt_tokens == len(tok.encode(serve.render_chat(srv.server.model, msgs)))


def test_models_health_metrics(srv):
    c = srv.client()
    assert [m.id for m in c.models.list().data] == ["m.gguf"]
    assert httpx.get(srv.url + "/health").json() == {"status": "ok"}
    text = httpx.get(srv.url + "/metrics").text
    assert "# TYPE pyggml_tokens_generated_total counter" in text
    samples = dict(line.rsplit(" ", 1) for line in text.splitlines() if not line.startswith("#"))
    assert float(samples["pyggml_tokens_generated_total"]) > 0 and samples["pyggml_requests_running"] == "0"


def test_embeddings_are_the_pooled_last_hidden_state(srv):
    c = srv.client()
    ids = [3, 14, 15, 92, 65]
    got = np.array(c.embeddings.create(model="m", input=[ids, "hello"]).data[0].embedding)
    hf = hf_model("qwen2", vocab_size=320)
    with torch.no_grad():
        h = hf(torch.tensor([ids]), output_hidden_states=True).hidden_states[-1][0].double().numpy()
    want = h.mean(0) / np.linalg.norm(h.mean(0))
    assert got.shape == (64,) and abs(np.linalg.norm(got) - 1) < 1e-5
    np.testing.assert_allclose(got, want, atol=1e-2)
    b64 = httpx.post(srv.url + "/v1/embeddings", json={"input": ids, "encoding_format": "base64"}).json()
    import base64
    np.testing.assert_array_equal(np.frombuffer(base64.b64decode(b64["data"][0]["embedding"]), np.float32),
                                  got.astype(np.float32))


BAD = [
    (b"{not json", 400, None),
    (b"[1, 2]", 400, None),
    (json.dumps({"prompt": "hi", "max_tokens": -1}).encode(), 400, "max_tokens"),
    (json.dumps({"prompt": "hi", "max_tokens": 10 ** 12}).encode(), 400, "max_tokens"),
    (json.dumps({"prompt": "hi", "max_tokens": "5"}).encode(), 400, "max_tokens"),
    (json.dumps({"prompt": "hi", "temperature": "hot"}).encode(), 400, "temperature"),
    (json.dumps({"prompt": "hi", "temperature": 9}).encode(), 400, "temperature"),
    (json.dumps({"prompt": [1, 2, 320]}).encode(), 400, "prompt"),
    (json.dumps({"prompt": [1, -2]}).encode(), 400, "prompt"),
    (json.dumps({"prompt": [1, True]}).encode(), 400, "prompt"),
    (json.dumps({"prompt": 12}).encode(), 400, "prompt"),
    (json.dumps({"prompt": ""}).encode(), 400, "prompt"),
    (json.dumps({"prompt": "hi", "bogus": 1}).encode(), 400, "bogus"),
    (json.dumps({"prompt": "hi", "n": 0}).encode(), 400, "n"),
    (json.dumps({"prompt": "hi", "n": 17}).encode(), 400, "n"),
    (json.dumps({"prompt": "hi", "n": 1.5}).encode(), 400, "n"),
    (json.dumps({"prompt": "hi", "stop": 3}).encode(), 400, "stop"),
    (json.dumps({"prompt": "hi", "stream": "yes"}).encode(), 400, "stream"),
    (json.dumps({"prompt": "hi " * 400}).encode(), 400, "prompt"),
    (json.dumps({"prompt": list(range(127))}).encode(), 400, "prompt"),
    (json.dumps({"prompt": "hi", "mirostat": 3}).encode(), 400, "mirostat"),
    (json.dumps({"prompt": "hi", "mirostat": 1.0}).encode(), 400, "mirostat"),
    (json.dumps({"prompt": "hi", "mirostat": "2"}).encode(), 400, "mirostat"),
    (json.dumps({"prompt": "hi", "mirostat_tau": -1}).encode(), 400, "mirostat_tau"),
    (b'{"prompt": "hi", "mirostat_eta": NaN}', 400, "mirostat_eta"),
    (json.dumps({"prompt": "hi", "xtc_probability": 1.5}).encode(), 400, "xtc_probability"),
    (json.dumps({"prompt": "hi", "xtc_threshold": -0.1}).encode(), 400, "xtc_threshold"),
    (json.dumps({"prompt": "hi", "dry_multiplier": -1}).encode(), 400, "dry_multiplier"),
    (b'{"prompt": "hi", "dry_multiplier": Infinity}', 400, "dry_multiplier"),
    (json.dumps({"prompt": "hi", "dry_base": 0.5}).encode(), 400, "dry_base"),
    (json.dumps({"prompt": "hi", "dry_allowed_length": -1}).encode(), 400, "dry_allowed_length"),
    (json.dumps({"prompt": "hi", "dry_penalty_last_n": -2}).encode(), 400, "dry_penalty_last_n"),
    (json.dumps({"prompt": "hi", "repeat_penalty": 0}).encode(), 400, "repeat_penalty"),
    (b'{"prompt": "hi", "repeat_penalty": NaN}', 400, "repeat_penalty"),
    (b'{"prompt": "hi", "repeat_penalty": Infinity}', 400, "repeat_penalty"),
    (json.dumps({"prompt": "hi", "repeat_last_n": -2}).encode(), 400, "repeat_last_n"),
    (json.dumps({"prompt": "hi", "frequency_penalty": 2.5}).encode(), 400, "frequency_penalty"),
    (json.dumps({"prompt": "hi", "presence_penalty": "x"}).encode(), 400, "presence_penalty"),
    (json.dumps({"prompt": "hi", "min_p": 1.5}).encode(), 400, "min_p"),
    (json.dumps({"prompt": "hi", "logit_bias": {"x": 1}}).encode(), 400, "logit_bias"),
    (json.dumps({"prompt": "hi", "logit_bias": {"320": 1}}).encode(), 400, "logit_bias"),
    (json.dumps({"prompt": "hi", "logit_bias": {"3": "big"}}).encode(), 400, "logit_bias"),
    (json.dumps({"prompt": "hi", "logit_bias": [[1]]}).encode(), 400, "logit_bias"),
    (json.dumps({"prompt": "hi", "logit_bias": 5}).encode(), 400, "logit_bias"),
    (json.dumps({"prompt": "hi", "dry_penalty_last_n": 1 << 40}).encode(), 400, "dry_penalty_last_n"),
    (json.dumps({"prompt": "hi", "dry_sequence_breakers": "\n"}).encode(), 400, "dry_sequence_breakers"),
    (json.dumps({"prompt": "hi", "dry_sequence_breakers": []}).encode(), 400, "dry_sequence_breakers"),
    (json.dumps({"prompt": "hi", "dry_sequence_breakers": [":", 1]}).encode(), 400, "dry_sequence_breakers"),
    (json.dumps({"prompt": "hi", "dry_sequence_breakers": ["x" * 41]}).encode(), 400, "dry_sequence_breakers"),
]


@pytest.mark.parametrize("body,status,param", BAD)
def test_bad_requests_are_4xx(srv, body, status, param):
    r = httpx.post(srv.url + "/v1/completions", content=body, headers={"content-type": "application/json"})
    assert r.status_code == status, r.text
    err = r.json()["error"]
    assert err["message"] and err["type"] == "invalid_request_error" and err["param"] == param


# llama-server's DRY, XTC and mirostat fields (the random model's greedy text repeats, which DRY
# breaks; the tight thresholds make XTC and mirostat cut)
CHAIN = [{"temperature": 0, "dry_multiplier": 3.0, "dry_allowed_length": 1},
         {"temperature": 0.9, "seed": 5, "dry_multiplier": 1.5, "dry_base": 2.0, "dry_penalty_last_n": -1,
          "dry_sequence_breakers": ["\n", " the"]},
         {"temperature": 1.0, "seed": 6, "xtc_probability": 0.7, "xtc_threshold": 0.01},
         {"temperature": 0.8, "seed": 7, "mirostat": 1, "mirostat_tau": 2.0},
         {"temperature": 0.8, "seed": 8, "mirostat": 2, "mirostat_tau": 1.5, "mirostat_eta": 0.3},
         {"temperature": 0, "repeat_penalty": 1.6, "repeat_last_n": 16, "frequency_penalty": 0.5,
          "presence_penalty": 0.4},
         {"temperature": 0.9, "seed": 9, "min_p": 0.05, "repeat_last_n": -1, "repeat_penalty": 1.3,
          "logit_bias": {"5": -100, "17": False, "42": 3.5}},
         {"temperature": 0, "logit_bias": [[7, 50.0], [8, False]]}]


def sampled_alone(model, ids, n, q, n_ctx_seq):
    """The ids a Sampler with q's settings draws for ids alone (the prompt accepted into its windows
    first, as llama-server does), through a BatchEngine of one sequence over model (a Model of its
    own: the same logits to the bit as in the server's batch), checked against a second such Sampler
    replayed over those logits."""
    from pyggml.models.batch import BatchEngine
    from pyggml.models.sampling import Sampler
    names = {"mirostat": "mirostat_mode", "repeat_last_n": "penalty_last_n"}
    opts = {names.get(k, k): v for k, v in q.items() if k not in ("temperature", "seed")}
    bias = opts.get("logit_bias", {})
    opts["logit_bias"] = {int(t): -np.inf if b is False else b for t, b in (bias.items() if isinstance(bias, dict) else bias)}
    if opts.get("dry_penalty_last_n") == -1:
        opts["dry_penalty_last_n"] = n_ctx_seq

    def sampler():
        s = Sampler(q["temperature"], 0, 1.0, q.get("seed"), tokenizer=model.tokenizer, **opts)
        s.accept(ids)
        return s
    eng = BatchEngine(model, n_seq=1)
    r = eng.submit(ids, n, sampler=sampler(), keep_logits=True)
    eng.run()
    replay = sampler()
    assert [replay(x) for x in r.logits] == r.tokens
    return r.tokens


def test_sampling_fields(srv):
    """Requests with min-p, repetition penalties, logit bias, DRY, XTC or mirostat give the ids of a
    Sampler with the same settings and seed alone, sent one by one, together (each its own sampler
    state), streamed; the settings change them."""
    m = srv.server.model
    ref = models.load(m.source, n_ctx=128, n_threads=2)
    ids = [5, 17, 42, 99, 5, 17, 42]
    reqs = [dict(q, prompt=ids, max_tokens=10) for q in CHAIN]
    text = [r.json()["choices"][0]["text"] for r in (httpx.post(srv.url + "/v1/completions", json=q, timeout=60)
                                                     for q in reqs)]
    for q, t in zip(CHAIN, text):
        want = sampled_alone(ref, ids, 10, q, srv.server.engine.n_ctx_seq)
        assert t == m.tokenizer.decode([x for x in want if x != m.hparams.eos_id]), q
    plain = [httpx.post(srv.url + "/v1/completions", json={k: v for k, v in q.items() if k in (
        "prompt", "max_tokens", "temperature", "seed")}, timeout=60).json()["choices"][0]["text"] for q in reqs]
    assert sum(a != b for a, b in zip(text, plain)) >= 6
    assert text[7] == m.tokenizer.decode([7] * 10)          # +50 on id 7 takes every greedy step

    async def together():
        async with httpx.AsyncClient(timeout=60) as cl:
            return await asyncio.gather(*(cl.post(srv.url + "/v1/completions", json=q) for q in reqs + reqs[::-1]))
    got = [r.json()["choices"][0]["text"] for r in asyncio.run(together())]
    assert got == text + text[::-1]
    s = srv.client().completions.create(model="m", prompt=ids, max_tokens=10, temperature=0.8, seed=8, stream=True,
                                        extra_body={"mirostat": 2, "mirostat_tau": 1.5, "mirostat_eta": 0.3})
    assert "".join(ch.choices[0].text for ch in s) == text[4]
    msgs = [{"role": "user", "content": "hello hello hello"}]
    c = [httpx.post(srv.url + "/v1/chat/completions", json=dict(CHAIN[i], messages=msgs, max_tokens=8),
                    timeout=60).json()["choices"][0]["message"]["content"] for i in (1, 3)]
    assert c == [httpx.post(srv.url + "/v1/chat/completions", json=dict(CHAIN[i], messages=msgs, max_tokens=8),
                            timeout=60).json()["choices"][0]["message"]["content"] for i in (1, 3)]
    r = httpx.post(srv.url + "/v1/chat/completions", json={"messages": msgs, "mirostat": 7})
    assert r.status_code == 400 and r.json()["error"]["param"] == "mirostat"


def test_other_bad_requests(srv):
    u = srv.url
    for path, body in [("/v1/chat/completions", {"messages": []}),
                       ("/v1/chat/completions", {"messages": [{"role": "wizard", "content": "x"}]}),
                       ("/v1/chat/completions", {"messages": [{"role": "user", "content": 5}]}),
                       ("/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}],
                                                 "response_format": {"type": "json_schema"}}),
                       ("/v1/embeddings", {"input": []}), ("/v1/embeddings", {"input": [[1, 999]]}),
                       ("/v1/embeddings", {"input": "x", "encoding_format": "int8"})]:
        r = httpx.post(u + path, json=body)
        assert r.status_code == 400 and "error" in r.json(), (path, body, r.text)
    r = httpx.post(u + "/v1/completions", content=b"x" * (2 << 20))
    assert r.status_code == 413 and "error" in r.json()
    r = httpx.get(u + "/v1/nothing")
    assert r.status_code == 404 and "error" in r.json()
    r = httpx.get(u + "/v1/completions")
    assert r.status_code == 405 and "error" in r.json()
    assert wait_idle(srv.server.engine) and srv.server.runner.thread.is_alive()


SCHEMA = {"type": "object", "additionalProperties": False, "required": ["name", "n", "tags"],
          "properties": {"name": {"enum": ["ann", "bob"]}, "n": {"type": "integer", "minimum": 0, "maximum": 99},
                         "tags": {"type": "array", "items": {"type": "string", "maxLength": 3}, "maxItems": 2}}}


def test_structured_output(srv):
    """response_format json_schema / json_object, llama-server's grammar and json_schema fields: the
    text follows them, streamed or not, alone or beside other requests; max_tokens cutting the JSON
    is "length"; a broken schema or grammar is a 400."""
    pytest.importorskip("llguidance")
    jsonschema = pytest.importorskip("jsonschema")
    c = srv.client()
    msgs = [{"role": "user", "content": "json please"}]
    rf = {"type": "json_schema", "json_schema": {"name": "person", "schema": SCHEMA, "strict": True}}
    for t, seed in [(0, 0), (0.9, 1), (1.3, 2)]:
        a = c.chat.completions.create(model="m", messages=msgs, max_tokens=300, temperature=t, seed=seed,
                                      response_format=rf)
        assert a.choices[0].finish_reason == "stop"
        jsonschema.validate(json.loads(a.choices[0].message.content), SCHEMA)
        s = list(c.chat.completions.create(model="m", messages=msgs, max_tokens=300, temperature=t, seed=seed,
                                           response_format=rf, stream=True))
        assert "".join(ch.choices[0].delta.content or "" for ch in s) == a.choices[0].message.content
    # concurrent requests, constrained and not: each equals itself run alone
    jobs = [{"messages": msgs, "max_tokens": 200, "temperature": 0.9, "seed": i} for i in range(4)]
    for j in jobs[1::2]:
        j["response_format"] = rf
    alone = [c.chat.completions.create(model="m", **j) for j in jobs]
    together = [None] * len(jobs)

    def run(i):
        together[i] = c.chat.completions.create(model="m", **jobs[i])
    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(jobs))]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert [r.choices[0].message.content for r in together] == [r.choices[0].message.content for r in alone]
    # json_object: an object (greedy on this random model may never close one: max_tokens ends it),
    # and llama-server's json_object with a schema
    o = httpx.post(srv.url + "/v1/chat/completions", json={"messages": msgs, "max_tokens": 40, "temperature": 0,
                                                            "response_format": {"type": "json_object"}}).json()
    text = o["choices"][0]["message"]["content"]
    assert text.startswith("{") and o["choices"][0]["finish_reason"] in ("stop", "length")
    if o["choices"][0]["finish_reason"] == "stop":
        assert isinstance(json.loads(text), dict)
    o = httpx.post(srv.url + "/v1/chat/completions", json={
        "messages": msgs, "max_tokens": 300, "seed": 6, "response_format": {"type": "json_object", "schema": SCHEMA}},
        timeout=60).json()
    jsonschema.validate(json.loads(o["choices"][0]["message"]["content"]), SCHEMA)
    # llama-server's fields on /v1/completions: a GBNF grammar and a JSON schema
    g = c.completions.create(model="m", prompt="the quick", max_tokens=40, temperature=1.0, seed=3,
                             extra_body={"grammar": 'root ::= ("yes" | "no") " " [0-9]+ "."'})
    assert re.fullmatch(r"(yes|no) [0-9]+\.", g.choices[0].text) and g.choices[0].finish_reason == "stop"
    j = c.completions.create(model="m", prompt="the quick", max_tokens=300, temperature=0.8, seed=4,
                             extra_body={"json_schema": SCHEMA})
    jsonschema.validate(json.loads(j.choices[0].text), SCHEMA)
    # max_tokens cutting the JSON short
    cut = c.chat.completions.create(model="m", messages=msgs, max_tokens=3, temperature=0, response_format=rf)
    assert cut.choices[0].finish_reason == "length" and cut.usage.completion_tokens == 3
    # broken schemas and grammars: a 400 naming the field
    for path, body, param in [
            ("/v1/chat/completions", {"messages": msgs, "response_format": {
                "type": "json_schema", "json_schema": {"schema": {"type": "objectx"}}}}, "response_format"),
            ("/v1/chat/completions", {"messages": msgs, "response_format": {"type": "json_object",
                                                                              "schema": [1]}}, "response_format"),
            ("/v1/chat/completions", {"messages": msgs, "response_format": {"type": "yaml"}}, "response_format"),
            ("/v1/chat/completions", {"messages": msgs, "grammar": 'root ::= "open'}, "grammar"),
            ("/v1/completions", {"prompt": "hi", "grammar": "start: missing_rule"}, "grammar"),
            ("/v1/completions", {"prompt": "hi", "json_schema": {"$ref": "#/nowhere"}}, "json_schema"),
            ("/v1/completions", {"prompt": "hi", "json_schema": "object"}, "json_schema")]:
        r = httpx.post(srv.url + path, json=body)
        assert r.status_code == 400, (body, r.text)
        err = r.json()["error"]
        assert err["type"] == "invalid_request_error" and err["param"] == param and err["message"], err
    assert wait_idle(srv.server.engine) and srv.server.runner.thread.is_alive()


def test_structured_output_without_engine(srv, monkeypatch):
    monkeypatch.setitem(sys.modules, "llguidance", None)
    r = httpx.post(srv.url + "/v1/completions", json={"prompt": "hi", "grammar": 'root ::= "a"'})
    assert r.status_code == 501 and "pyggml[grammar]" in r.json()["error"]["message"]
    assert httpx.post(srv.url + "/v1/completions", json={"prompt": "hi", "max_tokens": 2}).status_code == 200


def test_server_warms_up_unless_told_not_to(model_path):
    """Server runs BatchEngine.warmup before it serves (the decode graph built, nothing left in the
    cache); warmup=False (pyggml serve --no-warmup) skips it."""
    for warm in (True, False):
        server = serve.Server(models.load(model_path, n_ctx=256, n_threads=2), n_seq=2, warmup=warm)
        try:
            assert server.engine.n_graph_builds == int(warm)
            assert server.model.cache.n_used == 0 and server.engine.stats["steps"] == 0
        finally:
            server.close()


def test_api_key(model_path):
    r = Running(model_path, n_ctx=128, n_seq=2, api_key="s3cret")
    try:
        with pytest.raises(openai.AuthenticationError):
            r.client("wrong").models.list()
        resp = httpx.post(r.url + "/v1/completions", json={"prompt": "hi"})
        assert resp.status_code == 401 and resp.json()["error"]["type"] == "authentication_error"
        assert httpx.get(r.url + "/health").status_code == 200
        assert r.client("s3cret").completions.create(model="m", prompt="hi", max_tokens=2).choices
    finally:
        r.close()


def _request(i):
    return {"prompt": ["hello world", "the quick brown fox", "pyggml runs gguf", "spaces and"][i % 4] + " " * (i % 3),
            "max_tokens": 6 + i % 5, "temperature": 0.9, "seed": 100 + i, "logprobs": 1}


def test_concurrent_requests_equal_alone(srv):
    reqs = [_request(i) for i in range(7)]
    alone = [httpx.post(srv.url + "/v1/completions", json=q, timeout=60).json() for q in reqs]

    async def together():
        async with httpx.AsyncClient(timeout=60) as cl:
            return await asyncio.gather(*(cl.post(srv.url + "/v1/completions", json=q) for q in reqs))
    for resp, want in zip(asyncio.run(together()), alone):
        got = resp.json()
        assert got["choices"][0]["text"] == want["choices"][0]["text"]
        assert got["choices"][0]["logprobs"] == want["choices"][0]["logprobs"]
        assert got["usage"] == want["usage"]


def test_n_choices_are_the_requests_with_seed_plus_i(srv):
    """n completions of one request: choice i is the same request with n = 1 and seed + i, in the
    body, streamed (chunks tagged by index) and in chat; usage counts the prompt once."""
    c = srv.client()
    q = {"model": "m", "prompt": "hello world, this", "max_tokens": 10, "temperature": 0.9, "logprobs": 1}
    one = [c.completions.create(seed=7 + i, **q) for i in range(3)]
    got = c.completions.create(seed=7, n=3, **q)
    assert [ch.index for ch in got.choices] == [0, 1, 2]
    assert [ch.text for ch in got.choices] == [o.choices[0].text for o in one]
    assert [ch.logprobs.token_logprobs for ch in got.choices] == [o.choices[0].logprobs.token_logprobs for o in one]
    assert len({ch.text for ch in got.choices}) > 1
    assert got.usage.prompt_tokens == one[0].usage.prompt_tokens
    assert got.usage.completion_tokens == sum(o.usage.completion_tokens for o in one)
    text, ends = ["", "", ""], [None] * 3
    chunks = list(c.completions.create(seed=7, n=3, stream=True, stream_options={"include_usage": True}, **q))
    for ch in chunks:
        for x in ch.choices:
            text[x.index] += x.text
            ends[x.index] = x.finish_reason or ends[x.index]
    assert text == [ch.text for ch in got.choices] and ends == [ch.finish_reason for ch in got.choices]
    assert chunks[-1].usage.completion_tokens == got.usage.completion_tokens
    msgs = [{"role": "user", "content": "hello world"}]
    chat = c.chat.completions.create(model="m", messages=msgs, max_tokens=8, temperature=0.9, seed=3, n=2)
    assert [x.message.content for x in chat.choices] == [
        c.chat.completions.create(model="m", messages=msgs, max_tokens=8, temperature=0.9, seed=3 + i).choices[0]
        .message.content for i in range(2)]
    parts = ["", ""]
    for ch in c.chat.completions.create(model="m", messages=msgs, max_tokens=8, temperature=0.9, seed=3, n=2,
                                        stream=True):
        for x in ch.choices:
            parts[x.index] += x.delta.content or ""
    assert parts == [x.message.content for x in chat.choices]
    assert wait_idle(srv.server.engine)


def test_disconnect_frees_the_sequence(srv):
    eng = srv.server.engine
    before = eng.stats["tokens_generated"]
    with httpx.stream("POST", srv.url + "/v1/completions", timeout=60,
                      json={"prompt": "hello", "max_tokens": 100000, "stream": True, "temperature": 0.0}) as r:
        lines = r.iter_lines()
        got = [next(lines) for _ in range(6)]
        assert eng.n_running == 1 and any(x.startswith("data: ") for x in got)
    assert wait_idle(eng, 5.0)
    assert eng.stats["tokens_generated"] - before < 400
    before = eng.stats["tokens_generated"]
    # sampled, so no sequence may end early on end-of-text: its logit is taken down
    no_eos = {str(eng.model.hparams.eos_id): -100}
    with httpx.stream("POST", srv.url + "/v1/completions", timeout=60,
                      json={"prompt": "hello", "max_tokens": 100000, "stream": True, "n": 3, "logit_bias": no_eos}) as r:
        lines = r.iter_lines()
        got = [next(lines) for _ in range(12)]
        assert eng.n_running == 3
    assert wait_idle(eng, 5.0)                      # every choice's request cancelled
    assert eng.stats["tokens_generated"] - before < 1200


@pytest.mark.slow
def test_load_with_cancellations(srv):
    """16 clients x 4 requests each, a quarter of them dropped mid-stream: every completed response
    equals the same request alone, nothing is lost, and the engine ends idle."""
    reqs = [dict(_request(i), max_tokens=4 + i % 13) for i in range(64)]
    want = {i: httpx.post(srv.url + "/v1/completions", json=q, timeout=60).json()["choices"][0]["text"]
            for i, q in enumerate(reqs)}
    rnd = random.Random(0)
    drop = {i for i in range(64) if rnd.random() < 0.25}

    async def client(k, cl):
        out = {}
        for i in range(k, 64, 16):
            q = dict(reqs[i], stream=True)
            async with cl.stream("POST", srv.url + "/v1/completions", json=q) as r:
                text, n = "", 0
                async for line in r.aiter_lines():
                    if line.startswith("data: ") and line != "data: [DONE]":
                        text += json.loads(line[6:])["choices"][0]["text"]
                        n += 1
                        if i in drop and n == 2:
                            break
                if i not in drop:
                    out[i] = text
        return out

    async def main():
        async with httpx.AsyncClient(timeout=120) as cl:
            parts = await asyncio.gather(*(client(k, cl) for k in range(16)))
        return {i: t for p in parts for i, t in p.items()}
    got = asyncio.run(main())
    assert set(got) == set(range(64)) - drop
    for i, t in got.items():
        assert t == want[i], i
    assert wait_idle(srv.server.engine, 10.0) and srv.server.engine.cache.n_used <= srv.server.engine.n_seq * \
        srv.server.engine.n_ctx_seq
