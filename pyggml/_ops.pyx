"""Graph-node builders: validate the inputs, pack op_params, return the result tensor.
Nothing is computed here; every check that can be made from shapes and types is made here, so the
kernels can assume valid input."""
from libc.stdint cimport int32_t, int64_t
from libc.string cimport memcpy

from pyggml._tensor cimport Tensor, check_int, new_node, new_view, tensor_is_contiguous

from pyggml._enums import FLOAT_TYPES, QUANT_TYPES, GluOp, Op, Type, UnaryOp, kernel_types
from pyggml._tables import blck_size, type_size

__all__ = [
    "add", "mul", "scale", "cpy", "cont", "cont_2d", "cont_3d", "cont_4d", "dup",
    "view_1d", "view_2d", "view_3d", "view_4d",
    "reshape", "reshape_1d", "reshape_2d", "reshape_3d", "reshape_4d", "permute", "transpose",
    "get_rows", "soft_max_ext", "soft_max_add_sinks", "glu", "glu_split", "swiglu", "swiglu_split",
    "silu", "gelu", "gelu_erf", "gelu_quick", "tanh", "mul_mat",
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
    cdef size_t ts = type_size(t.c.type)
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
    """v as a finite float32 parameter: TypeError for what is no number, ValueError for NaN, inf and
    values that overflow float32."""
    import math
    try:
        f = float(v)
    except (TypeError, ValueError):
        raise TypeError(f"{op}: {arg} must be a number, got {v!r}") from None
    if math.isnan(f):
        raise ValueError(f"{op}: {arg} must be a number, got {v!r}")
    if abs(f) > 3.4028234663852886e38:
        raise ValueError(f"{op}: {arg} must be finite (within the float32 range), got {v!r}")
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
    """x / (1 + exp(-x)) elementwise (F32/F16; F16 computed in f32 and rounded once)."""
    return _unary("silu", UnaryOp.SILU, a)


def gelu(a):
    """GELU, tanh approximation 0.5x(1 + tanh(sqrt(2/pi)(x + 0.044715x^3))) (F32/F16). pyggml
    computes it in f32; ggml's CPU reads an fp16 lookup table (GGML_GELU_FP16)."""
    return _unary("gelu", UnaryOp.GELU, a)


def gelu_erf(a):
    """GELU with erf: 0.5x(1 + erf(x/sqrt(2))) (F32/F16)."""
    return _unary("gelu_erf", UnaryOp.GELU_ERF, a)


def gelu_quick(a):
    """Quick GELU x / (1 + exp(-1.702x)) (F32/F16). pyggml computes it in f32; ggml's CPU reads an
    fp16 lookup table (GGML_GELU_QUICK_FP16)."""
    return _unary("gelu_quick", UnaryOp.GELU_QUICK, a)


def tanh(a):
    """tanh elementwise (ggml_tanh; F32/F16, F16 computed in f32 and rounded once). Gemma-2 caps its
    final logits with it: scale(tanh(scale(x, 1/c)), c)."""
    return _unary("tanh", UnaryOp.TANH, a)


# ---- copies and views ----

_COPY_TYPES = FLOAT_TYPES | QUANT_TYPES


def cpy(a, b):
    """Copy a into b converting to b's type; returns a view of b (the node that writes it).
    a and b need the same number of elements; elements are taken in logical (row-major ne) order.
    Quantized tensors on either side need the same shape and packed rows; non-finite values are
    quantised as from_numpy does (as ggml: see docs/reliability.md)."""
    cdef Tensor ta = _tensor("cpy", "a", a), tb = _tensor("cpy", "b", b)
    if ta.nelements != tb.nelements:
        raise ValueError(f"cpy: a and b must have the same number of elements, got {ta.nelements} and {tb.nelements}")
    ints = ta.type not in _COPY_TYPES or tb.type not in _COPY_TYPES
    if ints and ta.type != tb.type:
        raise TypeError(f"cpy: {ta.type.name} -> {tb.type.name} is not supported: the float types (F32, F16, "
                        "BF16) and the quantized ones convert into each other, every other type copies to its "
                        "own type only")
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


def _cont_nd(str op, a, ne):
    cdef Tensor ta = _tensor(op, "a", a)
    full = _ne4(op, ne)
    if full[0] * full[1] * full[2] * full[3] != ta.nelements:
        raise ValueError(f"{op}: ne={full[:len(ne)]} has {full[0] * full[1] * full[2] * full[3]} elements, "
                         f"a has {ta.nelements}")
    if ta.type in QUANT_TYPES and full != ta.ne:
        raise ValueError(f"{op}: a quantized tensor keeps its shape, got ne={full} for a.ne={ta.ne}")
    blck = blck_size(ta.type)
    if full[0] % blck:
        raise ValueError(f"{op}: ne0 of a {ta.type.name} tensor must be a multiple of {blck}, got {full[0]}")
    if ta.type in QUANT_TYPES:
        _packed0(op, "a", ta)
    return new_node(ta.ctx, ta.c.type, full, Op.CONT, (ta,), len(ne))


def cont_2d(a, ne0, ne1):
    """A packed copy of a with shape [ne0, ne1] (ggml_cont_2d): elements in a's logical order."""
    return _cont_nd("cont_2d", a, (ne0, ne1))


def cont_3d(a, ne0, ne1, ne2):
    """A packed copy of a with shape [ne0, ne1, ne2] (ggml_cont_3d)."""
    return _cont_nd("cont_3d", a, (ne0, ne1, ne2))


def cont_4d(a, ne0, ne1, ne2, ne3):
    """A packed copy of a with shape [ne0, ne1, ne2, ne3] (ggml_cont_4d)."""
    return _cont_nd("cont_4d", a, (ne0, ne1, ne2, ne3))


cdef tuple _ne4(str op, ne):
    ne = tuple(check_int(op, "each entry of ne", x) for x in ne)
    if any(x < 0 for x in ne):
        raise ValueError(f"{op}: ne must be >= 0, got {ne}")
    return ne + (1,) * (4 - len(ne))


def _view(str op, a, ne, nbs, offset):
    cdef Tensor ta = _tensor(op, "a", a)
    full = _ne4(op, ne)
    blck, ts = blck_size(ta.type), type_size(ta.type)
    if full[0] % blck:
        raise ValueError(f"{op}: ne0 of a {ta.type.name} view must be a multiple of {blck}, got {full[0]}")
    offset = check_int(op, "offset", offset)
    if offset < 0:
        raise ValueError(f"{op}: offset must be >= 0, got {offset}")
    nb = [ts, full[0] // blck * ts, 0, 0]
    nb[1:1 + len(nbs)] = [check_int(op, "strides", x) for x in nbs]
    for i in range(len(nbs) + 1, 4):
        nb[i] = nb[i - 1] * full[i - 1]
    if any(x < 0 for x in nb):
        raise ValueError(f"{op}: strides must be >= 0, got {tuple(nb)}")
    return new_view(ta, full, tuple(nb), offset, Op.VIEW, len(ne), op)


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
    blck, ts = blck_size(ta.type), type_size(ta.type)
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


cdef _keep_blocks(str op, Tensor ta, bint moves_dim0, what):
    """A Q8_0/Q4_0 tensor's blocks run along dim 0: a view that moves dim 0 addresses no element."""
    if moves_dim0 and blck_size(ta.type) > 1:
        raise ValueError(f"{op}: a {ta.type.name} tensor must keep dim 0 in place (its blocks run along it), "
                         f"got {what}")


def permute(a, ax0, ax1, ax2=2, ax3=3):
    """Dim i of a becomes dim ax_i of the result (ggml_permute), no copy. Q8_0/Q4_0 tensors keep
    dim 0 (ax0 == 0)."""
    cdef Tensor ta = _tensor("permute", "a", a)
    axes = tuple(check_int("permute", "axes", x) for x in (ax0, ax1, ax2, ax3))
    if sorted(axes) != [0, 1, 2, 3]:
        raise ValueError(f"permute: axes must be a permutation of 0..3, got {axes}")
    _keep_blocks("permute", ta, axes[0] != 0, f"axes {axes}")
    ne = [0] * 4
    nb = [0] * 4
    for i, ax in enumerate(axes):
        ne[ax] = ta.ne[i]
        nb[ax] = ta.nb[i]
    nd = max(ta._ndim, max(ax for i, ax in enumerate(axes) if i < ta._ndim) + 1)
    return new_view(ta, tuple(ne), tuple(nb), 0, Op.PERMUTE, nd)


def transpose(a):
    """Swap dims 0 and 1, no copy (not for Q8_0/Q4_0, whose blocks run along dim 0)."""
    cdef Tensor ta = _tensor("transpose", "a", a)
    _keep_blocks("transpose", ta, True, "a transpose")
    cdef Tensor t = new_view(ta, (ta.c.ne[1], ta.c.ne[0], ta.c.ne[2], ta.c.ne[3]),
                             (ta.c.nb[1], ta.c.nb[0], ta.c.nb[2], ta.c.nb[3]), 0, Op.TRANSPOSE, max(ta._ndim, 2))
    return t


# ---- rows ----

_GET_ROWS_TYPES = kernel_types("to_float")


def get_rows(a, b):
    """Rows of a picked by the I32 indices b [n, B1, B2, 1]: result [a.ne0, n, B1, B2] (F32, or I32 when
    a is I32), row (i, j, k) = a[:, b[i, j, k], j, k] converted to f32. Indices are checked when the
    graph runs: one out of range raises IndexError after the compute (and its row is not read)."""
    cdef Tensor ta = _tensor("get_rows", "a", a), tb = _tensor("get_rows", "b", b)
    _types("get_rows", "a", ta, _GET_ROWS_TYPES)
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
    """softmax(a*scale + slope*mask) over dim 0 (ggml_soft_max_ext), F32 result of a's shape.

    mask: F16/F32 [a.ne0, >= a.ne1, M2, M3]; row i1 of a uses mask row i1, dims 2/3 broadcast by
    modulo (a.ne2 % M2 == 0, a.ne3 % M3 == 0). max_bias > 0 turns on ALiBi slopes per head (dim 2),
    which multiply the mask, so it needs one. A row that is all -inf gives NaN, as in ggml.
    pyggml differs from ggml: a and mask need packed rows only (ggml requires contiguous tensors),
    and rows are split contiguously over threads (ggml interleaves them).
    """
    cdef Tensor ta = _tensor("soft_max_ext", "a", a), tm
    _types("soft_max_ext", "a", ta, {Type.F32})
    _packed0("soft_max_ext", "a", ta)
    fscale = _finite("soft_max_ext", "scale", scale)
    fbias = _finite("soft_max_ext", "max_bias", max_bias)
    if fbias < 0:
        raise ValueError(f"soft_max_ext: max_bias must be >= 0, got {max_bias}")
    srcs = [ta]
    if mask is not None:
        tm = _tensor("soft_max_ext", "mask", mask)
        _types("soft_max_ext", "mask", tm, {Type.F16, Type.F32})
        _packed0("soft_max_ext", "mask", tm)
        if tm.c.ne[0] != ta.c.ne[0]:
            raise ValueError(f"soft_max_ext: mask.ne[0] must equal a.ne[0] = {ta.c.ne[0]}, got {tm.c.ne[0]}")
        if tm.c.ne[1] < ta.c.ne[1]:
            raise ValueError(f"soft_max_ext: mask.ne[1] must be >= a.ne[1] = {ta.c.ne[1]}, got {tm.c.ne[1]}")
        if 0 in tm.ne[2:] or ta.c.ne[2] % tm.c.ne[2] or ta.c.ne[3] % tm.c.ne[3]:
            raise ValueError(f"soft_max_ext: a.ne[2:4] = {ta.ne[2:]} must be multiples of mask.ne[2:4] = {tm.ne[2:]}")
        srcs.append(tm)
    elif fbias > 0:
        raise ValueError(f"soft_max_ext: max_bias > 0 (got {max_bias}) needs a mask, got None")
    cdef Tensor t = new_node(ta.ctx, Type.F32, ta.ne, Op.SOFT_MAX, tuple(srcs))
    set_param_f32(t, 0, fscale)
    set_param_f32(t, 1, fbias)
    return t


def soft_max_add_sinks(t, sinks):
    """Attach F32 sinks [a.ne2] (one logit per head) to a soft_max_ext node (ggml_soft_max_add_sinks):
    each joins its rows' max and denominator, not the output. Returns t."""
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


def _glu_op(str name, op):
    try:
        gop = GluOp(op)
    except ValueError:
        names = ", ".join(o.name for o in GluOp)
        raise ValueError(f"{name}: op must be a pyggml.GluOp ({names}), got {op!r}") from None
    if gop == GluOp.SWIGLU_OAI:
        raise ValueError(f"{name}: SWIGLU_OAI takes alpha and limit: use swiglu_oai")
    return gop


def glu(a, op, swapped=False):
    """Gated unit on the two halves of each row of a (ggml_glu): out = act(x) * g with x the first
    half and g the second (exchanged when swapped); result [a.ne0 // 2, ...] of a's type (F32/F16;
    an odd last element is ignored). GEGLU uses the tanh form computed in f32, where ggml's CPU reads
    an fp16 table. a needs packed rows (ggml: contiguous_1)."""
    cdef Tensor ta = _tensor("glu", "a", a)
    gop = _glu_op("glu", op)
    _types("glu", "a", ta, _GLU_TYPES)
    _packed0("glu", "a", ta)
    if ta.c.ne[0] < 2:
        raise ValueError(f"glu: a.ne[0] must be >= 2 to split into x and g, got {ta.c.ne[0]}")
    cdef Tensor t = new_node(ta.ctx, ta.c.type, (ta.c.ne[0] // 2,) + ta.ne[1:], Op.GLU, (ta,))
    set_param_i32(t, 0, gop)
    set_param_i32(t, 1, 1 if swapped else 0)
    return t


def glu_split(a, b, op):
    """Gated unit with separate tensors (ggml_glu_split): out = act(a) * b, same shape and type
    (F32/F16)."""
    cdef Tensor ta = _tensor("glu_split", "a", a), tb = _tensor("glu_split", "b", b)
    gop = _glu_op("glu_split", op)
    _types("glu_split", "a", ta, _GLU_TYPES)
    if tb.c.type != ta.c.type:
        raise TypeError(f"glu_split: b must have a's type {ta.type.name}, got {tb.type.name}")
    _same_shape("glu_split", "b", ta, tb)
    _packed0("glu_split", "a", ta)
    _packed0("glu_split", "b", tb)
    cdef Tensor t = new_node(ta.ctx, ta.c.type, ta.ne, Op.GLU, (ta, tb))
    set_param_i32(t, 0, gop)
    return t


def swiglu(a):
    """silu(first half) * second half of each row (ggml_swiglu)."""
    return glu(a, GluOp.SWIGLU)


def swiglu_split(a, b):
    """silu(a) * b (ggml_swiglu_split)."""
    return glu_split(a, b, GluOp.SWIGLU)


# ---- matrix multiplication ----

_MM_WEIGHT_TYPES = kernel_types("vec_dot")


def mul_mat(a, b):
    """out[i, j] = dot(row i of a, row j of b): F32 [a.ne1, b.ne1, b.ne2, b.ne3], a broadcast over
    dims 2/3. a (weights): the types with a vec_dot kernel (F32/F16/BF16, Q8_0/Q4_0/Q4_1/Q5_0/Q5_1/
    IQ4_NL, Q2_K..Q6_K); b (activations): F32, converted first to a's dot type as ggml does (F16
    weights: b rounded to fp16; quantized weights: b quantised to Q8_0, Q8_1 for Q4_1/Q5_1, Q8_K for
    the K-quants, and integer dot products per block). Non-finite values follow ggml's numerics
    (docs/reliability.md): with Q8_0/Q4_0 weights a NaN in b is quantised to some finite value, so
    the result stays finite."""
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
__all__ += ["rms_norm", "rms_norm_inplace", "norm", "norm_inplace"]


cdef Tensor _norm(str op, int code, a, eps, bint inplace):
    cdef Tensor ta = _tensor(op, "a", a)
    _types(op, "a", ta, {Type.F32})
    _packed0(op, "a", ta)
    cdef float e = _finite(op, "eps", eps)
    if e < 0:
        raise ValueError(f"{op}: eps must be finite and >= 0, got {eps!r}")
    cdef Tensor t
    if inplace:
        t = new_view(ta, ta.ne, ta.nb, 0, code, ta._ndim)
    else:
        t = new_node(ta.ctx, Type.F32, ta.ne, code, (ta,), ta._ndim)
    set_param_f32(t, 0, e)
    return t


def rms_norm(a, eps):
    """Each row (dim 0) of a divided by its root mean square: y = x / sqrt(mean(x*x) + eps), F32
    with packed rows (any stride in dims 1-3). As ggml, the squares are summed in double and the rest
    is ggml's f32 formula, bit for bit. A graph may fuse it with a residual ADD before it and a
    weight MUL after it (CGraph.plan): pyggml's ADD fusion goes beyond ggml, results are identical."""
    return _norm("rms_norm", Op.RMS_NORM, a, eps, False)


def rms_norm_inplace(a, eps):
    """rms_norm writing into a (the result is a view of a)."""
    return _norm("rms_norm_inplace", Op.RMS_NORM, a, eps, True)


def norm(a, eps):
    """Each row (dim 0) of a made zero-mean and unit-variance: y = (x - mean) / sqrt(var + eps), no
    affine part (ggml_norm). F32 with packed rows. Sums in double as ggml, the rest ggml's f32 steps."""
    return _norm("norm", Op.NORM, a, eps, False)


def norm_inplace(a, eps):
    """norm writing into a (the result is a view of a)."""
    return _norm("norm_inplace", Op.NORM, a, eps, True)


# ================================================================================================
# ---- rope: rope_ext, rope_multi, rope_set_offset ----
# ================================================================================================
# (each section appends its public names: __all__ += [...])

from pyggml._enums import RopeType

__all__ += ["rope_ext", "rope_multi", "rope_set_offset"]

_ROPE_MODES = {int(m) for m in RopeType}
_ROPE_MULTI = int(RopeType.MROPE)      # the mode bit of the multi modes (MROPE, VISION, IMROPE)


cdef Tensor _rope(str op, a, b, c, n_dims, sections, mode, n_ctx_orig, freq_base, freq_scale,
                  ext_factor, attn_factor, beta_fast, beta_slow):
    cdef Tensor ta = _tensor(op, "a", a), tb = _tensor(op, "b", b), tc
    _types(op, "a", ta, {Type.F32, Type.F16})
    _packed0(op, "a", ta)
    mode = check_int(op, "mode", mode)
    if mode not in _ROPE_MODES:
        raise ValueError(f"{op}: mode must be one of {sorted(_ROPE_MODES)} (pyggml.RopeType), got {mode}")
    multi = bool(mode & _ROPE_MULTI)
    if multi and sections is None:
        raise ValueError(f"{op}: mode {RopeType(mode).name} needs sections: use rope_multi")
    ne0 = ta.c.ne[0]
    n_dims = (ne0 // 2 if mode == RopeType.VISION else ne0) if n_dims is None else check_int(op, "n_dims", n_dims)
    if n_dims <= 0 or n_dims % 2:
        raise ValueError(f"{op}: n_dims must be even and > 0, got {n_dims}")
    if n_dims > ne0:
        raise ValueError(f"{op}: n_dims must be <= a.ne[0] = {ne0}, got {n_dims}")
    if mode == RopeType.VISION and 2 * n_dims != ne0:
        raise ValueError(f"{op}: VISION rotates (k, k + n_dims) over the whole row, so n_dims must be "
                         f"a.ne[0] / 2 = {ne0 / 2}, got {n_dims}")
    secs = (0, 0, 0, 0)
    if multi:
        secs = tuple(check_int(op, "sections", x) for x in sections)
        if len(secs) != 4 or any(x < 0 for x in secs):
            raise ValueError(f"{op}: sections must be 4 integers >= 0, got {tuple(sections)}")
        if not (secs[0] > 0 or secs[1] > 0 or secs[2] > 0):
            raise ValueError(f"{op}: one of sections[0:3] must be > 0, got {secs}")
        if sum(secs) > ne0:
            raise ValueError(f"{op}: sections {secs} sum to {sum(secs)}, more than the row a.ne[0] = {ne0}")
    _types(op, "b", tb, {Type.I32})
    _contiguous(op, "b", tb)
    n_pos = ta.c.ne[2] * (4 if multi else 1)
    if tb.c.ne[1] != 1 or tb.c.ne[2] != 1 or tb.c.ne[3] != 1 or tb.c.ne[0] != n_pos:
        what = "4 * a.ne[2] (blocks t, h, w, e)" if multi else "a.ne[2]"
        raise ValueError(f"{op}: b must be a vector of {what} = {n_pos} positions, got ne={tb.ne}")
    srcs = [ta, tb]
    if c is not None:
        tc = _tensor(op, "c", c)
        _types(op, "c", tc, {Type.F32})
        _contiguous(op, "c", tc)
        n_pairs = n_dims if mode == RopeType.VISION else n_dims // 2
        if tc.nelements < n_pairs:
            raise ValueError(f"{op}: c must hold one frequency factor per rotated pair ({n_pairs}), "
                             f"got {tc.nelements}")
        srcs.append(tc)
    floats = {"freq_base": freq_base, "freq_scale": freq_scale, "ext_factor": ext_factor,
              "attn_factor": attn_factor, "beta_fast": beta_fast, "beta_slow": beta_slow}
    vals = [_finite(op, k, v) for k, v in floats.items()]
    if vals[0] <= 0:
        raise ValueError(f"{op}: freq_base must be > 0, got {freq_base}")
    if vals[2] < 0:
        raise ValueError(f"{op}: ext_factor must be >= 0, got {ext_factor}")
    if vals[2] != 0 and vals[1] <= 0:
        raise ValueError(f"{op}: freq_scale must be > 0 when ext_factor != 0, got {freq_scale}")
    if vals[2] != 0 and min(vals[4], vals[5]) <= 0:
        raise ValueError(f"{op}: beta_fast and beta_slow must be > 0 when ext_factor != 0, got "
                         f"{beta_fast} and {beta_slow}")
    n_ctx_orig = check_int(op, "n_ctx_orig", n_ctx_orig)
    if not 0 <= n_ctx_orig < 2**31:
        raise ValueError(f"{op}: n_ctx_orig must be in [0, 2^31), got {n_ctx_orig}")
    cdef Tensor t = new_node(ta.ctx, ta.c.type, ta.ne, Op.ROPE, tuple(srcs), ta._ndim)
    set_param_i32(t, 0, 0)
    set_param_i32(t, 1, n_dims)
    set_param_i32(t, 2, mode)
    set_param_i32(t, 3, 0)
    set_param_i32(t, 4, n_ctx_orig)
    for i, v in enumerate(vals):
        set_param_f32(t, 5 + i, v)
    for i in range(4):
        set_param_i32(t, 11 + i, secs[i])
    return t


def rope_ext(a, b, c=None, n_dims=None, mode=RopeType.NORMAL, n_ctx_orig=0, freq_base=10000.0,
             freq_scale=1.0, ext_factor=0.0, attn_factor=1.0, beta_fast=32.0, beta_slow=1.0):
    """Rotary position embedding (ggml_rope_ext) of a [ne0, n_head, n_tokens, ne3] (F32/F16, dims 1-3
    any stride) at the I32 positions b [n_tokens]; c: None or F32 frequency factors (the angle of
    pair k is divided by c[k]). mode: RopeType.NORMAL (pairs (2k, 2k+1)) or NEOX (pairs (k, k+n_dims/2));
    the multi modes need rope_multi. n_dims < ne0 rotates the first n_dims elements (from n_offs, see
    rope_set_offset) and copies the rest. YaRN: ext_factor > 0 mixes interpolated (freq_scale) and
    extrapolated angles between the correction dims from beta_fast/beta_slow and n_ctx_orig.
    Keyword defaults are ggml_rope's: c=None, n_dims=None (the whole row, a.ne[0]), mode NORMAL,
    n_ctx_orig=0, freq_base=10000, freq_scale=1, ext_factor=0, attn_factor=1, beta_fast=32,
    beta_slow=1; the positional order is ggml_rope_ext's.
    Differs from ggml: only the factors of rotated pairs are read (ggml's cache loop reads ne0/2 of
    them even when n_dims < ne0). The factors are data, checked when the graph runs: one that is not
    finite and > 0 makes compute() raise ValueError (position, value); ggml rotates by NaN. Parameters
    that turn finite input into NaN raise when the node is built (n_ctx_orig < 0, ext_factor < 0,
    beta_fast or beta_slow <= 0 with ext_factor != 0)."""
    return _rope("rope_ext", a, b, c, n_dims, None, mode, n_ctx_orig, freq_base, freq_scale,
                 ext_factor, attn_factor, beta_fast, beta_slow)


def rope_multi(a, b, c=None, n_dims=None, sections=None, mode=RopeType.MROPE, n_ctx_orig=0,
               freq_base=10000.0, freq_scale=1.0, ext_factor=0.0, attn_factor=1.0, beta_fast=32.0,
               beta_slow=1.0):
    """Multimodal RoPE (ggml_rope_multi): b holds 4 * n_tokens positions, four blocks t | h | w | e.
    sections (4 ints) give how many pairs each block drives: MROPE contiguous sections in the NEOX
    layout, IMROPE interleaved t h w t h w ..., VISION restarts the frequency index per section and
    rotates (k, k + n_dims) over the whole row (n_dims = ne0 / 2). With NORMAL/NEOX the sections are
    ignored (stored as zeros) and b holds n_tokens positions, as in ggml. Defaults as rope_ext's,
    with mode MROPE (n_dims=None: a.ne[0], or a.ne[0] / 2 for VISION).
    Differs from ggml: VISION needs ne0 == 2 * n_dims exactly, and c one factor per pair (n_dims of
    them; ggml checks for n_dims / 2 and reads past them)."""
    return _rope("rope_multi", a, b, c, n_dims, sections, mode, n_ctx_orig, freq_base, freq_scale,
                 ext_factor, attn_factor, beta_fast, beta_slow)


def rope_set_offset(t, n_offs):
    """Rotate from element n_offs on (ggml_rope_set_offset): the pairs of a rope_ext/rope_multi result t
    start at n_offs, elements before and after the rotated span are copied. Returns t."""
    cdef Tensor tt = _tensor("rope_set_offset", "t", t)
    if tt.c.op != Op.ROPE:
        raise ValueError(f"rope_set_offset: t must be a rope_ext/rope_multi result, got op {tt.op.name}")
    n_offs = check_int("rope_set_offset", "n_offs", n_offs)
    n_dims, mode, ne0 = tt.c.op_params[1], tt.c.op_params[2], tt.c.ne[0]
    if mode == RopeType.VISION and n_offs != 0:
        raise ValueError(f"rope_set_offset: n_offs must be 0 with mode VISION, got {n_offs}")
    if n_offs < 0 or n_offs % 2:
        raise ValueError(f"rope_set_offset: n_offs must be even and >= 0, got {n_offs}")
    if n_offs + n_dims > ne0:
        raise ValueError(f"rope_set_offset: n_offs + n_dims must be <= a.ne[0] = {ne0}, got "
                         f"{n_offs} + {n_dims}")
    set_param_i32(tt, 15, n_offs)
    return tt


# ================================================================================================
# ---- set_rows: set_rows ----
# ================================================================================================
# (each section appends its public names: __all__ += [...])

__all__ += ["set_rows"]

_SET_ROWS_DST_TYPES = FLOAT_TYPES | QUANT_TYPES


def set_rows(a, b, c):
    """Write the rows of b into a at the rows named by c and return a view of a (the node that
    writes it; build on the view so later nodes run after the write).

    a: destination [E, R, A2, A3], F32/F16/BF16 or quantized (E a multiple of the block size), rows
    packed in dim 0, otherwise any strides (a KV-cache slice). b: source rows F32/F16 [E, n, A2, A3],
    rows packed in dim 0. c: I32/I64 indices [n, C1, C2, 1], broadcast over dims 2/3 by modulo:
    a[:, c[i, i2 % C1, i3 % C2], i2, i3] = convert(b[:, i, i2, i3]) with ggml's CPU conversions.
    src slots as ggml: 0 = b, 1 = c, 2 = a.

    Differs from ggml: every index is checked before any row is written, and one that is negative or
    >= R makes compute() raise IndexError (op, position, value) with a left unchanged (ggml asserts).
    Duplicate indices are well defined: the last source row (in b's row order) wins, with any number
    of threads (ggml leaves it undefined). Rows are split across all threads, and a single row by
    blocks (ggml runs set_rows on one thread). When b is an F32 rope_ext/rope_multi result (or a reshape
    of one) read by nothing else, the graph fuses the pair: rows are rotated and written converted
    straight into a, bit-identical to the two nodes (ggml has no such fusion)."""
    cdef Tensor ta = _tensor("set_rows", "a", a), tb = _tensor("set_rows", "b", b)
    cdef Tensor tc = _tensor("set_rows", "c", c)
    _types("set_rows", "a", ta, _SET_ROWS_DST_TYPES)
    _types("set_rows", "b", tb, {Type.F32, Type.F16})
    _types("set_rows", "c", tc, {Type.I32, Type.I64})
    _packed0("set_rows", "a", ta)
    _packed0("set_rows", "b", tb)
    blck = blck_size(ta.type)
    if ta.c.ne[0] % blck:
        raise ValueError(f"set_rows: a.ne[0] must be a multiple of the {ta.type.name} block size {blck}, "
                         f"got {ta.c.ne[0]}")
    if ta.c.ne[0] != tb.c.ne[0]:
        raise ValueError(f"set_rows: b.ne[0] must equal a.ne[0] = {ta.c.ne[0]}, got {tb.c.ne[0]}")
    if ta.c.ne[2] != tb.c.ne[2] or ta.c.ne[3] != tb.c.ne[3]:
        raise ValueError(f"set_rows: b.ne[2:4] must equal a.ne[2:4] = {ta.ne[2:]}, got {tb.ne[2:]}")
    if tc.c.ne[0] != tb.c.ne[1]:
        raise ValueError(f"set_rows: c.ne[0] must equal b.ne[1] = {tb.c.ne[1]}, got {tc.c.ne[0]}")
    if tc.c.ne[3] != 1:
        raise ValueError(f"set_rows: c.ne[3] must be 1, got {tc.c.ne[3]}")
    if tc.c.ne[1] == 0 or tc.c.ne[2] == 0 or tb.c.ne[2] % tc.c.ne[1] or tb.c.ne[3] % tc.c.ne[2]:
        raise ValueError(f"set_rows: b.ne[2:4] = {tb.ne[2:]} must be multiples of c.ne[1:3] = {tc.ne[1:3]}")
    cdef Tensor t = new_view(ta, ta.ne, ta.nb, 0, Op.SET_ROWS, ta._ndim)
    t._src = (tb, tc, ta) + (None,) * 7
    t.c.src[0] = &tb.c
    t.c.src[1] = &tc.c
    t.c.src[2] = &ta.c
    return t


# ================================================================================================
# ---- attention: flash_attn_ext and friends ----
# ================================================================================================
# (each section appends its public names: __all__ += [...])


__all__ += ["flash_attn_ext", "flash_attn_ext_set_prec", "flash_attn_ext_add_sinks",
            "flash_attn_ext_set_path", "flash_attn_ext_get_path", "FA_PATHS"]

from pyggml._enums import Prec

# K rows are dotted with q (vec_dot on one_chunk, attn_dot on split, to f32 on tiled), V rows are
# accumulated (attn_acc, to f32 on tiled)
_FA_K_TYPES = kernel_types("vec_dot", "attn_dot", "to_float")
_FA_V_TYPES = kernel_types("attn_acc", "to_float")
# the op_params slots and the paths are csrc/ops/flash-attn.h's (pg_fa_param, pg_fa_path); FA_PATHS[i]
# names path i
from pyggml._tables import FA_PARAMS, FA_PATHS, FA_SPLIT_MAX_N

cdef int _FA_SCALE = FA_PARAMS["scale"], _FA_MAX_BIAS = FA_PARAMS["max_bias"]
cdef int _FA_SOFTCAP = FA_PARAMS["logit_softcap"], _FA_PREC = FA_PARAMS["prec"]
cdef int _FA_PATH = FA_PARAMS["path"], _FA_TAKEN = FA_PARAMS["taken"]


def flash_attn_ext(q, k, v, mask, scale, max_bias=0.0, logit_softcap=0.0):
    """Fused attention (ggml_flash_attn_ext): for each query row, softmax over the keys of
    scale*q.k (with logit_softcap: softcap*tanh(scale*q.k/softcap)) plus slope*mask, times v.

    q F32 [DK, N, Hq, S]; k [DK, L, Hkv, S] and v [DV, L, Hkv, S] of type F32, F16, BF16, Q8_0, Q4_0,
    Q4_1, Q5_0, Q5_1 or IQ4_NL
    (rows packed in dim 0, other strides free, e.g. views of a KV cache); Hq % Hkv == 0 (GQA: query
    head h reads KV head h // (Hq // Hkv)); mask None or F16 contiguous [>= L, >= N, M2, M3] with
    Hq % M2 == 0 and S % M3 == 0; ALiBi slopes from max_bias (needs a mask). Result F32
    [DV, Hq, N, S] (heads before queries). A key with slope*mask == -inf gets no weight; a row with
    every key masked is exactly 0.

    Paths (see csrc/ops/flash-attn.h; force one with flash_attn_ext_set_path, read the one taken with
    flash_attn_ext_get_path): one_chunk (per row; compute(use_ref=True) always takes it), tiled
    (64 x 64 tiles, automatic from N >= 64), split (split-KV decode, one row after the other,
    automatic for S == 1, N <= FA_SPLIT_MAX_N = 16 and L >= PG_FA_SPLIT_MIN_L = 64,
    csrc/ops/flash-attn.h: a row gets the same bits whatever the other rows, so a step of a few rows
    gives each what a one-row decode step gives it).

    Differences from ggml: every path accumulates in f32 (ggml keeps an fp16 accumulator for F16 V
    on one_chunk and split); split-KV also runs for BF16, quantized and mixed K/V types and reads
    each K/V row once for all the query heads sharing it (tiled too, up to 4 heads); tiled also runs
    for any K/V type and any DV; short last KV tiles never leak weight to padding keys under softcap."""
    op = "flash_attn_ext"
    cdef Tensor tq = _tensor(op, "q", q), tk = _tensor(op, "k", k), tv = _tensor(op, "v", v), tm
    _types(op, "q", tq, {Type.F32})
    _types(op, "k", tk, _FA_K_TYPES)
    _types(op, "v", tv, _FA_V_TYPES)
    _packed0(op, "q", tq)
    _packed0(op, "k", tk)
    _packed0(op, "v", tv)
    DK, N, Hq, S = tq.ne
    if tk.c.ne[0] != DK:
        raise ValueError(f"{op}: k.ne[0] must equal q.ne[0] = {DK} (DK), got {tk.c.ne[0]}")
    L, Hkv = tk.c.ne[1], tk.c.ne[2]
    if tv.c.ne[1] != L or tv.c.ne[2] != Hkv:
        raise ValueError(f"{op}: v.ne[1:3] must equal k.ne[1:3] = {(L, Hkv)}, got {tv.ne[1:3]}")
    if tk.c.ne[3] != S or tv.c.ne[3] != S:
        raise ValueError(f"{op}: k.ne[3] and v.ne[3] must equal q.ne[3] = {S}, got {tk.c.ne[3]} and {tv.c.ne[3]}")
    if Hkv == 0 or Hq % Hkv:
        raise ValueError(f"{op}: q.ne[2] (Hq = {Hq}) must be a multiple of k.ne[2] (Hkv = {Hkv})")
    srcs = [tq, tk, tv]
    if mask is not None:
        tm = _tensor(op, "mask", mask)
        _types(op, "mask", tm, {Type.F16})
        _contiguous(op, "mask", tm)
        if tm.c.ne[0] < L:
            raise ValueError(f"{op}: mask.ne[0] must be >= L = {L}, got {tm.c.ne[0]}")
        if tm.c.ne[1] < N:
            raise ValueError(f"{op}: mask.ne[1] must be >= N = {N}, got {tm.c.ne[1]}")
        if 0 in tm.ne[2:] or Hq % tm.c.ne[2] or S % tm.c.ne[3]:
            raise ValueError(f"{op}: (Hq, S) = {(Hq, S)} must be multiples of mask.ne[2:4] = {tm.ne[2:]}")
        srcs.append(tm)
    mb = _finite(op, "max_bias", max_bias)
    if mb < 0:
        raise ValueError(f"{op}: max_bias must be >= 0, got {max_bias}")
    if mb > 0 and mask is None:
        raise ValueError(f"{op}: max_bias > 0 (got {max_bias}) needs a mask")
    cdef Tensor t = new_node(tq.ctx, Type.F32, (tv.c.ne[0], Hq, N, S), Op.FLASH_ATTN_EXT, tuple(srcs))
    set_param_f32(t, _FA_SCALE, _finite(op, "scale", scale))
    set_param_f32(t, _FA_MAX_BIAS, mb)
    set_param_f32(t, _FA_SOFTCAP, _finite(op, "logit_softcap", logit_softcap))
    return t


cdef Tensor _fa_node(str op, t):
    cdef Tensor tt = _tensor(op, "t", t)
    if tt.c.op != Op.FLASH_ATTN_EXT:
        raise ValueError(f"{op}: t must be a flash_attn_ext result, got op {tt.op.name}")
    return tt


def flash_attn_ext_set_prec(t, prec):
    """Precision request (an op_params slot); DEFAULT and F32 are identical on the CPU (always f32)."""
    cdef Tensor tt = _fa_node("flash_attn_ext_set_prec", t)
    try:
        p = Prec(prec)
    except ValueError:
        raise ValueError(f"flash_attn_ext_set_prec: prec must be a pyggml.Prec, got {prec!r}") from None
    set_param_i32(tt, _FA_PREC, p)
    return tt


def flash_attn_ext_add_sinks(t, sinks):
    """Attach F32 sinks [Hq]: head h's logit sinks[h] joins its softmax denominator (no value row)."""
    op = "flash_attn_ext_add_sinks"
    cdef Tensor tt = _fa_node(op, t), ts = _tensor(op, "sinks", sinks)
    _types(op, "sinks", ts, {Type.F32})
    _contiguous(op, "sinks", ts)
    if ts.ne != (tt.c.ne[1], 1, 1, 1):
        raise ValueError(f"{op}: sinks must have ne=({tt.c.ne[1]}, 1, 1, 1) (one per query head), got {ts.ne}")
    tt._src = tt._src[:4] + (ts,) + tt._src[5:]
    tt.c.src[4] = &ts.c
    return tt


def flash_attn_ext_set_path(t, path):
    """Force the execution path of a flash_attn_ext node: one of FA_PATHS ("auto", "one_chunk",
    "tiled", "split"); "split" needs N <= FA_SPLIT_MAX_N (16) and S == 1. compute(use_ref=True)
    still runs one_chunk.
    pyggml only (ggml picks the path itself)."""
    op = "flash_attn_ext_set_path"
    cdef Tensor tt = _fa_node(op, t)
    if path not in FA_PATHS:
        raise ValueError(f"{op}: path must be one of {FA_PATHS}, got {path!r}")
    if path == "split" and (tt.c.ne[2] > FA_SPLIT_MAX_N or tt.c.ne[3] != 1):
        raise ValueError(f"{op}: the split path needs N <= {FA_SPLIT_MAX_N} and S == 1, "
                         f"got N={tt.c.ne[2]} S={tt.c.ne[3]}")
    set_param_i32(tt, _FA_PATH, FA_PATHS.index(path))
    return tt


def flash_attn_ext_get_path(t):
    """The path the last compute of this flash_attn_ext node took ("one_chunk", "tiled", "split"),
    or None before it has run (CGraph.plan chooses it; Plan.paths reports it). pyggml only."""
    cdef Tensor tt = _fa_node("flash_attn_ext_get_path", t)
    taken = tt.c.op_params[_FA_TAKEN]
    return FA_PATHS[taken] if taken else None


# ================================================================================================
# ---- convolution: im2col, conv_2d, concat ----
# ================================================================================================
# (each section appends its public names: __all__ += [...])

__all__ += ["im2col", "conv_2d", "concat"]


cdef int64_t _conv_out(int64_t ins, int64_t ks, int s, int p, int d):
    """ggml_calc_conv_output_size"""
    return (ins + 2 * p - d * (ks - 1) - 1) // s + 1


def im2col(a, b, s0, s1, p0, p1, d0, d1, is_2D, dst_type=Type.F32):
    """The patches a convolution with kernel a reads from b, one row per output position
    (ggml_im2col, same parameter order). 2-D: a [KW, KH, IC, OC], b [IW, IH, IC, N] F32 ->
    [IC*KH*KW, OW, OH, N]; 1-D (is_2D False): a [K, IC, OC], b [IL, IC, N] -> [IC*K, OL, N]. Element
    (c*KH + ky)*KW + kx of row (ow, oh, n) is b[ow*s0 + kx*d0 - p0, oh*s1 + ky*d1 - p1, c, n], 0 outside
    b. OW = (IW + 2*p0 - d0*(KW - 1) - 1) // s0 + 1 (OH alike). Only a's shape is read. dst_type F32
    or F16. pyggml differs from ggml: b may have any strides (ggml: packed rows and planes)."""
    op = "im2col"
    cdef Tensor ta = _tensor(op, "a", a), tb = _tensor(op, "b", b)
    _types(op, "b", tb, {Type.F32})
    if dst_type not in (Type.F32, Type.F16):
        raise TypeError(f"{op}: dst_type must be F32 or F16, got {dst_type!r}")
    cdef int32_t prm[7]
    names = ("s0", "s1", "p0", "p1", "d0", "d1")
    for i, (name, v) in enumerate(zip(names, (s0, s1, p0, p1, d0, d1))):
        prm[i] = check_int(op, name, v)
    two = bool(is_2D)
    for i, name in ((0, "s0"), (4, "d0")) + (((1, "s1"), (5, "d1")) if two else ()):
        if prm[i] <= 0:
            raise ValueError(f"{op}: {name} must be > 0, got {prm[i]}")
    for i, name in ((2, "p0"),) + (((3, "p1"),) if two else ()):
        if prm[i] < 0:
            raise ValueError(f"{op}: {name} must be >= 0, got {prm[i]}")
    if two and ta.c.ne[2] != tb.c.ne[2]:
        raise ValueError(f"{op}: a.ne[2] and b.ne[2] (input channels) must match, got {ta.c.ne[2]} and {tb.c.ne[2]}")
    if not two and (ta.c.ne[1] != tb.c.ne[1] or tb.c.ne[3] != 1):
        raise ValueError(f"{op}: 1-D: a.ne[1] and b.ne[1] (input channels) must match and b.ne[3] must be 1, "
                         f"got a.ne={ta.ne} b.ne={tb.ne}")
    ow = _conv_out(tb.c.ne[0], ta.c.ne[0], prm[0], prm[2], prm[4])
    oh = _conv_out(tb.c.ne[1], ta.c.ne[1], prm[1], prm[3], prm[5]) if two else 1
    if ow <= 0 or oh <= 0:
        raise ValueError(f"{op}: b (ne={tb.ne}) is too small for the kernel a (ne={ta.ne}) with these strides, "
                         f"paddings and dilations: the output would be {ow} x {oh}")
    if two:
        ne = (ta.c.ne[0] * ta.c.ne[1] * ta.c.ne[2], ow, oh, tb.c.ne[3])
    else:
        ne = (ta.c.ne[0] * ta.c.ne[1], ow, tb.c.ne[2], 1)
    cdef Tensor t = new_node(ta.ctx, Type(dst_type), ne, Op.IM2COL, (ta, tb))
    for i in range(6):
        set_param_i32(t, i, prm[i])
    set_param_i32(t, 6, 1 if two else 0)
    return t


def conv_2d(a, b, s0=1, s1=1, p0=0, p1=0, d0=1, d1=1):
    """2-D convolution as ggml_conv_2d builds it: im2col of b, then one dot of fp16 values per
    output (kernel and patches rounded to fp16, as ggml's F16 im2col and F16 mul_mat), then the
    layout [OW, OH, OC, N]. a: kernel [KW, KH, IC, OC] F32/F16, b: input [IW, IH, IC, N] F32; F32
    result. The nodes: im2col (F32) -> mul_mat(kernel F16, patches) -> reshape -> permute -> cont."""
    op = "conv_2d"
    cdef Tensor ta = _tensor(op, "a", a)
    _types(op, "a", ta, {Type.F32, Type.F16})
    cols = im2col(a, b, s0, s1, p0, p1, d0, d1, True, Type.F32)       # [IC*KH*KW, OW, OH, N]
    k = a if ta.c.type == Type.F16 else cpy(cont(a), ta.ctx.new_tensor(Type.F16, ta.ne))
    k = reshape_2d(k, ta.c.ne[0] * ta.c.ne[1] * ta.c.ne[2], ta.c.ne[3])
    ow, oh, n = cols.ne[1], cols.ne[2], cols.ne[3]
    y = mul_mat(k, reshape_2d(cols, cols.ne[0], ow * oh * n))          # [OC, OW*OH*N]
    return cont(permute(reshape_4d(y, ta.c.ne[3], ow, oh, n), 2, 0, 1, 3))


def concat(a, b, dim=0):
    """a and b joined along dim (ggml_concat): equal shapes except in dim, one type (any type with
    one element per block: F32, F16, BF16, F64, I8..I64); the result is new and contiguous, a's
    elements first. a and b may have any strides."""
    op = "concat"
    cdef Tensor ta = _tensor(op, "a", a), tb = _tensor(op, "b", b)
    d = check_int(op, "dim", dim)
    if not 0 <= d < 4:
        raise ValueError(f"{op}: dim must be in [0, 4), got {d}")
    if ta.c.type != tb.c.type:
        raise TypeError(f"{op}: a and b must have one type, got {Type(ta.c.type).name} and {Type(tb.c.type).name}")
    if blck_size(ta.c.type) != 1:
        raise TypeError(f"{op}: {Type(ta.c.type).name} is a block type; concat takes types of one element per block")
    ne = list(ta.ne)
    for i in range(4):
        if i == d:
            ne[i] += tb.c.ne[i]
        elif ta.c.ne[i] != tb.c.ne[i]:
            raise ValueError(f"{op}: a.ne and b.ne must match except in dim {d}, got {ta.ne} and {tb.ne}")
    cdef Tensor t = new_node(ta.ctx, Type(ta.c.type), tuple(ne), Op.CONCAT, (ta, tb))
    set_param_i32(t, 0, d)
    return t


# ================================================================================================
# ---- mixture of experts: routing (sum_rows, div, argsort, top_k, add_id), swiglu_oai, mul_mat_id ----
# ================================================================================================
# (each section appends its public names: __all__ += [...])

from pyggml._enums import SortOrder

__all__ += ["sum_rows", "div", "argsort", "argsort_top_k", "top_k", "add_id", "swiglu_oai", "mul_mat_id"]


def sum_rows(a):
    """The sum of each row (dim 0) of a (ggml_sum_rows): F32 [1, ne1, ne2, ne3], summed in double and
    rounded once as ggml. a F32 with packed rows."""
    cdef Tensor ta = _tensor("sum_rows", "a", a)
    _types("sum_rows", "a", ta, {Type.F32})
    _packed0("sum_rows", "a", ta)
    return new_node(ta.ctx, Type.F32, (1,) + ta.ne[1:], Op.SUM_ROWS, (ta,), ta._ndim)


def div(a, b):
    """a / b elementwise, with b repeated over a (ggml_div); types as add."""
    return _binary("div", Op.DIV, a, b)


cdef Tensor _sort_src(str op, a):
    cdef Tensor ta = _tensor(op, "a", a)
    _types(op, "a", ta, {Type.F32})
    _packed0(op, "a", ta)
    if ta.c.ne[0] > 2**31 - 1:
        raise ValueError(f"{op}: a.ne[0] must fit in int32 (the indices are I32), got {ta.c.ne[0]}")
    return ta


def argsort(a, order=SortOrder.ASC):
    """The indices that sort each row (dim 0) of a (ggml_argsort): I32 of a's shape, order
    SortOrder.ASC or DESC. a F32 with packed rows. Equal values keep the lower index first in either
    order (ggml's std::sort leaves their order unspecified; for rows of up to 16 elements libstdc++
    gives this one); NaN sorts above every number (last ascending, first descending)."""
    cdef Tensor ta = _sort_src("argsort", a)
    try:
        o = SortOrder(order)
    except ValueError:
        raise ValueError(f"argsort: order must be a pyggml.SortOrder (ASC, DESC), got {order!r}") from None
    cdef Tensor t = new_node(ta.ctx, Type.I32, ta.ne, Op.ARGSORT, (ta,), ta._ndim)
    set_param_i32(t, 0, o)
    return t


cdef int64_t _top_k_k(str op, Tensor ta, k) except -1:
    k = check_int(op, "k", k)
    if not 0 < k <= ta.c.ne[0]:
        raise ValueError(f"{op}: k must be in [1, a.ne[0] = {ta.c.ne[0]}], got {k}")
    return k


def argsort_top_k(a, k):
    """The indices of the k largest values of each row, largest first (ggml_argsort_top_k: argsort
    DESC and a view of its first k columns; what llama.cpp routes experts with)."""
    cdef Tensor ta = _sort_src("argsort_top_k", a)
    kk = _top_k_k("argsort_top_k", ta, k)
    s = argsort(ta, SortOrder.DESC)
    nd = max(ta._ndim, 1)
    return _view("argsort_top_k", s, (kk,) + s.ne[1:nd], s.nb[1:nd], 0)


def top_k(a, k):
    """The indices of the k largest values of each row (ggml_top_k): I32 [k, ne1, ne2, ne3]. ggml
    gives them "in no particular order"; its CPU sorts them largest first and exchanges the first
    two, and so does pyggml (ties and NaN as argsort's DESC)."""
    cdef Tensor ta = _sort_src("top_k", a)
    kk = _top_k_k("top_k", ta, k)
    return new_node(ta.ctx, Type.I32, (kk,) + ta.ne[1:], Op.TOP_K, (ta,), ta._ndim)


def add_id(a, b, ids):
    """a plus the row of b each (i1, i2) picks (ggml_add_id): dst[:, i1, i2, i3] = a[:, i1, i2, i3] +
    b[:, ids[i1, i2]]. a F32 [ne0, ne1, ne2, ne3], b F32 [ne0, n_b] (gpt-oss's expert biases), ids I32
    [ne1, ne2]; rows packed. An id outside [0, n_b) makes compute() raise IndexError and leaves its
    row unwritten (ggml asserts)."""
    op = "add_id"
    cdef Tensor ta = _tensor(op, "a", a), tb = _tensor(op, "b", b), ti = _tensor(op, "ids", ids)
    _types(op, "a", ta, {Type.F32})
    _types(op, "b", tb, {Type.F32})
    _types(op, "ids", ti, {Type.I32})
    _packed0(op, "a", ta)
    _packed0(op, "b", tb)
    if tb.c.ne[0] != ta.c.ne[0] or tb.c.ne[2] != 1 or tb.c.ne[3] != 1:
        raise ValueError(f"{op}: b must be [a.ne[0] = {ta.c.ne[0]}, n_b], got ne={tb.ne}")
    if ti.ne != (ta.c.ne[1], ta.c.ne[2], 1, 1):
        raise ValueError(f"{op}: ids must have ne=({ta.c.ne[1]}, {ta.c.ne[2]}, 1, 1) (a.ne[1], a.ne[2]), got {ti.ne}")
    return new_node(ta.ctx, Type.F32, ta.ne, Op.ADD_ID, (ta, tb, ti), ta._ndim)


def swiglu_oai(a, b, alpha, limit):
    """gpt-oss's clamped SwiGLU (ggml_swiglu_oai): y = xc * sigmoid(alpha * xc) * (gc + 1) with
    xc = min(x, limit), gc = clamp(g, -limit, limit); x = a, g = b, or with b None the two halves of
    each row of a (x first). F32 with packed rows; alpha finite, limit finite and >= 0 (ggml's clamp
    needs -limit <= limit). The GLU op SWIGLU_OAI, alpha and limit in op_params[2], [3] as ggml."""
    op = "swiglu_oai"
    cdef Tensor ta = _tensor(op, "a", a), tb
    _types(op, "a", ta, {Type.F32})
    _packed0(op, "a", ta)
    fa = _finite(op, "alpha", alpha)
    fl = _finite(op, "limit", limit)
    if fl < 0:
        raise ValueError(f"{op}: limit must be >= 0, got {limit!r}")
    cdef Tensor t
    if b is None:
        if ta.c.ne[0] < 2:
            raise ValueError(f"{op}: a.ne[0] must be >= 2 to split into x and g, got {ta.c.ne[0]}")
        t = new_node(ta.ctx, Type.F32, (ta.c.ne[0] // 2,) + ta.ne[1:], Op.GLU, (ta,))
    else:
        tb = _tensor(op, "b", b)
        _types(op, "b", tb, {Type.F32})
        _same_shape(op, "b", ta, tb)
        _packed0(op, "b", tb)
        t = new_node(ta.ctx, Type.F32, ta.ne, Op.GLU, (ta, tb))
    set_param_i32(t, 0, GluOp.SWIGLU_OAI)
    set_param_f32(t, 2, fa)
    set_param_f32(t, 3, fl)
    return t


def mul_mat_id(a, b, ids):
    """One matrix product per column, with the expert matrix the column picks (ggml_mul_mat_id; ggml
    calls a `as`): dst[:, u, t] = mul_mat(a[:, :, ids[u, t]], b[:, u % b.ne[1], t]).

    a: the experts [K, M, n_expert], every weight type mul_mat takes (packed in dim 0); b: F32 [K,
    nb1, n_tokens] with n_used % nb1 == 0 (nb1 = 1: each token's row goes to all its experts); ids:
    I32 [n_used, n_tokens]. Result F32 [M, n_used, n_tokens]. The activations are converted as
    mul_mat converts them and dotted by the same integer kernels, so every column has mul_mat's bits
    (float weights: those of mul_mat's GEMV); each used expert's weights are read once per compute
    for all its columns, and unused experts not at all. An id outside [0, n_expert) makes compute()
    raise IndexError with nothing of the result written (ggml asserts)."""
    op = "mul_mat_id"
    cdef Tensor ta = _tensor(op, "a", a), tb = _tensor(op, "b", b), ti = _tensor(op, "ids", ids)
    _types(op, "a", ta, _MM_WEIGHT_TYPES)
    _types(op, "b", tb, {Type.F32})
    _types(op, "ids", ti, {Type.I32})
    _packed0(op, "a", ta)
    _packed0(op, "b", tb)
    if ta.c.ne[3] != 1 or ta.c.ne[2] < 1:
        raise ValueError(f"{op}: a must be [K, M, n_expert] with n_expert >= 1 (a.ne[3] == 1), got ne={ta.ne}")
    if tb.c.ne[3] != 1:
        raise ValueError(f"{op}: b must be [K, nb1, n_tokens] (b.ne[3] == 1), got ne={tb.ne}")
    if ti.c.ne[2] != 1 or ti.c.ne[3] != 1:
        raise ValueError(f"{op}: ids must be [n_used, n_tokens], got ne={ti.ne}")
    if ta.c.ne[0] != tb.c.ne[0]:
        raise ValueError(f"{op}: a.ne[0] and b.ne[0] must match, got {ta.c.ne[0]} and {tb.c.ne[0]}")
    if ti.c.ne[1] != tb.c.ne[2]:
        raise ValueError(f"{op}: ids.ne[1] (n_tokens) must equal b.ne[2] = {tb.c.ne[2]}, got {ti.c.ne[1]}")
    if tb.c.ne[1] == 0 or ti.c.ne[0] % tb.c.ne[1]:
        raise ValueError(f"{op}: ids.ne[0] (n_used = {ti.c.ne[0]}) must be a multiple of b.ne[1] = {tb.c.ne[1]}")
    return new_node(ta.ctx, Type.F32, (ta.c.ne[1], ti.c.ne[0], tb.c.ne[2], 1), Op.MUL_MAT_ID, (ta, tb, ti))
