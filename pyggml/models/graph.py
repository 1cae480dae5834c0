"""The model graph of one batch shape, built once and run many times with its inputs rewritten in place.

A StepGraph covers a contiguous layer range [l0, l1) of a model: its input is token ids (l0 == 0:
the token embedding is looked up in the graph) or a hidden state [n_embd, n_tokens] F32 (after layer
l0 - 1, or input embeddings such as an image's when l0 == 0 and embd is set), its output
the logits (l1 == n_layer: output norm and LM head) or the hidden state after layer l1 - 1. The
graph's shape is (n_tokens, n_kv, n_out): n_kv cells of the KV cache are attended (padded, see
KVCache.n_kv_for) and n_out rows reach the LM head (n_tokens, or 1 for the last token only: as
llama.cpp, the rows nobody reads leave the last layer after its attention). Tensors carry
llama.cpp's callback names ("attn_norm-3", "Qcur-3", "kqv_out-3", "ffn_out-3", "l_out-3",
"result_norm", "result_output"; inputs "inp_tokens", "inp_embd", "inp_pos", "inp_out_ids",
"kq_mask", "kv_idxs"), so CGraph.get_tensor finds them.
"""
import math

import numpy as np

from pyggml import _ops as op
from pyggml._enums import Prec, Type
from pyggml._graph import CGraph, set_input, set_output


