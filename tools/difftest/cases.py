"""cases.py: one random-case generator per op of autograd/ops/ops.hpp (GENERATORS), plus random
in-place programs through views. Each takes a gen.Gen and returns a case dict.
"""
import math

from gen import Gen

UNARY = ["neg", "exp", "log", "sqrt", "rsqrt", "abs", "square", "reciprocal", "tanh", "sigmoid", "relu", "gelu",
         "gelu_tanh", "silu", "isfinite"]
BINARY = ["add", "sub", "mul", "div", "maximum", "minimum", "pow", "eq", "ne", "lt", "le", "gt", "ge"]
SCALAR = ["add_s", "mul_s", "div_s", "rdiv_s", "rsub_s", "pow_s", "rpow_s"]


def broadcast_partner(g, shape):
    """a shape broadcastable with `shape` (sometimes not: an invalid case)"""
    r = g.r.random()
    if r < 0.4:
        return list(shape)
    if r < 0.6:
        return [1 if g.r.random() < 0.5 else s for s in shape]
    if r < 0.8:
        return list(shape[g.r.randint(0, len(shape)):])
    if r < 0.95:
        return []
    return [s + 1 for s in shape] or [2]


def gen_unary(g, op):
    kind = "positive" if op in ("log", "sqrt", "rsqrt") and g.r.random() < 0.7 else "normal"
    x = g.tensor(g.shape(), kind=kind)
    g.step(op, [x])
    return g.case()


def gen_clamp(g, op):
    x = g.tensor(g.shape())
    lo = g.r.choice([None, -0.5, 0.0, -math.inf])
    hi = g.r.choice([None, 0.5, 1.0]) if lo is not None else g.r.choice([0.5, 1.0, None])
    g.step(op, [x], lo=lo, hi=hi)
    return g.case()


def gen_binary(g, op):
    s = g.shape()
    a = g.tensor(s, kind="positive" if op == "pow" and g.r.random() < 0.6 else "normal")
    dt = g.inputs[a]["dtype"] if g.r.random() < 0.75 else None        # sometimes mixed dtypes
    b = g.tensor(broadcast_partner(g, s), dtype=dt)
    kw = {"alpha": g.r.choice([1.0, 2.0, -0.5])} if op in ("add", "sub") else {}
    g.step(op, [b, a] if g.r.random() < 0.2 else [a, b], **kw)
    return g.case()


def gen_scalar(g, op):
    x = g.tensor(g.shape(), kind="positive" if op == "pow_s" and g.r.random() < 0.5 else "normal")
    s = g.r.choice([2.0, -1.5, 0.5, 3.0, 0.0, 1e-3, 1.0 / 3.0] + ([1e5] if op != "rpow_s" else []))
    if op == "rpow_s":
        s = abs(s) or 2.0
    g.step(op, [x], s=s)
    return g.case()


def gen_where(g, op):
    s = g.shape()
    c = g.tensor(broadcast_partner(g, s), dtype="bool")
    a = g.tensor(s)
    if op == "where_s":
        g.step(op, [c, a], s=g.r.choice([0.0, -1.0, math.inf]))
    else:
        b = g.tensor(broadcast_partner(g, s), dtype=g.inputs[a]["dtype"])
        g.step(op, [c, a, b])
    return g.case()


def gen_logic(g, op):
    s = g.shape()
    a = g.tensor(s, dtype="bool")
    if op == "logical_not":
        g.step(op, [a])
    else:
        g.step(op, [a, g.tensor(broadcast_partner(g, s), dtype="bool")])
    return g.case()


def gen_reduce_dims(g, op):
    s = g.shape(0, 3)
    x = g.tensor(s)
    kw = {"dims": g.dims(len(s)), "keepdim": g.r.random() < 0.4}
    if op in ("sum", "mean") and g.r.random() < 0.3:
        kw["dims"] = None
    if op == "norm":
        kw["p"] = g.r.choice([2.0, 1.0, 3.0, 0.5, 1.5, math.inf, -math.inf, 0.0])
    if op in ("var_c", "std"):
        kw["correction"] = g.r.choice([0.0, 1.0, 2.0])
    if op in ("amax", "amin", "logsumexp_dims", "var_c", "std", "norm") and kw["dims"] is None:
        kw["dims"] = []
    g.step(op, [x], **kw)
    return g.case()


