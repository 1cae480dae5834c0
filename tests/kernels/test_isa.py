"""The x86-64 kernel levels chosen at import (pyggml/_isa/__init__.py): the choice from CPU flags,
PYGGML_ISA forcing each level this CPU runs (a new process per level, checked against numpy), and
the one-line errors for a level that cannot run."""
import importlib
import os
import subprocess
import sys

import numpy as np
import pytest
import reference as ref

import pyggml as gg
from pyggml import _isa

DISPATCH = bool(_isa.BUILT)
needs_dispatch = pytest.mark.skipif(not DISPATCH, reason="not a -Dsimd=dispatch build")

AVX2_FLAGS = _isa.NEEDS["avx2"]
AVX512_FLAGS = _isa.NEEDS["avx512"]


def test_cpu_levels_from_flags():
    assert _isa.cpu_levels(frozenset()) == ("scalar",)
    assert _isa.cpu_levels(AVX2_FLAGS) == ("scalar", "avx2")
    assert _isa.cpu_levels(AVX512_FLAGS | {"avx512_bf16"}) == ("scalar", "avx2", "avx512")
    # AVX-512 without GFNI (Cascade Lake), or AVX2 without FMA: down one level
    assert _isa.cpu_levels(AVX512_FLAGS - {"gfni"}) == ("scalar", "avx2")
    assert _isa.cpu_levels(AVX2_FLAGS - {"fma"}) == ("scalar",)


def test_cpu_flags(tmp_path):
    f = tmp_path / "cpuinfo"
    f.write_text("processor\t: 0\nflags\t\t: fpu avx2 fma\n\nprocessor\t: 1\nflags\t\t: fpu\n")
    assert _isa.cpu_flags(f) == {"fpu", "avx2", "fma"}
    assert _isa.cpu_flags(tmp_path / "missing") == frozenset()


def test_choose():
    built = _isa.LEVELS
    assert _isa.choose(built, AVX512_FLAGS) == "avx512"
    assert _isa.choose(("scalar", "avx2"), AVX512_FLAGS) == "avx2"
    assert _isa.choose(built, AVX2_FLAGS) == "avx2"
    assert _isa.choose(built, frozenset()) == "scalar"
    assert _isa.choose(built, AVX512_FLAGS, "scalar") == "scalar"
    assert _isa.choose(built, AVX512_FLAGS, "avx2") == "avx2"
    with pytest.raises(ImportError, match=r"PYGGML_ISA='sse9' is not a kernel level; expected one of scalar, avx2, avx512"):
        _isa.choose(built, AVX512_FLAGS, "sse9")
    with pytest.raises(ImportError, match="PYGGML_ISA=avx512: this CPU lacks avx512_vnni, gfni"):
        _isa.choose(built, AVX512_FLAGS - {"gfni", "avx512_vnni"}, "avx512")
    with pytest.raises(ImportError, match="PYGGML_ISA=avx512: this build holds the levels scalar, avx2"):
        _isa.choose(("scalar", "avx2"), AVX512_FLAGS, "avx512")
    with pytest.raises(ImportError, match=r"flags cannot be read \(/proc/cpuinfo\)"):
        _isa.choose(built, frozenset(), "avx2")


def test_build_info_levels():
    info = gg.build_info()
    assert info["simd"] in info["simd_levels"]
    if DISPATCH:
        assert info["simd_levels"] == list(_isa.BUILT)
        assert "scalar" in info["simd_levels"]


@needs_dispatch
def test_level_matches_cpu():
    """the best level of the build this CPU runs, or PYGGML_ISA's; the compiled modules are its files"""
    forced = os.environ.get("PYGGML_ISA")
    want = forced or [lv for lv in _isa.BUILT if lv in _isa.cpu_levels()][-1]
    assert gg.build_info()["simd"] == want
    for mod in _isa.MODULES:
        assert os.path.basename(importlib.import_module(f"pyggml.{mod}").__file__).startswith(f"{mod}_{want}.")


