"""The x86-64 kernel levels of a dispatch build, and the choice among them at import.

A dispatch build (meson -Dsimd=dispatch, the default on x86-64) compiles the five extension modules
once per level, each level with its own -march (meson.build), and installs them in this folder as
<module>_<level><EXT_SUFFIX>, e.g. _tensor_avx2.cpython-311-x86_64-linux-gnu.so:

  scalar   -march=x86-64                        any x86-64 CPU: the scalar kernels
  avx2     -march=x86-64-v3                     AVX2, FMA, F16C, BMI1/2, LZCNT, MOVBE
  avx512   -march=x86-64-v4 -mavx512vnni -mgfni -mavx512vbmi
                                                AVX-512 F/BW/CD/DQ/VL with VNNI, GFNI and VBMI

pyggml/__init__.py calls install() before anything imports a compiled module. It picks the best
level this CPU runs, or the one PYGGML_ISA names, and puts a finder first on sys.meta_path that
answers `import pyggml._tensor` (and the other four) with that level's file. The modules then import
and cimport each other by their own names, as in a build with one level; the files' PyInit_<module>
symbols follow those names, not the file names. A build with one level (-Dsimd=native or none, or
any other architecture) has its modules in pyggml/ itself, and this module leaves it alone.
"""
import importlib.machinery
import importlib.util
import os
import sys

LEVELS = ("scalar", "avx2", "avx512")
MODULES = ("_tables", "_tensor", "_ops", "_graph", "_vec")

# /proc/cpuinfo's flags that each level's -march lets the compiler use (x86-64-v2's and v3's for avx2,
# v4's and the kernels' VNNI, GFNI and VBMI besides for avx512). Linux lists AVX and AVX-512 flags only
# where it also enables their register state (XCR0), so a listed flag is one a process may use.
_V3 = {"cx16", "lahf_lm", "popcnt", "pni", "ssse3", "sse4_1", "sse4_2",
       "avx", "avx2", "bmi1", "bmi2", "f16c", "fma", "abm", "movbe", "xsave"}
NEEDS = {
    "scalar": frozenset(),
    "avx2": frozenset(_V3),
    "avx512": frozenset(_V3 | {"avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl", "avx512_vnni", "gfni",
                        "avx512vbmi"}),
}

BUILT = ()  # the levels this build holds (empty in a build with one level)


def cpu_flags(path="/proc/cpuinfo"):
    """The first CPU's flags from /proc/cpuinfo; an empty set where it cannot be read."""
    try:
        with open(path) as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() == "flags":
                    return frozenset(value.split())
    except OSError:
        pass
    return frozenset()


def cpu_levels(flags=None):
    """The levels a CPU with these flags (default: this one's) runs, lowest first."""
    flags = cpu_flags() if flags is None else flags
    return tuple(lv for lv in LEVELS if NEEDS[lv] <= flags)


def choose(built, flags, forced=None):
    """The level to load: `forced` (PYGGML_ISA's value) if this build holds it and the CPU runs it,
    else the best of `built` that the CPU runs. ImportError (one line) names what is wrong."""
    if forced:
        if forced not in LEVELS:
            raise ImportError(f"pyggml: PYGGML_ISA={forced!r} is not a kernel level; expected one of {', '.join(LEVELS)}")
        if forced not in built:
            raise ImportError(f"pyggml: PYGGML_ISA={forced}: this build holds the levels {', '.join(built)}")
        missing = NEEDS[forced] - flags
        if missing and not flags:
            raise ImportError(f"pyggml: PYGGML_ISA={forced}: this CPU's flags cannot be read (/proc/cpuinfo)")
        if missing:
            raise ImportError(f"pyggml: PYGGML_ISA={forced}: this CPU lacks {', '.join(sorted(missing))}")
        return forced
    runs = [lv for lv in built if lv in cpu_levels(flags)]
    if not runs:
        raise ImportError(f"pyggml: this CPU runs none of this build's levels ({', '.join(built)})")
    return runs[-1]


class _LevelFinder:
    """Finds pyggml._tensor and the other compiled modules in the chosen level's files."""

    def __init__(self, files):
        self.files = files

    def find_spec(self, name, path=None, target=None):
        file = self.files.get(name)
        if file is None:
            return None
        return importlib.util.spec_from_file_location(name, file, loader=importlib.machinery.ExtensionFileLoader(name, file))


def _level_files(level):
    """{"pyggml._tensor": path, ...} for a level whose five modules are all installed, else None."""
    files = {}
    for mod in MODULES:
        spec = importlib.util.find_spec(f"{__name__}.{mod}_{level}")
        if spec is None or spec.origin is None:
            return None
        files[f"pyggml.{mod}"] = spec.origin
    return files


def install():
    """Choose and install the level of a dispatch build (see the module docstring). Returns the
    level, or None for a build with one level, where PYGGML_ISA is an error (it could not apply)."""
    global BUILT
    forced = os.environ.get("PYGGML_ISA", "")
    if importlib.util.find_spec("pyggml._tensor") is not None:
        if forced:
            raise ImportError(f"pyggml: PYGGML_ISA={forced}: this build has one kernel level (meson -Dsimd=native "
                              "or none, or not x86-64); PYGGML_ISA chooses among a -Dsimd=dispatch build's levels")
        return None
    files = {lv: f for lv in LEVELS if (f := _level_files(lv)) is not None}
    BUILT = tuple(files)
    if not files:
        return None
    level = choose(BUILT, cpu_flags(), forced)
    sys.meta_path.insert(0, _LevelFinder(files[level]))
    return level


def build_info():
    """pyggml._graph.build_info() plus simd_levels: the levels this build holds (in a build with one
    level, just the one that runs)."""
    from pyggml._graph import build_info
    info = build_info()
    info["simd_levels"] = list(BUILT) or [info["simd"]]
    return info
