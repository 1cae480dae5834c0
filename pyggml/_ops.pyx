"""Graph-node builders: validate the inputs, pack op_params, return the result tensor.
Nothing is computed here; every check that can be made from shapes and types is made here, so the
kernels can assume valid input."""
from libc.stdint cimport int32_t
from libc.string cimport memcpy

from pyggml._tensor cimport Tensor, new_node, new_view, tensor_is_contiguous

from pyggml._enums import FLOAT_TYPES, QUANT_TYPES, TYPE_TRAITS, GluOp, Op, Type, UnaryOp

__all__ = [
    "add", "mul", "scale", "cpy", "cont", "dup", "view_1d", "view_2d", "view_3d", "view_4d",
    "reshape", "reshape_1d", "reshape_2d", "reshape_3d", "reshape_4d", "permute", "transpose",
    "get_rows", "soft_max_ext", "soft_max_add_sinks", "glu", "glu_split", "swiglu", "swiglu_split",
    "silu", "gelu", "gelu_erf", "mul_mat",
]


# ---- shared checks ----

cdef Tensor _tensor(str op, str arg, x):
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}: {arg} must be a pyggml.Tensor, got {type(x).__name__}")
    return <Tensor> x


cdef _types(str op, str arg, Tensor t, types):
    if Type(t.c.type) not in types:
        names = ", ".join(sorted(Type(x).name for x in types))
        raise TypeError(f"{op}: {arg} must be of type {names}, got {Type(t.c.type).name}")


cdef _packed0(str op, str arg, Tensor t):
    cdef size_t ts = TYPE_TRAITS[Type(t.c.type)][1]
    if t.c.nb[0] != ts:
        raise ValueError(f"{op}: {arg} must be packed in dim 0 (nb[0] == {ts}), got nb={t.nb}")


cdef _contiguous(str op, str arg, Tensor t):
    if not tensor_is_contiguous(&t.c):
        raise ValueError(f"{op}: {arg} must be contiguous, got ne={t.ne} nb={t.nb}")


cdef _same_shape(str op, str arg, Tensor a, Tensor b):
    if a.ne != b.ne:
        raise ValueError(f"{op}: {arg} must have ne={a.ne}, got {b.ne}")


cdef bint _can_repeat(Tensor t, Tensor to):
    """ggml_can_repeat(t, to): t can be broadcast to `to` by repetition."""
    for i in range(4):
        if t.c.ne[i] == 0:
            return to.c.ne[i] == 0
        if to.c.ne[i] % t.c.ne[i]:
            return False
    return True


cdef void set_param_i32(Tensor t, int i, int32_t v):
    t.c.op_params[i] = v


cdef void set_param_f32(Tensor t, int i, float v):
    memcpy(&t.c.op_params[i], &v, 4)


cdef float _finite(str op, str arg, v) except? -1:
    import math
    f = float(v)
    if math.isnan(f):
        raise ValueError(f"{op}: {arg} must be a number, got {v!r}")
    return f


# ---- elementwise ----

cdef Tensor _binary(str op, int code, a, b):
    cdef Tensor ta = _tensor(op, "a", a), tb = _tensor(op, "b", b)
    _types(op, "a", ta, FLOAT_TYPES)
    _types(op, "b", tb, FLOAT_TYPES)
    _packed0(op, "a", ta)
    _packed0(op, "b", tb)
    if not _can_repeat(tb, ta):
        raise ValueError(f"{op}: b (ne={tb.ne}) cannot be broadcast to a (ne={ta.ne}): "
                         f"every a.ne[i] must be a multiple of b.ne[i]")
    return new_node(ta.ctx, ta.c.type, ta.ne, code, (ta, tb))


def add(a, b):
    """a + b, with b repeated over a as ggml's can_repeat allows. F32/F16/BF16; result has a's type."""
    return _binary("add", Op.ADD, a, b)


def mul(a, b):
    """a * b elementwise, with b repeated over a (ggml_mul)."""
    return _binary("mul", Op.MUL, a, b)


