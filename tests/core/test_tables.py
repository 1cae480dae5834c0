"""The C tables (csrc/ops.h, csrc/ops/glu.h) and what Python builds from them: the enums agree with
their stubs, and the plan refuses what the tables do not cover instead of running a default."""
import ast
import ctypes
import pathlib
import sys

import numpy as np
import pytest

import pyggml as gg
from pyggml import _tables


def stub_members():
    """{enum name: {member: value}} as _enums.pyi declares them"""
    tree = ast.parse(pathlib.Path(gg.__file__).with_name("_enums.pyi").read_text())
    return {c.name: {s.targets[0].id: s.value.value for s in c.body if isinstance(s, ast.Assign)}
            for c in tree.body if isinstance(c, ast.ClassDef)}


@pytest.mark.parametrize("name", ["Op", "Type", "UnaryOp", "GluOp", "RopeType", "SortOrder", "Prec"])
def test_enum_matches_its_stub(name):
    assert {m.name: int(m) for m in getattr(gg, name)} == stub_members()[name]


def test_op_enum_is_the_op_table():
    rows = _tables.ops()
    assert [(op.name, int(op)) for op in gg.Op] == [(name, i) for i, (name, _) in enumerate(rows)]
    no_compute = {name for name, flags in rows if flags & _tables.OPF_NO_COMPUTE}
    assert no_compute == {"NONE", "RESHAPE", "VIEW", "PERMUTE", "TRANSPOSE"}


def test_glu_and_unary_enums_are_their_tables():
    assert {op.name: int(op) for op in gg.GluOp} == _tables.glu_ops()
    assert {op.name: int(op) for op in gg.UnaryOp} == _tables.unary_ops()


def poke_int32(t, i, value):
    """Overwrite the int32 i places from op_params[0] of t's C struct (tests only; pyggml.h's
    pg_tensor: op is at -17): the builders never write an invalid value, so this is the one way to
    hand the plan a node no table row covers."""
    raw = t.op_params
    base = id(t)
    obj = ctypes.string_at(base, sys.getsizeof(t))
    at = obj.find(raw)
    assert at > 0 and obj.find(raw, at + 1) < 0, "op_params not found once in the object"
    ctypes.memmove(base + at + 4 * i, np.int32(value).tobytes(), 4)
    assert ctypes.string_at(base + at + 4 * i, 4) == np.int32(value).tobytes()


@pytest.mark.parametrize("build, what", [
    (lambda x: gg.glu(x, gg.GluOp.GEGLU_QUICK, swapped=True), "is not a GLU op"),
    (lambda x: gg.gelu_erf(x), "is not a unary op"),
])
def test_plan_refuses_an_op_without_a_row(ctx, build, what):
    x = ctx.from_numpy(np.ones((3, 8), np.float32))
    out = build(x)
    poke_int32(out, 0, 7)                             # no GLU op and no unary op of pyggml has the value 7
    g = gg.CGraph()
    g.build_forward_expand(out)
    with pytest.raises(ValueError, match=rf"plan: node 0 \({out.op.name}\): op_params\[0\] = 7 {what}"):
        g.compute(1)


def test_type_sizes_are_ggmls():
    for t, blck, size in [(gg.Type.F32, 1, 4), (gg.Type.F16, 1, 2), (gg.Type.BF16, 1, 2), (gg.Type.Q8_0, 32, 34),
                          (gg.Type.Q4_0, 32, 18), (gg.Type.Q4_1, 32, 20), (gg.Type.Q5_0, 32, 22),
                          (gg.Type.Q5_1, 32, 24), (gg.Type.Q8_1, 32, 36), (gg.Type.IQ4_NL, 32, 18),
                          (gg.Type.IQ4_XS, 256, 136), (gg.Type.I32, 1, 4), (gg.Type.I64, 1, 8)]:
        assert (gg.blck_size(t), gg.type_size(t)) == (blck, size)
    assert gg.row_size(gg.Type.Q4_0, 4096) == 4096 // 32 * 18
    assert gg.row_size(gg.Type.F16, 7) == 14 and gg.row_size(int(gg.Type.F32), 0) == 0
    with pytest.raises(ValueError, match="row_size: ne must be >= 0 and a multiple of the Q8_0 block size 32, got 33"):
        gg.row_size(gg.Type.Q8_0, 33)
    with pytest.raises(ValueError, match="type_size: 4 is not a type pyggml has"):
        gg.type_size(4)
    with pytest.raises(TypeError, match="blck_size: type must be a pyggml.Type"):
        gg.blck_size("f32")


def test_tensors_agree_with_the_type_table(ctx):
    for t in gg.Type:
        if t in _tables.types():
            x = ctx.new_tensor(t, (256, 3))
            assert x.nb[:2] == (gg.type_size(t), gg.row_size(t, 256)) and x.nbytes == 3 * gg.row_size(t, 256)


