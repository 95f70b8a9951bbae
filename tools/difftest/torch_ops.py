"""torch_ops.py: the PyTorch side of the differential tester: the op table (the same names and
keyword arguments as tools/difftest/replay_ops.cpp) and run_case(), which runs a case's program
forward, backward and double backward exactly as the replay program does.
"""
import torch
import torch.nn.functional as F

DTYPES = {"f32": torch.float32, "f64": torch.float64, "f16": torch.float16, "bf16": torch.bfloat16,
          "i64": torch.int64, "i32": torch.int32, "bool": torch.bool}
NAMES = {v: k for k, v in DTYPES.items()}


def _dims(kw):
    d = kw.get("dims")
    return None if d is None else list(d)


def _sum(a, kw):
    return [a[0].sum() if kw["dims"] is None else a[0].sum(dim=kw["dims"], keepdim=kw.get("keepdim", False))]


def _mean(a, kw):
    return [a[0].mean() if kw["dims"] is None else a[0].mean(dim=kw["dims"], keepdim=kw.get("keepdim", False))]


def _all_dims(t, dims):
    return dims if dims else list(range(t.dim()))


def _ce(a, kw):
    return [F.cross_entropy(a[0], a[1], weight=a[2] if len(a) > 2 else None, ignore_index=kw.get("ignore_index", -100),
                            reduction=kw.get("reduction", "mean"), label_smoothing=kw.get("label_smoothing", 0.0))]


def _sdpa(a, kw):
    return [F.scaled_dot_product_attention(a[0], a[1], a[2], attn_mask=a[3] if len(a) > 3 else None,
                                           is_causal=kw.get("is_causal", False), scale=kw.get("scale"))]


def _layer_norm(a, kw):
    return [F.layer_norm(a[0], kw["shape"], a[1] if len(a) > 1 else None, a[2] if len(a) > 2 else None,
                         kw.get("eps", 1e-5))]


def _rms_norm(a, kw):
    return [F.rms_norm(a[0], kw["shape"], a[1] if len(a) > 1 else None, kw.get("eps"))]


def _rotary(a, kw):
    """x cos + R(x) sin from primitives: Hugging Face's rotate_half, or Meta's interleaved pairs"""
    x, cos, sin = a
    if x.dim() == 0 or x.shape[-1] % 2:
        raise RuntimeError("apply_rotary_emb: HS must be even")
    if kw.get("interleaved"):
        rotated = torch.stack((-x[..., 1::2], x[..., 0::2]), dim=-1).flatten(-2)
    else:
        half = x.shape[-1] // 2
        rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return [x * cos + rotated * sin]


def _max_dim(a, kw):
    v, i = torch.max(a[0], kw["dim"], keepdim=kw.get("keepdim", False))
    return [v, i]


def _min_dim(a, kw):
    v, i = torch.min(a[0], kw["dim"], keepdim=kw.get("keepdim", False))
    return [v, i]


def _slice(a, k):
    """x[start:end:step] along dim (Python's slicing), an IndexError for a dim out of range as torch's"""
    x, dim = a[0], k["dim"]
    if x.dim() == 0 or not -x.dim() <= dim < x.dim():
        raise IndexError(f"slice: dim {dim} out of range for {x.dim()} dims")
    index = (slice(None),) * (dim % x.dim()) + (slice(k["start"], k["end"], k["step"]),)
    return [x[index]]


