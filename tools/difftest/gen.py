"""gen.py: random case generation for the differential tester. make_case(op, seed, limits) is
deterministic in its arguments; `limits` (max_size, special, layouts, dtype, double) is what the
shrinker lowers to find a smaller case that still fails.

Inputs cover sizes 0 and 1, broadcasting, non-contiguous layouts (transposed, stride-2 slices,
expanded), inf/nan/+-0 values, f64/f32/f16/bf16 and mixed dtypes; a quarter of the float cases
ask for double backward; invalid arguments (bad dims, shapes, dtypes) appear on purpose.
"""
import math
import random

import torch

FLOATS = ["f64", "f32", "f16", "bf16"]
SPECIALS = [0.0, -0.0, math.inf, -math.inf, math.nan, 1.0, -1.0, 30.0, 1e-3]

DT = {"f32": torch.float32, "f64": torch.float64, "f16": torch.float16, "bf16": torch.bfloat16,
      "i64": torch.int64, "i32": torch.int32, "bool": torch.bool}

DEFAULT_LIMITS = {"max_size": 5, "special": True, "layouts": True, "dtype": None, "double": True, "max_rank": 4}


def _encode(t):
    t = t.detach().contiguous()
    if t.dtype in (torch.int64, torch.int32, torch.bool):
        data = [int(x) for x in t.reshape(-1).tolist()]
    else:
        data = []
        for x in t.reshape(-1).to(torch.float64).tolist():
            data.append("nan" if x != x else ("inf" if x == math.inf else ("-inf" if x == -math.inf else x)))
    return {"dtype": {torch.float32: "f32", torch.float64: "f64", torch.float16: "f16", torch.bfloat16: "bf16",
                      torch.int64: "i64", torch.int32: "i32", torch.bool: "bool"}[t.dtype],
            "shape": list(t.shape), "data": data}


class Gen:
    def __init__(self, seed, limits):
        self.r = random.Random(seed)
        self.lim = dict(DEFAULT_LIMITS, **(limits or {}))
        self.inputs = []
        self.prog = []

    # ---- random pieces ----
    def size(self):
        m = self.lim["max_size"]
        x = self.r.random()
        if x < 0.07:
            return 0
        if x < 0.25:
            return 1
        return self.r.randint(1, max(1, m))

    def shape(self, lo=0, hi=None):
        hi = min(self.lim["max_rank"], 3 if hi is None else hi)
        return [self.size() for _ in range(self.r.randint(lo, max(lo, hi)))]

    def dtype(self):
        if self.lim["dtype"]:
            return self.lim["dtype"]
        return self.r.choice(["f64", "f32", "f32", "f16", "bf16"])

    def values(self, shape, dtype, kind="normal"):
        n = math.prod(shape)
        g = torch.Generator().manual_seed(self.r.randrange(1 << 30))
        if kind == "positive":
            t = torch.rand(n, generator=g, dtype=torch.float64) * 2 + 0.1
        elif kind == "prob":
            t = torch.rand(n, generator=g, dtype=torch.float64)
        else:
            t = torch.randn(n, generator=g, dtype=torch.float64) * self.r.choice([1.0, 1.0, 3.0])
        if self.lim["special"] and n and self.r.random() < 0.25:
            for _ in range(self.r.randint(1, 2)):
                t[self.r.randrange(n)] = self.r.choice(SPECIALS)
        if kind == "small_int" and n:
            t = torch.randint(-3, 4, (n,), generator=g).to(torch.float64)
        return t.reshape(shape).to(DT[dtype])

    def tensor(self, shape, dtype=None, kind="normal", grad=None, layout=None):
        """Adds an input; returns its register."""
        dtype = dtype or self.dtype()
        floating = dtype in FLOATS
        if layout is None:
            layout = "c"
            if self.lim["layouts"] and self.r.random() < 0.3:
                opts = (["t"] if len(shape) >= 2 else []) + (["s"] if len(shape) >= 1 else []) + \
                       (["e"] if len(shape) >= 1 and shape[0] == 3 else [])
                layout = self.r.choice(opts) if opts else "c"
        base_shape = list(shape)
        if layout == "t":
            base_shape[-1], base_shape[-2] = base_shape[-2], base_shape[-1]
        elif layout == "s":
            base_shape[-1] *= 2
        elif layout == "e":
            base_shape[0] = 1
        if dtype == "bool":
            t = torch.rand(base_shape, generator=torch.Generator().manual_seed(self.r.randrange(1 << 30))) > 0.5
        elif dtype in ("i64", "i32"):
            t = torch.randint(0, 5, base_shape, generator=torch.Generator().manual_seed(self.r.randrange(1 << 30)))
        else:
            t = self.values(base_shape, dtype, kind)
        enc = _encode(t.to(DT[dtype]))
        enc["layout"] = layout
        enc["requires_grad"] = floating and (grad if grad is not None else self.r.random() < 0.85)
        self.inputs.append(enc)
        return len(self.inputs) - 1

    def index_tensor(self, shape, high, extra=()):
        g = torch.Generator().manual_seed(self.r.randrange(1 << 30))
        t = torch.randint(0, max(high, 1), shape, generator=g) if high > 0 else torch.zeros(shape, dtype=torch.int64)
        if extra and t.numel():
            flat = t.reshape(-1)
            flat[self.r.randrange(flat.numel())] = self.r.choice(list(extra))
        self.inputs.append(dict(_encode(t), layout="c", requires_grad=False))
        return len(self.inputs) - 1

    def dim(self, rank, allow_bad=True):
        if allow_bad and self.r.random() < 0.03:
            return self.r.choice([rank, -rank - 1, 7])
        n = max(rank, 1)
        return self.r.randrange(-n, n)

    def dims(self, rank):
        if rank == 0:
            return self.r.choice([[0], [-1], None]) if self.r.random() < 0.5 else None
        k = self.r.randint(1, rank)
        ds = self.r.sample(range(rank), k)
        return [d - rank if self.r.random() < 0.3 else d for d in ds]

    def step(self, op, args, **kw):
        """Appends a program step; returns a reference to its first output ([step, 0])."""
        self.prog.append({"op": op, "args": list(args), "kw": kw})
        return [len(self.prog) - 1, 0]

    def case(self, outputs=None):
        last = len(self.prog) - 1
        return {"inputs": self.inputs, "prog": self.prog, "outputs": outputs or [[last, 0]],
                "double": self.lim["double"] and self.r.random() < 0.3}