@pytest.mark.parametrize("kernel, builder", [
    ("vec_dot", lambda a, f32: gg.mul_mat(a, f32)),
    ("attn_dot", lambda a, f32: gg.flash_attn_ext(f32, a, f32, None, 1.0)),
    ("attn_acc", lambda a, f32: gg.flash_attn_ext(f32, f32, a, None, 1.0)),
])
def test_builders_refuse_types_without_the_kernel(ctx, kernel, builder):
    """A NULL entry of the type table is a type the op does not support: refused when the node is built."""
    rows = _tables.types()
    f32 = ctx.new_tensor(gg.Type.F32, (256, 4, 2, 1))      # 256: a whole block of every type
    for t in gg.Type:
        a = ctx.new_tensor(t, (256, 4, 2, 1))
        if kernel in rows[t][4]:
            builder(a, f32)
        else:
            with pytest.raises(TypeError, match=f"must be of type .*, got {t.name}"):
                builder(a, f32)


def one_node_per_op(ctx):
    """{Op: a small node of that op, built by its public builder} for every op; the inputs are
    F32 of small odd sizes (vector tails)."""
    x = ctx.from_numpy(np.linspace(-1, 1, 3 * 20, dtype=np.float32).reshape(3, 20))
    y = ctx.from_numpy(np.linspace(2, 3, 3 * 20, dtype=np.float32).reshape(3, 20))
    idx = ctx.from_numpy(np.array([2, 0], np.int32))
    pos = ctx.from_numpy(np.arange(3, dtype=np.int32))
    cache = ctx.new_tensor(gg.Type.F32, (20, 4))
    q = ctx.from_numpy(np.linspace(0, 1, 20 * 2 * 2, dtype=np.float32).reshape(2, 2, 20))
    return {
        gg.Op.NONE: x, gg.Op.DUP: gg.dup(x), gg.Op.ADD: gg.add(x, y), gg.Op.MUL: gg.mul(x, y),
        gg.Op.SCALE: gg.scale(x, 2.0), gg.Op.CPY: gg.cpy(x, ctx.new_tensor(gg.Type.F16, (20, 3))),
        gg.Op.CONT: gg.cont(gg.transpose(x)), gg.Op.RESHAPE: gg.reshape_1d(x, 60),
        gg.Op.VIEW: gg.view_1d(x, 5, 4), gg.Op.PERMUTE: gg.permute(x, 1, 0, 2, 3), gg.Op.TRANSPOSE: gg.transpose(x),
        gg.Op.GET_ROWS: gg.get_rows(x, idx), gg.Op.SET_ROWS: gg.set_rows(cache, gg.view_2d(x, 20, 2, x.nb[1]), idx),
        gg.Op.SOFT_MAX: gg.soft_max_ext(x), gg.Op.ROPE: gg.rope_ext(gg.reshape_3d(x, 20, 1, 3), pos, None, 20),
        gg.Op.MUL_MAT: gg.mul_mat(x, y), gg.Op.NORM: gg.norm(x, 1e-5), gg.Op.RMS_NORM: gg.rms_norm(x, 1e-5),
        gg.Op.GLU: gg.swiglu_split(x, y), gg.Op.UNARY: gg.silu(x),
        gg.Op.FLASH_ATTN_EXT: gg.flash_attn_ext(q, q, q, None, 0.5),
        gg.Op.IM2COL: gg.im2col(ctx.new_tensor(gg.Type.F32, (3, 3, 1)), x, 1, 0, 0, 0, 1, 0, False),
        gg.Op.CONCAT: gg.concat(x, y, 1),
        gg.Op.SUM_ROWS: gg.sum_rows(x), gg.Op.DIV: gg.div(x, y), gg.Op.ARGSORT: gg.argsort(x),
        gg.Op.TOP_K: gg.top_k(x, 3), gg.Op.ADD_ID: gg.add_id(x, y, ctx.from_numpy(np.array([1, 0, 2], np.int32))),
        gg.Op.MUL_MAT_ID: gg.mul_mat_id(gg.reshape_3d(y, 20, 1, 3), gg.reshape_3d(x, 20, 1, 3),
                                        ctx.from_numpy(np.array([[2], [0], [1]], np.int32))),
    }


def test_every_op_row_has_a_builder_and_runs(ctx):
    """An op added to the table without a builder and a node here fails this test; every node with
    a kernel plans and computes (its numbers are each op's own tests' business)."""
    nodes = one_node_per_op(ctx)
    assert set(nodes) == set(gg.Op)
    for op, t in nodes.items():
        assert t.op == op
        g = gg.CGraph()
        g.build_forward_expand(t)
        g.compute(2)
        if t.type == gg.Type.F32:
            assert np.isfinite(t.numpy()).all(), op.name


def test_plan_refuses_an_op_id_without_a_row(ctx):
    """A node whose op id is past the op table is a plan error, not an out-of-bounds read."""
    x = ctx.from_numpy(np.ones((3, 8), np.float32))
    out = gg.scale(x, 2.0)
    poke_int32(out, -17, len(gg.Op))                  # the op id: one past the table
    g = gg.CGraph()
    g.build_forward_expand(out)
    with pytest.raises(ValueError, match=rf"plan: node 0 \(op {len(gg.Op)}\): op id {len(gg.Op)} has no row in the op table"):
        g.compute(1)
