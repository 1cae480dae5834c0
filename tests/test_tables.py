"""The C tables (csrc/ops.h, csrc/glu.h) and what Python builds from them: the enums agree with
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


@pytest.mark.parametrize("name", ["Op", "Type", "UnaryOp", "GluOp", "RopeType", "Prec"])
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


def poke_op_param(t, i, value):
    """Overwrite op_params[i] of t's C struct (tests only): the builders never write an invalid
    value, so this is the one way to hand the plan a node no table row covers."""
    raw = t.op_params
    base = id(t)
    obj = ctypes.string_at(base, sys.getsizeof(t))
    at = obj.find(raw)
    assert at > 0 and obj.find(raw, at + 1) < 0, "op_params not found once in the object"
    ctypes.memmove(base + at + 4 * i, np.int32(value).tobytes(), 4)
    assert t.op_params[4 * i:4 * i + 4] == np.int32(value).tobytes()


@pytest.mark.parametrize("build, what", [
    (lambda x: gg.glu(x, gg.GluOp.GEGLU_QUICK, swapped=True), "is not a GLU op"),
    (lambda x: gg.gelu_erf(x), "is not a unary op"),
])
def test_plan_refuses_an_op_without_a_row(ctx, build, what):
    x = ctx.from_numpy(np.ones((3, 8), np.float32))
    out = build(x)
    poke_op_param(out, 0, 3)                          # no GLU op and no unary op has the value 3
    g = gg.CGraph()
    g.build_forward_expand(out)
    with pytest.raises(ValueError, match=rf"plan: node 0 \({out.op.name}\): op_params\[0\] = 3 {what}"):
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
    f32 = ctx.new_tensor(gg.Type.F32, (256, 4, 2, 1))
    for t in gg.Type:
        a = ctx.new_tensor(t, (256, 4, 2, 1))
        if kernel in rows[t][4]:
            builder(a, f32)
        else:
            with pytest.raises(TypeError, match=f"must be of type .*, got {t.name}"):
                builder(a, f32)
