"""DLPack export: np.from_dlpack / torch.from_dlpack share the tensor's memory."""
import gc

import numpy as np
import pytest

import pyggml as gg

try:
    import torch
except ImportError:  # torch is optional
    torch = None

# numpy < 2.3 (Debian trixie's 2.2 in the riscv64 run) imports every DLPack capsule read-only, its
# own arrays' too: writes through a numpy consumer are checked only where numpy allows them
NUMPY_WRITES = np.lib.NumpyVersion(np.__version__) >= "2.3.0"

EXPORTABLE = [(gg.Type.F32, np.float32), (gg.Type.F16, np.float16), (gg.Type.I32, np.int32),
              (gg.Type.I64, np.int64)]


def consumers():
    out = [("numpy", np.from_dlpack, lambda x: x)]
    if torch is not None:
        out.append(("torch", torch.from_dlpack, lambda x: x.numpy()))
    return out


def pytest_generate_tests(metafunc):
    if "consumer" in metafunc.fixturenames:
        cs = consumers()
        metafunc.parametrize("consumer", cs, ids=[c[0] for c in cs])


@pytest.mark.parametrize("typ,dtype", EXPORTABLE, ids=[t.name for t, _ in EXPORTABLE])
def test_shares_memory_both_ways(ctx, typ, dtype, consumer):
    _, from_dlpack, as_np = consumer
    src = np.arange(2 * 3 * 5).reshape(2, 3, 5).astype(dtype)
    t = ctx.from_numpy(src)
    view = from_dlpack(t)
    arr = as_np(view)
    assert arr.dtype == dtype and arr.shape == (2, 3, 5)
    assert np.array_equal(arr, src)
    if consumer[0] != "numpy" or NUMPY_WRITES:
        view[1, 2, 3] = 42                       # write through the consumer ...
        assert t.to_numpy()[1, 2, 3] == 42       # ... and see it in the tensor
    t.set(np.zeros_like(src))                    # write the tensor ...
    assert (as_np(view) == 0).all()              # ... and see it in the consumer


def test_strided_view_strides(ctx, consumer):
    _, from_dlpack, as_np = consumer
    src = np.arange(4 * 6, dtype=np.float32).reshape(4, 6)
    t = gg.transpose(ctx.from_numpy(src))        # ne [4, 6], nb [24, 4]
    arr = as_np(from_dlpack(t))
    assert arr.shape == src.T.shape
    assert np.array_equal(arr, src.T)
    assert arr.strides == (4, 24)


def test_keeps_memory_alive(consumer):
    _, from_dlpack, as_np = consumer
    ctx = gg.Context()
    t = ctx.from_numpy(np.full((64, 64), 3.5, np.float32))
    view = from_dlpack(gg.view_2d(t, 8, 4, t.nb[1], 4 * 8))      # a view with an offset
    del t, ctx
    gc.collect()
    junk = [np.full((64, 64), -1.0, np.float32) for _ in range(20)]   # reuse freed memory if any
    assert (as_np(view) == 3.5).all()
    del junk


def test_capsule_never_consumed_is_freed(ctx):
    t = ctx.from_numpy(np.ones(10, np.float32))
    for max_version in (None, (1, 0)):
        cap = t.__dlpack__(max_version=max_version)
        del cap                                  # the capsule's destructor runs the deleter
    gc.collect()
    assert (t.to_numpy() == 1).all()


def test_versions_and_device(ctx):
    t = ctx.from_numpy(np.ones(3, np.float32))
    assert t.__dlpack_device__() == (1, 0)
    assert "dltensor_versioned" in repr(t.__dlpack__(max_version=(1, 0)))
    assert "dltensor" in repr(t.__dlpack__())
    assert np.array_equal(np.from_dlpack(t, device="cpu"), np.ones(3))


def test_copy(ctx):
    src = np.arange(12, dtype=np.float32).reshape(3, 4)
    t = gg.transpose(ctx.from_numpy(src))
    arr = np.from_dlpack(t, copy=True)
    assert np.array_equal(arr, src.T)
    assert not np.shares_memory(arr, t.numpy())
    if NUMPY_WRITES:
        arr[0, 0] = 99
        assert t.to_numpy()[0, 0] == 0


@pytest.mark.parametrize("typ", [gg.Type.BF16, gg.Type.Q8_0, gg.Type.Q4_0, gg.Type.I8])
def test_unsupported_types_raise(ctx, typ):
    t = ctx.new_tensor(typ, (32, 2))
    msg = f"a {typ.name} tensor cannot be exported; DLPack export supports F32, F16, I32 and I64"
    with pytest.raises(BufferError, match=msg):
        t.__dlpack__()
    with pytest.raises(BufferError, match="cannot be exported"):
        np.from_dlpack(t)


def test_bad_arguments(ctx):
    t = ctx.from_numpy(np.ones(4, np.float32))
    with pytest.raises(BufferError, match="stream must be None for a CPU tensor, got 1"):
        t.__dlpack__(stream=1)
    with pytest.raises(BufferError, match=r"only export to the CPU .* got \(2, 0\)"):
        t.__dlpack__(dl_device=(2, 0))
    node = gg.scale(t, 2.0)
    with pytest.raises(BufferError, match="has no memory yet"):
        node.__dlpack__()