def scale(a, s, b=0.0):
    """a*s + b (ggml_scale / ggml_scale_ext), F32."""
    cdef Tensor ta = _tensor("scale", "a", a)
    _types("scale", "a", ta, {Type.F32})
    _packed0("scale", "a", ta)
    cdef Tensor t = new_node(ta.ctx, ta.c.type, ta.ne, Op.SCALE, (ta,))
    set_param_f32(t, 0, _finite("scale", "s", s))
    set_param_f32(t, 1, _finite("scale", "b", b))
    return t


cdef Tensor _unary(str op, int code, a):
    cdef Tensor ta = _tensor(op, "a", a)
    _types(op, "a", ta, {Type.F32, Type.F16})
    _packed0(op, "a", ta)
    cdef Tensor t = new_node(ta.ctx, ta.c.type, ta.ne, Op.UNARY, (ta,))
    set_param_i32(t, 0, code)
    return t


def silu(a):
    """x * sigmoid(x) elementwise (F32/F16)."""
    return _unary("silu", UnaryOp.SILU, a)


def gelu(a):
    """GELU, tanh approximation (F32/F16)."""
    return _unary("gelu", UnaryOp.GELU, a)


def gelu_erf(a):
    """GELU with the exact erf (F32/F16)."""
    return _unary("gelu_erf", UnaryOp.GELU_ERF, a)


# ---- copies and views ----

_COPY_TYPES = FLOAT_TYPES | QUANT_TYPES


def cpy(a, b):
    """Copy a into b converting to b's type; returns a view of b (the node that writes it).
    a and b need the same number of elements; elements are taken in logical (row-major ne) order.
    Quantized tensors on either side need the same shape and packed rows."""
    cdef Tensor ta = _tensor("cpy", "a", a), tb = _tensor("cpy", "b", b)
    if ta.nelements != tb.nelements:
        raise ValueError(f"cpy: a and b must have the same number of elements, got {ta.nelements} and {tb.nelements}")
    ints = ta.type not in _COPY_TYPES or tb.type not in _COPY_TYPES
    if ints and ta.type != tb.type:
        raise TypeError(f"cpy: {ta.type.name} -> {tb.type.name} is not supported (integer tensors copy to their own type)")
    if (ta.type in QUANT_TYPES or tb.type in QUANT_TYPES):
        if ta.ne != tb.ne:
            raise ValueError(f"cpy: quantized copies need equal shapes, got a.ne={ta.ne} b.ne={tb.ne}")
        _packed0("cpy", "a", ta)
        _packed0("cpy", "b", tb)
    cdef Tensor t = new_view(tb, tb.ne, tb.nb, 0, Op.CPY, tb._ndim)
    t._src = (ta, tb) + (None,) * 8
    t.c.src[0] = &ta.c
    t.c.src[1] = &tb.c
    return t


cdef Tensor _copy_node(str op, int code, a):
    cdef Tensor ta = _tensor(op, "a", a)
    if ta.type in QUANT_TYPES:
        _packed0(op, "a", ta)
    return new_node(ta.ctx, ta.c.type, ta.ne, code, (ta,), ta._ndim)


def cont(a):
    """A packed copy of a (e.g. after permute/transpose)."""
    return _copy_node("cont", Op.CONT, a)


def dup(a):
    """A packed copy of a, same type."""
    return _copy_node("dup", Op.DUP, a)


cdef tuple _ne4(str op, ne):
    ne = tuple(int(x) for x in ne)
    if any(x < 0 for x in ne):
        raise ValueError(f"{op}: ne must be >= 0, got {ne}")
    return ne + (1,) * (4 - len(ne))