# the child: F16 and quantized weights (the 32-element blocks, MXFP4's among them, and the K-quants'
# and IQ4_XS's 256) at one column (the GEMV kernels) and 20 (the GEMM tiles), written to an .npz for
# the parent to check
CHILD = """
import sys
import numpy as np
import pyggml as gg
rng = np.random.default_rng(7)
ctx = gg.Context()
out = {"simd": np.array(gg.build_info()["simd"])}
for typ in ("F16", "Q8_0", "Q4_0", "MXFP4", "Q4_K", "Q5_K", "Q6_K", "IQ4_XS"):
    w = rng.standard_normal((33, 256)).astype(np.float32)
    for n in (1, 20):
        x = rng.standard_normal((n, 256)).astype(np.float32)
        y = gg.mul_mat(ctx.from_numpy(w, type=gg.Type[typ]), ctx.from_numpy(x))
        g = gg.CGraph()
        g.build_forward_expand(y)
        g.compute(n_threads=2)
        out[f"{typ}_{n}_w"], out[f"{typ}_{n}_x"], out[f"{typ}_{n}"] = w, x, y.to_numpy()
np.savez(sys.argv[1], **out)
"""


def run_child(tmp_path, level, code=CHILD):
    env = {**os.environ, "PYGGML_ISA": level}
    return subprocess.run([sys.executable, "-c", code, str(tmp_path / "out.npz")], capture_output=True, text=True,
                          cwd=tmp_path, env=env, check=False, timeout=300)


@needs_dispatch
@pytest.mark.subprocess
@pytest.mark.parametrize("level", _isa.LEVELS)
def test_forced_level(tmp_path, level):
    if level not in _isa.BUILT or level not in _isa.cpu_levels():
        pytest.skip(f"this build or CPU has no {level} level")
    p = run_child(tmp_path, level)
    assert p.returncode == 0, p.stderr
    got = np.load(tmp_path / "out.npz")
    assert str(got["simd"]) == level
    for typ in ("F16", "Q8_0", "Q4_0", "MXFP4", "IQ4_XS"):     # (the K-quants: test_panels_same_bits_at_both_levels)
        for n in (1, 20):
            w, x = got[f"{typ}_{n}_w"], got[f"{typ}_{n}_x"]
            err = ref.nmse(got[f"{typ}_{n}"], ref.mul_mat(ref.roundtrip(w, typ), x, typ))
            assert err < 1e-10, (typ, n, err)


@needs_dispatch
@pytest.mark.subprocess
def test_panels_same_bits_at_both_levels(tmp_path):
    """Q8_0, Q4_0, MXFP4, Q4_K, Q5_K and Q6_K run the panels' arithmetic at the avx2 and avx512 levels
    (exact block sums, then the same f32 steps in the same order; Q6_K's GEMV at avx512 takes them
    too): the GEMV's and the GEMM's bits are the same at both"""
    levels = ("avx2", "avx512")
    if not all(lv in _isa.BUILT and lv in _isa.cpu_levels() for lv in levels):
        pytest.skip("this build or CPU lacks the avx2 or the avx512 level")
    got = {}
    for lv in levels:
        (tmp_path / lv).mkdir()
        p = run_child(tmp_path / lv, lv)
        assert p.returncode == 0, p.stderr
        got[lv] = np.load(tmp_path / lv / "out.npz")
    for typ in ("Q8_0", "Q4_0", "MXFP4", "Q4_K", "Q5_K", "Q6_K"):
        for n in (1, 20):
            a, b = got["avx2"][f"{typ}_{n}"], got["avx512"][f"{typ}_{n}"]
            np.testing.assert_array_equal(a.view(np.uint32), b.view(np.uint32), err_msg=f"{typ} N={n}")


@pytest.mark.subprocess
@pytest.mark.parametrize("value", ["sse9", "AVX2", "x86-64-v3"])
def test_bad_value_is_one_line(tmp_path, value):
    p = run_child(tmp_path, value, "import pyggml")
    assert p.returncode != 0
    last = p.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError: pyggml: PYGGML_ISA="), p.stderr
    if DISPATCH:
        assert last.endswith(f"PYGGML_ISA={value!r} is not a kernel level; expected one of scalar, avx2, avx512")