OPS = {
    # elementwise
    "neg": lambda a, k: [torch.neg(a[0])], "exp": lambda a, k: [torch.exp(a[0])],
    "log": lambda a, k: [torch.log(a[0])], "sqrt": lambda a, k: [torch.sqrt(a[0])],
    "rsqrt": lambda a, k: [torch.rsqrt(a[0])], "abs": lambda a, k: [torch.abs(a[0])],
    "square": lambda a, k: [torch.square(a[0])], "reciprocal": lambda a, k: [torch.reciprocal(a[0])],
    "tanh": lambda a, k: [torch.tanh(a[0])], "sigmoid": lambda a, k: [torch.sigmoid(a[0])],
    "relu": lambda a, k: [torch.relu(a[0])], "gelu": lambda a, k: [F.gelu(a[0])],
    "gelu_tanh": lambda a, k: [F.gelu(a[0], approximate="tanh")], "silu": lambda a, k: [F.silu(a[0])],
    "isfinite": lambda a, k: [torch.isfinite(a[0])], "logical_not": lambda a, k: [torch.logical_not(a[0])],
    "clamp": lambda a, k: [torch.clamp(a[0], k.get("lo"), k.get("hi"))],
    "sin": lambda a, k: [torch.sin(a[0])], "cos": lambda a, k: [torch.cos(a[0])],
    "exp2": lambda a, k: [torch.exp2(a[0])], "log1p": lambda a, k: [torch.log1p(a[0])],
    "expm1": lambda a, k: [torch.expm1(a[0])], "erf": lambda a, k: [torch.erf(a[0])],
    "sign": lambda a, k: [torch.sign(a[0])], "floor": lambda a, k: [torch.floor(a[0])],
    "ceil": lambda a, k: [torch.ceil(a[0])], "round": lambda a, k: [torch.round(a[0])],
    "trunc": lambda a, k: [torch.trunc(a[0])], "fmod": lambda a, k: [torch.fmod(a[0], a[1])],
    "remainder": lambda a, k: [torch.remainder(a[0], a[1])], "atan2": lambda a, k: [torch.atan2(a[0], a[1])],
    "lerp": lambda a, k: [torch.lerp(a[0], a[1], a[2])], "lerp_s": lambda a, k: [torch.lerp(a[0], a[1], k["s"])],
    "logical_xor": lambda a, k: [torch.logical_xor(a[0], a[1])],
    "rms_norm": _rms_norm, "apply_rotary_emb": _rotary,
    "tril": lambda a, k: [torch.tril(a[0], k["diagonal"])], "triu": lambda a, k: [torch.triu(a[0], k["diagonal"])],
    "masked_fill": lambda a, k: [torch.masked_fill(a[0], a[1], k["s"])],
    "repeat_interleave": lambda a, k: [torch.repeat_interleave(a[0], k["repeats"], dim=k.get("dim"))],
    "chunk": lambda a, k: list(torch.chunk(a[0], k["chunks"], k["dim"])),
    "repeat": lambda a, k: [a[0].repeat(*k["repeats"]) if k["repeats"] else a[0].repeat(())],
    "flip": lambda a, k: [torch.flip(a[0], k["dims"])],
    "roll": lambda a, k: [torch.roll(a[0], k["shifts"], k["dims"] or None)],
    "cumsum": lambda a, k: [torch.cumsum(a[0], k["dim"])],
    "slice": _slice,
    # ampgrad always sorts stably; torch's topk orders ties its own way, so only its values are compared
    "sort": lambda a, k: list(torch.sort(a[0], dim=k["dim"], descending=k["descending"], stable=True)),
    "argsort": lambda a, k: [torch.argsort(a[0], dim=k["dim"], descending=k["descending"], stable=True)],
    "topk": lambda a, k: [torch.topk(a[0], k["k"], dim=k["dim"], largest=k["largest"])[0]],
    "sdpa_gqa": lambda a, k: [F.scaled_dot_product_attention(a[0], a[1], a[2], attn_mask=a[3] if len(a) > 3 else None,
                                                             is_causal=k.get("is_causal", False), enable_gqa=True)],
    "gather": lambda a, k: [torch.gather(a[0], k["dim"], a[1])],
    "scatter": lambda a, k: [torch.scatter(a[0], k["dim"], a[1], a[2])],
    "scatter_v": lambda a, k: [torch.scatter(a[0], k["dim"], a[1], k["s"])],
    "scatter_add": lambda a, k: [torch.scatter_add(a[0], k["dim"], a[1], a[2])],
    "index_select": lambda a, k: [torch.index_select(a[0], k["dim"], a[1])],
    "index_add": lambda a, k: [torch.index_add(a[0], k["dim"], a[1], a[2], alpha=k["alpha"])],
    "take_along_dim": lambda a, k: [torch.take_along_dim(a[0], a[1], dim=k.get("dim"))],
    "one_hot": lambda a, k: [F.one_hot(a[0], k["num_classes"])],
    "repeat_interleave_t": lambda a, k: [torch.repeat_interleave(a[0], a[1], dim=k.get("dim"))],
    "repeat_interleave_r": lambda a, k: [torch.repeat_interleave(a[0])],
    "add": lambda a, k: [torch.add(a[0], a[1], alpha=k.get("alpha", 1.0))],
    "sub": lambda a, k: [torch.sub(a[0], a[1], alpha=k.get("alpha", 1.0))],
    "mul": lambda a, k: [a[0] * a[1]], "div": lambda a, k: [a[0] / a[1]],
    "maximum": lambda a, k: [torch.maximum(a[0], a[1])], "minimum": lambda a, k: [torch.minimum(a[0], a[1])],
    "pow": lambda a, k: [torch.pow(a[0], a[1])], "eq": lambda a, k: [torch.eq(a[0], a[1])],
    "ne": lambda a, k: [torch.ne(a[0], a[1])], "lt": lambda a, k: [torch.lt(a[0], a[1])],
    "le": lambda a, k: [torch.le(a[0], a[1])], "gt": lambda a, k: [torch.gt(a[0], a[1])],
    "ge": lambda a, k: [torch.ge(a[0], a[1])], "logical_and": lambda a, k: [a[0] & a[1]],
    "logical_or": lambda a, k: [a[0] | a[1]], "where": lambda a, k: [torch.where(a[0], a[1], a[2])],
    "where_s": lambda a, k: [torch.where(a[0], a[1], k["s"])],
    "add_s": lambda a, k: [a[0] + k["s"]], "mul_s": lambda a, k: [a[0] * k["s"]],
    "div_s": lambda a, k: [a[0] / k["s"]], "rdiv_s": lambda a, k: [k["s"] / a[0]],
    "rsub_s": lambda a, k: [k["s"] - a[0]], "pow_s": lambda a, k: [a[0] ** k["s"]],
    "rpow_s": lambda a, k: [k["s"] ** a[0]],
    # reductions
    "sum": _sum, "mean": _mean, "max_dim": _max_dim, "min_dim": _min_dim,
    "max_all": lambda a, k: [a[0].max()], "min_all": lambda a, k: [a[0].min()],
    "amax": lambda a, k: [torch.amax(a[0], _dims(k) or (), keepdim=k.get("keepdim", False))],
    "amin": lambda a, k: [torch.amin(a[0], _dims(k) or (), keepdim=k.get("keepdim", False))],
    "argmax": lambda a, k: [torch.argmax(a[0], k["dim"], keepdim=k.get("keepdim", False))],
    "argmin": lambda a, k: [torch.argmin(a[0], k["dim"], keepdim=k.get("keepdim", False))],
    "logsumexp": lambda a, k: [torch.logsumexp(a[0], k["dim"], keepdim=k.get("keepdim", False))],
    "logsumexp_dims": lambda a, k: [torch.logsumexp(a[0], _all_dims(a[0], _dims(k)), keepdim=k.get("keepdim", False))],
    "norm_all": lambda a, k: [torch.linalg.vector_norm(a[0])],
    "norm": lambda a, k: [torch.linalg.vector_norm(a[0], ord=k["p"], dim=_dims(k), keepdim=k.get("keepdim", False))],
    "var": lambda a, k: [torch.var(a[0], k["dim"], unbiased=k.get("unbiased", True), keepdim=k.get("keepdim", False))],
    "var_c": lambda a, k: [torch.var(a[0], _dims(k), correction=k["correction"], keepdim=k.get("keepdim", False))],
    "std": lambda a, k: [torch.std(a[0], _dims(k), correction=k["correction"], keepdim=k.get("keepdim", False))],
    "prod_all": lambda a, k: [a[0].prod()],
    "prod_dim": lambda a, k: [a[0].prod(k["dim"], keepdim=k.get("keepdim", False))],
    "sum_to": lambda a, k: [a[0].sum_to_size(k["shape"])],
    # views and shape ops
    "view": lambda a, k: [a[0].view(k["shape"])], "reshape": lambda a, k: [a[0].reshape(k["shape"])],
    "transpose": lambda a, k: [a[0].transpose(k["d0"], k["d1"])], "permute": lambda a, k: [a[0].permute(k["dims"])],
    "unsqueeze": lambda a, k: [a[0].unsqueeze(k["dim"])], "squeeze": lambda a, k: [a[0].squeeze(k["dim"])],
    "squeeze_all": lambda a, k: [a[0].squeeze()], "expand": lambda a, k: [a[0].expand(k["shape"])],
    "narrow": lambda a, k: [a[0].narrow(k["dim"], k["start"], k["length"])],
    "select": lambda a, k: [a[0].select(k["dim"], k["index"])],
    "split": lambda a, k: list(torch.split(a[0], k["size"], k["dim"])),
    "cat": lambda a, k: [torch.cat(a, k["dim"])], "stack": lambda a, k: [torch.stack(a, k["dim"])],
    "contiguous": lambda a, k: [a[0].contiguous()], "clone": lambda a, k: [a[0].clone()],
    "to": lambda a, k: [a[0].to(DTYPES[k["dtype"]])], "flatten": lambda a, k: [a[0].flatten(k["start"], k["end"])],
    # linear algebra
    "matmul": lambda a, k: [torch.matmul(a[0], a[1])], "mm": lambda a, k: [torch.mm(a[0], a[1])],
    "bmm": lambda a, k: [torch.bmm(a[0], a[1])],
    "linear": lambda a, k: [F.linear(a[0], a[1], a[2] if len(a) > 2 else None)],
    # in place
    "add_": lambda a, k: [a[0].add_(a[1], alpha=k.get("alpha", 1.0))], "mul_": lambda a, k: [a[0].mul_(a[1])],
    "zero_": lambda a, k: [a[0].zero_()], "fill_": lambda a, k: [a[0].fill_(k["value"])],
    "copy_": lambda a, k: [a[0].copy_(a[1])], "clamp_": lambda a, k: [a[0].clamp_(k.get("lo"), k.get("hi"))],
    "add_s_": lambda a, k: [a[0].add_(k["s"])], "mul_s_": lambda a, k: [a[0].mul_(k["s"])],
    # nn.functional
    "softmax": lambda a, k: [F.softmax(a[0], k["dim"])], "log_softmax": lambda a, k: [F.log_softmax(a[0], k["dim"])],
    "layer_norm": _layer_norm, "dropout": lambda a, k: [F.dropout(a[0], k["p"], k["training"])],
    "embedding": lambda a, k: [F.embedding(a[0], a[1], padding_idx=k.get("padding_idx"))],
    "cross_entropy": _ce, "ce_fused": lambda a, k: [F.cross_entropy(a[0], a[1], ignore_index=k.get("ignore_index", -100))],
    "mse_loss": lambda a, k: [F.mse_loss(a[0], a[1])],
    "bce_logits": lambda a, k: [F.binary_cross_entropy_with_logits(a[0], a[1])],
    "bce": lambda a, k: [F.binary_cross_entropy(a[0], a[1])], "sdpa": _sdpa,
}


