"""GGUF files: load them memory-mapped, with tensors that point into the mapping, and save them.

    f = pyggml.gguf.load("model.gguf")     # GGUFFile
    f.arch, f.metadata["general.name"], f.metadata["llama.embedding_length"]
    w = f.tensor("blk.0.attn_q.weight")      # a pyggml.Tensor whose data is the file's mapping
    pyggml.gguf.save("copy.gguf", f.tensors, f.metadata, types=f.types)

load() needs numpy only: it maps the file copy-on-write and parses the header itself (struct over
the mapping; the gguf package's GGUFReader makes numpy views of every metadata element, which costs
seconds and hundreds of MB for a large vocabulary with its merges: docs/gguf.md). Weights are read
from the page cache and cost no anonymous memory (RssAnon); a write into a tensor changes the
process's copy, never the file. Tensors keep the mapping alive after close(). save() writes with
the gguf package's GGUFWriter (an optional dependency: pip install pyggml[gguf]).

This module knows the GGUF format only: what an architecture's keys and tensors mean is in
pyggml.models (pyggml.models.read_hparams(f) gives a file's typed, validated hyper-parameters).
"""
import mmap as _mmap
import os
import struct

import numpy as np

from pyggml._enums import Type
from pyggml._tables import blck_size, type_size
from pyggml._tensor import Context
from pyggml.progress import progress

__all__ = ["SUPPORTED_TYPES", "GGUFError", "GGUFFile", "load", "save"]

# tensor types pyggml can hold: every row of the C type table (csrc/types.h), which pyggml.Type is built
# from (adding a type there adds it here)
SUPPORTED_TYPES = frozenset(Type)

_MAGIC = b"GGUF"
# GGUF metadata value types: struct formats of the fixed-size ones, and the two others
_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
_STRING, _ARRAY = 8, 9


class GGUFError(ValueError):
    """A GGUF file that pyggml cannot use: the message names the file, the key or tensor, what was
    expected and what was found."""


def _gguf():
    try:
        import gguf
    except ImportError:
        raise ImportError("pyggml.gguf needs the gguf package: pip install gguf "
                          "(or pip install pyggml[gguf])") from None
    return gguf


def _type_names(types):
    return ", ".join(Type(t).name for t in sorted(types))


def _ggml_type_name(code):
    """'Q4_K (12)': the ggml name of a tensor type code, from the gguf package when it is installed."""
    try:
        import gguf
        return f"{gguf.GGMLQuantizationType(code).name} ({code})"
    except (ImportError, ValueError):
        return f"{code} (unknown to pyggml)"


def load(path, mmap=True):
    """Memory-map the GGUF file at `path`: its metadata and tensors (GGUFError for a file that breaks
    the format; what the keys mean is pyggml.models' concern). mmap=False reads the file into
    anonymous memory instead (GGUFFile)."""
    return GGUFFile(path, mmap)


