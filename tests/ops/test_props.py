"""Property tests over every builder (hypothesis; docs/reliability.md). Each example draws tensors of
random types and shapes (zero-sized and size-1 dims), laid out packed, permuted or as strided row
views, and parameters that are sometimes nonsense. The example must then either raise ValueError or
TypeError when the node is built, with a message naming the op, or compute (IndexError/ValueError
only for bad data, as documented) and match the float64 reference of tests/reference.py. A draw the
test knows to be valid must build; one it knows to be nonsense must not.

An example is plain data (Case), run by execute() in this process or, for the crash-prone draws
(arbitrary view strides and offsets, many threads), in a child process (Worker) whose death fails
the example instead of the test run.

CI runs the fixed, derandomised profile "ci" (the same examples every run); PYGGML_HYPOTHESIS=dev
draws new ones (more of them), PYGGML_HYPOTHESIS_EXAMPLES overrides the count.
"""
import math
import os
import pickle
import subprocess
import sys
from typing import NamedTuple

import numpy as np
import pytest
import reference as R
from conftest import EMULATED

pytest.importorskip("hypothesis", reason="the property tests need hypothesis (requirements-dev.txt); the qemu "
                    "sysroots have none")
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pyggml as gg
from pyggml._tables import FA_SPLIT_MAX_N

settings.register_profile("ci", derandomize=True, database=None, deadline=None, print_blob=True,
                          suppress_health_check=list(HealthCheck), max_examples=300)
settings.register_profile("dev", deadline=None, suppress_health_check=list(HealthCheck), max_examples=1000)
settings.load_profile(os.environ.get("PYGGML_HYPOTHESIS", "ci"))
EXAMPLES = int(os.environ.get("PYGGML_HYPOTHESIS_EXAMPLES", "0")) or settings().max_examples

# (elements per block, bytes per block): the storage facts of ggml's types
TS = {"F32": (1, 4), "F16": (1, 2), "BF16": (1, 2), "Q8_0": (32, 34), "Q4_0": (32, 18), "I32": (1, 4),
      "I64": (1, 8), "MXFP4": (32, 17), "Q4_K": (256, 144)}
FLOATS, QUANTS, INTS = ("F32", "F16", "BF16"), ("Q8_0", "Q4_0"), ("I32", "I64")
DIMS = (0, 1, 1, 2, 3, 5, 7, 32, 33)
BAD_FLOATS = (float("nan"), float("inf"), -float("inf"), 1e39, "x", None)


# ---- tensors as data ----

class Spec(NamedTuple):
    """A tensor made from a packed base of `base` elements (ggml order) and a layout: ("packed",),
    ("permute", axes) or ("rows", ne0, first): elements [first, first + ne0) of every base row."""
    type: str
    base: tuple
    layout: tuple
    seed: int
    scale: float = 1.0


