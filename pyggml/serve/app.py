"""The OpenAI-compatible HTTP server: a Starlette app over one BatchEngine run by an EngineThread.

Every generation request becomes one Request of the engine (pyggml.models.batch); the handler waits
on an asyncio.Event the engine's thread sets after each token, turns ids into text with the
tokenizer's StreamDecoder, applies the stop strings and answers in one JSON body or as server-sent
events. A streaming client that goes away cancels its request (the engine frees its slot at the
start of the next step); a non-streaming one is polled for the same.
"""
import asyncio
import base64
import functools
import hmac
import json
import os
import threading
import time
import uuid

import numpy as np
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.responses import JSONResponse, PlainTextResponse, StreamingResponse
from starlette.routing import Route

from pyggml.models.batch import BatchEngine, EngineThread
from pyggml.models.grammar import Grammar
from pyggml.models.model import Model
from pyggml.models.sampling import Sampler
from pyggml.serve.protocol import ApiError, parse_chat, parse_completion, parse_embeddings

__all__ = ["Server", "render_chat"]

# end-of-turn tokens of common chat formats: a chat completion also stops at these
_END_OF_TURN = ("<|im_end|>", "<|eot_id|>", "<|end|>", "<end_of_turn>", "<|endoftext|>")
_POOLING = {1: "mean", 2: "cls", 3: "last"}     # llama.cpp's enum llama_pooling_type


def render_chat(model, messages):
    """The prompt text of a chat: the model's chat template (Model.apply_chat_template) when the
    model has one, else ChatML (<|im_start|>role\\ncontent<|im_end|>, then the assistant's turn)."""
    apply = getattr(model, "apply_chat_template", None)
    if apply is not None:
        return apply(messages, add_generation_prompt=True)
    turns = "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages)
    return turns + "<|im_start|>assistant\n"


def _held(text, stops):
    """How many trailing characters of text could begin a stop string (held back from a stream)."""
    n = 0
    for s in stops:
        for k in range(min(len(s) - 1, len(text)), n, -1):
            if text.endswith(s[:k]):
                n = k
                break
    return n


def _api(handler):
    """A route of the API: the API key is checked first; an ApiError the handler raises answers in
    OpenAI's error shape, and any other exception (a bug) a 500 in the same shape: the server goes on."""
    @functools.wraps(handler)
    async def route(self, request):
        try:
            self._check_key(request)
            return await handler(self, request)
        except ApiError as e:
            return self._error(e)
        except Exception as e:  # noqa: BLE001 (a bug answers 500 in OpenAI's shape; the server goes on)
            return self._error(ApiError(500, f"internal error: {type(e).__name__}: {e}", type="server_error"))
    return route


