"""pyggml serve --stages N: the OpenAI-compatible server over a model pipelined across Ray actors
(pyggml.distributed), for a model larger than one machine. See docs/serving.md.

    from pyggml.serve.pipeline import pipeline_server
    server = pipeline_server("model.gguf", stages=3, n_ctx=4096)   # a pyggml.serve.Server
    pyggml.serve.run(server, "127.0.0.1", 8080)

The stages hold one sequence's KV cache each (a Pipeline is one sequence), so PipelineEngine runs
the requests one after another, with BatchEngine's interface and its Request, sampling, stop,
logprobs and cancellation: a step is the prompt (first) or the last sampled id sent through every
stage, and the last stage's logits row coming back to be sampled here, with the request's own
Sampler (so grammars, DRY, XTC and mirostat work as in the batched server). The pipeline's caches
are emptied between requests (no prefix reuse). The logits are the single-process model's bits
(docs/distributed.md), so each answer is what `pyggml serve` gives for the same request.
"""
import collections
import os
import threading

from pyggml.models.batch import BatchEngine, _Slot

__all__ = ["PipelineEngine", "PipelineModel", "pipeline_server"]


class PipelineModel:
    """What the server reads of a model, for a pyggml.distributed.Pipeline: the pipeline's arch,
    hparams, n_vocab, n_ctx and eval/reset, with the GGUF's tokenizer and chat template read here
    (the file must be at `path` on this machine too; only its metadata is read)."""

    def __init__(self, pipeline, path):
        from pyggml import gguf
        self.pipeline, self.source = pipeline, str(path)
        self.gguf = gguf.load(path)
        self.tokenizer = self.gguf.tokenizer()
        self.arch, self.hparams, self.n_vocab, self.n_ctx = pipeline.arch, pipeline.hparams, pipeline.n_vocab, \
            pipeline.n_ctx

    def apply_chat_template(self, messages, add_generation_prompt=True, tools=None, **extra):
        from pyggml.models import chat
        return chat.apply_chat_template(self, messages, add_generation_prompt, tools, **extra)


class _Cells:
    """The cache's n_used, for /metrics: the cells the running request holds in every stage."""

    def __init__(self, slot):
        self.slot = slot

    @property
    def n_used(self):
        return len(self.slot.cached)


class PipelineEngine(BatchEngine):
    """BatchEngine's interface (submit, step, busy, Request) over a PipelineModel: one request at a
    time, the whole context (n_ctx) its own."""

    def __init__(self, model):
        self.model, self.n_seq, self.n_batch = model, 1, model.n_ctx
        self.n_ctx_seq = model.n_ctx
        self.slots = [_Slot(0)]
        self.cache = _Cells(self.slots[0])
        self.waiting, self.running, self._inbox = collections.deque(), [], collections.deque()
        self._clock = 0
        self.stats = {"steps": 0, "tokens_prefilled": 0, "tokens_generated": 0, "tokens_reused": 0,
                      "requests_done": 0, "tokens_drafted": 0, "drafts_accepted": 0}
        self.wake = threading.Event()

    def close(self):
        """End the pipeline's stage actors (Server.close calls it)."""
        self.model.pipeline.close()

    def submit(self, prompt, n_predict, *args, lookup=False, **options):
        """BatchEngine.submit, without speculative lookup (a pipeline step carries one sequence)."""
        if lookup is not None and lookup is not False:
            raise ValueError("PipelineEngine.submit: lookup decoding is not supported over a pipeline")
        return super().submit(prompt, n_predict, *args, **options)

    def step(self):
        """Drop cancelled requests, start the next waiting one when none runs (emptying the stages'
        caches), send its prompt or its last id through the stages and sample. Returns the tokens
        sent (0: nothing to do)."""
        while self._inbox:
            self.waiting.append(self._inbox.popleft())
        for req in [r for r in self.running if r.cancelled]:
            self._finish(req, "cancelled")
        slot = self.slots[0]
        if not self.running and (req := self._next_waiting()) is not None:
            self.model.pipeline.reset()             # also restarts a stage that failed
            slot.cached, slot.req, req.slot = [], req, 0
            self.running.append(req)
        if not self.running:
            return 0
        req = self.running[0]
        ids = req.prompt if not req.tokens else [req.tokens[-1]]
        try:
            logits = self.model.pipeline.eval(ids, logits="last")[0]
        except Exception as e:  # noqa: BLE001 (the request ends with the error; the next one resets the stages)
            slot.cached = []
            self._finish(req, "error", e)
            return len(ids)
        self.stats["steps"] += 1
        if not req.tokens:
            req.n_cached = len(req.prompt)
            self.stats["tokens_prefilled"] += len(ids)
        slot.cached += [int(t) for t in ids]
        self._sample(req, logits)
        return len(ids)


def pipeline_server(path, stages=2, n_ctx=4096, n_threads=None, kv_type=None, n_batch=512, api_key=None, name=None,
                    actor_options=None, address=None, max_body=1 << 20):
    """A pyggml.serve.Server over pyggml.distributed.load(path, stages, ...): requests one at a time
    through the stages (PipelineEngine). Embeddings are not served (501). close() stops the engine
    and the stages."""
    from pyggml import distributed
    from pyggml.serve.app import Server
    kw = {} if kv_type is None else {"kv_type": kv_type}
    pipe = distributed.load(path, stages, n_ctx, n_threads, split=None, actor_options=actor_options, address=address,
                            n_batch=n_batch, **kw)
    try:
        model = PipelineModel(pipe, path)
        return Server(model, api_key=api_key, name=name or os.path.basename(path), max_body=max_body,
                      engine=PipelineEngine(model))
    except BaseException:
        pipe.close()
        raise
