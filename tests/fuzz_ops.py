"""Random op graphs over every type, odd and zero shapes, permutes and views: each case must build
or raise ValueError/TypeError, and every built graph must compute (IndexError allowed for bad
indices). A crash kills the process, so tests/test_fuzz.py runs this in a child process and the last
seed printed on stderr names the case.

    python tests/fuzz_ops.py FIRST_SEED COUNT
"""
import random
import sys

import numpy as np

import pyggml as gg

TYPES = [gg.Type.F32, gg.Type.F16, gg.Type.BF16, gg.Type.Q8_0, gg.Type.Q4_0, gg.Type.I32, gg.Type.I64]


def random_tensor(ctx, r):
    typ = r.choice(TYPES)
    ne = [r.choice([0, 1, 2, 3, 5, 32, 33, 64]) for _ in range(r.randint(1, 4))]
    if typ in (gg.Type.Q8_0, gg.Type.Q4_0):
        ne[0] = r.choice([0, 32, 64])
    x = ctx.new_tensor(typ, ne)
    if typ in (gg.Type.I32, gg.Type.I64):
        x.numpy()[...] = np.random.randint(-3, 70, size=x.shape)
    elif x.nelements:
        x.set(np.random.randn(*x.shape) * r.choice([1, 1e-3, 1e4]))
    if r.random() < 0.3:
        x = gg.permute(x, *r.sample(range(4), 4))
    if r.random() < 0.2 and x.ne[0] >= 2 and typ not in (gg.Type.Q8_0, gg.Type.Q4_0):
        x = gg.view_2d(x, x.ne[0] // 2, 1, x.nb[1], 0)
    return x


OPS = [
    lambda a, b, c, r: gg.add(a, b),
    lambda a, b, c, r: gg.mul(a, b),
    lambda a, b, c, r: gg.scale(a, 0.5),
    lambda a, b, c, r: gg.cpy(a, b),
    lambda a, b, c, r: gg.cont(a),
    lambda a, b, c, r: gg.get_rows(a, b),
    lambda a, b, c, r: gg.set_rows(a, b, c),
    lambda a, b, c, r: gg.soft_max_ext(a, b, 0.3, r.choice([0.0, 1.0])),
    lambda a, b, c, r: gg.swiglu_split(a, b),
    lambda a, b, c, r: gg.silu(a),
    lambda a, b, c, r: gg.glu(a, r.choice([0, 1, 2, 3, 4, 5, 9]), r.random() < 0.5),
    lambda a, b, c, r: gg.mul_mat(a, b),
    lambda a, b, c, r: gg.rms_norm(a, 1e-6),
    lambda a, b, c, r: gg.norm(a, 1e-5),
    lambda a, b, c, r: gg.rope_ext(a, b, c, r.choice([0, 2, 3, 4, 32, 64]), r.choice([0, 1, 2, 8, 24, 40]),
                                   0, 10000.0, 1.0, r.choice([0.0, 1.0]), 1.0, 32.0, 1.0),
    lambda a, b, c, r: gg.rope_multi(a, b, c, r.choice([2, 4, 32]), [r.randint(0, 8) for _ in range(4)],
                                     r.choice([8, 24, 40]), 0, 10000.0, 1.0, 0.0, 1.0, 32.0, 1.0),
    lambda a, b, c, r: gg.flash_attn_ext(a, b, c, None, 0.1),
    lambda a, b, c, r: gg.reshape(a, (r.randint(1, 5), r.randint(0, 4))),
    lambda a, b, c, r: gg.view_1d(a, r.randint(0, 100), r.randint(0, 64)),
]


def main(first, count):
    built = 0
    for seed in range(first, first + count):
        print(seed, file=sys.stderr, flush=True)
        r = random.Random(seed)
        np.random.seed(seed)
        ctx = gg.Context()
        try:
            out = r.choice(OPS)(*(random_tensor(ctx, r) for _ in range(3)), r)
        except (ValueError, TypeError):
            continue
        built += 1
        g = gg.CGraph()
        g.build_forward_expand(out)
        try:
            g.compute(r.choice([1, 2, 3]))
        except IndexError:
            continue
        if out.type not in (gg.Type.Q8_0, gg.Type.Q4_0) or out.ne[0] % 32 == 0:
            out.to_numpy()
    print(f"built {built} of {count}")


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]))
