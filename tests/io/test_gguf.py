"""GGUF files: Context.from_buffer, load (zero copy, format errors) and save (round trip). What the
keys of an architecture mean is tested in test_arch.py."""
import mmap
import os
import struct
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from tiny_gguf import llama_metadata, llama_tensors

import pyggml as gg

G = pytest.importorskip("pyggml.gguf")
gguf = pytest.importorskip("gguf")

@pytest.fixture
def llama_file(tmp_path, rng):
    path = tmp_path / "llama.gguf"
    tensors = llama_tensors(rng)
    G.save(path, tensors, llama_metadata())
    return path, tensors


def write_raw_gguf(path, kv, tensors, version=3, align=32, data=b"", endian="<"):
    """A GGUF written byte by byte (for broken files the gguf writer refuses to make): kv is a list of
    (key, type code, packed value bytes), tensors a list of (name, ne, type code, offset)."""
    def string(s):
        b = s.encode()
        return struct.pack(endian + "Q", len(b)) + b
    out = b"GGUF" + struct.pack(endian + "IQQ", version, len(tensors), len(kv))
    for key, code, value in kv:
        out += string(key) + struct.pack(endian + "I", code) + value
    for name, ne, code, offset in tensors:
        out += string(name) + struct.pack(endian + "I", len(ne)) + struct.pack(f"{endian}{len(ne)}Q", *ne)
        out += struct.pack(endian + "IQ", code, offset)
    out += b"\0" * (-len(out) % align) + data
    path.write_bytes(out)
    return path


