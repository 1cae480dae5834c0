"""What the build compiled and what runs. tools/qemu.sh sets PYGGML_EXPECT_SIMD and
PYGGML_EXPECT_VLEN for each emulated CPU, so a build that silently fell back to the scalar kernels
(a compiler without the intrinsics, a broken run-time dispatch) fails here instead of passing slowly."""
import os

import pytest

import pyggml as gg

SIMD_NAMES = ("avx512", "avx2", "neon", "rvv", "scalar")


def test_build_info():
    info = gg.build_info()
    assert info["simd"] in SIMD_NAMES
    assert isinstance(info["openmp"], bool)
    assert isinstance(info["vlen"], int)
    assert info["max_threads"] >= 1


@pytest.mark.skipif("PYGGML_EXPECT_SIMD" not in os.environ, reason="PYGGML_EXPECT_SIMD not set")
def test_expected_simd():
    assert gg.build_info()["simd"] == os.environ["PYGGML_EXPECT_SIMD"]


def test_vlen():
    info = gg.build_info()
    assert (info["vlen"] == 0) == (info["simd"] == "scalar")
    expect = os.environ.get("PYGGML_EXPECT_VLEN")
    if expect is not None:
        assert info["vlen"] == int(expect)


def test_every_module_is_installed():
    """meson.build lists the Python files it installs: a module added to the source tree but not
    there is missing from the installed package (and from every wheel)."""
    import pathlib

    from conftest import REPO
    installed = pathlib.Path(gg.__file__).parent
    src = REPO / "pyggml"
    if installed == src or not src.is_dir():
        pytest.skip("runs against an installed package beside its source tree")
    missing = [str(p.relative_to(src)) for p in src.rglob("*.py") if not (installed / p.relative_to(src)).is_file()]
    assert not missing, f"not installed (add to pyggml/meson.build): {missing}"
