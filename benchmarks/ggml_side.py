"""ggml's CPU backend driven from Python through the `ggml-python` package (PyPI; it builds a pinned
ggml with CMake and exposes ggml.h through ctypes). Only what the vs-ggml benchmark needs: a context
holding input tensors copied from numpy, a planned graph whose compute() is one ctypes call, and
results read back as float32.

Install (the build takes several minutes; GGML_NATIVE=ON compiles ggml for this CPU; GGML_LLAMAFILE=ON
adds the tinyBLAS GEMM that llama.cpp's own build turns on and ggml's standalone build leaves off):

    CMAKE_ARGS="-DGGML_NATIVE=ON -DGGML_LLAMAFILE=ON" pip install ggml-python

For a second copy built for AVX2 only, next to the native one:

    CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON \\
        -DGGML_BMI2=ON -DGGML_AVX512=OFF -DGGML_LLAMAFILE=ON" pip install --no-deps --target DIR ggml-python
    PYTHONPATH=DIR python -m benchmarks --vs-ggml
"""
import ctypes

import numpy as np

INSTALL_HINT = ('ggml is not installed: the comparison runs ggml through the ggml-python package. Install it '
                'with\n    CMAKE_ARGS="-DGGML_NATIVE=ON -DGGML_LLAMAFILE=ON" pip install ggml-python\n'
                '(it builds ggml from source with CMake: several minutes). See benchmarks/ggml_side.py.')

# what ggml's CPU backend was compiled with, as it reports (llamafile: the tinyBLAS GEMM llama.cpp builds)
ISA_FLAGS = ("avx", "avx2", "f16c", "fma", "avx_vnni", "avx512", "avx512_vbmi", "avx512_vnni", "avx512_bf16",
             "llamafile")


def load():
    """The ggml-python module, or an ImportError saying how to install it."""
    try:
        import ggml
    except ImportError as e:
        raise ImportError(INSTALL_HINT) from e
    return ggml


def isa(ggml):
    """The widest x86 level ggml was compiled for and its feature flags, e.g. ("avx512", [...])."""
    flags = [f for f in ISA_FLAGS if getattr(ggml, f"ggml_cpu_has_{f}")()]
    level = "avx512" if "avx512" in flags else "avx2" if "avx2" in flags else "sse/scalar"
    return level, flags


class Context:
    """One ggml context (ggml allocates its memory; pages it never touches cost nothing) and the
    graphs built in it. Tensors are ctypes pointers to ggml_tensor."""

    def __init__(self, ggml, mem_mib=64):
        self.g = ggml
        params = ggml.ggml_init_params(mem_size=mem_mib << 20, mem_buffer=None, no_alloc=False)
        self.ctx = ggml.ggml_init(params)
        if not self.ctx:
            raise MemoryError(f"ggml_init of {mem_mib} MiB failed")
        self._keep = []     # work buffers and plans the computes point into

    def close(self):
        if self.ctx:
            self.g.ggml_free(self.ctx)
            self.ctx = None

    def new(self, type, ne):
        """A zero-filled tensor (as pyggml's new_tensor)."""
        ne = tuple(ne) + (1,) * (4 - len(ne))
        t = self.g.ggml_new_tensor_4d(self.ctx, int(type), *ne)
        ctypes.memset(self.g.ggml_get_data(t), 0, self.g.ggml_nbytes(t))
        return t

    def tensor(self, array, type=None):
        """A ggml tensor with ne = array.shape[::-1] holding array converted to type (F32, F16, I32
        and I64 copied; quantized types quantized by ggml itself)."""
        array = np.ascontiguousarray(array)
        g = self.g
        if type is None:
            type = {np.dtype(np.float32): g.GGML_TYPE_F32, np.dtype(np.float16): g.GGML_TYPE_F16,
                    np.dtype(np.int32): g.GGML_TYPE_I32, np.dtype(np.int64): g.GGML_TYPE_I64}[array.dtype]
        t = self.new(type, array.shape[::-1])
        dst = g.ggml_get_data(t)
        if type == g.GGML_TYPE_F16:
            array = array.astype(np.float16)
        if type in (g.GGML_TYPE_F32, g.GGML_TYPE_F16, g.GGML_TYPE_I32, g.GGML_TYPE_I64):
            ctypes.memmove(dst, array.ctypes.data, array.nbytes)
        else:
            src = np.ascontiguousarray(array, dtype=np.float32)
            n_per_row = src.shape[-1]
            g.ggml_quantize_chunk(int(type), src.ctypes.data_as(ctypes.POINTER(ctypes.c_float)), dst, 0,
                                  src.size // n_per_row, n_per_row, None)
        return t

    def graph(self, out, size=2048):
        gf = self.g.ggml_new_graph_custom(self.ctx, size, False)
        self.g.ggml_build_forward_expand(gf, out)
        return gf

    def computer(self, gf, n_threads):
        """A no-argument callable that computes gf on n_threads: ggml_graph_plan once (as a backend
        keeps its plan), then each call is one ggml_graph_compute (OpenMP region included)."""
        g = self.g
        plan = g.ggml_graph_plan(gf, n_threads, None)
        if plan.work_size:
            work = np.empty(plan.work_size + 64, np.uint8)
            addr = (work.ctypes.data + 63) // 64 * 64
            plan.work_data = ctypes.cast(addr, ctypes.POINTER(ctypes.c_uint8))
            self._keep.append(work)
        self._keep.append(plan)
        ref = ctypes.byref(plan)
        compute = g.ggml_graph_compute
        return lambda: compute(gf, ref)

    def read(self, t):
        """Tensor t as a flat float32 array (quantized types dequantized by pyggml's own decoder,
        the same for both sides of a comparison)."""
        import pyggml as gg
        c = t.contents
        raw = ctypes.string_at(self.g.ggml_get_data(t), self.g.ggml_nbytes(t))
        return gg.Context().from_bytes(gg.Type(c.type), tuple(c.ne), raw).to_numpy().ravel()