class Server:
    """The server's state: model (a whole pyggml.models.Model; its KV cache belongs to the server),
    n_seq parallel sequences, api_key (None: open), name (what /v1/models lists), max_body (bytes
    of a request body). app is the ASGI application; close() stops the engine thread. engine: None
    (a BatchEngine(model, n_seq, n_batch), warmed up first unless warmup=False: see
    BatchEngine.warmup; the model's tokenizer is built then too) or an engine with its interface
    (pyggml.serve.pipeline's)."""

    def __init__(self, model, n_seq=4, api_key=None, name=None, max_body=1 << 20, n_batch=None, engine=None,
                 warmup=True):
        self.model = model
        if engine is None:
            engine = BatchEngine(model, n_seq, n_batch)
            if warmup:
                engine.warmup()
                _ = model.tokenizer     # built now (its vocabulary read, its libraries imported), not on a request
        self.engine = engine
        self.runner = EngineThread(self.engine)
        self.api_key = api_key.encode() if api_key else None
        self.name = name or os.path.basename(model.source) or model.arch
        self.max_body = int(max_body)
        self.created = int(time.time())
        self.counts = {"completions": 0, "chat": 0, "embeddings": 0, "errors": 0, "prompt_tokens": 0,
                       "completion_tokens": 0}
        self._embedder, self._embed_lock = None, threading.Lock()
        routes = [Route("/health", self.health), Route("/v1/models", self.models), Route("/metrics", self.metrics),
                  Route("/v1/completions", self.completions, methods=["POST"]),
                  Route("/v1/chat/completions", self.chat, methods=["POST"]),
                  Route("/v1/embeddings", self.embeddings, methods=["POST"])]
        self.app = Starlette(routes=routes, exception_handlers={HTTPException: self._http_error})

    def close(self):
        self.runner.close()
        close = getattr(self.engine, "close", None)
        if close is not None:           # an engine that holds more (a pipeline's actors)
            close()

    # ---- plumbing ----

    async def _http_error(self, request, exc):
        return JSONResponse(ApiError(exc.status_code, exc.detail, type="invalid_request_error").body(),
                            status_code=exc.status_code)

    def _check_key(self, request):
        if self.api_key is None:
            return
        auth = request.headers.get("authorization", "")
        given = auth[7:].encode() if auth.lower().startswith("bearer ") else b""
        if not hmac.compare_digest(given, self.api_key):
            raise ApiError(401, "invalid or missing API key (Authorization: Bearer KEY)", type="authentication_error",
                           code="invalid_api_key")

    async def _json(self, request):
        size = request.headers.get("content-length")
        if size is not None and (not size.isdigit() or int(size) > self.max_body):
            raise ApiError(413, f"the request body is larger than {self.max_body} bytes")
        body = bytearray()
        async for chunk in request.stream():
            body += chunk
            if len(body) > self.max_body:
                raise ApiError(413, f"the request body is larger than {self.max_body} bytes")
        try:
            return json.loads(body)
        except (ValueError, UnicodeDecodeError) as e:
            raise ApiError(400, f"the request body is not valid JSON: {e}") from None

    def _error(self, e):
        self.counts["errors"] += 1
        return JSONResponse(e.body(), status_code=e.status)

    def _tokenizer(self):
        tok = self.model.tokenizer
        if tok is None:
            raise ApiError(400, f"{self.name} has no tokenizer: send token ids", param="prompt")
        return tok

    def _check_prompt(self, ids, param):
        if not ids:
            raise ApiError(400, f"{param}: the prompt is empty", param)
        if len(ids) >= self.engine.n_ctx_seq:
            raise ApiError(400, f"{param}: the prompt has {len(ids)} tokens; this server's sequences hold "
                           f"{self.engine.n_ctx_seq} (n_ctx / parallel), so at most {self.engine.n_ctx_seq - 1}",
                           param, code="context_length_exceeded")

    async def _grammar(self, p, stop_ids):
        """The Grammar of a request's structured output (None: free text), ending at stop_ids: a bad
        schema or grammar is a 400, llguidance missing a 501 naming the extra."""
        if p["structured"] is None:
            return None
        try:
            return await asyncio.to_thread(Grammar, self._tokenizer(), p["structured"], stop_ids, self.model.n_vocab)
        except ImportError as e:
            raise ApiError(501, str(e), p["structured_param"], type="server_error") from None
        except ValueError as e:
            raise ApiError(400, f"{p['structured_param']}: {e}", p["structured_param"]) from None

    async def _sampler(self, p, ids, seed):
        """A choice's own Sampler: temperature, top_k, top_p, seed and the other sampling
        fields, with the prompt ids accepted into its windows (as llama-server: DRY sees the
        prompt). Options Sampler refuses are a 400; DRY's sequence breakers are matched against the
        vocabulary in a worker thread (the first time it reads every token's text)."""
        opts = dict(p["sampling"])
        if opts.get("dry_penalty_last_n") == -1:
            opts["dry_penalty_last_n"] = self.engine.n_ctx_seq
        dry = bool(opts.get("dry_multiplier"))
        if dry:
            opts["tokenizer"] = self.model.tokenizer
            if self.model.tokenizer is None and "dry_sequence_breakers" not in p["sampling"]:
                opts["dry_sequence_breakers"] = ()          # no text to match breakers against
        make = functools.partial(Sampler, p["temperature"], p["top_k"], p["top_p"], seed, **opts)
        try:
            sampler = await asyncio.to_thread(make) if dry else make()
        except (TypeError, ValueError) as e:
            param = next((k for k in p["sampling"] if k in str(e)), None)
            raise ApiError(400, f"{param or 'sampling'}: {e}", param) from None
        sampler.accept(ids)
        return sampler

    async def _choices(self, p, ids, stop_ids):
        """p["samplers"]: a Sampler (with its own Grammar, if any) per completion asked for (n).
        With a seed, choice i samples with seed + i (mod 2^64), so the choices differ and each is
        what the same request with that seed and n = 1 gives."""
        p["samplers"] = []
        for i in range(p["n"]):
            sampler = await self._sampler(p, ids, None if p["seed"] is None else (p["seed"] + i) % (1 << 64))
            sampler.grammar = await self._grammar(p, stop_ids)
            p["samplers"].append(sampler)

    # ---- generation ----

    async def _generate(self, request, ids, p, stop_ids, watch, choice):
        """Yield {"text", "token", "logprob"} per new id of choice number choice, then
        {"finish_reason", "n_tokens"}."""
        loop = asyncio.get_running_loop()
        changed = asyncio.Event()
        n_max = self.engine.n_ctx_seq if p["max_tokens"] is None else p["max_tokens"]
        req = self.engine.submit(ids, n_max, stop=stop_ids, sampler=p["samplers"][choice], logprobs=p.get("logprobs"),
                                 on_update=lambda r: loop.call_soon_threadsafe(changed.set))
        tok = self.model.tokenizer
        dec = tok.stream() if tok is not None else None
        stops, full, sent, seen, reason, by_string = p["stop"], "", 0, 0, None, False
        try:
            while reason is None:
                try:
                    await asyncio.wait_for(changed.wait(), 0.25 if watch else None)
                except asyncio.TimeoutError:
                    if await request.is_disconnected():
                        return
                    continue
                changed.clear()
                toks = req.tokens[:]
                for i in range(seen, len(toks)):
                    t = toks[i]
                    lp = req.logprobs[i] if req.n_logprobs is not None else None
                    if t in stop_ids:
                        reason = "stop"
                        break
                    full += dec.push(t) if dec else ""
                    hit = [j for j in (full.find(s, max(0, sent - len(s) + 1)) for s in stops) if j >= 0]
                    if hit:
                        yield {"text": full[sent:min(hit)], "token": t, "logprob": lp}
                        sent, reason, by_string = min(hit), "stop", True
                        break
                    safe = len(full) - _held(full, stops)
                    yield {"text": full[sent:safe], "token": t, "logprob": lp}
                    sent = max(sent, safe)
                seen = len(toks)
                if reason is None and req.done and seen == len(req.tokens):
                    if req.finish_reason == "error":
                        raise ApiError(500, f"generation failed: {req.error}", type="server_error")
                    reason = "length" if req.finish_reason == "length" else "stop"
            rest = "" if by_string else full[sent:] + (dec.flush() if dec else "")
            if rest:            # what was held back for a stop string that never came
                yield {"text": rest, "token": None, "logprob": None}
            n_gen = len([t for t in req.tokens if t not in stop_ids])
            self.counts["prompt_tokens"] += len(ids)
            self.counts["completion_tokens"] += n_gen
            yield {"finish_reason": reason, "n_tokens": n_gen}
        finally:
            if not req.done:
                req.cancel()
                self.engine.wake.set()

    def _piece(self, t):
        tok = self.model.tokenizer
        return tok.token_to_piece(t, special=True) if tok is not None else str(t)

    def _usage(self, n_prompt, n_gen):
        return {"prompt_tokens": n_prompt, "completion_tokens": n_gen, "total_tokens": n_prompt + n_gen}

    async def _respond(self, request, ids, p, stop_ids, kind):
        """The completion (kind "text") or chat completion (kind "chat") body, or its SSE stream."""
        rid = ("cmpl-" if kind == "text" else "chatcmpl-") + uuid.uuid4().hex
        obj = "text_completion" if kind == "text" else "chat.completion"
        base = {"id": rid, "object": obj, "created": int(time.time()), "model": self.name}

        def lp_text(evs):
            lps = [e for e in evs if e["logprob"] is not None]
            return {"tokens": [self._piece(e["token"]) for e in lps], "token_logprobs": [e["logprob"][0] for e in lps],
                    "top_logprobs": [{self._piece(t): v for t, v in e["logprob"][1]} for e in lps]}

        def lp_chat(evs):
            def entry(t, v):
                piece = self._piece(t)
                return {"token": piece, "logprob": v, "bytes": list(piece.encode())}
            return {"content": [dict(entry(e["token"], e["logprob"][0]),
                                     top_logprobs=[entry(t, v) for t, v in e["logprob"][1]])
                                for e in evs if e["logprob"] is not None]}

        lp_of = lp_text if kind == "text" else lp_chat
        want_lp = p.get("logprobs") is not None

        def choice(i, text, evs, reason):
            c = {"index": i, "finish_reason": reason, "logprobs": lp_of(evs) if want_lp else None}
            if kind == "text":
                c["text"] = text
            else:
                c["message" if not p["stream"] else "delta"] = {"role": "assistant", "content": text}
            return c

        if not p["stream"]:
            async def whole(i):
                evs, text = [], ""
                async for e in self._generate(request, ids, p, stop_ids, watch=True, choice=i):
                    if "finish_reason" in e:
                        return choice(i, text, evs, e["finish_reason"]), e["n_tokens"]
                    evs.append(e)
                    text += e["text"]
                return None                         # the client went away

            tasks = [asyncio.ensure_future(whole(i)) for i in range(p["n"])]
            try:
                done = await asyncio.gather(*tasks)
            finally:                                # one choice failed: the others stop too
                for t in tasks:
                    t.cancel()
            if any(d is None for d in done):
                return JSONResponse({"error": {"message": "client gone"}}, status_code=499)
            return JSONResponse({**base, "choices": [c for c, _ in done],
                                 "usage": self._usage(len(ids), sum(n for _, n in done))})

        base["object"] = "text_completion" if kind == "text" else "chat.completion.chunk"

        def chunk(choices, **extra):
            return f"data: {json.dumps({**base, 'choices': choices, **extra})}\n\n"

        async def events():
            """The choices' events as they come, each chunk naming its choice's index; a choice's
            generation runs in a task of its own, cancelled (with its engine request) when the
            client goes away."""
            queue = asyncio.Queue()

            async def feed(i):
                try:
                    async for e in self._generate(request, ids, p, stop_ids, watch=False, choice=i):
                        await queue.put((i, e))
                except ApiError as err:
                    await queue.put((i, err))

            if kind == "chat":
                yield chunk([{"index": i, "delta": {"role": "assistant", "content": ""}, "finish_reason": None,
                              "logprobs": None} for i in range(p["n"])])
            tasks = [asyncio.create_task(feed(i)) for i in range(p["n"])]
            n_gen, left = 0, p["n"]
            try:
                while left:
                    i, e = await queue.get()
                    if isinstance(e, ApiError):
                        yield f"data: {json.dumps(e.body())}\n\n"
                        break
                    if "finish_reason" in e:
                        c = choice(i, "", [], e["finish_reason"])
                        if kind == "chat":
                            c["delta"] = {}
                        yield chunk([c])
                        n_gen, left = n_gen + e["n_tokens"], left - 1
                    elif e["text"] or (want_lp and e["logprob"] is not None):
                        c = choice(i, e["text"], [e], None)
                        if kind == "chat":
                            c["delta"] = {"content": e["text"]}
                        yield chunk([c])
                if not left and p["include_usage"]:
                    yield chunk([], usage=self._usage(len(ids), n_gen))
                yield "data: [DONE]\n\n"
            finally:
                for t in tasks:
                    t.cancel()

        return StreamingResponse(events(), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})

    # ---- endpoints ----

    async def health(self, request):
        return JSONResponse({"status": "ok"})

    @_api
    async def models(self, request):
        return JSONResponse({"object": "list", "data": [{"id": self.name, "object": "model", "created": self.created,
                                                          "owned_by": "pyggml"}]})

    @_api
    async def completions(self, request):
        p = parse_completion(await self._json(request), self.model.n_vocab)
        ids = self._tokenizer().encode(p["prompt"]) if isinstance(p["prompt"], str) else p["prompt"]
        self._check_prompt(ids, "prompt")
        eos = self.model.hparams.eos_id
        stop_ids = () if eos is None else (eos,)
        await self._choices(p, ids, stop_ids)
        self.counts["completions"] += 1
        return await self._respond(request, ids, p, stop_ids, "text")

    @_api
    async def chat(self, request):
        p = parse_chat(await self._json(request), self.model.n_vocab)
        tok = self._tokenizer()
        try:
            text = render_chat(self.model, p["messages"])
        except ValueError as e:
            raise ApiError(400, f"messages: {e}", "messages") from None
        ids = tok.encode(text)
        self._check_prompt(ids, "messages")
        stop_ids = {tok.tokens.index(s) for s in _END_OF_TURN if s in tok.tokens}
        if self.model.hparams.eos_id is not None:
            stop_ids.add(self.model.hparams.eos_id)
        stop_ids = tuple(sorted(stop_ids))
        await self._choices(p, ids, stop_ids)
        self.counts["chat"] += 1
        return await self._respond(request, ids, p, stop_ids, "chat")

    def _embed(self, ids):
        """The pooled, L2-normalised last hidden state (after the output norm) of ids."""
        with self._embed_lock:
            m = self.model
            if self._embedder is None:
                n = m.n_ctx
                self._embedder = Model(m.arch, m.hparams, m.tensors, n_ctx=n, n_threads=m.n_threads, n_batch=n,
                                       kv_type=m.cache.type, keep=("result_norm",), source=m.source)
                meta = getattr(getattr(m, "gguf", None), "metadata", {})
                self._pooling = _POOLING.get(meta.get(f"{m.arch}.pooling_type"), "mean")
            e = self._embedder
            e.reset()
            e.eval(ids)
            h = np.asarray(e.last_graph.get_tensor("result_norm").numpy(), np.float64).reshape(len(ids), -1)
            v = {"mean": lambda: h.mean(0), "cls": lambda: h[0], "last": lambda: h[-1]}[self._pooling]()
            return (v / max(np.linalg.norm(v), 1e-12)).astype(np.float32)

    @_api
    async def embeddings(self, request):
        p = parse_embeddings(await self._json(request), self.model.n_vocab)
        if not isinstance(self.model, Model):       # a pipelined model: its weights are not here
            raise ApiError(501, "embeddings are not served for a pipelined model", type="server_error")
        items = [self._tokenizer().encode(x) if isinstance(x, str) else x for x in p["input"]]
        for ids in items:
            if not 0 < len(ids) <= self.model.n_ctx:
                raise ApiError(400, f"input: an input has {len(ids)} tokens; at most {self.model.n_ctx}", "input",
                               code="context_length_exceeded")
        self.counts["embeddings"] += 1
        data = []
        for i, ids in enumerate(items):
            v = await asyncio.to_thread(self._embed, ids)
            emb = base64.b64encode(v.tobytes()).decode() if p["encoding_format"] == "base64" else v.tolist()
            data.append({"object": "embedding", "index": i, "embedding": emb})
        n = sum(len(x) for x in items)
        return JSONResponse({"object": "list", "data": data, "model": self.name,
                             "usage": {"prompt_tokens": n, "total_tokens": n}})

    @_api
    async def metrics(self, request):
        s, eng, c = self.engine.stats, self.engine, self.counts
        busy = self.runner.busy_s
        rows = [
            ("pyggml_requests_total", "counter", "requests by endpoint",
             [(f'{{endpoint="{k}"}}', c[k]) for k in ("completions", "chat", "embeddings")]),
            ("pyggml_request_errors_total", "counter", "requests answered with an error", [("", c["errors"])]),
            ("pyggml_prompt_tokens_total", "counter", "prompt tokens of finished generations", [("", c["prompt_tokens"])]),
            ("pyggml_tokens_prefilled_total", "counter", "prompt tokens computed", [("", s["tokens_prefilled"])]),
            ("pyggml_tokens_reused_total", "counter", "prompt tokens whose cache was reused", [("", s["tokens_reused"])]),
            ("pyggml_tokens_generated_total", "counter", "tokens sampled", [("", s["tokens_generated"])]),
            ("pyggml_steps_total", "counter", "graph steps run", [("", s["steps"])]),
            ("pyggml_busy_seconds_total", "counter", "seconds the engine spent in steps", [("", round(busy, 6))]),
            ("pyggml_tokens_per_second", "gauge", "tokens generated per busy second",
             [("", round(s["tokens_generated"] / busy, 3) if busy else 0)]),
            ("pyggml_requests_running", "gauge", "requests holding a sequence", [("", eng.n_running)]),
            ("pyggml_requests_waiting", "gauge", "requests queued for a sequence", [("", eng.n_waiting)]),
            ("pyggml_kv_cells_used", "gauge", "KV cache cells in use", [("", eng.cache.n_used)]),
        ]
        lines = []
        for name, typ, help_, samples in rows:
            lines += [f"# HELP {name} {help_}", f"# TYPE {name} {typ}"]
            lines += [f"{name}{labels} {value}" for labels, value in samples]
        return PlainTextResponse("\n".join(lines) + "\n", media_type="text/plain; version=0.0.4")