def str_value(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


# Context.from_buffer

def test_from_buffer_is_a_view(ctx):
    a = np.arange(64, dtype=np.float32)
    t = ctx.from_buffer(gg.Type.F32, (16, 2), a, offset=64)
    assert t.data_ptr == a.ctypes.data + 64
    assert t.ne == (16, 2, 1, 1) and t.is_contiguous()
    np.testing.assert_array_equal(t.numpy(), a[16:48].reshape(2, 16))
    a[16] = -5.0                              # the tensor sees writes to the buffer...
    assert t.numpy()[0, 0] == -5.0
    t.numpy()[1, 0] = 7.0                     # ...and the buffer sees writes to the tensor
    assert a[32] == 7.0


def test_from_buffer_keeps_the_buffer_alive(ctx):
    t = ctx.from_buffer(gg.Type.F32, (8,), np.arange(8, dtype=np.float32))
    view = t.numpy()
    del t
    np.testing.assert_array_equal(view, np.arange(8))


def test_from_buffer_mmap_cannot_be_closed_while_used(ctx, tmp_path):
    p = tmp_path / "raw"
    p.write_bytes(np.arange(16, dtype=np.float32).tobytes())
    with open(p, "rb") as fp:
        m = mmap.mmap(fp.fileno(), 0, access=mmap.ACCESS_COPY)
    t = ctx.from_buffer(gg.Type.F32, (8,), m, 32)
    np.testing.assert_array_equal(t.numpy(), np.arange(8, 16))
    with pytest.raises(BufferError):
        m.close()
    del t
    m.close()


@pytest.mark.parametrize("typ", [gg.Type.Q8_0, gg.Type.Q4_0, gg.Type.Q4_1, gg.Type.Q5_0, gg.Type.Q5_1, gg.Type.IQ4_NL,
                                 gg.Type.MXFP4, gg.Type.F16, gg.Type.BF16])
def test_from_buffer_quantized_computes(ctx, rng, typ):
    w = rng.standard_normal((8, 64)).astype(np.float32)
    ref = ctx.from_numpy(w, type=typ)
    buf = bytearray(6) + bytearray(ref.tobytes())     # at an offset that is aligned for the type
    t = ctx.from_buffer(typ, ref.ne[:2], buf, offset=6)
    x = ctx.from_numpy(rng.standard_normal((3, 64)).astype(np.float32))
    a, b = gg.mul_mat(t, x), gg.mul_mat(ref, x)
    g = gg.CGraph()
    g.build_forward_expand(a)
    g.build_forward_expand(b)
    g.compute(n_threads=2)
    np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_from_buffer_errors(ctx):
    a = np.zeros(64, np.float32)
    with pytest.raises(ValueError, match=r"from_buffer: a F32 tensor of ne=\(16, 4, 1, 1\) needs 256 bytes "
                                         r"from offset 64, but the buffer has 256 bytes"):
        ctx.from_buffer(gg.Type.F32, (16, 4), a, 64)
    with pytest.raises(ValueError, match="from_buffer: .*needs 4 bytes from offset -4"):
        ctx.from_buffer(gg.Type.F32, (1,), a, -4)
    with pytest.raises(ValueError, match="F32 data must be aligned to 4 bytes, but offset 2"):
        ctx.from_buffer(gg.Type.F32, (4,), a, 2)
    with pytest.raises(ValueError, match="Q8_0 data must be aligned to 2 bytes"):
        ctx.from_buffer(gg.Type.Q8_0, (32,), a, 1)
    with pytest.raises(TypeError, match="writable, contiguous .* got bytes: Object is not writable"):
        ctx.from_buffer(gg.Type.F32, (4,), bytes(64))
    with pytest.raises(TypeError, match="got ndarray: ndarray is not contiguous"):
        ctx.from_buffer(gg.Type.F32, (4,), a[::2])
    with pytest.raises(TypeError, match="got int"):
        ctx.from_buffer(gg.Type.F32, (4,), 7)
    with pytest.raises(ValueError, match="ne\\[0\\] of a Q8_0 tensor must be a multiple of 32"):
        ctx.from_buffer(gg.Type.Q8_0, (16,), a)
    with pytest.raises(TypeError, match="from_buffer: type must be a pyggml.Type"):
        ctx.from_buffer(99, (4,), a)
    with pytest.raises(TypeError):
        ctx.from_buffer(gg.Type.F32, (4,), a, 1.5)


# load

def file_mapping(path):
    """[(start, end)] addresses of the process's mappings of `path` (from /proc/self/maps)."""
    real, spans = os.path.realpath(path), []
    with open("/proc/self/maps") as fp:
        for line in fp:
            parts = line.split(maxsplit=5)
            if len(parts) == 6 and parts[5].strip() == real:
                spans.append(tuple(int(x, 16) for x in parts[0].split("-")))
    return spans


@pytest.mark.skipif(not os.path.exists("/proc/self/maps"), reason="needs /proc/self/maps")
def test_load_tensors_point_into_the_mapping(llama_file):
    path, tensors = llama_file
    f = G.load(path)
    spans = file_mapping(path)
    assert spans
    for name, t in f.tensors.items():
        assert any(lo <= t.data_ptr and t.data_ptr + t.nbytes <= hi for lo, hi in spans), name
        assert t.tobytes() == tensors[name].tobytes()
        assert t.name == name


def test_load_mapping_is_copy_on_write(llama_file):
    path, _ = llama_file
    before = path.read_bytes()
    t = G.load(path).tensor("blk.0.attn_norm.weight")
    t.numpy()[:] = 123.0
    assert (t.numpy() == 123.0).all()
    assert path.read_bytes() == before
    assert (G.load(path).tensor("blk.0.attn_norm.weight").numpy() != 123.0).any()


def test_close_and_context_manager(llama_file):
    path, tensors = llama_file
    with G.load(path) as f:
        t = f.tensor("output_norm.weight")
    assert f.tensors == {}
    np.testing.assert_array_equal(t.numpy(), tensors["output_norm.weight"])    # the tensor kept the map


@pytest.mark.subprocess
@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="needs /proc/self/status")
def test_load_adds_little_anonymous_memory(tmp_path):
    """Loading a 40 MB model and running a matrix product over every weight raises RssAnon by well
    under 15% of the tensor bytes (the weights stay in the page cache). Measured in a fresh process."""
    script = textwrap.dedent(f"""
        import numpy as np, pyggml as gg, pyggml.gguf as G
        def anon():
            for line in open("/proc/self/status"):
                if line.startswith("RssAnon"):
                    return int(line.split()[1]) * 1024
        rng = np.random.default_rng(0)
        names = [f"blk.{{i}}.w" for i in range(20)]
        G.save({str(tmp_path / 'big.gguf')!r}, {{n: rng.standard_normal((1024, 512), dtype=np.float32) for n in names}},
               {{"general.architecture": "llama"}})
        x = gg.Context().from_numpy(rng.standard_normal((1, 512)).astype(np.float32))
        a0 = anon()
        f = G.load({str(tmp_path / 'big.gguf')!r})
        outs = [gg.mul_mat(f.tensor(n), x) for n in names]
        g = gg.CGraph()
        for o in outs:
            g.build_forward_expand(o)
        g.compute(n_threads=1)
        delta = anon() - a0
        w = f.tensor(names[3]).numpy()
        assert np.allclose(outs[3].numpy()[0], w @ x.numpy()[0], rtol=1e-4, atol=1e-3)
        print(delta, f.nbytes)
    """)
    out = subprocess.run([sys.executable, "-c", script], check=False, capture_output=True, text=True, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    delta, nbytes = (int(v) for v in out.stdout.split())
    assert nbytes == 20 * 1024 * 512 * 4
    assert delta < 0.15 * nbytes, (delta, nbytes)


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="needs /proc/self/status")
def test_release_drops_mapped_pages(tmp_path, rng):
    """GGUFFile.release (models.load's after Tensor.repack): the pages wholly inside the tensors'
    bytes leave the process's resident file memory; a later read maps them in again, the same"""
    def rss_file():
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) * 1024 for line in f if line.startswith("RssFile"))

    path = str(tmp_path / "w.gguf")
    G.save(path, {"w": rng.standard_normal((1024, 1024)).astype(np.float32)}, {"general.architecture": "llama"})
    f = G.load(path)
    t = f.tensor("w")
    want = t.numpy().copy()                 # every page read in
    before = rss_file()
    f.release([t])
    assert before - rss_file() > 0.9 * t.nbytes
    np.testing.assert_array_equal(t.numpy(), want)


