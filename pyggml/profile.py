"""Where a compute's time goes: CGraph.compute(profile=True) returns a Profile, and CGraph.to_dot()
draws the graph.

    p = g.compute(n_threads=2, profile=True)
    print(p.table())                 # per op type, top nodes, barrier wait per thread, efficiency
    p.save_json("profile.json")
    p.save_svg("profile.svg")        # a timeline: one lane per thread, one box per step
    p, g = profile_decode(model, prompt_ids)    # one decode step of a pyggml.models.Model

The executor (csrc/graph.h) records, for every step (a node, or a fused group of nodes run by one
kernel) and every thread, three clock reads in nanoseconds since the compute began: the start of
its work, its end, and the return from the barrier after it. From those:

    work     end - start of one thread
    wait     barrier return - end: the time a thread waited for the others
    span     the step's critical path: latest end - earliest start over the threads; the spans of
             the steps are disjoint (a barrier separates them), so they add up to at most the wall
    busy     a thread's work summed over the steps
    efficiency   sum of busy / (wall x threads)
"""
import functools
import json
from xml.sax.saxutils import escape

import numpy as np

from pyggml import _graph
from pyggml._enums import GluOp, Op, UnaryOp

__all__ = ["Profile", "graph_dot", "profile_decode"]

_SUB_OPS = {Op.UNARY: UnaryOp, Op.GLU: GluOp}


def _op(t):
    """The op's name; UNARY and GLU nodes by their function (SILU, SWIGLU), as ggml_op_desc."""
    kind = _SUB_OPS.get(t.op)
    code = int.from_bytes(t.op_params[:4], "little", signed=True)
    return kind(code).name if kind is not None and code in kind._value2member_map_ else t.op.name


def _label(t):
    return t.name or f"{_op(t).lower()}_{id(t) & 0xffff:04x}"


def _dq(s):
    """A DOT quoted string (line breaks as \\n)."""
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _shape(t):
    ne = list(t.ne)
    while len(ne) > 1 and ne[-1] == 1:
        ne.pop()
    return ne


