"""The include graph of pyggml/csrc runs one way: no file includes itself through others, and no
file includes one of a higher layer (docs/design.md, "Layout"). Pure Python over the #include lines;
the checks are also run on small made-up graphs so that they are seen to fail."""
import fnmatch
import pathlib
import re

import pytest

CSRC = pathlib.Path(__file__).resolve().parents[2] / "pyggml" / "csrc"

# the layers from the bottom up, each a list of patterns (paths from csrc/); a file takes the first
# layer that matches it. A file may include files of its own layer or of lower ones only.
LAYERS = [
    ("core", ["core/*"]),                          # types and threads every file sees
    ("isa", ["arch/simd-mappings.h", "arch/x86/x86.h", "arch/x86/avx2.h", "arch/x86/avx512.h",
             "arch/arm/neon.h", "arch/riscv/rvv.h"]),  # the ISA vocabulary and its switch
    ("vec", ["vec/*"]),                            # row primitives
    ("formats", ["types/convert.h", "types/quants-*.h"]),  # blocks, to/from float, reference loops
    ("kernels", ["arch/*"]),                       # each ISA's kernels over rows and blocks
    ("dots", ["types/dot-*.h"]),                   # each type's dots: which ISA's kernel runs
    ("type table", ["types.h"]),
    ("ops", ["ops/*", "ops.h"]),                   # op families and the op table
    ("executor", ["graph.h"]),
]
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.MULTILINE)


def layer(path):
    for rank, (_, patterns) in enumerate(LAYERS):
        if any(fnmatch.fnmatch(path, p) for p in patterns):
            return rank
    raise AssertionError(f"{path} is in no layer of test_layout.LAYERS")


def include_graph(root=CSRC):
    """{file: [included files]}, paths relative to csrc/ (the one include directory)"""
    files = sorted(p for p in root.rglob("*") if p.suffix in (".h", ".c"))
    return {str(p.relative_to(root)): INCLUDE.findall(p.read_text()) for p in files}


def find_cycle(graph):
    """a list of files that include each other in a circle, or None"""
    state = {}

    def visit(f, stack):
        state[f] = 1
        stack.append(f)
        for g in graph.get(f, ()):
            if state.get(g) == 1:
                return stack[stack.index(g):] + [g]
            if g not in state:
                found = visit(g, stack)
                if found:
                    return found
        stack.pop()
        state[f] = 2
        return None

    for f in graph:
        if f not in state:
            found = visit(f, [])
            if found:
                return found
    return None


def upward(graph):
    """the (file, included) pairs that go up a layer"""
    return [(f, g) for f, incs in graph.items() for g in incs if layer(g) > layer(f)]


def test_every_include_exists():
    graph = include_graph()
    missing = [(f, g) for f, incs in graph.items() for g in incs if g not in graph]
    assert not missing, f"includes of files not in csrc/ (paths are from csrc/): {missing}"


def test_no_cycle():
    assert find_cycle(include_graph()) is None


def test_includes_run_down():
    graph = include_graph()
    for f in graph:
        layer(f)
    assert not upward(graph), "\n".join(f"{f} ({LAYERS[layer(f)][0]}) includes {g} ({LAYERS[layer(g)][0]})"
                                        for f, g in upward(graph))


@pytest.mark.parametrize("graph, cycle", [
    ({"a.h": ["b.h"], "b.h": ["c.h"], "c.h": []}, False),
    ({"a.h": ["b.h"], "b.h": ["c.h"], "c.h": ["a.h"]}, True),
    ({"a.h": ["a.h"]}, True),
])
def test_cycle_check_can_fail(graph, cycle):
    assert (find_cycle(graph) is not None) == cycle


def test_layer_check_can_fail():
    assert upward({"core/pyggml.h": ["vec/cvt.h"], "vec/cvt.h": []}) == [("core/pyggml.h", "vec/cvt.h")]
    assert upward({"ops/norm.h": ["types.h", "vec/norm.h"], "types.h": [], "vec/norm.h": []}) == []
    # a format that includes an ISA's kernel goes up (the kernels include the formats)
    assert upward({"types/quants-k.h": ["arch/x86/kquants-x86.h"]}) == [("types/quants-k.h", "arch/x86/kquants-x86.h")]
    with pytest.raises(AssertionError):
        layer("nowhere/x.h")