def rss(kind):
    """The process's resident memory of one kind (RssAnon, RssFile) in bytes."""
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith(kind))


@pytest.mark.skipif(not os.path.exists("/proc/self/maps"), reason="needs /proc/self/maps")
def test_load_without_mmap_reads_into_anonymous_memory(llama_file):
    """mmap=False (llama.cpp's --no-mmap): the same metadata and tensor bytes, none of them in a
    mapping of the file; a write changes the copy only."""
    path, tensors = llama_file
    before = path.read_bytes()
    f, ref = G.load(path, mmap=False), G.load(path)
    assert not f.mapped and ref.mapped
    spans = file_mapping(path)          # ref's mapping
    assert spans and not any(lo <= t.data_ptr < hi for t in f.tensors.values() for lo, hi in spans)
    assert f.metadata == ref.metadata and f.types == ref.types and f.arch == ref.arch
    assert set(f.tensors) == set(tensors)
    for name, t in f.tensors.items():
        assert t.tobytes() == tensors[name].tobytes() and t.ne == ref.tensors[name].ne and t.type == ref.tensors[name].type
    f.tensor("blk.0.attn_norm.weight").numpy()[:] = 5.0
    assert path.read_bytes() == before


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="needs /proc/self/status")
def test_release_without_mmap_maps_the_file_back(tmp_path, rng):
    """release() of a file read into memory: the copy's pages inside the tensor leave resident
    anonymous memory (the file's pages are mapped over them), and the tensor still reads the same"""
    path = str(tmp_path / "w.gguf")
    w = rng.standard_normal((1024, 1024)).astype(np.float32)
    G.save(path, {"w": w, "b": w[:4]}, {"general.architecture": "llama"})
    f = G.load(path, mmap=False)
    t, b = f.tensor("w"), f.tensor("b")
    before = rss("RssAnon")
    f.release([t])
    assert before - rss("RssAnon") > 0.9 * t.nbytes
    np.testing.assert_array_equal(t.numpy(), w)
    np.testing.assert_array_equal(b.numpy(), w[:4])     # the other tensor's pages untouched
    # a file replaced since it was read is not mapped back: the copy stays
    f = G.load(path, mmap=False)
    t = f.tensor("w")
    G.save(path, {"w": -w, "b": w[:4]}, {"general.architecture": "llama"})
    f.release([t])
    np.testing.assert_array_equal(t.numpy(), w)


def test_load_mmap_argument_errors(llama_file):
    path, _ = llama_file
    with pytest.raises(TypeError, match="mmap must be True or False"):
        G.load(path, mmap="no")
    with pytest.raises(G.GGUFError, match="not a GGUF file"):
        bad = path.parent / "bad.gguf"
        bad.write_bytes(b"NOPE" + bytes(60))
        G.load(bad, mmap=False)


# save

