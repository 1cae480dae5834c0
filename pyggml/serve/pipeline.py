"""pyggml serve --stages N: the OpenAI-compatible server over a model pipelined across Ray actors
(pyggml.distributed), for a model larger than one machine. See docs/serving.md.

    from pyggml.serve.pipeline import pipeline_server
    server = pipeline_server("model.gguf", stages=3, n_ctx=4096, n_seq=4)   # a pyggml.serve.Server
    pyggml.serve.run(server, "127.0.0.1", 8080)

PipelineEngine is BatchEngine with the graphs run by the stages: it plans each step here (which
requests' tokens, which cells of the cache, the padding, prefix reuse, lookup drafts) over a
KVCells that stands for the stages' caches, and sends the step through them
(Pipeline.step_batch) with those cells, which each stage's cache then takes (KVCache.mirror, the
rows moved as this side's defrags moved them); the last stage sends back the logits of the rows
that need an id, sampled here with each request's Sampler (grammars, DRY, XTC, mirostat). The
stages run the graphs a single-process BatchEngine runs, so each answer is the one `pyggml serve`
gives, whatever else is in the batch. A stage that fails ends the running requests with the error;
the stages are then reset (a failed one restarted) and the next requests start on empty caches.
"""
import contextlib
import os

import numpy as np

from pyggml.kvcache import KVCells
from pyggml.models.batch import BatchEngine

__all__ = ["PipelineEngine", "PipelineModel", "pipeline_server"]


class PipelineModel:
    """What a BatchEngine reads of a model, for a pyggml.distributed.Pipeline: the pipeline's arch,
    hparams, n_vocab, n_ctx, the file's tensors (their types decide BatchEngine's exact mode; only
    the metadata is read) and its tokenizer and chat template (the file must be at `path` on this
    machine too), and `cache`, the KVCells of the stages' caches. n_batch: the most tokens a step
    carries."""

    def __init__(self, pipeline, path, n_batch=512):
        from pyggml import gguf
        self.pipeline, self.source = pipeline, str(path)
        self.gguf = gguf.load(path)
        self.tokenizer = self.gguf.tokenizer()
        self.arch, self.hparams, self.n_vocab, self.n_ctx = pipeline.arch, pipeline.hparams, pipeline.n_vocab, \
            pipeline.n_ctx
        self.tensors = self.gguf.tensors
        self.output_weight = self.tensors.get("output.weight", self.tensors["token_embd.weight"])
        self.has_head, self.l0, self.n_batch = True, 0, int(n_batch)
        self.pos_rows = 4 if self.hparams.rope.multi else 1
        self.cache = KVCells(self.n_ctx, pad=pipeline.stages[-1]["kv_pad"])

    def apply_chat_template(self, messages, add_generation_prompt=True, tools=None, **extra):
        from pyggml.models import chat
        return chat.apply_chat_template(self, messages, add_generation_prompt, tools, **extra)


class PipelineEngine(BatchEngine):
    """BatchEngine (submit, step, busy, Request; n_seq sequences, n_batch tokens a step, exact) over
    a PipelineModel: the steps planned here, run by the pipeline's stages."""

    def __init__(self, model, n_seq=1, n_batch=None, exact=True):
        super().__init__(model, n_seq, n_batch, exact)
        self._moves = []            # the results of the defrags since the last step
        self._failed = False

    def close(self):
        """End the pipeline's stage actors (Server.close calls it)."""
        self.model.pipeline.close()

    def _defrag(self):
        self._moves.append(self.cache.defrag())

    def _compute(self, ids, pos, cells, n_kv, n_out, want):
        moves, self._moves = self._moves, []
        try:
            out = self.model.pipeline.step_batch(ids, pos, cells, n_kv, n_out, want, self.cache, moves)
        except BaseException:
            self._failed = True
            raise
        return out, np.arange(len(want))

    def step(self):
        """BatchEngine.step; after a step that failed, the other running requests end with an error
        too (a stage may have lost its cache), and the stages are reset."""
        n = super().step()
        if self._failed:
            for req in list(self.running):
                self._finish(req, "error", RuntimeError("pyggml.serve.pipeline: a step of another request failed "
                                                        "and the stages were reset"))
            # a stage that cannot be restarted leaves it failed: the next step raises its StageError
            with contextlib.suppress(Exception):
                self.model.pipeline.reset()         # restarts a stage that failed
                self._failed = False
            self._forget_cells()
            self._moves = []
        return n


def pipeline_server(path, stages=2, n_ctx=4096, n_threads=None, kv_type=None, n_batch=512, api_key=None, name=None,
                    actor_options=None, address=None, max_body=1 << 20, n_seq=1):
    """A pyggml.serve.Server over pyggml.distributed.load(path, stages, ...): n_seq requests at a
    time batched through the stages (PipelineEngine), each with n_ctx // n_seq cells. Embeddings
    are not served (501). close() stops the engine and the stages."""
    from pyggml import distributed
    from pyggml.serve.app import Server
    kw = {} if kv_type is None else {"kv_type": kv_type}
    pipe = distributed.load(path, stages, n_ctx, n_threads, split=None, actor_options=actor_options, address=address,
                            n_batch=n_batch, **kw)
    try:
        model = PipelineModel(pipe, path, n_batch)
        return Server(model, api_key=api_key, name=name or os.path.basename(path), max_body=max_body,
                      engine=PipelineEngine(model, n_seq))
    except BaseException:
        pipe.close()
        raise