@needs_dispatch
@pytest.mark.subprocess
def test_level_the_cpu_lacks(tmp_path):
    lacking = [lv for lv in _isa.BUILT if lv not in _isa.cpu_levels()]
    if not lacking:
        pytest.skip("this CPU runs every level of the build")
    p = run_child(tmp_path, lacking[0], "import pyggml")
    assert p.returncode != 0
    assert p.stderr.strip().splitlines()[-1].startswith(f"ImportError: pyggml: PYGGML_ISA={lacking[0]}: this CPU lacks ")


@needs_dispatch
@pytest.mark.subprocess
def test_info_says_the_level(tmp_path):
    p = subprocess.run([sys.executable, "-m", "pyggml", "info"], capture_output=True, text=True, cwd=tmp_path,
                       env={**os.environ, "PYGGML_ISA": "scalar"}, check=False, timeout=300)
    assert p.returncode == 0, p.stderr
    assert "simd: scalar\n" in p.stdout
    assert f"simd_levels: {list(_isa.BUILT)}\n" in p.stdout


# the child of test_amx: 39 columns of the panel types' weights (the tiles' many-column GEMM: two groups of 16 on
# AMX where the CPU has it, the last 7 in the vector panels) with a last panel of 5 rows and a last pass of one
# block (the 32-element types: 37 blocks, passes of 32) or super-block (Q4_K, Q5_K: 5, passes of 4), and each
# column alone (the GEMV)
AMX_CHILD = """
import sys
import numpy as np
import pyggml as gg
rng = np.random.default_rng(11)
ctx = gg.Context()
out = {"amx": np.array(gg.build_info()["amx"])}
for typ in ("Q8_0", "Q4_0", "IQ4_NL", "MXFP4", "Q4_K", "Q5_K"):
    k = 256 * 5 if typ.endswith("_K") else 32 * 37
    w = ctx.from_numpy(rng.standard_normal((69, k)).astype(np.float32), type=gg.Type[typ])
    x = rng.standard_normal((39, k)).astype(np.float32)
    ys = [gg.mul_mat(w, ctx.from_numpy(x))] + [gg.mul_mat(w, ctx.from_numpy(x[j:j + 1])) for j in range(len(x))]
    g = gg.CGraph()
    for y in ys:
        g.build_forward_expand(y)
    g.compute(n_threads=2)
    out[typ] = ys[0].to_numpy()
    out[typ + "_alone"] = np.concatenate([y.to_numpy() for y in ys[1:]])
np.savez(sys.argv[1], **out)
"""


@pytest.mark.subprocess
def test_amx(tmp_path):
    """Intel AMX: build_info()["amx"] where the avx512 level runs on a CPU with AMX-INT8, off with
    PYGGML_AMX=0; with or without it, every GEMM column the GEMV's bits (the same exact block sums,
    scaled in the same order)"""
    runs = {}
    for amx in ("1", "0"):
        env = {**os.environ, "PYGGML_AMX": amx}
        p = subprocess.run([sys.executable, "-c", AMX_CHILD, str(tmp_path / f"amx{amx}.npz")], capture_output=True,
                           text=True, cwd=tmp_path, env=env, check=False, timeout=300)
        assert p.returncode == 0, p.stderr
        runs[amx] = np.load(tmp_path / f"amx{amx}.npz")
    cpu_amx = {"amx_tile", "amx_int8"} <= _isa.cpu_flags() and gg.build_info()["simd"] == "avx512"
    assert bool(runs["1"]["amx"]) == cpu_amx
    assert not runs["0"]["amx"]
    for typ in ("Q8_0", "Q4_0", "IQ4_NL", "MXFP4", "Q4_K", "Q5_K"):
        for run in runs.values():
            np.testing.assert_array_equal(run[typ].view(np.uint32), run[typ + "_alone"].view(np.uint32), err_msg=typ)
        np.testing.assert_array_equal(runs["1"][typ].view(np.uint32), runs["0"][typ].view(np.uint32), err_msg=typ)
