"""Pipeline a GGUF model's layers over Ray actors: pyggml.distributed.load(path, stages=N).

    import pyggml.distributed as dist
    m = dist.load("model.gguf", stages=3, n_ctx=2048, n_threads=8)     # starts Ray locally if needed
    logits = m.eval([1, 15043, 3186])        # float32 [3, n_vocab], as pyggml.models.Model.eval
    ids = m.generate([1, 15043], 32, temperature=0.8, seed=0)
    m.reset(); m.close()

Stage i is a Ray actor (a process, on any node of the cluster) that memory-maps the same GGUF and
builds pyggml.models graphs only for its contiguous layer range [l0, l1): stage 0 also looks up the
token embedding, the last stage also runs the output norm and the LM head; each has its own KV
cache of its layers. The ranges are split by weight bytes (split_layers). A step sends the token
ids to stage 0, each stage's hidden state [n_embd, n_tokens] F32 (a numpy array [n_tokens, n_embd])
to the next through Ray's object store (numpy is deserialised zero-copy from shared memory), and
the last stage's logits (or, for generate, the sampled id) back to the caller. The stages run the
graphs a single-process Model would run, so their logits are the same bits.

Ray is an optional dependency (pip install "pyggml[ray]"); plan() and split_layers() need numpy
only. See docs/distributed.md for clusters of several machines.
"""
import os
import re
import time

import numpy as np

from pyggml._enums import Type
from pyggml.models.model import generation
from pyggml.models.sampling import Sampler

__all__ = ["Pipeline", "StageError", "layer_bytes", "load", "plan", "split_layers"]


class StageError(RuntimeError):
    """A pipeline stage failed: its actor died (killed, out of memory, its node lost), it raised,
    or it gave no answer within the pipeline's timeout. `stage` is its index, `layers` its range
    (l0, l1). The pipeline refuses further steps until reset() (which restarts the failed stages)
    or a new load()."""

    def __init__(self, stage, layers, what):
        self.stage, self.layers, self.what = stage, tuple(layers) if layers else None, what
        where = f"layers [{layers[0]}, {layers[1]})" if layers else "layers not yet assigned"
        super().__init__(f"pyggml.distributed: stage {stage} ({where}) {what}")


def _ray():
    try:
        import ray
    except ImportError:
        raise ImportError("pyggml.distributed needs Ray: pip install ray (or pip install 'pyggml[ray]')") from None
    return ray


# ---- the layer split (numpy only) ----

def layer_bytes(f):
    """Weight bytes of a GGUFFile `f`: (a list with each layer's, the last stage's extra bytes), as
    Model.weight_bytes counts what a decode step reads: the output norm and the LM head (token_embd
    when output.weight is absent) belong to the last stage; stage 0's embedding lookup reads a few
    rows of token_embd and is not counted."""
    from pyggml.models import read_hparams
    n_layer = read_hparams(f).n_layer
    per_layer = [0] * n_layer
    for name, t in f.tensors.items():
        if name.startswith("blk."):
            per_layer[int(name.split(".")[1])] += t.nbytes
    head = "output.weight" if "output.weight" in f.tensors else "token_embd.weight"
    return per_layer, f.tensors["output_norm.weight"].nbytes + f.tensors[head].nbytes


def split_layers(per_layer, stages, last=0):
    """Split layers with these byte counts into `stages` contiguous, non-empty ranges [(l0, l1), ...]
    that minimise the largest stage's bytes (`last`: bytes the last stage holds besides its layers,
    the LM head); among equal maxima the earlier stages take fewer layers."""
    n = len(per_layer)
    if not 1 <= int(stages) <= n:
        raise ValueError(f"pyggml.distributed: stages must be in [1, n_layer = {n}], got {stages}")
    stages = int(stages)
    prefix = np.concatenate([[0], np.cumsum(per_layer, dtype=np.int64)]).tolist()

    def cost(s, a, b):      # bytes of stage s holding layers [a, b)
        return prefix[b] - prefix[a] + (last if s == stages - 1 else 0)

    # best[s][b]: (largest stage bytes, cut) over splits of layers [0, b) into stages 0..s
    best = [[None] * (n + 1) for _ in range(stages)]
    for b in range(1, n + 1):
        best[0][b] = (cost(0, 0, b), 0)
    for s in range(1, stages):
        for b in range(s + 1, n + 1):
            best[s][b] = min((max(best[s - 1][a][0], cost(s, a, b)), a) for a in range(s, b))
    ranges, b = [], n
    for s in range(stages - 1, -1, -1):
        a = best[s][b][1]
        ranges.append((a, b))
        b = a
    return ranges[::-1]