def decode(j):
    dt = DTYPES[j["dtype"]]
    data = [float(x) if isinstance(x, str) else x for x in j["data"]]
    if dt in (torch.int64, torch.int32, torch.bool):
        return torch.tensor(data, dtype=torch.int64).reshape(j["shape"]).to(dt)
    return torch.tensor(data, dtype=torch.float64).reshape(j["shape"]).to(dt)


def apply_layout(base, layout):
    if layout == "t":
        return base.transpose(-1, -2)
    if layout == "s":
        s = list(base.shape)
        return base.view(s[:-1] + [s[-1] // 2, 2]).select(-1, 0)
    if layout == "e":
        return base.expand([3] + list(base.shape[1:]))
    return base


def run_case(case, make_douts=None):
    """Runs case in PyTorch. Returns (result dict of torch tensors / error, douts, vs). make_douts(outputs,
    leaves) -> (douts, vs) is called once the output shapes are known, when the case has none yet."""
    res = {"stage": "forward"}
    case.setdefault("douts", [])
    case.setdefault("vs", [])
    try:
        leaves, regs = [], []
        for inp in case["inputs"]:
            base = decode(inp)
            if inp.get("requires_grad"):
                base.requires_grad_(True)
            leaves.append(base)
            regs.append(apply_layout(base, inp.get("layout", "c")))
        steps = []

        def ref(a):
            return regs[a] if isinstance(a, int) else steps[a[0]][a[1]]
        for step in case["prog"]:
            args = [ref(a) for a in step["args"]]
            steps.append(OPS[step["op"]](args, step.get("kw", {})))
        outs = [ref(a) for a in case["outputs"]]
        res["outputs"] = [o.detach().clone() for o in outs]
        if make_douts is not None:
            case["douts"], case["vs"] = make_douts(outs, leaves)
        wrt = [l for l in leaves if l.requires_grad]
        pairs = [(o, decode(d)) for o, d in zip(outs, case["douts"]) if d is not None and o.requires_grad]
        if not pairs or not wrt:
            res["stage"] = "ok"
            return res
        res["stage"] = "backward"
        dbl = case.get("double", False)
        g = torch.autograd.grad([p[0] for p in pairs], wrt, [p[1] for p in pairs], retain_graph=True,
                                create_graph=dbl, allow_unused=True)
        it = iter(g)
        res["grads"] = [next(it) if l.requires_grad else None for l in leaves]
        res["grads"] = [None if x is None else x.detach().clone() for x in res["grads"]]
        if dbl:
            res["stage"] = "double"
            total = None
            for i, l in enumerate(leaves):
                gi = g[[j for j, x in enumerate(leaves) if x.requires_grad].index(i)] if l.requires_grad else None
                v = case["vs"][i]
                if gi is None or not gi.requires_grad or v is None:
                    continue
                term = (gi * decode(v).to(gi.dtype)).sum().to(torch.float64)
                total = term if total is None else total + term
            res["grads2"] = [None] * len(leaves)
            if total is not None:
                g2 = torch.autograd.grad(total, wrt, allow_unused=True)
                it = iter(g2)
                res["grads2"] = [next(it) if l.requires_grad else None for l in leaves]
        res["stage"] = "ok"
    except Exception as e:  # noqa: BLE001 -- any PyTorch error is a result to compare
        res["error"] = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
    return res