class GGUFFile:
    """A memory-mapped GGUF file: `path`, `arch` (general.architecture, or None), `metadata` (raw key ->
    value), `types` (key -> its GGUF value type, (ARRAY, element type) for arrays), `tensors` (name -> pyggml.Tensor pointing into the mapping; ne in ggml order as
    stored). Also a context manager.

    mmap=False (llama.cpp's --no-mmap): the whole file is read into anonymous memory (transparent
    huge pages asked for where the OS has them) and the tensors point there. Loading then costs a
    read of the file and resident anonymous memory its size, and the weights no longer share the
    page cache; where the file's cached pages read slower than fresh memory (seen on a virtual
    machine, docs/gguf.md), decode runs faster."""

    def __init__(self, path, mmap=True):
        self.path = os.fspath(path)
        if not isinstance(mmap, bool):
            raise TypeError(f"pyggml.gguf.load: mmap must be True or False, got {type(mmap).__name__}")
        self.mapped = mmap
        try:
            with open(self.path, "rb") as fp:
                head = fp.read(4)
                if head != _MAGIC:
                    raise GGUFError(f"{self.path}: not a GGUF file (it starts with {head!r}, a GGUF file "
                                    f"with {_MAGIC!r})")
                self._map = _mmap.mmap(fp.fileno(), 0, access=_mmap.ACCESS_COPY) if mmap else _read_anon(fp)
                self._file_id = _file_id(os.fstat(fp.fileno()))
        except OSError as e:
            raise GGUFError(f"{self.path}: cannot open: {e.strerror}") from None
        try:
            infos, data_start = self._parse()
        except struct.error:
            raise GGUFError(f"{self.path}: the file ends inside its header (truncated?)") from None
        self.arch = self.metadata.get("general.architecture")
        self._ctx = Context(os.path.basename(self.path))
        self.tensors = {}
        for name, ne, code, offset in infos:
            self.tensors[name] = self._tensor(name, ne, code, data_start + offset)

    def _parse(self):
        """Read the metadata into self.metadata/self.types; return the tensor infos
        [(name, ne, type code, offset in the data section)] and where the data section starts."""
        m = self._map
        version, n_tensors, n_kv = struct.unpack_from("<IQQ", m, 4)
        if version & 0xFFFF == 0:
            raise GGUFError(f"{self.path}: the file is big-endian; pyggml reads little-endian GGUF files")
        if version not in (2, 3):
            raise GGUFError(f"{self.path}: GGUF version {version} is not supported; supported: 2, 3")
        pos = 24
        self.metadata, self.types = {}, {}
        for _ in range(n_kv):
            key, pos = self._string(pos, "a metadata key")
            if key in self.metadata:
                raise GGUFError(f"{self.path}: metadata key {key!r} appears twice")
            vtype, = struct.unpack_from("<I", m, pos)
            self.metadata[key], self.types[key], pos = self._value(key, vtype, pos + 4)
        infos, names = [], set()
        for _ in range(n_tensors):
            name, pos = self._string(pos, "a tensor name")
            n_dims, = struct.unpack_from("<I", m, pos)
            if not 1 <= n_dims <= 4:
                raise GGUFError(f"{self.path}: tensor {name!r} has {n_dims} dimensions; ggml tensors have 1 to 4")
            ne = struct.unpack_from(f"<{n_dims}Q", m, pos + 4)
            code, offset = struct.unpack_from("<IQ", m, pos + 4 + 8 * n_dims)
            pos += 16 + 8 * n_dims
            if name in names:
                raise GGUFError(f"{self.path}: tensor {name!r} appears twice")
            names.add(name)
            infos.append((name, ne, code, offset))
        align = self.metadata.get("general.alignment", 32)
        if not isinstance(align, int) or align <= 0 or align & (align - 1):
            raise GGUFError(f"{self.path}: general.alignment must be a power of two, got {align!r}")
        for name, _, _, offset in infos:
            if offset % align:
                raise GGUFError(f"{self.path}: tensor {name!r} starts at data offset {offset}, which is not a "
                                f"multiple of general.alignment {align}")
        return infos, (pos + align - 1) // align * align

    def _string(self, pos, what):
        n, = struct.unpack_from("<Q", self._map, pos)
        raw = self._map[pos + 8:pos + 8 + n]
        if len(raw) != n:
            raise struct.error("truncated")
        try:
            return raw.decode("utf-8"), pos + 8 + n
        except UnicodeDecodeError as e:
            raise GGUFError(f"{self.path}: {what} at byte {pos} is not UTF-8: {e}") from None

    def _value(self, key, vtype, pos):
        """(value, type, position after it) of the metadata value of GGUF type vtype at pos."""
        if vtype in _SCALARS:
            fmt = _SCALARS[vtype]
            value, = struct.unpack_from(fmt, self._map, pos)
            return value, vtype, pos + struct.calcsize(fmt)
        if vtype == _STRING:
            value, pos = self._string(pos, f"the value of {key!r}")
            return value, vtype, pos
        if vtype != _ARRAY:
            raise GGUFError(f"{self.path}: metadata key {key!r} has the unknown value type {vtype}")
        etype, n = struct.unpack_from("<IQ", self._map, pos)
        pos += 12
        if etype in _SCALARS:
            fmt = _SCALARS[etype]
            values = list(struct.unpack_from(f"<{n}{fmt[1]}", self._map, pos))
            return values, (vtype, etype), pos + n * struct.calcsize(fmt)
        if etype != _STRING:
            raise GGUFError(f"{self.path}: metadata key {key!r} is an array of value type {etype}; "
                            f"pyggml reads arrays of numbers, booleans and strings")
        values = []
        for _ in range(n):
            value, pos = self._string(pos, f"an element of {key!r}")
            values.append(value)
        return values, (vtype, etype), pos

    def _tensor(self, name, ne, code, offset):
        if code not in SUPPORTED_TYPES:
            raise GGUFError(f"{self.path}: tensor {name!r} has type {_ggml_type_name(code)}, which pyggml does "
                            f"not support; supported types: {_type_names(SUPPORTED_TYPES)}")
        typ = Type(code)
        blck, size = blck_size(typ), type_size(typ)
        if ne[0] % blck:
            raise GGUFError(f"{self.path}: tensor {name!r} of type {typ.name} has ne[0]={ne[0]}, not a multiple "
                            f"of its block size {blck}")
        nbytes = int(np.prod(ne, dtype=np.uint64)) // blck * size
        if offset + nbytes > len(self._map):
            raise GGUFError(f"{self.path}: tensor {name!r} ({nbytes} bytes at byte {offset}) extends past the "
                            f"end of the file ({len(self._map)} bytes; truncated?)")
        t = self._ctx.from_buffer(typ, ne, self._map, offset)
        t.name = name
        return t

    def tensor(self, name):
        """The tensor `name`; KeyError naming the file and the tensor if the file has none."""
        try:
            return self.tensors[name]
        except KeyError:
            raise KeyError(f"{self.path}: no tensor {name!r} ({len(self.tensors)} tensors in the file)") from None

    def tokenizer(self):
        """A pyggml.tokenizer.Tokenizer for this file's vocabulary, or None without the tokenizers library."""
        from pyggml.tokenizer import from_gguf
        return from_gguf(self)

    @property
    def nbytes(self):
        """Bytes of tensor data in the file."""
        return sum(t.nbytes for t in self.tensors.values())

    def release(self, tensors):
        """Let the OS drop the pages wholly inside these tensors' bytes (ones whose reader has
        another copy: Tensor.repack), so that resident memory does not count them twice; a later
        read of them maps them in again from the file. Their contents must not have been written.
        A file read into memory (mmap=False) maps those pages of the file back over its copy
        (where the OS allows it: Linux and other POSIX systems; elsewhere nothing is dropped)."""
        if self._map is None or not hasattr(_mmap, "MADV_DONTNEED"):
            return
        view = np.frombuffer(self._map, dtype=np.uint8)
        base, page = view.ctypes.data, _mmap.PAGESIZE
        del view
        ranges = []
        for t in tensors:
            start = t.data_ptr - base
            lo, hi = -(-start // page) * page, (start + t.nbytes) // page * page
            if 0 <= start and hi > lo:
                ranges.append((lo, hi))
        if self.mapped:
            for lo, hi in ranges:
                self._map.madvise(_mmap.MADV_DONTNEED, lo, hi - lo)
        elif ranges:
            _map_file_over(self.path, self._file_id, base, ranges)

    def close(self):
        """Drop this object's references to the mapping; tensors taken from it keep it alive."""
        self.tensors = {}
        self._map = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        return f"<GGUFFile {self.path!r} {self.arch} {len(self.tensors)} tensors>"


# numpy dtype of an array given to save() -> tensor type
_FROM_DTYPE = {np.dtype(np.float32): Type.F32, np.dtype(np.float16): Type.F16, np.dtype(np.float64): Type.F64,
               np.dtype(np.int8): Type.I8, np.dtype(np.int16): Type.I16, np.dtype(np.int32): Type.I32,
               np.dtype(np.int64): Type.I64}


def _file_id(st):
    """What identifies a file's contents for _map_file_over: device, inode, size, modification time."""
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns


def _read_anon(fp):
    """The whole of the open file fp read into a private anonymous mapping (GGUFFile(mmap=False))."""
    size = os.fstat(fp.fileno()).st_size
    m = _mmap.mmap(-1, max(size, 1), flags=_mmap.MAP_PRIVATE) if hasattr(_mmap, "MAP_PRIVATE") else _mmap.mmap(-1, max(size, 1))
    if hasattr(_mmap, "MADV_HUGEPAGE"):
        m.madvise(_mmap.MADV_HUGEPAGE)
    fp.seek(0)
    view, done, chunk = memoryview(m), 0, 64 << 20
    with progress(total=size >> 20, desc=f"reading {os.path.basename(fp.name)}", unit="MiB",
                  enable=None if size >= 1 << 30 else False) as bar:
        while done < size:
            n = fp.readinto(view[done:done + chunk])
            if not n:
                raise GGUFError(f"{fp.name}: the file ended at byte {done} while being read ({size} bytes expected)")
            done += n
            bar.update(n >> 20)
    view.release()
    return m


def _map_file_over(path, file_id, base, ranges):
    """Map the file's pages [lo, hi) (page-aligned byte ranges, each the same offset in the file as
    in the copy at `base`) copy-on-write over the copy's, which the OS then frees; nothing where
    libc's mmap cannot be called, or when the file at path is no longer the one read (file_id)."""
    import ctypes
    import ctypes.util
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        fixed = 0x10 if os.uname().sysname in ("Linux", "Darwin", "FreeBSD") else None
    except (OSError, AttributeError):
        return
    if fixed is None:
        return
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    prot = _mmap.PROT_READ | _mmap.PROT_WRITE
    with open(path, "rb") as fp:
        if _file_id(os.fstat(fp.fileno())) != file_id:
            return
        for lo, hi in ranges:
            got = libc.mmap(base + lo, hi - lo, prot, _mmap.MAP_PRIVATE | fixed, fp.fileno(), lo)
            if got != base + lo:
                return


def _tensor_entry(name, t):
    """(type, numpy-order shape, a function returning the raw bytes as a uint8 array)."""
    if isinstance(t, np.ndarray):
        if t.dtype not in _FROM_DTYPE:
            raise TypeError(f"save: tensor {name!r} has dtype {t.dtype}; arrays may be "
                            f"{', '.join(str(d) for d in _FROM_DTYPE)} (or pass a pyggml.Tensor)")
        shape = t.shape if t.ndim else (1,)
        return _FROM_DTYPE[t.dtype], shape, lambda: np.ascontiguousarray(t).reshape(-1).view(np.uint8)
    if not hasattr(t, "tobytes") or not hasattr(t, "ne"):
        raise TypeError(f"save: tensor {name!r} must be a pyggml.Tensor or a numpy array, got {type(t).__name__}")
    if not t.has_data:
        raise ValueError(f"save: tensor {name!r} has no memory yet; compute a graph that contains it")
    return t.type, t.shape, lambda: np.frombuffer(t.tobytes(), np.uint8)


def _value_type(gguf, key, value):
    """The GGUF type a metadata value is written with (llama.cpp's: UINT32 ints, FLOAT32 floats,
    INT32 elements in integer arrays) as (type, element type or None)."""
    V = gguf.GGUFValueType

    def scalar(x, in_array):
        if isinstance(x, bool):
            return V.BOOL
        if isinstance(x, (int, np.integer)):
            if in_array:
                return V.INT32 if -2**31 <= x < 2**31 else V.INT64
            return V.UINT32 if 0 <= x < 2**32 else V.UINT64 if x >= 0 else V.INT32 if x >= -2**31 else V.INT64
        if isinstance(x, (float, np.floating)):
            return V.FLOAT32
        if isinstance(x, (str, bytes)):
            return V.STRING
        raise TypeError(f"save: metadata {key!r} has a value of type {type(x).__name__}; values may be "
                        f"str, int, float, bool or a list of one of those")

    if isinstance(value, (list, tuple)):
        if not value:
            raise ValueError(f"save: metadata {key!r} is an empty list; GGUF arrays need an element type")
        types = {scalar(x, True) for x in value}
        if types == {V.INT32, V.INT64}:
            types = {V.INT64}
        if len(types) != 1:
            raise TypeError(f"save: metadata {key!r} mixes element types {sorted(t.name for t in types)}")
        return V.ARRAY, types.pop()
    return scalar(value, False), None


def save(path, tensors, metadata, arch=None, types=None):
    """Write a GGUF file with the gguf package's writer.

    tensors: dict name -> pyggml.Tensor (written as stored: its type and raw bytes) or numpy array
    (float32/float16/float64/int8-64, as F32/F16/...). metadata: dict key -> str, int, float, bool or
    a list of one of those; ints are written as UINT32 (INT32 inside arrays), floats as FLOAT32, as
    llama.cpp's converter writes its keys, unless `types` (key -> gguf.GGUFValueType, or a tuple
    (ARRAY, element type), as GGUFFile.types gives) says otherwise. arch: general.architecture
    (default: metadata's). The file is written to a temporary name and renamed, so a failed save
    leaves no partial file. A round trip (load then save) keeps every tensor's bytes."""
    gguf = _gguf()
    arch = arch or metadata.get("general.architecture")
    if not arch:
        raise ValueError("save: no architecture: pass arch= or metadata['general.architecture']")
    entries = [(name, *_tensor_entry(name, t)) for name, t in tensors.items()]
    kv = []
    for key, value in metadata.items():
        if key == "general.architecture":
            continue
        vt = (types or {}).get(key)
        vt = _value_type(gguf, key, value) if vt is None else vt
        kv.append((key, value, *(vt if isinstance(vt, tuple) else (vt, None))))

    def add_metadata(w):
        for key, value, vt, sub in kv:
            if key == "general.alignment":
                w.data_alignment = int(value)
            if vt == gguf.GGUFValueType.ARRAY:
                w.add_key_value(key, list(value), gguf.GGUFValueType(vt), sub_type=gguf.GGUFValueType(sub))
            else:
                w.add_key_value(key, value, gguf.GGUFValueType(vt))

    _write(path, arch, add_metadata, entries)


def _write(path, arch, add_metadata, tensors):
    """Write a GGUF file: add_metadata(writer) adds the key/values (after the tensor infos, so it can
    count parameters); tensors is a list of (name, Type, numpy-order shape, function returning the
    stored data as an array). Written to path + '.partial' and renamed, so a failure leaves no file;
    one tensor's data is in memory at a time."""
    gguf = _gguf()
    for name, typ, shape, _ in tensors:
        blck, size = blck_size(typ), type_size(typ)
        if shape[-1] % blck:
            raise ValueError(f"save: tensor {name!r}: ne[0]={shape[-1]} of a {typ.name} tensor is not a "
                             f"multiple of {blck}")
    path = os.fspath(path)
    tmp = path + ".partial"
    w = gguf.GGUFWriter(tmp, arch)
    try:
        for name, typ, shape, _ in tensors:
            blck, size = blck_size(typ), type_size(typ)
            w.add_tensor_info(name, (*shape[:-1], shape[-1] // blck * size), np.dtype(np.uint8),
                              int(np.prod(shape)) // blck * size, raw_dtype=gguf.GGMLQuantizationType(int(typ)))
        add_metadata(w)
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_ti_data_to_file()
        for _, _, _, data in tensors:
            w.write_tensor_data(data())
        w.close()
        os.replace(tmp, path)
    finally:
        w.close()
        if os.path.exists(tmp):
            os.remove(tmp)