def plan(path, stages):
    """The layer ranges load(path, stages) would give its stages and the weight bytes of each:
    a list of {"layers": (l0, l1), "weight_bytes": n}. Needs numpy only (the file is mapped here)."""
    from pyggml import gguf

    with gguf.load(path) as f:
        per_layer, head = layer_bytes(f)
    ranges = split_layers(per_layer, stages, head)
    return [{"layers": r, "weight_bytes": sum(per_layer[r[0]:r[1]]) + (head if i == len(ranges) - 1 else 0)}
            for i, r in enumerate(ranges)]


# ---- one stage (a Ray actor; the class is wrapped with ray.remote when a pipeline starts) ----

class _Stage:
    """Maps the GGUF at `path`; build() makes the Model of a layer range."""

    def __init__(self, path):
        from pyggml import gguf
        from pyggml.models import read_hparams

        self.file = gguf.load(path)
        self.hparams = read_hparams(self.file)
        self.model = None
        self.sampler = None
        self.seconds, self.calls = 0.0, 0

    def info(self):
        """What the caller needs before the split: the architecture, hparams and weight bytes."""
        import ray

        return {"arch": self.file.arch, "hparams": self.hparams, "bytes": layer_bytes(self.file),
                "node": ray.get_runtime_context().get_node_id(), "pid": os.getpid()}

    def build(self, layers, n_ctx, n_threads, kv_type, options):
        from pyggml._graph import build_info
        from pyggml._threads import count_threads
        from pyggml.models import Model

        if n_threads is None:       # Ray sets OMP_NUM_THREADS from num_cpus; use the node's cores
            n_threads = count_threads(build_info()["openmp"], environ={})
        f = self.file
        self.model = Model(f.arch, self.hparams, f.tensors, n_ctx=n_ctx, n_threads=n_threads, kv_type=kv_type,
                           layers=layers, source=f.path, **options)
        self.steps = None
        return {"weight_bytes": self.model.weight_bytes, "kv_bytes": self.model.cache.nbytes,
                "n_threads": n_threads, "kv_pad": self.model.cache.pad}

    def run(self, x, positions, logits, sample):
        """Model.eval of this stage's layers; the sampled id when `sample` (the last stage)."""
        t0 = time.perf_counter()
        out = self.model.eval(x, logits=logits, positions=positions)
        if sample:
            out = int(self.sampler(out[-1]))
        self.seconds += time.perf_counter() - t0
        self.calls += 1
        return out

    def run_batch(self, x, pos, cells, n_kv, n_out, want, kv_cells, moves):
        """A batched step planned elsewhere over the cells kv_cells (a KVCells, with the results of
        its defrags since the last step, `moves`): this cache takes them (KVCache.mirror), then
        StepGraphs.run; the last stage returns the wanted rows' logits, the others the hidden
        states."""
        from pyggml.models.batch import StepGraphs

        t0 = time.perf_counter()
        if self.steps is None:
            self.steps = StepGraphs(self.model)
        self.model.cache.mirror(kv_cells, moves)
        out, rows = self.steps.run(x, pos, cells, n_kv, n_out, want)
        out = out[rows] if self.model.has_head else np.array(out)
        self.seconds += time.perf_counter() - t0
        self.calls += 1
        return out

    def set_sampler(self, sampler):
        self.sampler = sampler

    def reset(self):
        self.model.reset()

    def tokenize(self, text, add_bos):
        if self.model.tokenizer is None:
            self.model.tokenizer = self.file.tokenizer()
        return self.model.tokenize(text, add_bos)

    def timings(self):
        """Seconds spent in run() and the number of calls since the last timings(), and the graphs
        the model has built."""
        builds = self.model.n_graph_builds + (0 if self.steps is None else self.steps.n_builds)
        out = {"seconds": self.seconds, "calls": self.calls, "graph_builds": builds}
        self.seconds, self.calls = 0.0, 0
        return out


