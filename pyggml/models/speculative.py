"""Speculative decoding for Model.generate / Model.stream: a drafter proposes the next k ids, the
target model evaluates the last id and the k proposals in one step (logits for all k + 1
positions), keeps the proposals it would have produced itself and drops the rest from its KV cache.

    m.generate(ids, 64, draft=small_model, draft_max=8)   # a smaller model with the same vocabulary
    m.generate(ids, 64, lookup=True)                     # prompt lookup: n-grams of the context

Drafters (as llama.cpp's examples/speculative and examples/lookup):
  DraftModel  a second, smaller Model over the same vocabulary drafts greedily (its argmax, one
              decode step per proposed id). Its own context follows the target's: it is reset at
              the start of each generation, reads the prompt, and after each step drops what the
              target rejected (KVCache.seq_rm) and reads what the target accepted.
  Lookup      prompt lookup: the last n ids of the context (n from n_max down to n_min) are looked
              for earlier in the context (the prompt and the ids generated so far); at the latest
              earlier occurrence, the ids that followed it are the draft.

Acceptance (greedy and sampled alike): the target's Sampler samples position 0 from its logits,
then position i + 1 only while the id it sampled at position i equals draft id i. Each position is
sampled from the target's distribution given exactly the ids before it, in order, with one draw of
the Sampler's generator per id: the same draws as generation without a draft, so the output has
plain sampling's distribution (not the rejection-sampling scheme, which needs the draft's
probabilities and accepts more often when sampling at temperature > 0). Stop ids and n_predict end
the generation inside an accepted run exactly where they would without a draft, and the target's
KV cache then holds what it would hold without one (the prompt and every new id but the last).

The ids equal those of generation without a draft when a step of k + 1 tokens gives each row the
logits a one-token step gives; otherwise they can differ where the two largest logits are close.
pyggml's integer paths (quantized weights, any column count) give the same bits, and so does
flash_attn_ext, whose split-KV path takes a step of up to 16 rows one row after the other (each as a
one-row decode step) with the default choice. One path does not: mul_mat of F32/F16/BF16 matrices
(weights, or the F16 cache's products without flash attention) dots one column with the
one-column kernels and two or more with the dot tiles (from gemm_min_cols() columns on with the
GEMM), whose sums are ordered differently: a few ulps.
BatchEngine, which gives every row its bits whatever the step carries, takes lookup drafts with
the ids and logits to the bit.
"""
import collections

import numpy as np

__all__ = ["DraftModel", "Lookup", "Speculative", "check_draft"]


def _rollback(model, n):
    """Drop every cached token at positions >= n and continue at position n."""
    model.cache.seq_rm(-1, int(n))
    model.n_past = int(n)


def check_draft(target, draft):
    """ValueError/TypeError unless `draft` can draft for `target`: another whole Model with the
    same vocabulary (the same n_vocab, end-of-sequence id and, when both files list them, token
    texts)."""
    from pyggml.models.model import Model
    if not isinstance(draft, Model):
        raise TypeError(f"Model.generate: draft must be a pyggml.models.Model, got {type(draft).__name__}")
    if draft is target:
        raise ValueError("Model.generate: the draft must be another Model than the target (each needs its own KV "
                         "cache); load the file a second time to draft with the same weights")
    if not draft.has_head or draft.l0 != 0:
        raise ValueError("Model.generate: the draft needs the whole model (layers from 0 to n_layer)")
    where = f"the draft {draft.source or draft.arch} and the target {target.source or target.arch}"
    if draft.n_vocab != target.n_vocab:
        raise ValueError(f"Model.generate: {where} have different vocabularies: n_vocab {draft.n_vocab} and "
                         f"{target.n_vocab}")
    if draft.hparams.eos_id != target.hparams.eos_id:
        raise ValueError(f"Model.generate: {where} have different end-of-sequence ids: {draft.hparams.eos_id} and "
                         f"{target.hparams.eos_id}")
    texts = [getattr(getattr(m, "gguf", None), "metadata", {}).get("tokenizer.ggml.tokens") for m in (draft, target)]
    if texts[0] is not None and texts[1] is not None and list(texts[0]) != list(texts[1]):
        i = next((i for i, (a, b) in enumerate(zip(texts[0], texts[1])) if a != b), min(map(len, texts)))
        a, b = (t[i] if i < len(t) else None for t in texts)
        raise ValueError(f"Model.generate: {where} have different vocabularies: token {i} is {a!r} and {b!r}")


def check_draft_max(draft_max, where="Model.generate"):
    if isinstance(draft_max, bool) or not isinstance(draft_max, (int, np.integer)) or draft_max < 1:
        raise ValueError(f"{where}: draft_max must be an int >= 1, got {draft_max!r}")