def packed_nb(typ, ne):
    blck, ts = TS[typ]
    nb1 = ts * (ne[0] // blck)
    return (ts, nb1, nb1 * ne[1], nb1 * ne[1] * ne[2])


def geometry(spec):
    """ne, nb and byte offset of the tensor a spec makes."""
    nb = packed_nb(spec.type, spec.base)
    if spec.layout[0] == "packed":
        return spec.base, nb, 0
    if spec.layout[0] == "permute":
        ne, nbp = [0] * 4, [0] * 4
        for i, ax in enumerate(spec.layout[1]):
            ne[ax], nbp[ax] = spec.base[i], nb[i]
        return tuple(ne), tuple(nbp), 0
    _, ne0, first = spec.layout
    blck, ts = TS[spec.type]
    return (ne0,) + spec.base[1:], nb, first // blck * ts


def packed0(spec):
    _, nb, _ = geometry(spec)
    return nb[0] == TS[spec.type][1]


def contiguous(spec):
    """ggml_is_contiguous of the tensor (a dim of size 1 has any stride)."""
    ne, nb, _ = geometry(spec)
    blck, ts = TS[spec.type]
    if ne[0] != blck and nb[0] != ts:
        return False
    want = ts * (ne[0] // blck)
    for i in range(1, 4):
        if ne[i] != 1:
            if nb[i] != want:
                return False
            want *= ne[i]
    return True


def base_values(spec):
    rng = np.random.default_rng(spec.seed)
    shape = spec.base[::-1]
    if spec.type in INTS:
        return rng.integers(-3, 40, shape)
    return (rng.standard_normal(shape) * spec.scale).astype(np.float32)


def stored(x, typ):
    """x as a tensor of typ stores it, float64; the K-quants (no encoder in tests/reference.py) decoded
    by the reference from the bytes pyggml's quantiser writes"""
    if typ in R.K_LAYOUT:
        raw = np.frombuffer(gg.Context().from_numpy(x, type=gg.Type[typ]).tobytes(), np.uint8)
        return R.dequantize_k(raw, typ).reshape(x.shape)
    return R.roundtrip(x, typ).astype(np.float64)


def values(spec):
    """The values the tensor holds, as stored (float64, int64 for integers), numpy order 4-d."""
    x = base_values(spec)
    if spec.type in INTS:
        s = x.astype(np.int64)
    else:
        s = (stored(x, spec.type) if x.size else x).astype(np.float64)
    if spec.layout[0] == "permute":
        perm = [0] * 4
        for i, ax in enumerate(spec.layout[1]):
            perm[3 - ax] = 3 - i
        return s.transpose(perm)
    if spec.layout[0] == "rows":
        _, ne0, first = spec.layout
        return s[..., first:first + ne0]
    return s


def base_bytes(spec):
    """The raw storage of the spec's base, in memory order."""
    x = base_values(spec)
    if spec.type in INTS:
        return x.astype(np.int32 if spec.type == "I32" else np.int64).tobytes()
    if x.size == 0:
        return b""
    return R.encode_rows(x, spec.type).tobytes()


def materialize(ctx, spec):
    x = base_values(spec)
    if spec.type == "I32":
        x = x.astype(np.int32)
    base = ctx.from_numpy(x, type=gg.Type[spec.type])
    if spec.layout[0] == "permute":
        return gg.permute(base, *spec.layout[1])
    if spec.layout[0] == "rows":
        ne, _, off = geometry(spec)
        return gg.view_4d(base, *ne, base.nb[1], base.nb[2], base.nb[3], off)
    return base


@st.composite
def shapes(draw, blck=1, ne0=None):
    ne = list(draw(st.lists(st.sampled_from(DIMS), min_size=1, max_size=4))) + [1, 1, 1]
    ne[0] = draw(st.sampled_from((0, 32, 64) if blck > 1 else DIMS)) if ne0 is None else ne0
    return tuple(ne[:4])


@st.composite
def specs(draw, types, ne=None, layouts=("packed", "packed", "permute", "rows"), scale=1.0):
    """A Spec of one of `types` whose tensor has ne (drawn when None)."""
    typ = draw(st.sampled_from(types))
    blck = TS[typ][0]
    ne = draw(shapes(blck)) if ne is None else tuple(ne) + (1,) * (4 - len(ne))
    layout = draw(st.sampled_from(layouts))
    seed = draw(st.integers(0, 2**16))
    if layout == "permute":
        axes = tuple(draw(st.permutations(range(4))))
        if blck > 1:                                 # blocks run along dim 0: it stays
            axes = (0,) + tuple(draw(st.permutations((1, 2, 3))))
        return Spec(typ, tuple(ne[axes[i]] for i in range(4)), ("permute", axes), seed, scale)
    if layout == "rows" and ne[0] % blck == 0:
        pad = blck * draw(st.sampled_from((1, 3)))
        first = draw(st.sampled_from((0, pad))) if all(ne[1:]) else 0    # no view past an empty base
        return Spec(typ, (ne[0] + pad,) + ne[1:], ("rows", ne[0], first), seed, scale)
    return Spec(typ, ne, ("packed",), seed, scale)


def rare(draw, n):
    """True about once in n draws (hypothesis favours the first choice: the sound one)"""
    return draw(st.sampled_from((False,) * (n - 1) + (True,)))


def bad_float(draw):
    return draw(st.sampled_from(BAD_FLOATS))


def divisor_shape(draw, ne):
    """A shape that ggml's can_repeat broadcasts to ne."""
    return tuple(draw(st.sampled_from([d for d in range(1, n + 1) if n % d == 0])) if n else
                 draw(st.sampled_from((0, 1, 3))) for n in ne)


# ---- cases ----

class Case(NamedTuple):
    op: str
    tensors: dict          # name -> Spec or None
    params: dict
    valid: bool            # True: must build; False: must be refused when built
    nth: int = 1


OPS = {}       # op -> (build(T, P) -> (node, read), ref(V, case) -> Expect, names the errors may start with)


class Expect(NamedTuple):
    value: object = None            # float64 array (or bytes) the result must match
    bound: float = 0.0              # NMSE bound (0: equal)
    raises: type = None             # the data error compute must raise instead


def op(name, names=None):
    def reg(fns):
        OPS[name] = (fns[0], fns[1], names or (name,))
        return fns
    return reg


def read_values(t):
    return t.to_numpy().reshape(t.ne[::-1])


def rounded(x, typ):
    """float64 results stored in a tensor of typ"""
    with np.errstate(over="ignore", invalid="ignore"):
        return R.roundtrip(np.asarray(x, np.float64).astype(np.float32), typ).astype(np.float64) if typ in FLOATS \
            else np.asarray(x)


# binary: add, mul

@st.composite
def binary_case(draw, name):
    a = draw(specs(FLOATS))
    ne_a, _, _ = geometry(a)
    nonsense = draw(st.sampled_from((None,) * 6 + ("shape", "type", "int", "packed")))
    ne_b = divisor_shape(draw, ne_a)
    if nonsense == "shape":
        ne_b = tuple(n + 1 for n in ne_b) if any(ne_a) else (2, 1, 1, 1)
        ok = all((b == 0 and x == 0) or (b != 0 and x % b == 0) for x, b in zip(ne_a, ne_b))
        nonsense = None if ok else nonsense
    b = draw(specs(INTS if nonsense == "type" else FLOATS, ne_b, layouts=("packed", "rows")))
    if nonsense == "int":
        a = a._replace(type=draw(st.sampled_from(INTS)), layout=("packed",), base=ne_a)
    if nonsense == "packed":           # dim 0 strided: whether that is refused follows from the strides
        a, nonsense = Spec(a.type, (ne_a[1], ne_a[0]) + ne_a[2:], ("permute", (1, 0, 2, 3)), a.seed), None
    return Case(name, {"a": a, "b": b}, {}, nonsense is None and packed0(a) and packed0(b))


def _binary_ref(fn):
    def ref(V, case):
        a, b = V["a"], V["b"]
        if a.size == 0:
            return Expect(a)
        return Expect(rounded(R.broadcast_binary(a, b, fn), case.tensors["a"].type), 1e-12)
    return ref


op("add")((lambda T, P: _node(gg.add(T["a"], T["b"])), _binary_ref(np.add)))
op("mul")((lambda T, P: _node(gg.mul(T["a"], T["b"])), _binary_ref(np.multiply)))


def _node(t, read=None):
    """the node to compute and how to read the result (its values unless told)"""
    return t, read or (lambda: read_values(t))


@st.composite
def scale_case(draw):
    a = draw(specs(("F32",) * 4 + ("F16",)))
    s, b = draw(st.floats(-4, 4).filter(lambda v: v == 0 or abs(v) > 1e-30)), draw(st.sampled_from((0.0, 0.5)))
    valid = a.type == "F32" and packed0(a)
    if draw(st.booleans()) and draw(st.booleans()):
        s, valid = bad_float(draw), False
    return Case("scale", {"a": a}, {"s": s, "b": b}, valid)


op("scale")((lambda T, P: _node(gg.scale(T["a"], P["s"], P["b"])),
             lambda V, c: Expect(rounded(V["a"] * np.float32(c.params["s"]) + c.params["b"], "F32"), 1e-12)))


# copies and reshapes

@st.composite
def cpy_case(draw):
    a = draw(specs(FLOATS + QUANTS + INTS))
    ne_a, _, _ = geometry(a)
    n = math.prod(ne_a)
    if a.type in QUANTS or draw(st.booleans()):
        ne_b = ne_a
    else:
        ne_b = draw(st.sampled_from([(n, 1, 1, 1), (1, n, 1, 1)] + ([(n // 2, 2, 1, 1)] if n % 2 == 0 else [])))
    types = (a.type,) if a.type in INTS else FLOATS + (QUANTS if ne_b[0] % 32 == 0 else ()) + \
        (("I32",) if draw(st.booleans()) else ())
    b = draw(specs(types, ne_b, layouts=("packed", "rows")))
    ints = a.type in INTS or b.type in INTS
    quant = a.type in QUANTS or b.type in QUANTS
    valid = (not ints or a.type == b.type) and (not quant or (ne_a == ne_b and packed0(a) and packed0(b)))
    return Case("cpy", {"a": a, "b": b}, {}, valid)


@st.composite
def dup_case(draw):
    a = draw(specs(FLOATS + QUANTS + INTS))
    return Case(draw(st.sampled_from(("cont", "dup"))), {"a": a}, {}, a.type not in QUANTS or packed0(a))


def _cpy_ref(V, case):
    b = case.tensors["b"]
    ne_b, _, _ = geometry(b)
    x = V["a"].reshape(ne_b[::-1])
    if x.size == 0:
        return Expect(x)
    return Expect(x if b.type in INTS else rounded(x, b.type) if b.type in FLOATS else
                  R.roundtrip(x.astype(np.float32), b.type), 1e-12)


@st.composite
def cont_nd_case(draw):
    """cont_2d/3d/4d: a's elements in logical order under a shape of as many elements (its trailing
    dims merged, or all in dim 0); quantized tensors keep their shape."""
    a = draw(specs(FLOATS + QUANTS + INTS))
    ne_a, _, _ = geometry(a)
    d = draw(st.sampled_from((2, 3, 4)))
    ne = draw(st.sampled_from((ne_a[:d - 1] + (math.prod(ne_a[d - 1:]),), (math.prod(ne_a),) + (1,) * (d - 1))))
    if rare(draw, 8):
        ne = (ne[0] + 1,) + ne[1:]
    full = ne + (1,) * (4 - d)
    valid = math.prod(full) == math.prod(ne_a) and full[0] % TS[a.type][0] == 0 and \
        (a.type not in QUANTS or (full == ne_a and packed0(a)))
    return Case(f"cont_{d}d", {"a": a}, {"ne": ne}, valid)


op("cpy")((lambda T, P: _node(gg.cpy(T["a"], T["b"])), _cpy_ref))
op("cont")((lambda T, P: _node(gg.cont(T["a"])), lambda V, c: Expect(V["a"])))
op("dup")((lambda T, P: _node(gg.dup(T["a"])), lambda V, c: Expect(V["a"])))
for _k in ("cont_2d", "cont_3d", "cont_4d"):
    op(_k)((lambda T, P, k=_k: _node(getattr(gg, k)(T["a"], *P["ne"])),
            lambda V, c: Expect(V["a"].reshape((tuple(c.params["ne"]) + (1,) * 4)[:4][::-1]))))


@st.composite
def reshape_case(draw):
    a = draw(specs(FLOATS + QUANTS + INTS))
    ne_a, _, _ = geometry(a)
    n = math.prod(ne_a)
    blck = TS[a.type][0]
    opts = [(n,), (ne_a[0], n // ne_a[0]) if ne_a[0] else (0, 3), ne_a[::-1], (ne_a[0], 1, max(n // max(ne_a[0], 1), 0))]
    ne = draw(st.sampled_from(opts))
    if rare(draw, 10):
        ne = (draw(st.sampled_from((2.0, 2.5))),)
        return Case("reshape", {"a": a}, {"ne": ne, "nd_call": False}, False)
    full = tuple(ne) + (1,) * (4 - len(ne))
    valid = contiguous(a) and math.prod(full) == n and full[0] % blck == 0
    return Case("reshape", {"a": a}, {"ne": tuple(ne), "nd_call": draw(st.booleans())}, valid)


def _reshape_build(T, P):
    ne = P["ne"]
    fn = getattr(gg, f"reshape_{len(ne)}d") if P["nd_call"] else lambda a, *n: gg.reshape(a, n)
    return _node(gg.cont(fn(T["a"], *ne)))


op("reshape", ("reshape", "reshape_1d", "reshape_2d", "reshape_3d", "reshape_4d", "cont"))((_reshape_build,
               lambda V, c: Expect(V["a"].reshape((tuple(c.params["ne"]) + (1,) * 4)[:4][::-1]))))


@st.composite
def permute_case(draw):
    a = draw(specs(FLOATS + QUANTS + INTS, layouts=("packed", "rows")))
    axes = tuple(draw(st.permutations(range(4))))
    if rare(draw, 10):
        return Case("permute", {"a": a}, {"axes": axes[:3] + (axes[0],)}, False)
    return Case("permute", {"a": a}, {"axes": axes}, a.type not in QUANTS or axes[0] == 0)


def _permuted(V, case):
    perm = [0] * 4
    for i, ax in enumerate(case.params["axes"]):
        perm[3 - ax] = 3 - i
    return Expect(V["a"].transpose(perm))


def _permute_build(T, P):
    if P["axes"] == (1, 0, 2, 3):
        return _node(gg.cont(gg.transpose(T["a"])))
    return _node(gg.cont(gg.permute(T["a"], *P["axes"])))


op("permute", ("permute", "transpose", "cont"))((_permute_build, _permuted))


# rows

@st.composite
def get_rows_case(draw):
    a = draw(specs(FLOATS + QUANTS + ("MXFP4", "I32"), layouts=("packed", "rows")))
    _, Rn, B1, B2 = geometry(a)[0]
    n = draw(st.sampled_from((0, 1, 3, 5)))
    idx_t = "I32"
    ne_b = (n, B1, B2, 1)
    valid = packed0(a)
    if rare(draw, 8):
        ne_b, valid = (n, B1 + 1, B2, 1), False
    elif rare(draw, 8):
        idx_t, valid = "I64", False
    seed = draw(st.integers(0, 2**16))
    top = Rn + (1 if rare(draw, 5) else 0)      # sometimes one index out of range
    return Case("get_rows", {"a": a, "b": Spec(idx_t, ne_b, ("packed",), seed)}, {"top": top}, valid)


def _index_spec(spec, top):
    """the indices of spec drawn in [0, top) (-1 too when top is 0)"""
    rng = np.random.default_rng(spec.seed)
    return rng.integers(-1 if top == 0 else 0, max(top, 1), spec.base[::-1])


def _get_rows_ref(V, case):
    Rn = geometry(case.tensors["a"])[0][1]
    idx = V["b"][0]                                      # [B2, B1, n]
    if idx.size and (idx.min() < 0 or idx.max() >= Rn):
        return Expect(raises=IndexError)
    return Expect(R.get_rows(V["a"], idx) if idx.size else None)


op("get_rows")((lambda T, P: _node(gg.get_rows(T["a"], T["b"])), _get_rows_ref))


@st.composite
def set_rows_case(draw):
    a = draw(specs(FLOATS + QUANTS, layouts=("packed", "rows")))
    E, Rn, A2, A3 = geometry(a)[0]
    n = draw(st.sampled_from((0, 1, 2, 5)))
    b = draw(specs(("F32", "F16"), (E, n, A2, A3), layouts=("packed", "rows")))
    C1 = draw(st.sampled_from([d for d in range(1, A2 + 1) if A2 % d == 0] or [1]))
    C2 = draw(st.sampled_from([d for d in range(1, A3 + 1) if A3 % d == 0] or [1]))
    c = Spec(draw(st.sampled_from(INTS)), (n, C1, C2, 1), ("packed",), draw(st.integers(0, 2**16)))
    valid = packed0(b) and A2 % C1 == 0 and A3 % C2 == 0
    if rare(draw, 8):
        b, valid = b._replace(type="BF16"), False
    top = Rn + (1 if rare(draw, 5) else 0)
    return Case("set_rows", {"a": a, "b": b, "c": c}, {"top": top}, valid)


def _set_rows_ref(V, case):
    a = case.tensors["a"]
    Rn = geometry(a)[0][1]
    c = V["c"][0]
    if c.size and (c.min() < 0 or c.max() >= Rn):
        return Expect(raises=IndexError)
    rows = R.encode_rows(V["a"].astype(np.float32), a.type) if V["a"].size else None
    if rows is None or not c.size:
        return Expect(rows.tobytes() if rows is not None else b"")
    new = R.encode_rows(V["b"].astype(np.float32), a.type)
    return Expect(R.set_rows(rows, new, c).tobytes())


op("set_rows")((lambda T, P: _node(gg.set_rows(T["a"], T["b"], T["c"]), lambda: T["a"].tobytes()), _set_rows_ref))


# softmax

@st.composite
def soft_max_case(draw):
    a = draw(specs(("F32",), scale=draw(st.sampled_from((1.0, 10.0)))))
    ne = geometry(a)[0]
    P = {"scale": draw(st.floats(0.01, 2.0)), "max_bias": draw(st.sampled_from((0.0, 0.0, 1.0, 8.0))),
         "sinks": draw(st.booleans()) and ne[2] > 0}
    mask = None
    if draw(st.booleans()) or P["max_bias"] > 0:
        M2 = draw(st.sampled_from([d for d in range(1, ne[2] + 1) if ne[2] % d == 0] or [1]))
        M3 = draw(st.sampled_from([d for d in range(1, ne[3] + 1) if ne[3] % d == 0] or [1]))
        mask = Spec(draw(st.sampled_from(("F16", "F32"))), (ne[0], ne[1] + draw(st.sampled_from((0, 2))), M2, M3),
                    ("mask",), draw(st.integers(0, 2**16)))
    valid = packed0(a)
    if rare(draw, 8):
        P["scale"], valid = bad_float(draw), False
    T = {"a": a, "mask": mask}
    if P["sinks"]:
        T["sinks"] = Spec("F32", (ne[2], 1, 1, 1), ("packed",), draw(st.integers(0, 2**16)))
    return Case("soft_max_ext", T, P, valid)


def _soft_max_build(T, P):
    t = gg.soft_max_ext(T["a"], T["mask"], P["scale"], P["max_bias"])
    if P["sinks"]:
        gg.soft_max_add_sinks(t, T["sinks"])
    return _node(t)


def _soft_max_ref(V, case):
    P = case.params
    if V["a"].size == 0:
        return Expect(V["a"])
    sinks = V["sinks"].reshape(-1) if P["sinks"] else None
    with np.errstate(invalid="ignore"):
        return Expect(R.soft_max_ext(V["a"], V["mask"], np.float32(P["scale"]), P["max_bias"], sinks), 1e-10)


op("soft_max_ext", ("soft_max_ext", "soft_max_add_sinks"))((_soft_max_build, _soft_max_ref))


# GLU and activations

@st.composite
def glu_case(draw):
    kind = draw(st.sampled_from(("glu", "glu_split", "swiglu", "swiglu_split", "silu", "gelu", "gelu_erf",
                                 "gelu_quick", "tanh")))
    typ = draw(st.sampled_from(("F32", "F16")))
    a = draw(specs((typ,), scale=draw(st.sampled_from((1.0, 4.0)))))
    ne = geometry(a)[0]
    P = {"kind": kind, "op": draw(st.sampled_from((0, 1, 2, 4, 5))), "swapped": draw(st.booleans())}
    T = {"a": a}
    valid = packed0(a)
    if kind.endswith("split"):
        T["b"] = draw(specs((typ,), ne, layouts=("packed", "rows")))
        valid = valid and packed0(T["b"])
    if kind in ("glu", "swiglu"):
        valid = valid and ne[0] >= 2
    if rare(draw, 10):
        if kind.startswith("glu"):
            P["op"], valid = draw(st.sampled_from((3, 9, -1))), False
        else:
            T["a"], valid = a._replace(type="BF16"), False
    return Case(kind, T, P, valid)


def _glu_build(T, P):
    k = P["kind"]
    if k == "glu":
        return _node(gg.glu(T["a"], P["op"], P["swapped"]))
    if k == "glu_split":
        return _node(gg.glu_split(T["a"], T["b"], P["op"]))
    if k == "swiglu_split":
        return _node(gg.swiglu_split(T["a"], T["b"]))
    return _node(getattr(gg, k)(T["a"]))


def _glu_ref(V, case):
    k, P = case.op, case.params
    with np.errstate(over="ignore"):
        if k == "glu":
            y = R.glu(V["a"], P["op"], P["swapped"])
        elif k in ("glu_split", "swiglu_split"):
            y = R.glu_split(V["a"], V["b"], P["op"] if k == "glu_split" else 2)
        elif k == "swiglu":
            y = R.glu(V["a"], 2)
        else:
            y = {"silu": R.silu, "gelu": R.gelu, "gelu_erf": R.gelu_erf, "gelu_quick": R.gelu_quick,
                 "tanh": R.tanh}[k](V["a"])
    return Expect(y, 1e-7 if case.tensors["a"].type == "F32" else 1e-5)


for _k in ("glu", "glu_split", "swiglu", "swiglu_split", "silu", "gelu", "gelu_erf", "gelu_quick", "tanh"):
    op(_k, ("glu", "glu_split", _k))((_glu_build, _glu_ref))


# mul_mat

@st.composite
def mul_mat_case(draw):
    wt = draw(st.sampled_from(FLOATS + QUANTS))
    K = draw(st.sampled_from((0, 32, 64) if wt in QUANTS else (0, 1, 5, 32, 33)))
    M, A2, A3 = (draw(st.sampled_from((1, 2, 5))) for _ in range(3))
    N = draw(st.sampled_from((0, 1, 3)))
    B2, B3 = A2 * draw(st.sampled_from((1, 2))), A3
    a = draw(specs((wt,), (K, M, A2, A3), layouts=("packed", "rows")))
    b = draw(specs(("F32",), (K, N, B2, B3), layouts=("packed", "rows")))
    valid = packed0(a) and packed0(b)
    if rare(draw, 8):
        b, valid = draw(specs(("F32",), (K + 1, N, B2, B3))), False
    return Case("mul_mat", {"a": a, "b": b}, {}, valid)


def _mul_mat_ref(V, case):
    if V["b"].shape[-1] == 0:
        return Expect(np.zeros(V["b"].shape[:-1] + (V["a"].shape[-2],)))
    return Expect(R.mul_mat(V["a"], V["b"].astype(np.float32), case.tensors["a"].type), 1e-10)


op("mul_mat")((lambda T, P: _node(gg.mul_mat(T["a"], T["b"])), _mul_mat_ref))


# norms

@st.composite
def norm_case(draw):
    name = draw(st.sampled_from(("rms_norm", "norm", "rms_norm_inplace", "norm_inplace")))
    a = draw(specs(("F32",), scale=draw(st.sampled_from((1.0, 1e-3, 1e3)))))
    eps = draw(st.sampled_from((0.0, 1e-6, 1e-5)))
    valid = packed0(a)
    if rare(draw, 8):
        eps, valid = draw(st.sampled_from(BAD_FLOATS + (-1e-5,))), False
    return Case(name, {"a": a}, {"eps": eps}, valid)


def _norm_ref(V, case):
    f = R.rms_norm_ggml if case.op.startswith("rms") else R.norm_ggml
    with np.errstate(invalid="ignore", divide="ignore"):
        return Expect(f(V["a"].astype(np.float32), case.params["eps"]).astype(np.float64), 1e-12)


for _k in ("rms_norm", "norm", "rms_norm_inplace", "norm_inplace"):
    op(_k)((lambda T, P, k=_k: _node(getattr(gg, k)(T["a"], P["eps"])), _norm_ref))


# rope

ROPE_MODES = {"rope_ext": (0, 2), "rope_multi": (2, 8, 24, 40)}


@st.composite
def rope_case(draw):
    name = draw(st.sampled_from(("rope_ext", "rope_multi")))
    mode = draw(st.sampled_from(ROPE_MODES[name]))
    typ = draw(st.sampled_from(("F32", "F16")))
    n_dims = draw(st.sampled_from((2, 4, 8)))
    ne0 = 2 * n_dims if mode == 24 else n_dims + draw(st.sampled_from((0, 2, 6)))
    a = draw(specs((typ,), (ne0, draw(st.sampled_from((1, 2, 3))), draw(st.sampled_from((0, 1, 4))),
                            draw(st.sampled_from((1, 2)))), layouts=("packed", "rows")))
    n_tok = geometry(a)[0][2]
    multi = bool(mode & 8)
    n_pairs = n_dims if mode == 24 else n_dims // 2
    P = {"mode": mode, "n_dims": n_dims, "n_ctx_orig": draw(st.sampled_from((0, 4096))),
         "freq_base": draw(st.sampled_from((100.0, 10000.0, 1e6))), "freq_scale": draw(st.sampled_from((1.0, 0.25))),
         "ext_factor": draw(st.sampled_from((0.0, 0.0, 1.0))), "attn_factor": draw(st.sampled_from((1.0, 0.5))),
         "beta_fast": 32.0, "beta_slow": 1.0, "n_offs": 0, "ff_bad": False,
         "sections": [draw(st.integers(1, 3))] + [draw(st.integers(0, 3)) for _ in range(3)]}
    if mode != 24 and draw(st.booleans()):
        P["n_offs"] = draw(st.sampled_from(range(0, ne0 - n_dims + 1, 2)))
    T = {"a": a, "b": Spec("I32", (4 * n_tok if multi else n_tok, 1, 1, 1), ("positions",), draw(st.integers(0, 2**16)))}
    if draw(st.booleans()):
        T["c"] = Spec("F32", (n_pairs, 1, 1, 1), ("factors",), draw(st.integers(0, 2**16)))
        P["ff_bad"] = rare(draw, 6)
    valid = packed0(a) and (not multi or sum(P["sections"]) <= ne0)
    k = draw(st.sampled_from((None,) * 7 + (0, 1, 2, 3, 4)))
    if k == 0:
        P["n_dims"], valid = draw(st.sampled_from((0, 3, ne0 + 2))), False
    elif k == 1:
        P[draw(st.sampled_from(("freq_base", "attn_factor", "freq_scale")))], valid = bad_float(draw), False
    elif k == 2:
        P["n_ctx_orig"], valid = draw(st.sampled_from((-1, 1.5))), False
    elif k == 3 and name == "rope_ext":
        P["mode"], valid = draw(st.sampled_from((1, 8, 99))), False
    elif k == 4 and mode != 24:
        P["n_offs"], valid = draw(st.sampled_from((1, -2, ne0))), False
    return Case(name, T, P, valid)


def _rope_build(T, P):
    f = [P[k] for k in ("n_ctx_orig", "freq_base", "freq_scale", "ext_factor", "attn_factor", "beta_fast", "beta_slow")]
    t = (gg.rope_multi(T["a"], T["b"], T.get("c"), P["n_dims"], P["sections"], P["mode"], *f) if P["_name"] == "rope_multi"
         else gg.rope_ext(T["a"], T["b"], T.get("c"), P["n_dims"], P["mode"], *f))
    if P["n_offs"]:
        gg.rope_set_offset(t, P["n_offs"])
    return _node(t)


def _rope_ref(V, case):
    P = case.params
    if P["ff_bad"] and V["a"].size:              # factors are checked when the rope runs
        return Expect(raises=ValueError)
    ff = V["c"].reshape(-1) if "c" in V else None
    y = R.rope(V["a"], V["b"].reshape(-1), P["n_dims"], P["mode"], P["n_ctx_orig"], P["freq_base"], P["freq_scale"],
               P["ext_factor"], P["attn_factor"], P["beta_fast"], P["beta_slow"], ff,
               P["sections"] if P["mode"] & 8 else None, P["n_offs"])
    typ = case.tensors["a"].type
    return Expect(rounded(y, typ), (1e-8 if typ == "F32" else 1e-7))


for _k in ("rope_ext", "rope_multi"):
    op(_k, (_k, "rope_set_offset"))((_rope_build, _rope_ref))


# attention

@st.composite
def flash_attn_case(draw):
    kt, vt = draw(st.sampled_from(FLOATS + QUANTS)), draw(st.sampled_from(FLOATS + QUANTS))
    quant = kt in QUANTS or vt in QUANTS
    DK = draw(st.sampled_from((32, 64) if quant else (1, 5, 32, 40)))
    DV = DK if quant or draw(st.booleans()) else draw(st.sampled_from((3, 16)))
    Hkv = draw(st.sampled_from((1, 2)))
    Hq, N, L, S = Hkv * draw(st.sampled_from((1, 2, 3))), draw(st.sampled_from((1, 2, 66))), \
        draw(st.sampled_from((1, 7, 70))), draw(st.sampled_from((1, 2)))
    T = {"q": draw(specs(("F32",), (DK, N, Hq, S), layouts=("packed", "rows"))),
         "k": draw(specs((kt,), (DK, L, Hkv, S), layouts=("packed", "rows"))),
         "v": draw(specs((vt,), (DV, L, Hkv, S), layouts=("packed", "rows"))), "mask": None}
    paths = ("auto", "one_chunk", "tiled") + (("split",) if N <= FA_SPLIT_MAX_N and S == 1 else ())
    P = {"scale": draw(st.sampled_from((0.125, 1.0))), "max_bias": 0.0,
         "softcap": draw(st.sampled_from((0.0, 0.0, 20.0))), "path": draw(st.sampled_from(paths)),
         "sinks": draw(st.booleans())}
    if draw(st.booleans()):
        T["mask"] = Spec("F16", (L + draw(st.sampled_from((0, 3))), N, draw(st.sampled_from((1, Hq))), 1), ("mask",),
                         draw(st.integers(0, 2**16)))
        P["max_bias"] = draw(st.sampled_from((0.0, 8.0)))
    if P["sinks"]:
        T["sinks"] = Spec("F32", (Hq, 1, 1, 1), ("packed",), draw(st.integers(0, 2**16)))
    valid = True
    k = draw(st.sampled_from((None,) * 7 + (0, 1, 2)))
    if k == 0:
        P["scale"], valid = bad_float(draw), False
    elif k == 1 and not (N <= FA_SPLIT_MAX_N and S == 1):
        P["path"], valid = "split", False
    elif k == 2:
        T["q"], valid = T["q"]._replace(type="F16"), False
    P["prec"] = draw(st.sampled_from((None, None, 0, 10)))
    if rare(draw, 10):
        P["prec"], valid = draw(st.sampled_from((1, -1, "F32"))), False
    return Case("flash_attn_ext", T, P, valid)


def _fa_build(T, P):
    t = gg.flash_attn_ext(T["q"], T["k"], T["v"], T["mask"], P["scale"], P["max_bias"], P["softcap"])
    if P["sinks"]:
        gg.flash_attn_ext_add_sinks(t, T["sinks"])
    gg.flash_attn_ext_set_path(t, P["path"])
    if P["prec"] is not None:
        gg.flash_attn_ext_set_prec(t, P["prec"])
    return _node(t)


def _fa_ref(V, case):
    P = case.params
    bound = max({"F32": 1e-6, "F16": 5e-4, "BF16": 5e-4, "Q8_0": 5e-3, "Q4_0": 5e-3}[case.tensors[x].type]
                for x in ("k", "v"))
    mask = V["mask"]
    y = R.flash_attn_ext(V["q"], V["k"], V["v"], mask, P["scale"], P["max_bias"], P["softcap"],
                         V["sinks"].reshape(-1) if P["sinks"] else None)
    return Expect(y, bound)


op("flash_attn_ext", ("flash_attn_ext", "flash_attn_ext_set_path", "flash_attn_ext_add_sinks",
                      "flash_attn_ext_set_prec"))((_fa_build, _fa_ref))


# mixture of experts: sum_rows, div, argsort, argsort_top_k, top_k, add_id, swiglu_oai, mul_mat_id

@st.composite
def logits_spec(draw, ne):
    """F32 values of shape ne for the routing ops: a plain spec (any layout), or router logits on a
    grid of halves (ties) with a NaN now and then (kind "logits", packed)"""
    if draw(st.booleans()):
        return draw(specs(("F32",), ne))
    return Spec("F32", tuple(ne) + (1,) * (4 - len(ne)), ("logits", draw(st.booleans())), draw(st.integers(0, 2**16)))


def bad_id(draw, top):
    """None, or now and then an id outside [0, top) that one of the drawn ids becomes (kind "ids": the
    others drawn in [0, top), repeats and all): an IndexError from compute"""
    return draw(st.sampled_from((None,) * 5 + (-1, top, 2**31 - 1)))


def _packed_rows(spec):
    return spec.layout[0] in ("logits", "ids") or packed0(spec)


@st.composite
def sort_case(draw):
    name = draw(st.sampled_from(("argsort", "argsort_top_k", "top_k", "sum_rows")))
    ne = draw(shapes(ne0=draw(st.sampled_from((8, 1, 2, 3, 17, 0)))))
    a = draw(logits_spec(ne))
    P = {"order": draw(st.sampled_from((gg.SortOrder.ASC, gg.SortOrder.DESC, 0, 1))),
         "k": draw(st.sampled_from(range(1, ne[0] + 1))) if ne[0] else 1}
    valid = _packed_rows(a) and (name in ("argsort", "sum_rows") or ne[0] > 0)
    nonsense = draw(st.sampled_from((None,) * 8 + ("type", "param")))
    if nonsense == "type":
        a, valid = Spec(draw(st.sampled_from(("F16", "I32"))), a.base, ("packed",), a.seed), False
    elif nonsense == "param" and name == "argsort":
        P["order"], valid = draw(st.sampled_from((2, -1, "DESC", None))), False
    elif nonsense == "param" and name != "sum_rows":
        P["k"], valid = draw(st.sampled_from((0, -1, ne[0] + 1, 1.5))), False
    return Case(name, {"a": a}, P, valid)


def _sort_build(T, P):
    name = P["_name"]
    if name == "argsort":
        return _node(gg.argsort(T["a"], P["order"]))
    if name == "sum_rows":
        return _node(gg.sum_rows(T["a"]))
    return _node(getattr(gg, name)(T["a"], P["k"]))


def _sort_ref(V, case):
    a, P = V["a"], case.params
    if case.op == "sum_rows":
        return Expect(rounded(R.sum_rows(a), "F32"), 1e-14)
    if case.op == "argsort":
        return Expect(R.argsort(a, int(P["order"]) == int(gg.SortOrder.DESC)))
    if case.op == "top_k":
        return Expect(R.top_k(a, P["k"]))
    return Expect(R.argsort(a, desc=True)[..., :P["k"]])


for _k in ("argsort", "argsort_top_k", "top_k", "sum_rows"):
    op(_k)((_sort_build, _sort_ref))
op("div")((lambda T, P: _node(gg.div(T["a"], T["b"])), _binary_ref(np.divide)))


@st.composite
def add_id_case(draw):
    ne = (draw(st.sampled_from((0, 1, 5, 32, 33))), draw(st.sampled_from((1, 2, 3))), draw(st.sampled_from((0, 1, 4))),
          draw(st.sampled_from((1, 2))))
    n_b = draw(st.sampled_from((1, 3, 8)))
    a = draw(specs(("F32",), ne))
    b = draw(specs(("F32",), (ne[0], n_b), layouts=("packed", "rows")))
    ids = Spec("I32", (ne[1], ne[2], 1, 1), ("ids", n_b, bad_id(draw, n_b)), draw(st.integers(0, 2**16)))
    valid = packed0(a) and packed0(b)
    nonsense = draw(st.sampled_from((None,) * 8 + ("ids", "b", "type")))
    if nonsense == "ids":
        ids, valid = ids._replace(base=(ne[1] + 1, ne[2], 1, 1)), False
    elif nonsense == "b":
        b, valid = draw(specs(("F32",), (ne[0] + 1, n_b))), False
    elif nonsense == "type":
        ids, valid = Spec("F32", ids.base, ("packed",), ids.seed), False
    return Case("add_id", {"a": a, "b": b, "ids": ids}, {}, valid)


def _add_id_ref(V, case):
    ids, n_b = V["ids"][0, 0], geometry(case.tensors["b"])[0][1]
    if V["a"].size == 0:                          # rows of no elements: nothing read, no id checked
        return Expect(V["a"])
    if ids.min() < 0 or ids.max() >= n_b:
        return Expect(raises=IndexError)
    return Expect(R.add_id(V["a"], V["b"][0, 0], ids), 1e-14)


op("add_id")((lambda T, P: _node(gg.add_id(T["a"], T["b"], T["ids"])), _add_id_ref))


@st.composite
def swiglu_oai_case(draw):
    a = draw(specs(("F32",), scale=draw(st.sampled_from((1.0, 8.0)))))
    ne = geometry(a)[0]
    P = {"alpha": draw(st.sampled_from((1.702, 0.5, 0.0, -1.0))), "limit": draw(st.sampled_from((7.0, 1.0, 0.0, 1e30)))}
    T = {"a": a, "b": None}
    valid = packed0(a)
    if draw(st.booleans()):
        T["b"] = draw(specs(("F32",), ne, layouts=("packed", "rows"), scale=4.0))
        valid = valid and packed0(T["b"])
    else:
        valid = valid and ne[0] >= 2
    nonsense = draw(st.sampled_from((None,) * 8 + ("alpha", "limit", "type")))
    if nonsense in ("alpha", "limit"):
        P[nonsense], valid = draw(st.sampled_from(BAD_FLOATS + ((-1.0,) if nonsense == "limit" else ()))), False
    elif nonsense == "type":
        T["a"], valid = a._replace(type="F16"), False
    return Case("swiglu_oai", T, P, valid)


def _swiglu_oai_ref(V, case):
    a, P = V["a"], case.params
    alpha, limit = float(np.float32(P["alpha"])), float(np.float32(P["limit"]))   # op_params are f32
    if V["b"] is None:
        nc = a.shape[-1] // 2
        x, g = a[..., :nc], a[..., nc:2 * nc]
    else:
        x, g = a, V["b"]
    return Expect(R.swiglu_oai(x, g, alpha, limit), 1e-12)


op("swiglu_oai")((lambda T, P: _node(gg.swiglu_oai(T["a"], T["b"], P["alpha"], P["limit"])), _swiglu_oai_ref))

MMID_TYPES = ("F32", "F16", "Q8_0", "Q4_0", "MXFP4", "Q4_K")


@st.composite
def mul_mat_id_case(draw):
    """experts [K, M, n_expert] of every weight family, ids [n_used, n_tokens] drawn with repeats (an
    expert twice in one token, one expert for many tokens), b [K, nb1, n_tokens] with nb1 1 or n_used"""
    wt = draw(st.sampled_from(MMID_TYPES))
    blck = TS[wt][0]
    K = draw(st.sampled_from((256,) if blck == 256 else (32, 96) if blck > 1 else (1, 5, 32, 33)))
    M, n_expert, n_used = (draw(st.sampled_from(c)) for c in ((1, 2, 5), (1, 2, 3, 8), (1, 2, 4)))
    nb1, n_tok = draw(st.sampled_from((1, n_used))), draw(st.sampled_from((0, 1, 3, 9)))
    a = draw(specs((wt,), (K, M, n_expert), layouts=("packed",), scale=0.5))
    b = draw(specs(("F32",), (K, nb1, n_tok), layouts=("packed", "rows")))
    ids = Spec("I32", (n_used, n_tok, 1, 1), ("ids", n_expert, bad_id(draw, n_expert)), draw(st.integers(0, 2**16)))
    valid = True
    nonsense = draw(st.sampled_from((None,) * 8 + ("K", "tokens", "nb1", "type")))
    if nonsense == "K":
        b, valid = draw(specs(("F32",), (K + blck, nb1, n_tok))), False
    elif nonsense == "tokens":
        ids, valid = ids._replace(base=(n_used, n_tok + 1, 1, 1)), False
    elif nonsense == "nb1" and n_used > 1:
        b, valid = draw(specs(("F32",), (K, n_used + 1, n_tok))), False
    elif nonsense == "type":
        ids, valid = Spec(draw(st.sampled_from(("F32", "I64"))), ids.base, ("packed",), ids.seed), False
    return Case("mul_mat_id", {"a": a, "b": b, "ids": ids}, {}, valid)


def _mul_mat_id_ref(V, case):
    ids, n_expert = V["ids"][0, 0], geometry(case.tensors["a"])[0][2]
    if ids.size and (ids.min() < 0 or ids.max() >= n_expert):
        return Expect(raises=IndexError)
    return Expect(R.mul_mat_id(V["a"][0], V["b"][0].astype(np.float32), ids, case.tensors["a"].type), 1e-10)


op("mul_mat_id")((lambda T, P: _node(gg.mul_mat_id(T["a"], T["b"], T["ids"])), _mul_mat_id_ref))


# concat, im2col, conv_2d

@st.composite
def concat_case(draw):
    typ = draw(st.sampled_from(FLOATS + INTS))
    dim = draw(st.integers(0, 3))
    a = draw(specs((typ,)))
    ne_a = geometry(a)[0]
    ne_b = tuple(draw(st.sampled_from((0, 1, 2, 5))) if i == dim else n for i, n in enumerate(ne_a))
    b = draw(specs((typ,), ne_b))
    valid = True
    k = draw(st.sampled_from((None,) * 7 + (0, 1, 2)))
    if k == 0:
        dim, valid = draw(st.sampled_from((-1, 4))), False
    elif k == 1 and typ in FLOATS:
        b, valid = b._replace(type=draw(st.sampled_from([t for t in FLOATS if t != typ]))), False
    elif k == 2 and any(ne_a[i] != 1 for i in range(4) if i != dim):
        other = next(i for i in range(4) if i != dim and ne_a[i] != 1)
        b, valid = draw(specs((typ,), tuple(n + 1 if i == other else n for i, n in enumerate(ne_b)))), False
    return Case("concat", {"a": a, "b": b}, {"dim": dim}, valid)


op("concat")((lambda T, P: _node(gg.concat(T["a"], T["b"], P["dim"])),
              lambda V, c: Expect(R.concat(V["a"], V["b"], c.params["dim"]))))


@st.composite
def conv_case(draw):
    """im2col (1-D and 2-D, F32 or F16 result) and conv_2d on small images; the kernel's values are
    read by conv_2d only."""
    name = draw(st.sampled_from(("im2col", "conv_2d")))
    two = name == "conv_2d" or draw(st.booleans())
    ic, kw, kh = draw(st.sampled_from((1, 3))), draw(st.sampled_from((1, 2, 3))), draw(st.sampled_from((1, 2, 3)))
    n, iw, ih = draw(st.sampled_from((1, 2))), draw(st.sampled_from((1, 4, 7))), draw(st.sampled_from((1, 5)))
    P = {"s": (draw(st.sampled_from((1, 2))), draw(st.sampled_from((1, 2))) if two else 0),
         "p": (draw(st.sampled_from((0, 1))), draw(st.sampled_from((0, 1))) if two else 0),
         "d": (draw(st.sampled_from((1, 2))), draw(st.sampled_from((1, 2))) if two else 0),
         "two": two, "dst": draw(st.sampled_from(("F32", "F16")))}
    if two:
        T = {"a": draw(specs(("F32", "F16"), (kw, kh, ic, draw(st.sampled_from((1, 2)))), layouts=("packed",),
                             scale=0.5)),
             "b": draw(specs(("F32",), (iw, ih, ic, n)))}
    else:
        T = {"a": draw(specs(("F32", "F16"), (kw, ic, 2, 1), layouts=("packed",))),
             "b": draw(specs(("F32",), (iw, ic, n, 1)))}
    sizes = [(iw, kw, 0)] + ([(ih, kh, 1)] if two else [])
    valid = all((size + 2 * P["p"][i] - P["d"][i] * (k - 1) - 1) // P["s"][i] + 1 > 0 for size, k, i in sizes)
    if rare(draw, 8):
        P["s"], valid = (0, P["s"][1]), False
    return Case(name, T, P, valid)


def _conv_build(T, P):
    (s0, s1), (p0, p1), (d0, d1) = P["s"], P["p"], P["d"]
    if P["_name"] == "conv_2d":
        return _node(gg.conv_2d(T["a"], T["b"], s0, s1, p0, p1, d0, d1))
    return _node(gg.im2col(T["a"], T["b"], s0, s1, p0, p1, d0, d1, P["two"], gg.Type[P["dst"]]))


def _conv_ref(V, case):
    P, a = case.params, case.tensors["a"]
    (s0, s1), (p0, p1), (d0, d1) = P["s"], P["p"], P["d"]
    if case.op == "conv_2d":
        # ggml rounds the kernel and the patches to fp16 and dots them in f32
        return Expect(R.conv_2d(R.round_f16(V["a"]), R.round_f16(V["b"]), s0, s1, p0, p1, d0, d1), 1e-5)
    kshape = a.base[::-1] if P["two"] else a.base[:3][::-1]
    b = V["b"] if P["two"] else V["b"][0]
    y = R.im2col(kshape, b, s0, s1, p0, p1, d0, d1, P["two"])
    return Expect(rounded(y, P["dst"]))


op("im2col")((_conv_build, _conv_ref))
op("conv_2d", ("conv_2d", "im2col"))((_conv_build, _conv_ref))


# views with arbitrary strides and offsets (crash-prone: run in the child)

VIEW_CONSUMERS = ("cont", "to_numpy", "tobytes", "get_rows", "add", "mul_mat", "rms_norm", "cpy")


@st.composite
def view_case(draw):
    base = draw(specs(FLOATS + QUANTS + INTS, layouts=("packed",)))
    nd = draw(st.integers(1, 4))
    blck, ts = TS[base.type]
    unit = st.one_of(st.sampled_from((0, 1, 2, 3, 4, 5, 7, 32, 33)), st.integers(0, 2**66))
    ne = [draw(st.sampled_from((0, 32, 64)) if blck > 1 else st.sampled_from((0, 1, 2, 3, 5, 8)))]
    ne += [draw(st.sampled_from((0, 1, 2, 3, 2**31 + 1))) for _ in range(nd - 1)]
    strides = [draw(st.one_of(st.sampled_from((ts, 2 * ts, 3 * ts + 1, packed_nb(base.type, base.base)[1])), unit))
               for _ in range(nd - 1)]
    offset = draw(st.one_of(st.sampled_from((0, ts, 2 * ts, 1, -ts)), unit))
    consumer = draw(st.sampled_from(VIEW_CONSUMERS))
    nth = draw(st.sampled_from((1, 2, 3, 8)))
    return Case("view", {"base": base}, {"ne": tuple(ne), "nb": tuple(strides), "offset": offset, "consumer": consumer},
                view_valid(base, ne, strides, offset), nth)


def view_geometry(base, ne, strides):
    blck, ts = TS[base.type]
    full = tuple(ne) + (1,) * (4 - len(ne))
    nb = [ts, ts * (full[0] // blck), 0, 0]
    nb[1:1 + len(strides)] = strides
    for i in range(len(strides) + 1, 4):
        nb[i] = nb[i - 1] * full[i - 1]
    return full, tuple(nb)


def view_valid(base, ne, strides, offset):
    """The bounds and alignment rule, computed here: the view lies inside the base, every element is
    aligned to the element size, and every size is below 2^62."""
    blck, ts = TS[base.type]
    full, nb = view_geometry(base, ne, strides)
    if offset < 0 or offset % ts or any(x % ts for x in nb):
        return False
    extent = 0 if 0 in full else (full[0] * nb[0] // blck if blck > 1 else ts + (full[0] - 1) * nb[0]) + \
        sum((full[i] - 1) * nb[i] for i in range(1, 4))
    if max(full + nb + (extent,)) >= 2**62:
        return False
    return offset + extent <= math.prod(base.base) // blck * ts


def view_values(case):
    """The values of a valid view, decoded from the base's bytes at the view's addresses (each row's
    elements are contiguous: nb[0] is the element size)."""
    base, P = case.tensors["base"], case.params
    full, nb = view_geometry(base, P["ne"], P["nb"])
    blck, ts = TS[base.type]
    dtype = np.float64 if base.type not in INTS else np.int64
    if 0 in full:                  # an empty view (whatever its other dims: one may be 2^31 long)
        return np.zeros(full[::-1], dtype)
    raw = np.frombuffer(base_bytes(base), np.uint8)
    row_bytes = full[0] // blck * ts
    rows = np.lib.stride_tricks.as_strided(raw[P["offset"]:], shape=(full[3], full[2], full[1], row_bytes),
                                           strides=(nb[3], nb[2], nb[1], 1), writeable=False)
    return decode(np.ascontiguousarray(rows).tobytes(), base.type, math.prod(full)).reshape(full[::-1]).astype(dtype)


def decode(data, typ, n):
    if typ in QUANTS:
        f = R.dequantize_q8_0 if typ == "Q8_0" else R.dequantize_q4_0
        return f(np.frombuffer(data, np.uint8).reshape(-1, TS[typ][1]), n).reshape(-1) if n else np.zeros(0)
    if typ == "BF16":
        return R.bf16_bits_to_f32(np.frombuffer(data, np.uint16))
    return np.frombuffer(data, {"F32": np.float32, "F16": np.float16, "I32": np.int32, "I64": np.int64}[typ])


def _view_build(T, P):
    fn = getattr(gg, f"view_{len(P['ne'])}d")
    v = fn(T["base"], *P["ne"], *P["nb"], P["offset"])
    c = P["consumer"]
    if c in ("to_numpy", "tobytes"):
        return None, lambda: getattr(v, c)()
    if c == "cont":
        return _node(gg.cont(v))
    ctx = v.ctx
    try:        # the view is built: the consumer may refuse it (its type, its strides), naming itself
        other = {"get_rows": lambda: gg.get_rows(v, ctx.new_tensor(gg.Type.I32, (2, v.ne[2], v.ne[3]))),
                 "add": lambda: gg.add(v, v), "mul_mat": lambda: gg.mul_mat(v, ctx.new_tensor(gg.Type.F32, (v.ne[0], 2))),
                 "rms_norm": lambda: gg.rms_norm(v, 1e-6),
                 "cpy": lambda: gg.cpy(v, ctx.new_tensor(gg.Type.F32, v.ne))}[c]()
    except (ValueError, TypeError) as e:
        msg = str(e)
        return None, lambda: ("refused", msg)
    return other, lambda: None


def _view_ref(V, case):
    c = case.params["consumer"]
    return Expect(view_values(case) if c in ("cont", "to_numpy") else ("refused", c) if c != "tobytes" else None)


op("view", ("view_1d", "view_2d", "view_3d", "view_4d", "get_rows", "add", "mul_mat", "rms_norm", "cpy", "to_numpy",
            "tobytes"))((_view_build, _view_ref))


# ---- running a case ----

def input_values(spec):
    """values() for the specs that are not plain tensors (masks, positions, factors, indices)"""
    if spec is None:
        return None
    rng = np.random.default_rng(spec.seed)
    shape = spec.base[::-1]
    kind = spec.layout[0]
    if kind == "mask":
        m = rng.standard_normal(shape)
        m[rng.random(shape) < 0.3] = -np.inf
        return (m.astype(np.float16) if spec.type == "F16" else m.astype(np.float32)).astype(np.float64)
    if kind == "positions":
        return rng.integers(0, 1000, shape)
    if kind == "factors":
        return rng.uniform(0.5, 4.0, shape).astype(np.float32).astype(np.float64)
    if kind == "logits":
        x = np.round(rng.standard_normal(shape) * 2) / 2
        if spec.layout[1]:
            x[rng.random(shape) < 0.1] = np.nan
        return x
    if kind == "ids":
        _, top, bad = spec.layout
        x = rng.integers(0, top, shape)
        if bad is not None and x.size:
            x.flat[rng.integers(x.size)] = bad
        return x
    return values(spec)


def make_input(ctx, name, spec, case):
    if spec is None:
        return None
    kind = spec.layout[0]
    if kind in ("mask", "positions", "factors", "logits", "ids"):
        x = input_values(spec)
        if kind == "factors" and case.params.get("ff_bad"):
            x = x.copy()
            x.flat[-1] = 0.0
        dtype = {"F16": np.float16, "F32": np.float32, "I32": np.int32}[spec.type]
        return ctx.from_numpy(x.astype(dtype))
    if name in ("b", "c") and spec.type in INTS and case.op in ("get_rows", "set_rows"):
        idx = _index_spec(spec, case.params["top"])
        return ctx.from_numpy(idx.astype(np.int32 if spec.type == "I32" else np.int64))
    return materialize(ctx, spec)


def case_inputs(case):
    """The float64 values of every input, as the reference sees them."""
    V = {}
    for name, spec in case.tensors.items():
        if spec is not None and name in ("b", "c") and spec.type in INTS and case.op in ("get_rows", "set_rows"):
            V[name] = _index_spec(spec, case.params["top"])
        else:
            V[name] = input_values(spec)
    if case.params.get("ff_bad"):
        V["c"] = V["c"].copy()
        V["c"].flat[-1] = 0.0
    return V


def execute(case):
    """Build and compute a case: ("build", exception type name, message), ("run", name, message) or
    ("ok", result)."""
    ctx = gg.Context()
    T = {name: make_input(ctx, name, spec, case) for name, spec in case.tensors.items()}
    P = dict(case.params, _name=case.op)
    try:
        node, read = OPS[case.op][0](T, P)
    except (ValueError, TypeError) as e:
        return ("build", type(e).__name__, str(e))
    if node is not None:
        g = gg.CGraph()
        g.build_forward_expand(node)
        try:
            with np.errstate(all="ignore"):
                g.compute(case.nth)
        except (IndexError, ValueError) as e:
            return ("run", type(e).__name__, str(e), read() if case.op == "set_rows" else None)
    try:
        return ("ok", read())
    except (ValueError, TypeError) as e:
        return ("build", type(e).__name__, str(e))


def check(case, outcome):
    """The property: refused with a clear message exactly when the case is nonsense, else the
    reference's result or its data error."""
    names = OPS[case.op][2]
    if outcome[0] == "build":
        assert not case.valid, f"a valid case was refused: {outcome}"
        assert outcome[2].split(":")[0] in names, f"the message does not name the op: {outcome}"
        return
    assert case.valid, f"nonsense was accepted: {case}"
    with np.errstate(all="ignore"):
        want = OPS[case.op][1](case_inputs(case), case)
    if outcome[0] == "run":
        assert want.raises is not None and outcome[1] == want.raises.__name__, outcome
        if case.op == "set_rows":             # nothing written
            a = case.tensors["a"]
            untouched = R.encode_rows(values(a).astype(np.float32), a.type).tobytes() if math.prod(geometry(a)[0]) else b""
            assert outcome[3] == untouched
        return
    assert want.raises is None, f"compute should have raised {want.raises.__name__}"
    got = outcome[1]
    if isinstance(want.value, tuple):             # a consumer of a view: computed, or refused by name
        assert got is None or got[1].startswith(want.value[1] + ":"), got
        return
    if want.value is None:
        return
    if isinstance(want.value, bytes):
        assert got == want.value
        return
    ref = np.asarray(want.value)
    got = np.asarray(got, dtype=ref.dtype if ref.dtype.kind in "iu" else np.float64).reshape(ref.shape)
    nan = np.isnan(ref)
    np.testing.assert_array_equal(np.isnan(got), nan)
    if want.bound == 0:
        np.testing.assert_array_equal(got, ref)
    elif (~nan).any():
        assert R.nmse(got[~nan], ref[~nan]) <= want.bound, (R.nmse(got[~nan], ref[~nan]), want.bound)


CASES = {"binary": st.one_of(binary_case("add"), binary_case("mul")), "scale": scale_case(),
         "copy": st.one_of(cpy_case(), dup_case(), cont_nd_case(), reshape_case(), permute_case()), "rows": st.one_of(get_rows_case(), set_rows_case()),
         "soft_max": soft_max_case(), "glu": glu_case(), "mul_mat": mul_mat_case(), "norm": norm_case(),
         "rope": rope_case(), "flash_attn": flash_attn_case(), "concat": concat_case(), "conv": conv_case(),
         "routing": st.one_of(sort_case(), binary_case("div"), add_id_case()), "swiglu_oai": swiglu_oai_case(),
         "mul_mat_id": mul_mat_id_case()}
# the families the child draws
CHILD_FAMILIES = list(CASES.values())


@pytest.mark.parametrize("family", sorted(CASES))
def test_builder_property(family):
    @settings(max_examples=EXAMPLES)
    @given(CASES[family], st.sampled_from((1, 2, 3)))
    def prop(case, nth):
        case = case._replace(nth=nth)
        check(case, execute(case))
    prop()


# what pyggml._ops exports that no family draws, and why
NOT_DRAWN = {"flash_attn_ext_get_path": "reads a computed node, builds none (tests/ops/test_flash_attn.py)",
             "FA_PATHS": "a constant"}


def test_every_builder_is_drawn():
    """Every builder pyggml._ops exports is drawn by some family (OPS: a family's op and the names
    its cases call), or listed in NOT_DRAWN with a reason."""
    drawn = set(OPS) | {n for _, _, names in OPS.values() for n in names}
    exported = set(gg._ops.__all__)
    assert not exported - drawn - set(NOT_DRAWN), f"builders no property test draws: {sorted(exported - drawn - set(NOT_DRAWN))}"
    assert set(NOT_DRAWN) <= exported - drawn, f"stale NOT_DRAWN entries: {sorted(set(NOT_DRAWN) - (exported - drawn))}"


# ---- the child process ----

class Worker:
    """A child Python running execute() on pickled cases (python tests/ops/test_props.py --worker); it is
    started again after it dies."""

    def __init__(self):
        self.proc = None

    def run(self, case):
        if self.proc is None or self.proc.poll() is not None:
            # tests/ on the path for reference.py and conftest.py (the script's own folder is tests/ops)
            path = [os.path.dirname(os.path.dirname(os.path.abspath(__file__))), os.environ.get("PYTHONPATH")]
            env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in path if p)}
            self.proc = subprocess.Popen([sys.executable, __file__, "--worker"], stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        data = pickle.dumps(case)
        try:
            self.proc.stdin.write(len(data).to_bytes(8, "little") + data)
            self.proc.stdin.flush()
            n = int.from_bytes(self.proc.stdout.read(8), "little")
            out = self.proc.stdout.read(n) if n else b""
        except BrokenPipeError:
            out = b""
        if not out:
            rc = self.proc.wait(30)
            err = self.proc.stderr.read().decode(errors="replace")[-3000:]
            self.proc = None
            pytest.fail(f"the child died (rc {rc}) on {case}:\n{err}")
        return pickle.loads(out)

    def close(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.stdin.close()
            self.proc.wait(30)


def serve():
    inp, out = sys.stdin.buffer, sys.stdout.buffer
    while True:
        head = inp.read(8)
        if len(head) < 8:
            return
        case = pickle.loads(inp.read(int.from_bytes(head, "little")))
        res = pickle.dumps(execute(case))
        out.write(len(res).to_bytes(8, "little") + res)
        out.flush()


@pytest.fixture(scope="module")
def worker():
    w = Worker()
    yield w
    w.close()


@pytest.mark.subprocess
@pytest.mark.skipif(EMULATED, reason="starts a new Python process")
def test_crash_prone_draws_in_a_child(worker):
    """Arbitrary view strides, offsets and sizes (up to 2^66) under every consumer, and every family's
    cases on up to 8 threads, in the child: a crash fails the example it happened on."""
    @settings(max_examples=4 * EXAMPLES)
    @given(st.one_of(view_case(), view_case(), *CHILD_FAMILIES), st.sampled_from((1, 2, 4, 8)))
    def prop(case, nth):
        case = case._replace(nth=max(case.nth, nth))
        check(case, worker.run(case))
    prop()


if __name__ == "__main__" and sys.argv[1:] == ["--worker"]:
    serve()