_REMOTE = None


def _stage_class():
    global _REMOTE
    if _REMOTE is None:
        _REMOTE = _ray().remote(_Stage)
    return _REMOTE


# ---- the pipeline ----

class Pipeline:
    """The stages of a model over Ray actors, with pyggml.models.Model's eval / generate / stream /
    reset surface and its arch, hparams, n_vocab, n_ctx, and step_batch for a BatchEngine's steps
    (pyggml.serve.pipeline). Made by load(). stages: per stage a dict with "layers" (l0, l1),
    "weight_bytes", "kv_bytes", "kv_pad" (its cache's), "n_threads", "node" (Ray node id) and "pid"."""

    def __init__(self, path, n_stages, n_ctx, n_threads, kv_type, split, actor_options, timeout, start_timeout,
                 options):
        self.ray = _ray()
        self.path, self.n_ctx = str(path), int(n_ctx)
        self.timeout, self.start_timeout = timeout, start_timeout
        self._args = (n_threads, kv_type, options)
        if isinstance(actor_options, dict) or actor_options is None:
            actor_options = [dict(actor_options or {}) for _ in range(n_stages)]
        if len(actor_options) != n_stages:
            raise ValueError(f"pyggml.distributed.load: actor_options must be one dict or {n_stages} dicts "
                             f"(one per stage), got {len(actor_options)}")
        self._options = [{"num_cpus": 1, **o} for o in actor_options]
        self._broken = None
        self.timings = {}
        self.actors = [None] * n_stages
        self.stages = [{"layers": None} for _ in range(n_stages)]
        try:
            for i in range(n_stages):
                self.actors[i] = self._spawn(i)
            info = self._wait_stage(0, self.actors[0].info.remote(), "did not start")
            self.arch, self.hparams = info["arch"], info["hparams"]
            self.n_vocab = self.hparams.n_vocab
            per_layer, head = info["bytes"]
            if split is None:
                ranges = split_layers(per_layer, n_stages, head)
            else:
                ranges = [tuple(int(v) for v in r) for r in split]
                bounds = [0] + [r[1] for r in ranges]
                if len(ranges) != n_stages or any(r[0] != b or r[1] <= r[0] for r, b in zip(ranges, bounds)) \
                        or bounds[-1] != len(per_layer):
                    raise ValueError(f"pyggml.distributed.load: split must be {n_stages} contiguous non-empty "
                                     f"ranges covering [0, {len(per_layer)}), got {split}")
            for i, r in enumerate(ranges):
                self.stages[i]["layers"] = r
            self._build_all(range(n_stages))
        except BaseException:
            self.close()
            raise

    # ---- stages ----

    def _spawn(self, i):
        return _stage_class().options(**self._options[i]).remote(self.path)

    def _build_all(self, indices):
        n_threads, kv_type, options = self._args
        refs = {i: (self.actors[i].build.remote(self.stages[i]["layers"], self.n_ctx, n_threads, kv_type, options),
                    self.actors[i].info.remote()) for i in indices}
        for i, (built, info) in refs.items():
            self.stages[i].update(self._wait_stage(i, built, "did not start"))
            info = self._wait_stage(i, info, "did not start")
            self.stages[i].update(node=info["node"], pid=info["pid"])

    def _wait_stage(self, i, ref, what):
        ray = self.ray
        try:
            return ray.get(ref, timeout=self.start_timeout)
        except ray.exceptions.GetTimeoutError:
            raise StageError(i, self.stages[i]["layers"],
                             f"{what} within {self.start_timeout} s (no node with the resources it asks for? "
                             f"options {self._options[i]}; see `ray status`)") from None
        except ray.exceptions.RayError as e:
            raise StageError(i, self.stages[i]["layers"], f"{what}: {_summary(e)}") from e

    def _failure(self, refs, timed_out):
        """The StageError of a step whose result raised: the first stage (in pipeline order) whose
        result is an error or, after a timeout, is not ready (None when all are ready by now). A
        ValueError/TypeError of stage 0 (bad input, a full context: nothing was appended anywhere)
        is returned as it is."""
        ray = self.ray
        for i, r in enumerate(refs):
            try:
                ray.get(r, timeout=0 if timed_out else self.timeout)
            except ray.exceptions.GetTimeoutError:
                return StageError(i, self.stages[i]["layers"], f"gave no answer within {self.timeout} s")
            except ray.exceptions.RayTaskError as e:
                if i == 0 and isinstance(e.cause, (ValueError, TypeError)):
                    return e.cause
                return StageError(i, self.stages[i]["layers"], f"raised {_summary(e)}")
            except ray.exceptions.RayError as e:
                return StageError(i, self.stages[i]["layers"], f"failed: {_summary(e)}")
        return None

    def _step(self, x, positions, logits, sample=False):
        """Model.eval's step of x through every stage; the last stage's output."""
        last = len(self.actors) - 1
        return self._through(x, lambda i, actor, ref: actor.run.remote(ref, positions, logits if i == last else "all",
                                                                       sample and i == last))

    def step_batch(self, ids, pos, cells, n_kv, n_out, want, kv_cells, moves=()):
        """A BatchEngine step through every stage (pyggml.serve.pipeline.PipelineEngine plans it): the
        token ids at positions pos [rows, n] into `cells` of the stages' caches, whose cells are
        kv_cells's (a KVCells, after the defrags whose results are `moves`); the logits of the rows
        `want` (n_out of them, padded, reach the LM head), float32 [len(want), n_vocab]."""
        last = len(self.actors) - 1
        return self._through(ids, lambda i, actor, ref: actor.run_batch.remote(
            ref, pos, cells, n_kv, n_out if i == last else len(ids), want, kv_cells, moves))

    def _through(self, x, call):
        """Send x through every stage, call(i, actor, input ref) making each stage's call; the last
        stage's output."""
        if self.actors[0] is None:
            raise RuntimeError("pyggml.distributed: the pipeline is closed; load again")
        if self._broken is not None:
            b = self._broken
            raise StageError(b.stage, b.layers, f"failed earlier ({b.what}); call reset() or load again")
        refs, ref = [], x
        for i, actor in enumerate(self.actors):
            ref = call(i, actor, ref)
            refs.append(ref)
        ray = self.ray
        try:
            return ray.get(ref, timeout=self.timeout)
        except (ray.exceptions.RayError, ray.exceptions.GetTimeoutError) as e:
            err = self._failure(refs, isinstance(e, ray.exceptions.GetTimeoutError))
            if err is None:             # the last stage answered just after the timeout
                return ray.get(ref)
            if isinstance(err, StageError):
                self._broken = err
            raise err from e

    # ---- the Model surface ----

    def eval(self, tokens, logits="all", positions=None):
        """Model.eval over the pipeline: append token ids to every stage's KV cache and return float32
        logits [n, n_vocab] (logits="last": [1, n_vocab]). positions as Model.eval."""
        if logits not in ("all", "last"):
            raise ValueError(f"Pipeline.eval: logits must be 'all' or 'last', got {logits!r}")
        ids = np.asarray(tokens, dtype=np.int64).reshape(-1)
        pos = None if positions is None else np.asarray(positions, dtype=np.int32)
        return np.array(self._step(ids, pos, logits))

    def tokenize(self, text, add_bos=True):
        """Token ids of text with the GGUF's tokenizer (run by stage 0)."""
        return self._wait_stage(0, self.actors[0].tokenize.remote(text, add_bos), "could not tokenize")

    def stream(self, prompt, n_predict, temperature=0.0, top_k=0, top_p=1.0, seed=None, stop=None):
        """Model.stream over the pipeline: yields up to n_predict sampled ids after prompt (ids, or text
        when the GGUF has a tokenizer); the last stage samples, so only the id comes back per step."""
        sampler = Sampler(temperature, top_k, top_p, seed)

        def prefill(ids):
            self.actors[-1].set_sampler.remote(sampler)     # runs before the step below (actor order)
            return decode(ids)

        def decode(ids):
            return self._step(np.asarray(ids, dtype=np.int64).reshape(-1), None, "last", sample=True)

        yield from generation(self, prompt, n_predict, stop, prefill, decode)

    def generate(self, prompt, n_predict, temperature=0.0, top_k=0, top_p=1.0, seed=None, stop=None):
        """The ids stream() yields, as a list (the new ids only)."""
        return list(self.stream(prompt, n_predict, temperature, top_k, top_p, seed, stop))

    def reset(self):
        """Empty every stage's KV cache (positions start at 0 again). A stage that failed, or does not
        answer within start_timeout, is replaced by a new actor (same options and layers)."""
        ray = self.ray
        if self.actors[0] is None:
            raise RuntimeError("pyggml.distributed: the pipeline is closed; load again")
        refs = [a.reset.remote() for a in self.actors]
        dead = []
        for i, r in enumerate(refs):
            try:
                ray.get(r, timeout=self.start_timeout)
            except (ray.exceptions.RayError, ray.exceptions.GetTimeoutError):
                dead.append(i)
        for i in dead:
            ray.kill(self.actors[i])
            self.actors[i] = self._spawn(i)
        self._build_all(dead)
        self._broken = None

    def stage_timings(self):
        """Per stage a dict: "seconds" and "calls" of its steps (Model.eval and sampling) since the last
        stage_timings(), "graph_builds" (Model.n_graph_builds: graphs are reused between steps)."""
        return [self._wait_stage(i, a.timings.remote(), "gave no timings") for i, a in enumerate(self.actors)]

    def close(self):
        """End the stage actors (also when the Pipeline is garbage collected, as Ray ends actors
        whose handles are gone)."""
        for a in self.actors:
            if a is not None:
                self.ray.kill(a)
        self.actors = [None] * len(self.actors)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        ranges = ", ".join(f"[{s['layers'][0]}, {s['layers'][1]})" for s in self.stages if s["layers"])
        return f"Pipeline({self.arch}, {len(self.stages)} stages: {ranges}, n_ctx={self.n_ctx})"