class Profile:
    """The record of one profiled compute. steps: one dict per step in execution order (index, op,
    nodes, name, shape, type, fused, path, work_ns and wait_ns per thread, span_ns); wall_ns: the
    whole parallel region; n_threads."""

    def __init__(self, groups, times, wall_ns, paths=None):
        """groups: the Tensors of each step (a fused group: several, in graph order); times:
        uint64 array [n_steps, n_threads, 3] of (start, end, barrier return) in ns since the start;
        paths: {Tensor: attention path} of the flash_attn_ext nodes. The steps are described on
        first use, so a profiled compute costs the clock reads and little more."""
        self._times = np.asarray(times, dtype=np.int64)
        self._groups = groups
        self._paths = paths or {}
        self.n_threads = int(self._times.shape[1])
        self.wall_ns = int(wall_ns)

    @functools.cached_property
    def steps(self):
        """One dict per step, in execution order (module docstring; docs/profiling.md)."""
        steps = []
        for i, (g, tt) in enumerate(zip(self._groups, self._times)):
            last = g[-1]
            steps.append({
                "index": i,
                "op": "+".join(_op(t) for t in g),
                "nodes": [_label(t) for t in g],
                "name": last.name,
                "shape": _shape(last),
                "type": last.type.name,
                "fused": len(g) > 1,
                "path": self._paths.get(last),
                "start_ns": tt[:, 0].tolist(),
                "work_ns": (tt[:, 1] - tt[:, 0]).tolist(),
                "wait_ns": (tt[:, 2] - tt[:, 1]).tolist(),
                "span_ns": int(tt[:, 1].max() - tt[:, 0].min()),
            })
        return steps

    # ---- summaries ----

    def busy_ns(self):
        """Work per thread, summed over the steps."""
        return (self._times[:, :, 1] - self._times[:, :, 0]).sum(axis=0).tolist()

    def wait_ns(self):
        """Barrier wait per thread, summed over the steps."""
        return (self._times[:, :, 2] - self._times[:, :, 1]).sum(axis=0).tolist()

    @property
    def efficiency(self):
        """Parallel efficiency: busy / (wall x threads), in [0, 1]."""
        return sum(self.busy_ns()) / (self.wall_ns * self.n_threads) if self.wall_ns else 0.0

    def by_op(self):
        """Per op type (a fused group counts as its ops joined by '+'): rows of op, count, total_ns
        (sum of spans), share (of the wall) and mean_ns, the largest total first."""
        acc = {}
        for s in self.steps:
            c, t = acc.get(s["op"], (0, 0))
            acc[s["op"]] = (c + 1, t + s["span_ns"])
        rows = [{"op": op, "count": c, "total_ns": t, "share": t / self.wall_ns if self.wall_ns else 0.0,
                 "mean_ns": t / c} for op, (c, t) in acc.items()]
        return sorted(rows, key=lambda r: -r["total_ns"])

    def top(self, n=10):
        """The n steps with the longest span."""
        return sorted(self.steps, key=lambda s: -s["span_ns"])[:n]

    def to_dict(self):
        """Everything as plain JSON-ready data: totals, per op, per thread and every step."""
        return {"n_threads": self.n_threads, "wall_ns": self.wall_ns, "efficiency": self.efficiency,
                "busy_ns": self.busy_ns(), "wait_ns": self.wait_ns(), "by_op": self.by_op(), "steps": self.steps}

    def to_json(self, indent=1):
        return json.dumps(self.to_dict(), indent=indent)

    def save_json(self, path):
        with open(path, "w") as f:
            f.write(self.to_json())

    def table(self, top=10):
        """The summaries as text: per op type, the top nodes, barrier wait per thread, efficiency."""
        us = 1e-3
        lines = [(f"{len(self.steps)} steps on {self.n_threads} threads, wall {self.wall_ns * us:.1f} us, "
                 f"parallel efficiency {self.efficiency:.1%}"), "",
                 f"{'op':<28} {'count':>6} {'total us':>10} {'share':>7} {'mean us':>9}"]
        for r in self.by_op():
            lines.append(f"{r['op']:<28} {r['count']:>6} {r['total_ns'] * us:>10.1f} {r['share']:>7.1%} "
                         f"{r['mean_ns'] * us:>9.2f}")
        lines += ["", f"{'top steps':<40} {'op':<22} {'type':<6} {'shape':<20} {'us':>8}"]
        for s in self.top(top):
            what = s["op"] + (f" ({s['path']})" if s["path"] else "")
            lines.append(f"{'#' + str(s['index']) + ' ' + ','.join(s['nodes']):<40.40} {what:<22.22} "
                         f"{s['type']:<6} {s['shape']!s:<20.20} {s['span_ns'] * us:>8.1f}")
        lines += ["", f"{'thread':<8} {'busy us':>10} {'wait us':>10}"]
        for t, (b, w) in enumerate(zip(self.busy_ns(), self.wait_ns())):
            lines.append(f"{t:<8} {b * us:>10.1f} {w * us:>10.1f}")
        return "\n".join(lines)

    # ---- timeline ----

    def svg(self, width=1200, lane=28):
        """The timeline as SVG text: one lane per thread (a <g class="lane">), one box per step
        coloured by op (hover: the nodes and times), its barrier wait as a grey box after it."""
        ops = [r["op"] for r in self.by_op()]
        colour = {op: f"hsl({(i * 137) % 360},65%,58%)" for i, op in enumerate(ops)}
        left, top = 70, 24
        legend_rows = (len(ops) + 3) // 4
        height = top + self.n_threads * lane + 20 + legend_rows * 18 + 10
        scale = (width - left - 10) / max(self.wall_ns, 1)
        out = [(f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
               f'font-family="sans-serif" font-size="11">'),
               (f'<text x="{left}" y="15">{len(self.steps)} steps, {self.n_threads} threads, wall '
               f'{self.wall_ns / 1e3:.1f} us, efficiency {self.efficiency:.1%}</text>')]
        for t in range(self.n_threads):
            y = top + t * lane
            out.append(f'<g class="lane" data-thread="{t}">')
            out.append(f'<text x="4" y="{y + lane * 0.6:.1f}">thread {t}</text>')
            out.append(f'<rect x="{left}" y="{y}" width="{width - left - 10}" height="{lane - 4}" fill="#f4f4f4"/>')
            for s in self.steps:
                x0 = left + s["start_ns"][t] * scale
                w = s["work_ns"][t] * scale
                tip = (f'#{s["index"]} {s["op"]} {",".join(s["nodes"])} {s["type"]} {s["shape"]}: '
                       f'{s["work_ns"][t] / 1e3:.2f} us, wait {s["wait_ns"][t] / 1e3:.2f} us')
                out.append(f'<rect class="work" x="{x0:.2f}" y="{y}" width="{max(w, 0.3):.2f}" height="{lane - 4}" '
                           f'fill="{colour[s["op"]]}"><title>{escape(tip)}</title></rect>')
                if s["wait_ns"][t] > 0:
                    out.append(f'<rect class="wait" x="{x0 + w:.2f}" y="{y + (lane - 4) / 3:.1f}" '
                               f'width="{s["wait_ns"][t] * scale:.2f}" height="{(lane - 4) / 3:.1f}" fill="#888"/>')
            out.append("</g>")
        y = top + self.n_threads * lane + 14
        out.append(f'<rect x="{left}" y="{y - 9}" width="12" height="6" fill="#888"/>'
                   f'<text x="{left + 16}" y="{y}">barrier wait</text>')
        for i, op in enumerate(ops):
            x = left + 130 + (i % 4) * 250
            yy = y + (i // 4) * 18
            out.append(f'<rect x="{x}" y="{yy - 10}" width="12" height="12" fill="{colour[op]}"/>'
                       f'<text x="{x + 16}" y="{yy}">{escape(op)}</text>')
        out.append("</svg>")
        return "\n".join(out)

    def save_svg(self, path, **kw):
        with open(path, "w") as f:
            f.write(self.svg(**kw))

    def __repr__(self):
        return (f"Profile({len(self.steps)} steps, n_threads={self.n_threads}, wall_ns={self.wall_ns}, "
                f"efficiency={self.efficiency:.3f})")


def graph_dot(nodes, leafs, fused=()):
    """Graphviz DOT of a graph in the spirit of ggml's graph dump: a box per node (op, name, type,
    shape), leafs as ellipses, an edge from each source (labelled with its slot when the node has
    several), and each fused group outlined as a dashed cluster. CGraph.to_dot() calls this."""
    ids = {}
    out = ["digraph pyggml {", "  rankdir=TB;", '  node [fontname="monospace", fontsize=10];']

    def nid(t):
        if id(t) not in ids:
            ids[id(t)] = f"t{len(ids)}"
        return ids[id(t)]

    def label(t, what):
        return _dq(f"{what}\n{t.name}\n{t.type.name} {_shape(t)}" if t.name else
                         f"{what}\n{t.type.name} {_shape(t)}")

    for t in leafs:
        out.append(f'  {nid(t)} [shape=ellipse, style=filled, fillcolor="#fde2e2", label={label(t, "leaf")}];')
    grouped = {id(t) for g in fused for t in g}
    for k, g in enumerate(fused):
        out.append(f"  subgraph cluster_fused_{k} {{")
        out.append(f'    style=dashed; color="#1f6feb"; label={_dq("fused " + "+".join(_op(t) for t in g))};')
        for t in g:
            out.append(f"    {nid(t)} [shape=box, label={label(t, _op(t))}];")
        out.append("  }")
    for t in nodes:
        if id(t) not in grouped:
            style = ', style=dashed' if t.view_src is not None else ""
            out.append(f"  {nid(t)} [shape=box{style}, label={label(t, _op(t))}];")
    for t in nodes:
        srcs = [s for s in t.src if s is not None]
        for j, s in enumerate(t.src):
            if s is not None:
                tag = f' [label="{j}"]' if len(srcs) > 1 else ""
                out.append(f"  {nid(s)} -> {nid(t)}{tag};")
    out.append("}")
    return "\n".join(out) + "\n"


def profile_decode(model, prompt):
    """Profile one decode step of a pyggml.models.Model: the cache is reset, prompt (token ids) is
    evaluated, one greedy token decoded (which builds the step's graph and brings its weights in),
    and that step computed once more with profile=True: it reads the same inputs and writes the
    same cache cells with the same values. Returns (Profile, the step's CGraph)."""
    model.reset()
    logits = model.eval(prompt, logits="last")
    model.eval([int(np.argmax(logits[-1]))], logits="last")
    g = model.last_graph
    return g.compute(model.n_threads, profile=True), g


# CGraph.compute(profile=True) and CGraph.to_dot come from here; the executor imports nothing above it
_graph._install_views(Profile, graph_dot)