def _view(str op, a, ne, nbs, offset):
    cdef Tensor ta = _tensor(op, "a", a)
    full = _ne4(op, ne)
    blck, ts = TYPE_TRAITS[ta.type]
    if full[0] % blck:
        raise ValueError(f"{op}: ne0 of a {ta.type.name} view must be a multiple of {blck}, got {full[0]}")
    if int(offset) < 0:
        raise ValueError(f"{op}: offset must be >= 0, got {offset}")
    nb = [ts, full[0] // blck * ts, 0, 0]
    nb[1:1 + len(nbs)] = [int(x) for x in nbs]
    for i in range(len(nbs) + 1, 4):
        nb[i] = nb[i - 1] * full[i - 1]
    if any(x < 0 for x in nb):
        raise ValueError(f"{op}: strides must be >= 0, got {tuple(nb)}")
    return new_view(ta, full, tuple(nb), int(offset), Op.VIEW, len(ne))


def view_1d(a, ne0, offset=0):
    """ne0 elements of a from byte `offset` on, no copy."""
    return _view("view_1d", a, (ne0,), (), offset)


def view_2d(a, ne0, ne1, nb1, offset=0):
    return _view("view_2d", a, (ne0, ne1), (nb1,), offset)


def view_3d(a, ne0, ne1, ne2, nb1, nb2, offset=0):
    return _view("view_3d", a, (ne0, ne1, ne2), (nb1, nb2), offset)


def view_4d(a, ne0, ne1, ne2, ne3, nb1, nb2, nb3, offset=0):
    return _view("view_4d", a, (ne0, ne1, ne2, ne3), (nb1, nb2, nb3), offset)


def reshape(a, ne):
    """a with a new shape `ne` (1 to 4 entries), no copy; a must be contiguous."""
    cdef Tensor ta = _tensor("reshape", "a", a)
    full = _ne4("reshape", ne)
    if not 1 <= len(tuple(ne)) <= 4:
        raise ValueError(f"reshape: ne must have 1 to 4 entries, got {len(tuple(ne))}")
    _contiguous("reshape", "a", ta)
    n = full[0] * full[1] * full[2] * full[3]
    if n != ta.nelements:
        raise ValueError(f"reshape: ne={full} has {n} elements, a has {ta.nelements}")
    blck, ts = TYPE_TRAITS[ta.type]
    if full[0] % blck:
        raise ValueError(f"reshape: ne0 of a {ta.type.name} tensor must be a multiple of {blck}, got {full[0]}")
    nb0 = ts
    nb1 = nb0 * (full[0] // blck)
    nb = (nb0, nb1, nb1 * full[1], nb1 * full[1] * full[2])
    return new_view(ta, full, nb, 0, Op.RESHAPE, len(tuple(ne)))


def reshape_1d(a, ne0):
    return reshape(a, (ne0,))


def reshape_2d(a, ne0, ne1):
    return reshape(a, (ne0, ne1))


def reshape_3d(a, ne0, ne1, ne2):
    return reshape(a, (ne0, ne1, ne2))


def reshape_4d(a, ne0, ne1, ne2, ne3):
    return reshape(a, (ne0, ne1, ne2, ne3))


def permute(a, ax0, ax1, ax2=2, ax3=3):
    """Dim i of a becomes dim ax_i of the result (ggml_permute), no copy."""
    cdef Tensor ta = _tensor("permute", "a", a)
    axes = (int(ax0), int(ax1), int(ax2), int(ax3))
    if sorted(axes) != [0, 1, 2, 3]:
        raise ValueError(f"permute: axes must be a permutation of 0..3, got {axes}")
    ne = [0] * 4
    nb = [0] * 4
    for i, ax in enumerate(axes):
        ne[ax] = ta.ne[i]
        nb[ax] = ta.nb[i]
    nd = max(ta._ndim, max(ax for i, ax in enumerate(axes) if i < ta._ndim) + 1)
    return new_view(ta, tuple(ne), tuple(nb), 0, Op.PERMUTE, nd)


def transpose(a):
    """Swap dims 0 and 1, no copy."""
    cdef Tensor ta = _tensor("transpose", "a", a)
    cdef Tensor t = new_view(ta, (ta.c.ne[1], ta.c.ne[0], ta.c.ne[2], ta.c.ne[3]),
                             (ta.c.nb[1], ta.c.nb[0], ta.c.nb[2], ta.c.nb[3]), 0, Op.TRANSPOSE, max(ta._ndim, 2))
    return t


# ---- rows ----

def get_rows(a, b):
    """Rows of a picked by the I32 indices b [n, B1, B2, 1]: result [a.ne0, n, B1, B2] (F32, or I32 when
    a is I32), row (i, j, k) = a[:, b[i, j, k], j, k] converted to f32. Indices are checked when the
    graph runs: one out of range raises IndexError after the compute (and its row is not read)."""
    cdef Tensor ta = _tensor("get_rows", "a", a), tb = _tensor("get_rows", "b", b)
    _types("get_rows", "a", ta, FLOAT_TYPES | QUANT_TYPES | {Type.I32})
    _types("get_rows", "b", tb, {Type.I32})
    _packed0("get_rows", "a", ta)
    if tb.c.ne[3] != 1:
        raise ValueError(f"get_rows: b.ne[3] must be 1, got {tb.c.ne[3]}")
    if ta.c.ne[2] != tb.c.ne[1] or ta.c.ne[3] != tb.c.ne[2]:
        raise ValueError(f"get_rows: a.ne[2:4] must equal b.ne[1:3], got {ta.ne[2:]} and {tb.ne[1:3]}")
    out_type = Type.I32 if ta.type == Type.I32 else Type.F32
    return new_node(ta.ctx, out_type, (ta.c.ne[0], tb.c.ne[0], tb.c.ne[1], tb.c.ne[2]), Op.GET_ROWS, (ta, tb))


# ---- softmax ----

def soft_max_ext(a, mask=None, scale=1.0, max_bias=0.0):
    """softmax(a*scale + slope*mask) over dim 0 (ggml_soft_max_ext). mask: F16/F32 [a.ne0, >=a.ne1, ...]
    broadcast over dims 2/3 by modulo; ALiBi slopes from max_bias (needs a mask). A row that is all
    -inf gives NaN, as in ggml."""
    cdef Tensor ta = _tensor("soft_max_ext", "a", a), tm
    _types("soft_max_ext", "a", ta, {Type.F32})
    _contiguous("soft_max_ext", "a", ta)
    srcs = [ta]
    if mask is not None:
        tm = _tensor("soft_max_ext", "mask", mask)
        _types("soft_max_ext", "mask", tm, {Type.F16, Type.F32})
        _contiguous("soft_max_ext", "mask", tm)
        if tm.c.ne[0] != ta.c.ne[0]:
            raise ValueError(f"soft_max_ext: mask.ne[0] must equal a.ne[0] = {ta.c.ne[0]}, got {tm.c.ne[0]}")
        if tm.c.ne[1] < ta.c.ne[1]:
            raise ValueError(f"soft_max_ext: mask.ne[1] must be >= a.ne[1] = {ta.c.ne[1]}, got {tm.c.ne[1]}")
        if ta.c.ne[2] % tm.c.ne[2] or ta.c.ne[3] % tm.c.ne[3]:
            raise ValueError(f"soft_max_ext: a.ne[2:4] = {ta.ne[2:]} must be multiples of mask.ne[2:4] = {tm.ne[2:]}")
        srcs.append(tm)
    elif float(max_bias) > 0:
        raise ValueError(f"soft_max_ext: max_bias > 0 (got {max_bias}) needs a mask")
    if float(max_bias) < 0:
        raise ValueError(f"soft_max_ext: max_bias must be >= 0, got {max_bias}")
    cdef Tensor t = new_node(ta.ctx, Type.F32, ta.ne, Op.SOFT_MAX, tuple(srcs))
    set_param_f32(t, 0, _finite("soft_max_ext", "scale", scale))
    set_param_f32(t, 1, _finite("soft_max_ext", "max_bias", max_bias))
    return t


def soft_max_add_sinks(t, sinks):
    """Attach F32 sinks [a.ne2] (one logit per head) to a soft_max_ext node: each joins the row's
    max and denominator, not the output."""
    cdef Tensor tt = _tensor("soft_max_add_sinks", "t", t), ts = _tensor("soft_max_add_sinks", "sinks", sinks)
    if tt.c.op != Op.SOFT_MAX:
        raise ValueError(f"soft_max_add_sinks: t must be a soft_max_ext result, got op {tt.op.name}")
    _types("soft_max_add_sinks", "sinks", ts, {Type.F32})
    _contiguous("soft_max_add_sinks", "sinks", ts)
    if ts.nelements != tt.c.ne[2]:
        raise ValueError(f"soft_max_add_sinks: sinks must have a.ne[2] = {tt.c.ne[2]} elements, got {ts.nelements}")
    tt._src = tt._src[:2] + (ts,) + tt._src[3:]
    tt.c.src[2] = &ts.c
    return tt


# ---- GLU ----

_GLU_TYPES = {Type.F32, Type.F16}


def glu(a, op, swapped=False):
    """Gated unit on the two halves of each row of a: out = act(x) * g with x the first half and g
    the second (reversed when swapped). Result ne0 = a.ne0 // 2."""
    cdef Tensor ta = _tensor("glu", "a", a)
    gop = _glu_op(op)
    _types("glu", "a", ta, _GLU_TYPES)
    _packed0("glu", "a", ta)
    cdef Tensor t = new_node(ta.ctx, ta.c.type, (ta.c.ne[0] // 2,) + ta.ne[1:], Op.GLU, (ta,))
    set_param_i32(t, 0, gop)
    set_param_i32(t, 1, 1 if swapped else 0)
    return t


def glu_split(a, b, op):
    """Gated unit with separate tensors: out = act(a) * b (same shape and type)."""
    cdef Tensor ta = _tensor("glu_split", "a", a), tb = _tensor("glu_split", "b", b)
    gop = _glu_op(op)
    _types("glu_split", "a", ta, _GLU_TYPES)
    if tb.c.type != ta.c.type:
        raise TypeError(f"glu_split: b must have a's type {ta.type.name}, got {tb.type.name}")
    _same_shape("glu_split", "b", ta, tb)
    _packed0("glu_split", "a", ta)
    _packed0("glu_split", "b", tb)
    cdef Tensor t = new_node(ta.ctx, ta.c.type, ta.ne, Op.GLU, (ta, tb))
    set_param_i32(t, 0, gop)
    return t


def _glu_op(op):
    try:
        return GluOp(op)
    except ValueError:
        raise ValueError(f"glu: op must be a pyggml.GluOp, got {op!r}") from None


def swiglu(a):
    """silu(first half) * second half of each row."""
    return glu(a, GluOp.SWIGLU)


def swiglu_split(a, b):
    """silu(a) * b."""
    return glu_split(a, b, GluOp.SWIGLU)


# ---- matrix multiplication ----

_MM_WEIGHT_TYPES = {Type.F32, Type.F16, Type.BF16, Type.Q8_0, Type.Q4_0}


def mul_mat(a, b):
    """out[i, j] = dot(row i of a, row j of b): F32 [a.ne1, b.ne1, b.ne2, b.ne3], a broadcast over
    dims 2/3. a (weights): F32/F16/BF16/Q8_0/Q4_0; b (activations): F32, converted first to a's dot
    type as ggml does (F16 weights: b rounded to fp16; quantized weights: b quantised to Q8_0)."""
    cdef Tensor ta = _tensor("mul_mat", "a", a), tb = _tensor("mul_mat", "b", b)
    _types("mul_mat", "a", ta, _MM_WEIGHT_TYPES)
    _types("mul_mat", "b", tb, {Type.F32})
    if ta.c.ne[0] != tb.c.ne[0]:
        raise ValueError(f"mul_mat: a.ne[0] and b.ne[0] must match, got {ta.c.ne[0]} and {tb.c.ne[0]}")
    for d in (2, 3):
        if (tb.c.ne[d] % ta.c.ne[d]) if ta.c.ne[d] else tb.c.ne[d]:
            raise ValueError(f"mul_mat: b.ne[2:4] = {tb.ne[2:]} must be multiples of a.ne[2:4] = {ta.ne[2:]}")
    _packed0("mul_mat", "a", ta)
    _packed0("mul_mat", "b", tb)
    return new_node(ta.ctx, Type.F32, (ta.c.ne[1], tb.c.ne[1], tb.c.ne[2], tb.c.ne[3]), Op.MUL_MAT, (ta, tb))


# ================================================================================================
# ---- norm: rms_norm, norm ----
# ================================================================================================
# (each section appends its public names: __all__ += [...])


# ================================================================================================
# ---- rope: rope_ext, rope_multi, rope_set_offset ----
# ================================================================================================
# (each section appends its public names: __all__ += [...])


# ================================================================================================
# ---- set_rows: set_rows ----
# ================================================================================================
# (each section appends its public names: __all__ += [...])


# ================================================================================================
# ---- attention: flash_attn_ext and friends ----
# ================================================================================================
# (each section appends its public names: __all__ += [...])


