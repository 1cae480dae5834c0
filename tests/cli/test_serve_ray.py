"""pyggml serve --ray: the OpenAI-compatible app as a Ray Serve deployment of two replicas on a local
Ray cluster (2 CPUs), driven over its real HTTP endpoint with the openai client and raw HTTP,
streaming and not: each answer equals the same request run locally (a BatchEngine of one sequence
over the same GGUF); the command without Ray installed is one line and exit status 2."""
import asyncio
import socket
import subprocess
import sys
import time

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("gguf")
pytest.importorskip("starlette")
httpx = pytest.importorskip("httpx")
openai = pytest.importorskip("openai")

from hf_models import bpe_tokenizer, hf_model

from pyggml import models
from pyggml.models.batch import BatchEngine
from pyggml.models.sampling import Sampler


@pytest.fixture(scope="module")
def model_path(tmp_path_factory):
    from pyggml.convert import convert_hf
    d = tmp_path_factory.mktemp("serve_ray")
    tok = bpe_tokenizer(d / "tok", vocab_size=300)
    return convert_hf(hf_model("qwen2", vocab_size=320), d / "m.gguf", "f16", tokenizer=tok)


def local_text(model, prompt, n, temperature, seed):
    """The text the request gives on this machine: a BatchEngine of one sequence (the server's
    engine gives each sequence the bits it has alone)."""
    tok = model.tokenizer
    ids = tok.encode(prompt) if isinstance(prompt, str) else prompt
    eng = BatchEngine(model, n_seq=1)
    r = eng.submit(ids, n, temperature=temperature, seed=seed)
    eng.run()
    return tok.decode([t for t in r.tokens if t != model.hparams.eos_id])