def gen_reduce_dim(g, op):
    s = g.shape(0, 3)
    x = g.tensor(s)
    kw = {"dim": g.dim(len(s)), "keepdim": g.r.random() < 0.4}
    if op == "var":
        kw["unbiased"] = g.r.random() < 0.7
    g.step(op, [x], **kw)
    outs = [[0, 0], [0, 1]] if op in ("max_dim", "min_dim") else None
    return g.case(outs)


def gen_reduce_all(g, op):
    x = g.tensor(g.shape(0, 3))
    g.step(op, [x])
    return g.case()


def gen_sum_to(g, op):
    s = g.shape(1, 3)
    x = g.tensor(s)
    target = [1 if g.r.random() < 0.5 else d for d in s][g.r.randint(0, len(s)):]
    g.step(op, [x], shape=target)
    return g.case()


def gen_view(g, op):
    s = g.shape(0, 3)
    x = g.tensor(s)
    r = len(s)
    n = math.prod(s)
    if op in ("view", "reshape"):
        shape = g.r.choice([[n], [-1], [1, n], [n, 1]] + ([[s[0], -1]] if r else []) + ([[2, -1]] if n % 2 == 0 else [[3, 2]]))
        g.step(op, [x], shape=shape)
    elif op == "transpose":
        g.step(op, [x], d0=g.dim(r), d1=g.dim(r))
    elif op == "permute":
        dims = list(range(r))
        g.r.shuffle(dims)
        g.step(op, [x], dims=dims if g.r.random() > 0.05 else dims + [0])
    elif op == "unsqueeze":
        g.step(op, [x], dim=g.r.randint(-r - 1, r))
    elif op == "squeeze":
        g.step(op, [x], dim=g.dim(r))
    elif op == "squeeze_all":
        g.step(op, [x])
    elif op == "expand":
        shape = [g.r.choice([2, 3])] + [d if d != 1 or g.r.random() < 0.5 else 3 for d in s]
        g.step(op, [x], shape=shape if g.r.random() > 0.1 else [-1] * len(s))
    elif op == "narrow":
        d = g.dim(r)
        size = s[d] if r and -r <= d < r else 1
        start = g.r.randint(0, size)
        g.step(op, [x], dim=d, start=start, length=g.r.randint(0, max(0, size - start)))
    elif op == "select":
        d = g.dim(r)
        size = s[d] if r and -r <= d < r else 1
        g.step(op, [x], dim=d, index=g.r.randint(-size, size - 1) if size else 0)
    elif op == "split":
        d = g.dim(r)
        g.step(op, [x], size=g.r.choice([1, 2, 3]), dim=d)
        return g.case([[0, 0]])
    elif op in ("contiguous", "clone"):
        g.step(op, [x])
    elif op == "to":
        g.step(op, [x], dtype=g.r.choice(["f64", "f32", "f16", "bf16"]))
    elif op == "flatten":
        a, b = sorted([g.r.randrange(max(r, 1)), g.r.randrange(max(r, 1))])
        g.step(op, [x], start=a, end=b)
    return g.case()


def gen_join(g, op):
    s = g.shape(1, 3)
    dt = g.dtype()
    xs = []
    for _ in range(g.r.randint(1, 3)):
        t = list(s)
        if op == "cat" and g.r.random() < 0.5:
            t[0] = g.size()
        xs.append(g.tensor(t, dtype=dt if g.r.random() < 0.9 else None))
    d = 0 if op == "cat" and g.r.random() < 0.6 else g.dim(len(s) + (1 if op == "stack" else 0))
    g.step(op, xs, dim=d)
    return g.case()


def gen_matmul(g, op):
    m, k, n = g.size(), g.size(), g.size()
    dt = g.dtype()
    if op == "mm":
        a, b = [m, k], [k, n]
    elif op == "bmm":
        bs = g.size()
        a, b = [bs, m, k], [bs, k, n]
    elif op == "linear":
        lead = g.shape(0, 2)
        a, b = lead + [k], [n, k]
    else:
        la, lb = g.r.randint(1, 4), g.r.randint(1, 4)
        a = ([g.r.choice([1, 2])] * max(0, la - 2) + [m, k])[-la:]
        b = ([g.r.choice([1, 2])] * max(0, lb - 2) + [k, n])[-lb:]
        if la == 1:
            a = [k]
        if lb == 1:
            b = [k]
    if g.r.random() < 0.04:
        b[0] += 1                                       # mismatched inner sizes
    ra, rb = g.tensor(a, dtype=dt), g.tensor(b, dtype=dt)
    args = [ra, rb] + ([g.tensor([n], dtype=dt)] if op == "linear" and g.r.random() < 0.6 else [])
    g.step(op, args)
    return g.case()