def test_round_trip_keeps_bytes_and_values(tmp_path, rng, ctx):
    tensors = llama_tensors(rng)
    tensors["blk.0.attn_q.weight"] = ctx.from_numpy(rng.standard_normal((64, 64)).astype(np.float32), gg.Type.Q8_0)
    tensors["blk.0.attn_k.weight"] = ctx.from_numpy(rng.standard_normal((32, 64)).astype(np.float32), gg.Type.Q4_0)
    tensors["blk.0.attn_v.weight"] = ctx.from_numpy(rng.standard_normal((32, 64)).astype(np.float32), gg.Type.BF16)
    for typ in (gg.Type.Q4_1, gg.Type.Q5_0, gg.Type.Q5_1, gg.Type.IQ4_NL, gg.Type.IQ4_XS):
        tensors[f"extra.{typ.name.lower()}"] = ctx.from_numpy(rng.standard_normal((4, 256)).astype(np.float32), typ)
    tensors["extra.i32"] = np.arange(6, dtype=np.int32).reshape(2, 3)
    md = llama_metadata()
    md.update({"general.name": "tiny", "x.flag": True, "x.neg": -3, "x.big": 2**40, "x.f": 0.5,
               "x.sections": [1, 2, 3, 0], "x.scores": [0.5, -1.0]})
    G.save(tmp_path / "a.gguf", tensors, md)
    f = G.load(tmp_path / "a.gguf")
    assert set(f.tensors) == set(tensors)
    for name, t in tensors.items():
        assert f.tensor(name).tobytes() == t.tobytes(), name
        want = t.type if isinstance(t, gg.Tensor) else {np.float32: gg.Type.F32, np.float16: gg.Type.F16,
                                                        np.int32: gg.Type.I32}[t.dtype.type]
        assert f.tensor(name).type == want
        assert f.tensor(name).shape == t.shape
    assert f.metadata == md
    V = gguf.GGUFValueType
    assert f.types["llama.block_count"] == V.UINT32 and f.types["x.neg"] == V.INT32
    assert f.types["x.big"] == V.UINT64 and f.types["x.f"] == V.FLOAT32
    assert f.types["x.sections"] == (V.ARRAY, V.INT32) and f.types["tokenizer.ggml.tokens"] == (V.ARRAY, V.STRING)
    G.save(tmp_path / "b.gguf", f.tensors, f.metadata, types=f.types)
    assert (tmp_path / "a.gguf").read_bytes() == (tmp_path / "b.gguf").read_bytes()
    r = gguf.GGUFReader(tmp_path / "a.gguf")                # the gguf package reads what we wrote
    assert {t.name: int(t.tensor_type) for t in r.tensors} == {n: int(t.type) for n, t in f.tensors.items()}


def test_save_errors_leave_no_file(tmp_path, ctx):
    with pytest.raises(ValueError, match="save: no architecture"):
        G.save(tmp_path / "x.gguf", {}, {})
    with pytest.raises(TypeError, match="save: tensor 'a' has dtype complex64"):
        G.save(tmp_path / "x.gguf", {"a": np.zeros(2, np.complex64)}, {}, arch="llama")
    with pytest.raises(TypeError, match="save: tensor 'a' must be a pyggml.Tensor or a numpy array, got list"):
        G.save(tmp_path / "x.gguf", {"a": [1.0]}, {}, arch="llama")
    x = ctx.new_tensor(gg.Type.F32, (4,))
    with pytest.raises(ValueError, match="save: tensor 'r' has no memory yet"):
        G.save(tmp_path / "x.gguf", {"r": gg.add(x, x)}, {}, arch="llama")
    with pytest.raises(TypeError, match="save: metadata 'k' has a value of type dict"):
        G.save(tmp_path / "x.gguf", {}, {"k": {}}, arch="llama")
    with pytest.raises(TypeError, match="save: metadata 'k' mixes element types"):
        G.save(tmp_path / "x.gguf", {}, {"k": [1, "a"]}, arch="llama")
    with pytest.raises(ValueError, match="save: metadata 'k' is an empty list"):
        G.save(tmp_path / "x.gguf", {}, {"k": []}, arch="llama")
    assert os.listdir(tmp_path) == []


# load errors

def test_not_gguf(tmp_path):
    (tmp_path / "x.bin").write_bytes(b"PK\x03\x04 not a model")
    with pytest.raises(G.GGUFError, match=r"x.bin: not a GGUF file \(it starts with b'PK\\x03\\x04'"):
        G.load(tmp_path / "x.bin")
    (tmp_path / "empty").write_bytes(b"")
    with pytest.raises(G.GGUFError, match="empty: not a GGUF file"):
        G.load(tmp_path / "empty")
    with pytest.raises(G.GGUFError, match="missing.gguf: cannot open: No such file"):
        G.load(tmp_path / "missing.gguf")


def test_missing_tensor_name(llama_file):
    with pytest.raises(KeyError, match="llama.gguf: no tensor 'nope'"):
        G.load(llama_file[0]).tensor("nope")


