"""cases_model.py: the random-case generators of the ops a model writer reaches for (issue 25):
elementwise math (autograd/ops/math.cpp), lerp, rms_norm, apply_rotary_emb, the mask ops
(autograd/ops/mask.cpp) and grouped-query attention. cases.py registers them into GENERATORS.
"""
import math

from cases import broadcast_partner, gen_binary, gen_logic, gen_unary

MATH_UNARY = ["sin", "cos", "exp2", "log1p", "expm1", "erf", "sign", "floor", "ceil", "round", "trunc"]
MATH_BINARY = ["fmod", "remainder", "atan2"]


def gen_lerp(g, op):
    s = g.shape()
    dt = g.dtype()
    start, end = g.tensor(s, dtype=dt), g.tensor(broadcast_partner(g, s), dtype=dt)
    if op == "lerp_s":
        g.step(op, [start, end], s=g.r.choice([0.0, 0.3, 0.5, 0.7, 1.0, -1.5, 2.0]))
    else:
        g.step(op, [start, end, g.tensor(broadcast_partner(g, s), dtype=dt)])
    return g.case()


def gen_rms_norm(g, op):
    s = g.shape(1, 3)
    norm = s[-g.r.randint(1, len(s)):]
    dt = g.dtype()
    args = [g.tensor(s, dtype=dt)]
    if g.r.random() < 0.6:
        args.append(g.tensor(norm, dtype=dt))
    g.step(op, args, shape=norm, eps=g.r.choice([None, 1e-5, 1e-3]))
    return g.case()


def gen_rotary(g, op):
    s = g.shape(1, 4)
    s[-1] = 2 * g.r.randint(0, 3) if g.r.random() < 0.95 else 3          # sometimes an odd HS: invalid
    dt = g.dtype()
    table = s[-2:] if len(s) >= 2 and g.r.random() < 0.5 else s           # (T,HS) or x's shape
    x, cos, sin = g.tensor(s, dtype=dt), g.tensor(table, dtype=dt), g.tensor(table, dtype=dt)
    g.step(op, [x, cos, sin], interleaved=g.r.random() < 0.4)
    return g.case()


def gen_mask(g, op):
    lo = 2 if op in ("tril", "triu") and g.r.random() < 0.9 else 1    # sometimes too few dims: invalid
    x = g.tensor(g.shape(lo, 3))
    nd = max(len(g.inputs[x]["shape"]), 1)
    if op in ("tril", "triu"):
        g.step(op, [x], diagonal=g.r.choice([-2, -1, 0, 1, 3]))
    elif op == "masked_fill":
        mask = g.tensor(broadcast_partner(g, g.inputs[x]["shape"]), dtype="bool")
        g.step(op, [x, mask], s=g.r.choice([0.0, -1e9, 2.5, -math.inf]))
    elif op == "repeat_interleave":
        g.step(op, [x], repeats=g.r.choice([0, 1, 2, 3]), dim=g.r.choice([None] + list(range(-nd, nd))))
    else:                                                                  # chunk
        g.step(op, [x], chunks=g.r.choice([1, 2, 3, 4, 0]), dim=g.r.randint(-nd, nd - 1))
    return g.case()


def gen_sdpa_gqa(g, op):
    """grouped-query attention: q (B,NH,T,E) against k, v (B,NKV,S,*), NH = group * NKV (sometimes not)"""
    dt = g.dtype()
    nkv, group = g.r.randint(1, 3), g.r.choice([1, 2, 4])
    nh = nkv * group if g.r.random() < 0.9 else nkv * group + 1
    b, t, s, e, ev = g.r.randint(1, 2), g.size(), max(1, g.size()), max(1, g.size()), g.size()
    q = g.tensor([b, nh, t, e], dtype=dt)
    args = [q, g.tensor([b, nkv, s, e], dtype=dt), g.tensor([b, nkv, s, ev], dtype=dt)]
    if g.r.random() < 0.25:
        args.append(g.tensor([t, s], dtype="bool"))
    g.step(op, args, is_causal=g.r.random() < 0.4 and len(args) == 3)
    return g.case()


def gen_reorder(g, op):
    """repeat, flip, roll, cumsum, slice, sort, argsort, topk; invalid arguments on purpose at times"""
    x = g.tensor(g.shape(0, 3), dtype=g.dtype() if op != "cumsum" or g.r.random() < 0.8 else "i64")
    shape = g.inputs[x]["shape"]
    nd = max(len(shape), 1)
    dim = g.r.randint(-nd, nd - 1) if g.r.random() < 0.95 else nd            # sometimes out of range
    if op == "repeat":
        reps = [g.r.choice([0, 1, 2, 3]) for _ in range(len(shape) + g.r.choice([0, 0, 1, 2]))]
        if reps and g.r.random() < 0.05:
            reps = reps[1:] if len(reps) > len(shape) else reps[:-1]           # too few: invalid
        g.step(op, [x], repeats=reps)
    elif op == "flip":
        dims = g.r.sample(range(-nd, nd), g.r.randint(0, nd))
        if dims and g.r.random() < 0.05:
            dims.append(dims[0])                                              # twice: invalid
        g.step(op, [x], dims=dims)
    elif op == "roll":
        if g.r.random() < 0.3:
            g.step(op, [x], shifts=[g.r.randint(-7, 7)], dims=[])
        else:
            dims = [g.r.randint(-nd, nd - 1) for _ in range(g.r.randint(1, 2))]
            g.step(op, [x], shifts=[g.r.randint(-7, 7) for _ in dims], dims=dims)
    elif op == "cumsum":
        g.step(op, [x], dim=dim)
    elif op == "slice":
        if not shape:
            dim = 0                                                           # a 0-d x: invalid
        pick = [None, -9, -2, -1, 0, 1, 2, 5, 9]
        g.step(op, [x], dim=dim, start=g.r.choice(pick), end=g.r.choice(pick),
               step=g.r.choice([1, 1, 2, 3]) if g.r.random() < 0.95 else 0)
    elif op == "topk":
        n = (shape[dim] if shape and -nd <= dim < nd else 1)
        g.step(op, [x], k=g.r.randint(0, n + (1 if g.r.random() < 0.05 else 0)), dim=dim,
               largest=g.r.random() < 0.6)
    else:                                                                     # sort, argsort
        g.step(op, [x], dim=dim, descending=g.r.random() < 0.5)
    return g.case()


def register_model_ops(generators):
    for op in MATH_UNARY:
        generators[op] = gen_unary
    for op in MATH_BINARY:
        generators[op] = gen_binary
    generators.update({"lerp": gen_lerp, "lerp_s": gen_lerp, "logical_xor": gen_logic, "rms_norm": gen_rms_norm,
                       "apply_rotary_emb": gen_rotary, "sdpa_gqa": gen_sdpa_gqa})
    for op in ("tril", "triu", "masked_fill", "repeat_interleave", "chunk"):
        generators[op] = gen_mask
    for op in ("repeat", "flip", "roll", "cumsum", "slice", "sort", "argsort", "topk"):
        generators[op] = gen_reorder