def gen_softmax(g, op):
    s = g.shape(0, 3)
    x = g.tensor(s)
    g.step(op, [x], dim=g.dim(len(s)))
    return g.case()


def gen_layer_norm(g, op):
    s = g.shape(1, 3)
    k = g.r.randint(1, len(s))
    norm = s[-k:]
    dt = g.dtype()
    x = g.tensor(s, dtype=dt)
    args = [x]
    if g.r.random() < 0.6:
        args += [g.tensor(norm, dtype=dt), g.tensor(norm, dtype=dt)]
    g.step(op, args, shape=norm, eps=g.r.choice([1e-5, 1e-3]))
    return g.case()


def gen_dropout(g, op):
    x = g.tensor(g.shape())
    p, training = g.r.choice([(0.0, True), (0.5, False), (0.3, False), (1.5, False)])
    g.step(op, [x], p=p, training=training)
    return g.case()


def gen_embedding(g, op):
    v, c = g.size(), g.size()
    idx = g.index_tensor(g.shape(0, 2), v, extra=(v, -1) if g.r.random() < 0.05 else ())
    w = g.tensor([v, c], layout="c")
    pad = g.r.choice([None, None, 0, v - 1, -1]) if v else None
    g.step(op, [idx, w], padding_idx=pad)
    return g.case()


def gen_cross_entropy(g, op):
    dt = g.dtype()
    n, c = g.size(), max(1, g.size())
    spatial = [g.size()] * g.r.choice([1, 1, 2]) if g.r.random() < 0.3 else []      # ce_fused too (issue 25)
    unbatched = not spatial and g.r.random() < 0.15
    shape = [c] if unbatched else [n, c] + spatial
    x = g.tensor(shape, dtype=dt)
    probs = g.r.random() < 0.3
    if probs:
        t = g.tensor(shape, dtype=dt, kind="prob")
    else:
        tshape = [] if unbatched else [n] + spatial
        t = g.index_tensor(tshape, c, extra=(-100,) if g.r.random() < 0.5 else ((c,) if g.r.random() < 0.05 else ()))
    args = [x, t]
    kw = {"ignore_index": -100}
    if op == "cross_entropy":
        if g.r.random() < 0.4:
            args.append(g.tensor([c], dtype=dt, kind="positive", grad=False))
        kw["reduction"] = g.r.choice(["mean", "sum", "none"])
        kw["label_smoothing"] = g.r.choice([0.0, 0.0, 0.1, 0.5])
    g.step(op, args, **kw)
    return g.case()


def gen_pair_loss(g, op):
    s = g.shape()
    dt = g.dtype()
    x = g.tensor(s, dtype=dt, kind="prob" if op == "bce" else "normal")
    y = g.tensor(s if op != "mse_loss" else broadcast_partner(g, s), dtype=dt, kind="prob")
    g.step(op, [x, y])
    return g.case()


def gen_sdpa(g, op):
    dt = g.dtype()
    lead = g.shape(0, 2)
    t, s, e, ev = g.size(), g.size(), max(1, g.size()), g.size()
    q = g.tensor(lead + [t, e], dtype=dt)
    klead = [1 if g.r.random() < 0.3 else d for d in lead]
    k = g.tensor(klead + [s, e], dtype=dt)
    v = g.tensor(klead + [s, ev], dtype=dt)
    args = [q, k, v]
    kw = {"is_causal": g.r.random() < 0.3}
    r = g.r.random()
    if r < 0.25:
        args.append(g.tensor([t, s], dtype="bool"))
    elif r < 0.45:
        args.append(g.tensor([1] * len(lead) + [t, s], dtype=dt, grad=False))
    if g.r.random() < 0.3:
        kw["scale"] = g.r.choice([0.5, 2.0, -1.0])
    g.step(op, args, **kw)
    return g.case()


