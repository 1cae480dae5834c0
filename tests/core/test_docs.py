"""The docs cite code that exists: every name in backticks in docs/*.md, docs/bench/*.md (not the
journal, which is history) and README.md that looks like a pyggml API or a file of this repository
(`pyggml.models.load`, `Model.generate`, `csrc/graph.h`, `pg_compute_rms_norm`) is an importable
attribute, a file, or, for an attribute Python cannot reach (an instance or cdef attribute), a word of
the sources under pyggml/. A rename that leaves a doc behind fails here."""
import importlib
import re
from pathlib import Path

import pytest

import pyggml

ROOT = Path(__file__).resolve().parents[2]
DOCS = sorted(p for p in (ROOT / "docs").rglob("*.md") if p.name != "journal.md") + [ROOT / "README.md"]

FENCE = re.compile(r"```.*?```", re.DOTALL)
TICK = re.compile(r"`([^`\n]+)`")
EXT = r"(h|c|py|pyx|pxd|pyi|md|build|options|toml|sh|ini|txt|yml|json)"
PATH = re.compile(rf"^\.?[\w./+-]*\w\.{EXT}(::\w+)?$|^(csrc|pyggml|tests|benchmarks|docs|tools|cross|\.ci)/[\w./-]*$")
PYNAME = re.compile(r"^(pyggml|gg)(\.\w+)+(\(.*\))?$|^[A-Z]\w*(\.\w+)+(\(.*\))?$")
CNAME = re.compile(r"^(pg|PG)_\w+(\(.*\))?$")

# where a relative path may be rooted: these folders and those of csrc/ and tests/
BASES = ("", "pyggml", "pyggml/csrc", "docs", "docs/bench", "tests", "benchmarks", "cross") + tuple(
    p.relative_to(ROOT).as_posix() for d in ("pyggml/csrc", "tests") for p in sorted((ROOT / d).rglob("*"))
    if p.is_dir() and p.name != "__pycache__")

# cited on purpose though not in this repository, and why
NOT_OURS = {
    # other projects' files, read for ideas (design.md's examples) or used as tools
    "src/ggml-cpu/simd-mappings.h", "include/ggml.h", "tests/test-backend-ops.cpp", "sklearn/utils/_openmp_helpers.pxd",
    "scipy/meson.build", "pywt/_extensions/meson.build", ".github/workflows/linux_qemu.yml",
    "_core/tests/test_simd.py", "tinygrad/uop/__init__.py", "test/test_tiny.py", "convert_hf_to_gguf.py",
    "riscv_vector.h",
    # the files of a Hugging Face model folder, and a file the profiling example writes
    "config.json", "preprocessor_config.json", "processor_config.json", "tokenizer.json", "profile.json",
}

MODULES = ["pyggml", "pyggml.models", "pyggml.models.model", "pyggml.models.arch", "pyggml.models.graph",
           "pyggml.models.vision", "pyggml.models.sampling", "pyggml.gguf", "pyggml.kvcache", "pyggml.profile",
           "pyggml.tokenizer", "pyggml.convert", "pyggml.distributed", "pyggml.progress", "pyggml.demo",
           "pyggml._graph", "pyggml._tensor", "pyggml._vec"]


def cited():
    """(doc, kind, name) of every backticked name outside fenced blocks that looks like ours."""
    out = []
    for doc in DOCS:
        for tok in TICK.findall(FENCE.sub("", doc.read_text())):
            tok = tok.strip()
            kind = "path" if PATH.match(tok) else "c" if CNAME.match(tok) else "py" if PYNAME.match(tok) else None
            if kind and tok not in NOT_OURS:
                out.append((doc.relative_to(ROOT).as_posix(), kind, tok))
    return out


@pytest.fixture(scope="module")
def source_words():
    text = "\n".join(p.read_text(errors="replace") for p in (ROOT / "pyggml").rglob("*")
                     if p.suffix in (".py", ".pyx", ".pxd", ".pyi", ".h", ".c"))
    return set(re.findall(r"\w+", text))


def _modules():
    mods = []
    for name in MODULES:
        try:
            mods.append(importlib.import_module(name))
        except ImportError:           # an optional dependency missing: its names fall back to the grep
            pass
    return mods


def _resolves(parts, mods):
    if parts[0] in ("pyggml", "gg"):
        obj, rest = pyggml, parts[1:]
        for p in rest:
            if hasattr(obj, p):
                obj = getattr(obj, p)
                continue
            try:
                obj = importlib.import_module(f"{obj.__name__}.{p}")
            except (ImportError, AttributeError):
                return False
        return True
    for m in mods:
        obj = getattr(m, parts[0], None)
        if obj is None:
            continue
        for p in parts[1:]:
            obj = getattr(obj, p, None)
            if obj is None:
                break
        else:
            return True
    return False


def test_docs_cite_names_that_exist(source_words):
    names = cited()
    assert len(names) > 100, "the pattern no longer finds the docs' code names"
    mods = _modules()
    missing = []
    for doc, kind, tok in names:
        if kind == "path":
            path = tok.split("::")[0]
            ok = any((ROOT / base / path).exists() for base in BASES)
            if ok and "::" in tok:          # a pytest id: the test function exists in that file
                ok = f"def {tok.split('::')[1]}(" in next(ROOT / b / path for b in BASES
                                                          if (ROOT / b / path).exists()).read_text()
        else:
            name = tok.split("(")[0]
            parts = name.split(".")
            ok = (kind == "py" and _resolves(parts, mods)) or parts[-1] in source_words
        if not ok:
            missing.append(f"{doc}: `{tok}`")
    assert not missing, "the docs cite names that do not exist:\n" + "\n".join(missing)