def test_unsupported_tensor_type(tmp_path):
    w = gguf.GGUFWriter(tmp_path / "k.gguf", "llama")
    w.add_tensor("blk.0.attn_q.weight", np.zeros((4, 66), np.uint8), raw_dtype=gguf.GGMLQuantizationType.IQ2_XXS)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    with pytest.raises(G.GGUFError, match=r"k.gguf: tensor 'blk.0.attn_q.weight' has type IQ2_XXS \(16\), which "
                                          r"pyggml does not support; supported types: F32, F16, Q4_0, .*Q8_0, "
                                          r".*Q4_K, Q5_K, Q6_K, Q8_K, .*BF16"):
        G.load(tmp_path / "k.gguf")
    write_raw_gguf(tmp_path / "u.gguf", [], [("w", (32,), 99, 0)], data=bytes(64))
    with pytest.raises(G.GGUFError, match=r"tensor 'w' has type 99 \(unknown to pyggml\)"):
        G.load(tmp_path / "u.gguf")


def test_broken_files(tmp_path, llama_file):
    path, _ = llama_file
    raw = path.read_bytes()
    (tmp_path / "cut.gguf").write_bytes(raw[:-100])
    with pytest.raises(G.GGUFError, match=r"cut.gguf: tensor '.*' \(\d+ bytes at byte \d+\) extends past the end"):
        G.load(tmp_path / "cut.gguf")
    (tmp_path / "head.gguf").write_bytes(raw[:200])
    with pytest.raises(G.GGUFError, match="head.gguf: the file ends inside its header"):
        G.load(tmp_path / "head.gguf")
    arch = ("general.architecture", 8, str_value("llama"))
    write_raw_gguf(tmp_path / "v.gguf", [arch], [], version=7)
    with pytest.raises(G.GGUFError, match="GGUF version 7 is not supported"):
        G.load(tmp_path / "v.gguf")
    write_raw_gguf(tmp_path / "be.gguf", [], [], endian=">")
    with pytest.raises(G.GGUFError, match="be.gguf: the file is big-endian"):
        G.load(tmp_path / "be.gguf")
    write_raw_gguf(tmp_path / "dup.gguf", [arch, arch], [])
    with pytest.raises(G.GGUFError, match="metadata key 'general.architecture' appears twice"):
        G.load(tmp_path / "dup.gguf")
    write_raw_gguf(tmp_path / "off.gguf", [], [("w", (4,), 0, 8)], data=bytes(64))
    with pytest.raises(G.GGUFError, match="tensor 'w' starts at data offset 8, which is not a multiple of "
                                          "general.alignment 32"):
        G.load(tmp_path / "off.gguf")
    write_raw_gguf(tmp_path / "dims.gguf", [], [("w", (1, 1, 1, 1, 4), 0, 0)], data=bytes(64))
    with pytest.raises(G.GGUFError, match="tensor 'w' has 5 dimensions"):
        G.load(tmp_path / "dims.gguf")
    write_raw_gguf(tmp_path / "q.gguf", [], [("w", (16,), 8, 0)], data=bytes(64))
    with pytest.raises(G.GGUFError, match="tensor 'w' of type Q8_0 has ne\\[0\\]=16, not a multiple of its block"):
        G.load(tmp_path / "q.gguf")
    write_raw_gguf(tmp_path / "nest.gguf", [("k", 9, struct.pack("<IQ", 9, 0))], [])
    with pytest.raises(G.GGUFError, match="metadata key 'k' is an array of value type 9"):
        G.load(tmp_path / "nest.gguf")
    write_raw_gguf(tmp_path / "utf.gguf", [("k", 8, struct.pack("<Q", 2) + b"\xff\xfe")], [])
    with pytest.raises(G.GGUFError, match="the value of 'k' at byte \\d+ is not UTF-8"):
        G.load(tmp_path / "utf.gguf")


def test_raw_writer_matches_the_gguf_package(tmp_path):
    """The hand-made files above are real GGUF: the gguf package reads one as we do."""
    data = np.arange(8, dtype=np.float32).tobytes()
    write_raw_gguf(tmp_path / "r.gguf", [("general.architecture", 8, str_value("llama")),
                                         ("n", 4, struct.pack("<I", 7))], [("w", (8,), 0, 0)], data=data)
    f = G.load(tmp_path / "r.gguf")
    r = gguf.GGUFReader(tmp_path / "r.gguf")
    assert r.fields["n"].contents() == f.metadata["n"] == 7
    np.testing.assert_array_equal(r.tensors[0].data, f.tensor("w").numpy())