class StepGraph:
    """One built graph and its input tensors. feed() writes the inputs; compute via `graph`."""

    def __init__(self, model, n_tokens, n_kv, n_out, embd=False):
        m, hp = model, model.hparams
        self.named = {}
        nm = self._named
        self.key = (n_tokens, n_kv, n_out, embd)
        self.n_tokens, self.n_kv, self.n_out = n_tokens, n_kv, n_out
        ctx = m.ctx
        if m.l0 == 0 and not embd:
            self.inp = nm(set_input(ctx.new_tensor(Type.I32, (n_tokens,))), "inp_tokens")
            x = nm(op.get_rows(m.weight("token_embd.weight"), self.inp), "inp_embd")
        else:
            self.inp = x = nm(set_input(ctx.new_tensor(Type.F32, (hp["n_embd"], n_tokens))), "inp_embd")
        n_pos = n_tokens * (4 if m.spec.multi_rope else 1)
        self.pos = nm(set_input(ctx.new_tensor(Type.I32, (n_pos,))), "inp_pos")
        self.kv = m.cache.batch(n_tokens, n_kv)
        self.out_ids = None
        if m.has_head and n_out < n_tokens:
            self.out_ids = nm(set_input(ctx.from_numpy(np.arange(n_tokens - n_out, n_tokens, dtype=np.int32))),
                                  "inp_out_ids")
        for il in range(m.l0, m.l1):
            x = self._layer(m, x, il, il == hp["n_layer"] - 1)
        if m.has_head:
            x = nm(op.mul(op.rms_norm(x, hp["rms_eps"]), m.weight("output_norm.weight")), "result_norm")
            x = nm(op.mul_mat(m.output_weight, x), "result_output")
        self.out = x
        for name in m.keep:
            if name not in self.named:
                raise ValueError(f"pyggml.models: keep: no tensor {name!r} in the graph (names such as "
                                 f"'ffn_out-0', 'l_out-0', 'result_norm')")
            set_output(self.named[name])
        self.graph = CGraph(size=64 * (m.l1 - m.l0) + 64)
        self.graph.build_forward_expand(x)
        self._inp_np, self._pos_np = self.inp.numpy(), self.pos.numpy()
        self._out_np, self._out_ptr = None, 0

    def output(self):
        """The output's numpy view after a compute (overwritten by the next), made once per
        placement of the graph's memory: a decode step does not pay for a new view."""
        ptr = self.out.data_ptr
        if self._out_np is None or ptr != self._out_ptr:
            self._out_np, self._out_ptr = self.out.numpy(), ptr
        return self._out_np

    def _named(self, t, name):
        t.name = name
        self.named[name] = t
        return t

    def _rope(self, m, t):
        hp = m.hparams
        args = {"n_dims": hp["rope_dim"], "mode": m.spec.rope_mode, "n_ctx_orig": hp.get("n_ctx_train") or 0,
                "freq_base": hp["rope_freq_base"], "freq_scale": hp["rope_freq_scale"]}
        if m.spec.multi_rope:
            return op.rope_multi(t, self.pos, None, sections=hp["rope_sections"], **args)
        return op.rope_ext(t, self.pos, m.rope_freqs, **args)

    def _proj(self, m, h, il, name):
        y = op.mul_mat(m.weight(f"blk.{il}.{name}.weight"), h)
        b = m.weight(f"blk.{il}.{name}.bias", required=False)
        return y if b is None else op.add(y, b)

    def _layer(self, m, x, il, last):
        hp, n, nm = m.hparams, self.n_tokens, self._named
        li = il - m.l0          # the cache holds the stage's layers only
        hd, hdv, nh, nkv = hp["head_dim"], hp["head_dim_v"], hp["n_head"], hp["n_head_kv"]
        h = nm(op.mul(op.rms_norm(x, hp["rms_eps"]), m.weight(f"blk.{il}.attn_norm.weight")), f"attn_norm-{il}")
        q = op.reshape_3d(self._proj(m, h, il, "attn_q"), hd, nh, n)
        k = op.reshape_3d(self._proj(m, h, il, "attn_k"), hd, nkv, n)
        v = nm(op.reshape_3d(self._proj(m, h, il, "attn_v"), hdv, nkv, n), f"Vcur-{il}")
        q, k = nm(self._rope(m, q), f"Qcur-{il}"), nm(self._rope(m, k), f"Kcur-{il}")
        self.kv.cpy_k(li, k)
        self.kv.cpy_v(li, v)
        q = op.permute(q, 0, 2, 1, 3)                                   # [hd, n, nh]
        kk, vv = self.kv.get_k(li), self.kv.get_v(li)
        scale = 1.0 / math.sqrt(hd)
        if m.flash_attn:
            a = op.flash_attn_ext_set_prec(op.flash_attn_ext(q, kk, vv, self.kv.mask, scale), Prec.F32)
            a = op.reshape_2d(a, hdv * nh, n)                           # [hdv, nh, n] -> rows of n_embd
        else:
            kq = nm(op.soft_max_ext(op.mul_mat(kk, q), self.kv.mask, scale, 0.0), f"kq_soft_max-{il}")
            a = op.permute(op.mul_mat(vv, kq), 0, 2, 1, 3)              # [hdv, n, nh] -> [hdv, nh, n]
            a = op.reshape_2d(op.cont(a), hdv * nh, n)
        a = nm(a, f"kqv_out-{il}")
        a = nm(self._proj(m, a, il, "attn_output"), f"attn_out-{il}")
        if last and self.out_ids is not None:
            a, x = op.get_rows(a, self.out_ids), op.get_rows(x, self.out_ids)
        x = nm(op.add(a, x), f"ffn_inp-{il}")
        h = nm(op.mul(op.rms_norm(x, hp["rms_eps"]), m.weight(f"blk.{il}.ffn_norm.weight")), f"ffn_norm-{il}")
        f = op.swiglu_split(self._proj(m, h, il, "ffn_gate"), self._proj(m, h, il, "ffn_up"))
        f = nm(self._proj(m, f, il, "ffn_down"), f"ffn_out-{il}")
        return nm(op.add(f, x), f"l_out-{il}")

    def feed(self, inputs, positions, cells):
        """Write the token ids (or hidden rows [n_tokens, n_embd]), the positions ([rows, n_tokens])
        and the KV cells of this step into the input tensors."""
        self._inp_np[...] = inputs
        self._pos_np[:] = positions.reshape(-1)
        self.kv.fill(cells)