def gen_inplace(g, op):
    """clone a leaf, take a view, write into the view in place, maybe use both afterwards"""
    s = g.shape(1, 3)
    dt = g.dtype()
    x = g.tensor(s, dtype=dt, grad=True)
    base = g.step("clone", [x])
    r = len(s)
    view_op = g.r.choice(["select", "narrow", "transpose", "unsqueeze", "none"])
    d = g.r.randrange(r)
    vshape = list(s)
    if view_op == "select" and s[d] > 0:
        view = g.step("select", [base], dim=d, index=g.r.randrange(s[d]))
        vshape.pop(d)
    elif view_op == "narrow":
        start = g.r.randint(0, s[d])
        length = g.r.randint(0, s[d] - start)
        view = g.step("narrow", [base], dim=d, start=start, length=length)
        vshape[d] = length
    elif view_op == "transpose" and r >= 2:
        view = g.step("transpose", [base], d0=0, d1=r - 1)
        vshape[0], vshape[-1] = vshape[-1], vshape[0]
    elif view_op == "unsqueeze":
        view = g.step("unsqueeze", [base], dim=0)
        vshape = [1] + vshape
    else:
        view = base
    inplace = g.r.choice(["add_", "mul_", "copy_", "fill_", "zero_", "clamp_", "add_s_", "mul_s_"])
    if inplace in ("add_", "mul_", "copy_"):
        src = g.tensor(broadcast_partner(g, vshape) if g.r.random() < 0.3 else vshape, dtype=dt)
        kw = {"alpha": 2.0} if inplace == "add_" else {}
        out = g.step(inplace, [view, src], **kw)
    elif inplace == "fill_":
        out = g.step(inplace, [view], value=g.r.choice([0.5, -2.0, math.nan]))
    elif inplace == "clamp_":
        out = g.step(inplace, [view], lo=-0.5, hi=g.r.choice([None, 0.5]))
    elif inplace in ("add_s_", "mul_s_"):
        out = g.step(inplace, [view], s=g.r.choice([0.5, -3.0]))
    else:
        out = g.step(inplace, [view])
    outs = [base, out]
    if g.r.random() < 0.5:
        outs.append(g.step(g.r.choice(["exp", "tanh", "square"]), [base]))
    return g.case(outs)


GENERATORS = {}
for _op in UNARY:
    GENERATORS[_op] = gen_unary
GENERATORS["clamp"] = gen_clamp
for _op in BINARY:
    GENERATORS[_op] = gen_binary
for _op in SCALAR:
    GENERATORS[_op] = gen_scalar
GENERATORS.update({"where": gen_where, "where_s": gen_where, "logical_not": gen_logic, "logical_and": gen_logic,
                   "logical_or": gen_logic})
for _op in ("sum", "mean", "amax", "amin", "logsumexp_dims", "norm", "var_c", "std"):
    GENERATORS[_op] = gen_reduce_dims
for _op in ("max_dim", "min_dim", "argmax", "argmin", "logsumexp", "var", "prod_dim"):
    GENERATORS[_op] = gen_reduce_dim
for _op in ("max_all", "min_all", "norm_all", "prod_all"):
    GENERATORS[_op] = gen_reduce_all
GENERATORS["sum_to"] = gen_sum_to
for _op in ("view", "reshape", "transpose", "permute", "unsqueeze", "squeeze", "squeeze_all", "expand", "narrow",
            "select", "split", "contiguous", "clone", "to", "flatten"):
    GENERATORS[_op] = gen_view
GENERATORS.update({"cat": gen_join, "stack": gen_join})
for _op in ("matmul", "mm", "bmm", "linear"):
    GENERATORS[_op] = gen_matmul
GENERATORS.update({"softmax": gen_softmax, "log_softmax": gen_softmax, "layer_norm": gen_layer_norm,
                   "dropout": gen_dropout, "embedding": gen_embedding, "cross_entropy": gen_cross_entropy,
                   "ce_fused": gen_cross_entropy, "mse_loss": gen_pair_loss, "bce_logits": gen_pair_loss,
                   "bce": gen_pair_loss, "sdpa": gen_sdpa, "inplace_program": gen_inplace})

# the model writer's ops (issue 25) live in cases_model.py, which reuses the generators above
from cases_model import register_model_ops  # noqa: E402
register_model_ops(GENERATORS)
from cases_index import register_index_ops  # noqa: E402
register_index_ops(GENERATORS)


def make_case(op, seed, limits=None):
    g = Gen(seed, limits)
    case = GENERATORS[op](g, op)
    case["op"] = op
    case["seed"] = seed
    return case