def ray_init(ray, where):
    """A local 2-CPU Ray cluster started from `where`: Ray puts the driver's working directory first on
    its workers' sys.path, and from the repository root that is the source folder, which has no
    compiled modules (tests/models/test_distributed.py does the same)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(where)
        mp.setenv("RAY_worker_niceness", "0")
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)


@pytest.mark.slow
def test_ray_serve_replicas(model_path, tmp_path):
    ray = pytest.importorskip("ray")
    serve = pytest.importorskip("ray.serve")
    from pyggml.serve.ray_serve import deployment
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    ray_init(ray, tmp_path)
    try:
        serve.start(http_options={"host": "127.0.0.1", "port": port})
        serve.run(deployment(model_path, replicas=2, n_seq=2, n_ctx=256, n_threads=1, num_cpus=1), name="pyggml",
                  route_prefix="/")
        url = f"http://127.0.0.1:{port}"
        st = serve.status().applications["pyggml"].deployments["pyggml"]
        assert st.replica_states.get("RUNNING") == 2, st
        assert httpx.get(url + "/health", timeout=30).json() == {"status": "ok"}
        m = models.load(model_path, n_ctx=256, n_threads=1)
        reqs = [{"prompt": p, "max_tokens": 8, "temperature": t, "seed": s}
                for p, t, s in [("hello world", 0.0, None), ("the quick brown fox", 0.9, 1), ([5, 17, 42], 0.7, 2),
                                ("pyggml runs gguf", 1.1, 3), ("spaces and", 0.0, None), ([9, 8, 7, 6], 0.8, 4)]]
        want = [local_text(m, q["prompt"], 8, q["temperature"], q["seed"]) for q in reqs]

        async def together():
            async with httpx.AsyncClient(timeout=120) as cl:
                return await asyncio.gather(*(cl.post(url + "/v1/completions", json=q) for q in reqs))
        got = [r.json()["choices"][0]["text"] for r in asyncio.run(together())]
        assert got == want
        c = openai.OpenAI(base_url=url + "/v1", api_key="none", max_retries=0, timeout=120)
        for q, w in zip(reqs[:3], want):
            chunks = c.completions.create(model="m", stream=True, **q)
            assert "".join(ch.choices[0].text for ch in chunks) == w
        a = c.completions.create(model="m", **reqs[1])
        assert a.choices[0].text == want[1] and a.usage.completion_tokens > 0
        r = httpx.post(url + "/v1/completions", json={"prompt": "hi", "mirostat": 5}, timeout=30)
        assert r.status_code == 400 and r.json()["error"]["param"] == "mirostat"
    finally:
        serve.shutdown()
        ray.shutdown()


@pytest.mark.slow
def test_pipeline_server(model_path, tmp_path):
    """The server over a model pipelined across two Ray actors (pyggml.distributed), two sequences at
    a time: greedy, sampled, DRY and mirostat requests, sent together and streamed, give the ids of
    the single-process engine."""
    ray = pytest.importorskip("ray")
    uvicorn = pytest.importorskip("uvicorn")
    import threading

    from pyggml.serve.pipeline import pipeline_server
    ray_init(ray, tmp_path)
    server = uv = th = None
    try:
        server = pipeline_server(model_path, stages=2, n_ctx=256, n_threads=1, n_seq=2)
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        uv = uvicorn.Server(uvicorn.Config(server.app, log_level="warning"))
        th = threading.Thread(target=uv.run, kwargs={"sockets": [sock]}, daemon=True)
        th.start()
        for _ in range(500):
            if uv.started:
                break
            time.sleep(0.01)
        m = models.load(model_path, n_ctx=256, n_threads=1)
        reqs = [{"prompt": [5, 17, 42], "max_tokens": 8, "temperature": 0.0},
                {"prompt": "the quick brown fox", "max_tokens": 8, "temperature": 0.9, "seed": 1},
                {"prompt": [9, 8, 7, 9, 8], "max_tokens": 8, "temperature": 0.0, "dry_multiplier": 3.0,
                 "dry_allowed_length": 1},
                {"prompt": "hello world", "max_tokens": 8, "temperature": 0.8, "seed": 2, "mirostat": 2,
                 "mirostat_tau": 1.5}]
        want = []
        for q in reqs:      # the server's sampler (the prompt accepted) in an engine on this process
            s = Sampler(q["temperature"], 0, 1.0, q.get("seed"), tokenizer=m.tokenizer,
                        dry_multiplier=q.get("dry_multiplier", 0.0), dry_allowed_length=q.get("dry_allowed_length", 2),
                        mirostat_mode=q.get("mirostat", 0), mirostat_tau=q.get("mirostat_tau", 5.0))
            ids = m.tokenizer.encode(q["prompt"]) if isinstance(q["prompt"], str) else q["prompt"]
            s.accept(ids)
            eng = BatchEngine(m, n_seq=1)
            r = eng.submit(ids, 8, sampler=s)
            eng.run()
            want.append(m.tokenizer.decode([t for t in r.tokens if t != m.hparams.eos_id]))

        async def together():
            async with httpx.AsyncClient(timeout=120) as cl:
                return await asyncio.gather(*(cl.post(url + "/v1/completions", json=q) for q in reqs))
        got = [r.json()["choices"][0]["text"] for r in asyncio.run(together())]
        assert got == want
        c = openai.OpenAI(base_url=url + "/v1", api_key="none", max_retries=0, timeout=120)
        chunks = c.completions.create(model="m", stream=True, **reqs[1])
        assert "".join(ch.choices[0].text for ch in chunks) == want[1]
        a = c.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}], max_tokens=4,
                                      temperature=0)
        assert a.choices[0].finish_reason in ("stop", "length") and a.usage.prompt_tokens > 0
        r = httpx.post(url + "/v1/embeddings", json={"input": "hi"}, timeout=30)
        assert r.status_code == 501 and "error" in r.json()
    finally:
        if uv is not None:
            uv.should_exit = True
            th.join(10)
        if server is not None:
            server.close()
        ray.shutdown()


@pytest.mark.slow
@pytest.mark.subprocess
def test_serve_ray_command(model_path, tmp_path):
    """`pyggml serve MODEL --ray --replicas 2` starts a local Ray cluster and answers on --port until
    interrupted (SIGINT), then exits cleanly."""
    pytest.importorskip("ray.serve")
    import os
    import signal
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    p = subprocess.Popen([sys.executable, "-m", "pyggml", "serve", str(model_path), "--ray", "--replicas", "2",
                          "--parallel", "2", "--ctx", "256", "-t", "1", "--port", str(port)],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path)
    try:
        url = f"http://127.0.0.1:{port}"
        for _ in range(240):
            try:
                if httpx.get(url + "/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert p.poll() is None, p.stderr.read()
            time.sleep(0.5)
        m = models.load(model_path, n_ctx=256, n_threads=1)
        r = httpx.post(url + "/v1/completions", json={"prompt": "hello world", "max_tokens": 6, "temperature": 0.8,
                                                      "seed": 5}, timeout=60).json()
        assert r["choices"][0]["text"] == local_text(m, "hello world", 6, 0.8, 5)
        assert r["model"] == "m.gguf"
    finally:
        p.send_signal(signal.SIGINT)
        try:
            p.wait(60)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    assert p.returncode == 130, (p.returncode, p.stderr.read())


@pytest.mark.subprocess
def test_serve_ray_without_ray(model_path, tmp_path):
    """--ray with Ray missing: one line on stderr, exit status 2 (Ray hidden by a module that fails)."""
    (tmp_path / "ray").mkdir()
    (tmp_path / "ray" / "__init__.py").write_text("raise ImportError('No module named ray')\n")
    import os
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]))
    t0 = time.time()
    p = subprocess.run([sys.executable, "-m", "pyggml", "serve", str(model_path), "--ray", "--replicas", "2"],
                       check=False, capture_output=True, text=True, env=env, timeout=120, cwd=tmp_path)
    assert p.returncode == 2, p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "pip install 'pyggml[ray]'" in lines[0], p.stderr
    assert time.time() - t0 < 60
