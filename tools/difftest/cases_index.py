"""cases_index.py: the random-case generators of the indexing ops (issue 25; autograd/ops/index.cpp and
index_derived.cpp): gather, scatter (tensor and value forms), scatter_add, index_select, index_add,
take_along_dim, one_hot and repeat_interleave with a tensor of repeats. cases.py registers them.

Indices are int64 (sometimes int32 where PyTorch takes it), in range but for one out-of-range value in
about 5% of the cases (both sides must raise). take_along_dim's indices stay in [-size, size): PyTorch
2.15 does not check them (it wraps out-of-range ones), ampgrad raises. scatter's src is never larger
than the index: PyTorch's backward raises there, ampgrad's gives the zero-padded gradient.
"""
import math


def _index_input(g, shape, high, low=0, i32=False, allow_bad=True):
    """an index tensor of `shape` with values in [low, high); sometimes one out of range, sometimes int32"""
    bad = (high, low - 1) if allow_bad and g.r.random() < 0.05 else ()
    reg = g.index_tensor(shape, high - low, extra=bad)
    enc = g.inputs[reg]
    if low and not bad:
        enc["data"] = [v + low for v in enc["data"]]
    if i32 and g.r.random() < 0.3:
        enc["dtype"] = "i32"
    return reg


def _x_and_dim(g):
    """x, its shape, the dim passed (sometimes bad), the dim meant, and the size there"""
    s = g.shape(0, 3)
    x = g.tensor(s)
    nd = max(len(s), 1)
    dim = g.dim(len(s))
    d = dim % nd if -nd <= dim < nd else 0
    return x, s, dim, d, (s[d] if s else 1)


def gen_gather_scatter(g, op):
    """gather, scatter, scatter_v, scatter_add: an index no larger than x apart from dim"""
    x, s, dim, d, size = _x_and_dim(g)
    ishape = [g.size() if i == d else g.r.randint(0, v) for i, v in enumerate(s)]
    if not s and g.r.random() < 0.5:
        ishape = [g.r.randint(0, 2)]
    idx = _index_input(g, ishape, size, i32=True)
    if op == "scatter_v":
        g.step(op, [x, idx], dim=dim, s=g.r.choice([0.0, 2.5, -1e9, math.inf]))
    elif op == "gather":
        g.step(op, [x, idx], dim=dim)
    else:
        src = g.tensor(ishape, dtype=g.inputs[x]["dtype"] if g.r.random() < 0.95 else None)
        g.step(op, [x, idx, src], dim=dim)
    return g.case()


def gen_index_select_add(g, op):
    """index_select, index_add: a vector of indices (sometimes 0-d)"""
    x, s, dim, d, size = _x_and_dim(g)
    k = g.size()
    idx = _index_input(g, [] if k == 1 and g.r.random() < 0.2 else [k], size, i32=True)
    if op == "index_select":
        g.step(op, [x, idx], dim=dim)
        return g.case()
    src_shape = list(s)
    if s:
        src_shape[d] = k
    src = g.tensor(src_shape, dtype=g.inputs[x]["dtype"] if g.r.random() < 0.95 else None)
    g.step(op, [x, idx, src], dim=dim, alpha=g.r.choice([1.0, 2.0, -0.5]))
    return g.case()


def gen_take_along_dim(g, op):
    """indices broadcastable with x apart from dim, negative ones too; or the flattened form"""
    x, s, dim, d, size = _x_and_dim(g)
    flat = g.r.random() < 0.25 or not s
    ishape = [g.size()] if flat else [g.size() if i == d else g.r.choice([v, 1]) for i, v in enumerate(s)]
    if flat:
        idx = _index_input(g, ishape, max(1, math.prod(s)))
    else:
        idx = _index_input(g, ishape, size, low=-size, allow_bad=False)
    g.step(op, [x, idx], dim=None if flat else dim)
    return g.case()


def gen_index_int(g, op):
    """one_hot of int64 classes; repeat_interleave with a tensor of repeats, or of repeats alone"""
    if op == "one_hot":
        classes = _index_input(g, g.shape(0, 2), 5)
        g.step(op, [classes], num_classes=g.r.choice([-1, -1, 5, 7, 3]))
        return g.case()
    s = g.shape(0, 3)
    x = g.tensor(s)
    nd = max(len(s), 1)
    dim = g.r.choice([None, g.dim(len(s))])
    d = dim % nd if dim is not None and s and -nd <= dim < nd else 0
    n = math.prod(s) if dim is None else (s[d] if s else 1)
    reps = _index_input(g, g.r.choice([[n], [n], [1], []]), 3, i32=True)
    if op == "repeat_interleave_r":
        g.step(op, [reps])
    else:
        g.step(op, [x, reps], dim=dim)
    return g.case()


def register_index_ops(generators):
    for op in ("gather", "scatter", "scatter_v", "scatter_add"):
        generators[op] = gen_gather_scatter
    generators.update({"index_select": gen_index_select_add, "index_add": gen_index_select_add,
                       "take_along_dim": gen_take_along_dim})
    for op in ("one_hot", "repeat_interleave_t", "repeat_interleave_r"):
        generators[op] = gen_index_int