def lookup_drafter(lookup, where="Model.generate"):
    """The Lookup of a `lookup=` argument: True (n-grams of 3 down to 1 ids), n_max or (n_min, n_max)."""
    if lookup is True:
        return Lookup()
    if isinstance(lookup, (int, np.integer)) and not isinstance(lookup, bool):
        return Lookup(1, lookup, where)
    if isinstance(lookup, (tuple, list)) and len(lookup) == 2:
        return Lookup(*lookup, where)
    raise ValueError(f"{where}: lookup must be True, n_max (n-grams of n_max down to 1 ids) or (n_min, n_max), "
                     f"got {lookup!r}")


class Lookup:
    """Prompt-lookup drafts: draft(tokens, k) finds the last n ids of tokens earlier in tokens (n
    from n_max down to n_min; the latest earlier occurrence) and returns up to k ids that followed
    it ([] when none of the n-grams occurs earlier)."""

    def __init__(self, n_min=1, n_max=3, where="Lookup"):
        n_min, n_max = int(n_min), int(n_max)
        if not 1 <= n_min <= n_max:
            raise ValueError(f"{where}: lookup n-gram sizes must be 1 <= n_min <= n_max, got {n_min}, {n_max}")
        self.n_min, self.n_max = n_min, n_max

    def begin(self, ids):
        pass

    def draft(self, tokens, k):
        t = np.asarray(tokens, np.int64)
        for n in range(self.n_max, self.n_min - 1, -1):
            if len(t) <= n:
                continue
            # windows t[j:j + n] for j < len(t) - n: every start with at least one id after it
            windows = np.lib.stride_tricks.sliding_window_view(t[:-1], n)
            hits = np.flatnonzero((windows == t[-n:]).all(axis=1))
            if len(hits):
                j = int(hits[-1]) + n
                return t[j:j + k].tolist()
        return []


class DraftModel:
    """Drafts with a second Model: greedy, one decode step per proposed id. The draft model's KV
    cache holds the ids it has read since begin() (self.cached, at positions 0, 1, ...)."""

    def __init__(self, model):
        self.model = model
        self.cached = []

    def begin(self, ids):
        self.model.reset()
        self.cached = []

    def draft(self, tokens, k):
        m = self.model
        same = next((i for i, (a, b) in enumerate(zip(self.cached, tokens)) if a != b), len(self.cached))
        n = min(same, len(tokens) - 1)      # the last id is read again: its logits start the draft
        k = min(k, m.n_ctx - len(tokens) + 1)       # the context and k - 1 proposals read
        if k <= 0:
            return []
        _rollback(m, n)
        logits = m.eval(tokens[n:], logits="last")[0]
        self.cached = list(tokens)
        out = []
        while True:
            out.append(int(np.argmax(logits)))
            if len(out) == k:
                return out
            logits = m.eval(out[-1:], logits="last")[0]
            self.cached.append(out[-1])


class Speculative:
    """The decode step of Model.stream with a drafter (module docstring): prefill(ids) wraps the
    model's prefill to record the context; decode(tok) returns the next id, running a verify step
    of the target when the ids of the last one are used up."""

    def __init__(self, model, sample, n_predict, stop, draft=None, draft_max=8, lookup=False):
        check_draft_max(draft_max)
        if draft is not None and lookup:
            raise ValueError("Model.generate: draft with a model or by lookup, not both")
        if draft is not None:
            check_draft(model, draft)
            self.drafter = DraftModel(draft)
        else:
            self.drafter = lookup_drafter(lookup)
        self.model, self.sample, self.n_predict, self.stop = model, sample, int(n_predict), stop
        self.draft_max = int(draft_max)
        self.tokens = []
        self.n_prompt = 0
        self.pending = collections.deque()

    def prefill(self, run):
        """The prefill function for generation(): run(ids) -> the first id, the context recorded."""
        def prefill(ids):
            self.tokens, self.n_prompt = list(ids), len(ids)
            self.pending.clear()
            self.model.timings.update(draft_tokens=0, accepted_tokens=0, verify_steps=0)
            self.drafter.begin(self.tokens)
            return run(ids)
        return prefill

    def decode(self, tok):
        self.tokens.append(int(tok))
        if self.pending:
            return self.pending.popleft()
        m = self.model
        left = self.n_predict - (len(self.tokens) - self.n_prompt)      # ids still to come, >= 1
        k = min(self.draft_max, left - 1, m.n_ctx - m.cache.n_used - 1)
        drafted = self.drafter.draft(self.tokens, k) if k > 0 else []
        p = m.n_past
        logits = m.eval([tok] + drafted)
        out = []
        for i, row in enumerate(logits):
            out.append(int(self.sample(row)))
            if out[-1] in self.stop or i == len(drafted) or out[-1] != drafted[i]:
                break
        _rollback(m, p + len(out))          # tok and the accepted drafts; the last id is read next step
        t = m.timings
        t["draft_tokens"] += len(drafted)
        t["accepted_tokens"] += sum(a == b for a, b in zip(out, drafted))     # a prefix: out stops at a miss
        t["verify_steps"] += 1
        self.pending.extend(out[1:])
        return out[0]