def _summary(e):
    """A Ray error in one line: its type, its first line and, when it carries a traceback (an error
    raised in a stage), the last line, the exception raised there; terminal colours removed."""
    lines = [re.sub(r"\x1b\[[0-9;]*m", "", ln).strip() for ln in str(e).splitlines()]
    lines = [ln[:300] for ln in lines if ln]
    text = " ... ".join(lines[:1] + lines[-1:] if len(lines) > 1 else lines)
    return f"{type(e).__name__}: {text}"


_MODEL_OPTIONS = frozenset({"flash_attn", "n_batch", "kv_pad"})


def load(path, stages=2, n_ctx=512, n_threads=None, kv_type=Type.F16, *, split=None, actor_options=None,
         timeout=600.0, start_timeout=300.0, address=None, **options):
    """Start a pipeline of `stages` Ray actors over the GGUF at `path` (the same path on every node
    that hosts a stage) and return its Pipeline.

    n_ctx, kv_type and options (flash_attn, n_batch, kv_pad) are pyggml.models.load's, for every
    stage. n_threads: threads of each stage (None: the physical cores of its node). split: explicit
    layer ranges [(0, a), (a, b), ...] instead of the split by weight bytes. actor_options: Ray actor
    options (num_cpus, resources, memory, scheduling_strategy: NodeAffinitySchedulingStrategy or a
    placement group) as one dict for all stages or a list with one per stage; num_cpus defaults to 1.
    timeout: seconds a step may take before StageError (None: no limit); start_timeout: seconds for a
    stage to start (map the file, build its model) or reset. address: ray.init's, used only when Ray
    is not initialised yet in this process."""
    if int(stages) < 1:
        raise ValueError(f"pyggml.distributed.load: stages must be >= 1, got {stages}")
    unknown = set(options) - _MODEL_OPTIONS
    if unknown:
        raise TypeError(f"pyggml.distributed.load: unknown options {sorted(unknown)}; the model options are "
                        f"{sorted(_MODEL_OPTIONS)}")
    ray = _ray()
    if not ray.is_initialized():
        ray.init(address=address, include_dashboard=False)
    return Pipeline(path, int(stages), n_ctx, n_threads, kv_type, split, actor_options, timeout, start_timeout,
                    options)
