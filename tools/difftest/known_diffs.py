"""known_diffs.py: the differential tester's table of documented, deliberate differences from PyTorch.

Each entry names an op (or ops), the kinds compared ("outputs", "grads", "grads2"), a predicate on
the case and on the mismatch the comparison found, and the docs/edge_cases.md section that explains
why ampgrad's value differs on purpose. difftest.py counts a mismatch that an entry explains as a
known difference, not as a failure; anything else is unexplained and fails the run.

Keep predicates narrow: each tests the specific condition the docs describe (an inf weight, an
all-NaN attention row, an f16 partial product out of range), so a new bug in the same op with
ordinary values still shows up as unexplained.
"""
import math
import re
from dataclasses import dataclass
from typing import Callable

import torch

import torch_ops

DOC = "docs/edge_cases.md"
SECTION_SWEEP = "NaN, inf and degenerate statistics"


@dataclass
class Mismatch:
    """one compared tensor's first difference, parsed from compare()'s detail string"""
    tensor: int              # which output / gradient (the input's position for gradients)
    what: str                # "nan", "inf" or "value"
    index: tuple             # element index
    ours: float
    torch: float

    def nonfinite_differs(self):
        return self.what in ("nan", "inf")


_DETAIL = re.compile(r"^\[(\d+)\] (nan mismatch|inf mismatch|value) at \[([-\d, ]*)\]: ampgrad (\S+) torch (\S+)")


def parse_detail(detail):
    m = _DETAIL.match(detail)
    if not m:
        return None
    idx = tuple(int(i) for i in m.group(3).split(",") if i.strip())
    return Mismatch(int(m.group(1)), m.group(2).split()[0], idx, float(m.group(4)), float(m.group(5)))


@dataclass
class KnownDiff:
    name: str
    ops: tuple
    kinds: tuple
    section: str                                  # the heading in docs/edge_cases.md
    applies: Callable                             # (case, Mismatch) -> bool


# ---- helpers: the tensors an op sees (after the layout), in float64 ----

def _view(case, i):
    inp = case["inputs"][i]
    return torch_ops.apply_layout(torch_ops.decode(inp), inp.get("layout", "c")).to(torch.float64)


def _args(case):
    return case["prog"][0]["args"]


def _kw(case):
    return case["prog"][0].get("kw", {})


def _low_precision(case):
    return any(inp["dtype"] in ("f16", "bf16") for inp in case["inputs"])


def _has(t, pred):
    return bool(pred(t).any()) if t.numel() else False


# ---- binary_cross_entropy ----

def _bce_neg_zero(case, m):
    """An infinity whose sign differs, where p is -0: PyTorch's logit_backward (the target gradient's
    derivative) is `dy * inf` on its scalar path and `dy / (p (1 - p))` on its vectorised one, so its
    sign at p = -0 depends on where the element falls in the loop; we take the scalar path's."""
    p = torch_ops.decode(case["inputs"][_args(case)[0]]).to(torch.float64)
    if m.what != "inf" or m.tensor != 0 or len(m.index) != p.dim():
        return False
    x = p[m.index].item() if m.index else p.item()
    return x == 0 and math.copysign(1.0, x) < 0 and math.isinf(m.ours) and math.isinf(m.torch)


# ---- topk ----

def _topk_ties(case, m):
    """equal values in the input along the dim (NaNs, and -0 against +0, count as equal): the stable
    order picks the lower indices, PyTorch's selection its own, so gradients land on different ties"""
    x = _view(case, _args(case)[0])
    dim = _kw(case).get("dim", -1)
    rows = x.reshape(1, -1) if x.dim() == 0 else x.movedim(dim, -1).reshape(-1, x.shape[dim])
    for row in rows:
        values = [("nan" if math.isnan(v) else v) for v in row.tolist()]
        if len(values) != len(set(values)):
            return True
    return False


# ---- gelu ----

def _gelu_pos_inf(case, m):
    """gelu(+inf) (either form): ours is +inf, the limit of x * Phi(x); PyTorch 2.15's CPU result is NaN
    (issue 23's sweep). Only the element that is +inf in the input, only an inf-vs-NaN pattern."""
    x = _view(case, _args(case)[0])
    if m.tensor != 0 or len(m.index) != x.dim() or not (math.isinf(m.ours) and m.ours > 0 and math.isnan(m.torch)):
        return False
    v = x[m.index].item() if m.index else x.item()
    return math.isinf(v) and v > 0


# ---- layer_norm ----

def _layer_norm_inf(case, m):
    """inf - inf in the row sums when the input or the weight holds an inf: NaN or +-inf by formula"""
    a = _args(case)
    tensors = [_view(case, a[0])] + ([_view(case, a[1])] if len(a) > 1 else [])
    return m.nonfinite_differs() and any(_has(t, torch.isinf) for t in tensors)


def _layer_norm_f16_rstd_cubed(case, m):
    """PyTorch's f16 double backward forms a term of size rstd^3 in f16, which overflows (to inf, then
    0 * inf = NaN) when var + eps < 65504^(-2/3); we keep the statistics in f32"""
    a, kw = _args(case), _kw(case)
    if case["inputs"][a[0]]["dtype"] != "f16" or m.what != "nan" or not math.isnan(m.torch):
        return False
    x = _view(case, a[0])
    n = len(kw["shape"])
    rows = x.reshape(-1, math.prod(kw["shape"])) if x.numel() else x.reshape(0, 1)
    if rows.numel() == 0 or n == 0:
        return False
    var = rows.var(dim=1, unbiased=False)
    return bool((var + kw.get("eps", 1e-5) < 65504.0 ** (-2.0 / 3.0)).any())


def _layer_norm_flat_row(case, m):
    """layer_norm where a row's spread is within a few ulps of its mean: both libraries' gradients are
    rounding noise times rstd (up to 1/sqrt(eps) = 316); in f16/bf16 PyTorch also rounds mean and rstd
    to the dtype, we keep them in f32 (the exact f64 gradient is near 0)"""
    a, kw = _args(case), _kw(case)
    dtype = case["inputs"][a[0]]["dtype"]
    if dtype not in ("f16", "bf16", "f32") or m.what != "value":
        return False
    x = _view(case, a[0])
    if x.numel() == 0 or not torch.isfinite(x).all():
        return False
    rows = x.reshape(-1, math.prod(kw["shape"]))
    spread = rows.max(dim=1).values - rows.min(dim=1).values
    ulp = {"f16": 9.8e-4, "bf16": 7.8e-3, "f32": 1.2e-7}[dtype]
    return bool((spread <= 4 * ulp * rows.abs().max(dim=1).values).any())


def _rms_norm_single_element_cancellation(case, m):
    """rms_norm over one element: y = x / sqrt(x^2 + eps) is sign(x) to within eps / x^2, so every
    derivative is a difference 1 - x^2 rstd^2 that cancels to eps / (x^2 + eps); both libraries' values
    are rounding noise at relative 1e-16 / that, and differ past the tolerance while agreeing to 1e-3"""
    kw = _kw(case)
    if math.prod(kw["shape"]) != 1 or m.what != "value" or not (math.isfinite(m.ours) and math.isfinite(m.torch)):
        return False
    return abs(m.ours - m.torch) <= 1e-3 * max(abs(m.torch), 1e-300)


# ---- prod ----

def _prod_f16_partial_out_of_range(case, m):
    """PyTorch multiplies f16/bf16 in the dtype, so a partial product can overflow (or underflow to 0)
    where the true product is in range (and meet an inf or a zero of the input: 0 * inf); we multiply
    in double and round once"""
    inp = case["inputs"][_args(case)[0]]
    if inp["dtype"] not in ("f16", "bf16") or not m.nonfinite_differs():
        return False
    x = _view(case, _args(case)[0])
    dim = _kw(case).get("dim")
    slices = x.reshape(-1, 1) if x.dim() == 0 else (x.movedim(dim, -1) if dim is not None else x.reshape(1, -1))
    slices = slices.reshape(-1, slices.shape[-1]).abs()
    # An inf or NaN input is no overflow, and a zero no underflow: the partial products of the other
    # elements, from the left (the forward, prod_safe_zeros_backward's exclusive cumprod) and from the
    # right (its reversed one), are what may leave the range and meet an inf or a zero (0 * inf = NaN).
    slices = torch.where(torch.isfinite(slices) & (slices != 0), slices, torch.ones_like(slices))
    if not slices.numel():
        return False
    top = 65504.0 if inp["dtype"] == "f16" else 3.389e38
    low = 5.96e-8 if inp["dtype"] == "f16" else 9.2e-41
    out_of_range = lambda t: (t > top) | ((t < low) & (t > 0))  # noqa: E731
    return _has(slices.cumprod(dim=1), out_of_range) or _has(slices.flip(1).cumprod(dim=1), out_of_range)


def _prod_zero_and_nonfinite(case, m):
    """PyTorch's prod_backward takes prod_safe_zeros_backward (through cumprod) whenever the input holds a
    zero anywhere; cumprod's derivative spreads a NaN or inf that our doubling scan's derivative keeps
    out"""
    x = _view(case, _args(case)[0])
    return m.nonfinite_differs() and _has(x, lambda t: t == 0) and _has(x, lambda t: ~torch.isfinite(t))


# ---- norm ----

def _norm2_zero_vector(case, m):
    """the 2-norm's second gradient where the whole reduced vector is 0: PyTorch's is NaN (its
    masked_fill(norm == 0, 0) sits inside a formula whose derivative still divides by the norm), ours
    is 0, the subgradient choice of the first derivative"""
    kw = _kw(case)
    if kw.get("p", 2) != 2 or not math.isnan(m.torch) or math.isnan(m.ours):
        return False
    x = _view(case, _args(case)[0])
    dims = kw.get("dims") if case["op"] == "norm" else None
    if x.numel() == 0:
        return False
    zero = (x == 0)
    slices = zero.all() if not dims or x.dim() == 0 else zero.all(dim=tuple(dims))
    return _has(slices, lambda t: t)


# ---- scaled_dot_product_attention ----

def _sdpa_scores(case):
    """(scores, visible) in float64: q k^T * scale plus an additive mask; visible is False where the
    causal or boolean mask hides a key"""
    a, kw = _args(case), _kw(case)
    q, k = _view(case, a[0]), _view(case, a[1])
    if case["op"] == "sdpa_gqa" and k.dim() >= 3 and k.shape[-3] and q.shape[-3] % k.shape[-3] == 0:
        k = k.repeat_interleave(q.shape[-3] // k.shape[-3], -3)       # query head h sees kv head h / group
    scale = kw.get("scale") or 1.0 / math.sqrt(q.shape[-1])
    s = torch.matmul(q, k.transpose(-2, -1)) * scale
    visible = torch.ones(s.shape[-2:], dtype=torch.bool)
    if kw.get("is_causal"):
        visible = torch.ones(s.shape[-2:], dtype=torch.bool).tril()
    if len(a) > 3:
        mask = torch_ops.decode(case["inputs"][a[3]])
        if mask.dtype == torch.bool:
            visible = visible & mask
        else:
            s = s + mask.to(torch.float64)
    return s, visible.expand(s.shape)


def _sdpa_all_nan_row(case, m):
    """a row whose visible scores are all NaN or -inf (some NaN): PyTorch's flash CPU kernel takes the row
    max skipping NaN, sees a dead row and writes 0; ours propagates NaN"""
    s, vis = _sdpa_scores(case)
    dead_or_nan = torch.isnan(s) | (s == -math.inf) | ~vis
    rows = dead_or_nan.all(-1) & (torch.isnan(s) & vis).any(-1)
    return math.isnan(m.ours) and not math.isnan(m.torch) and _has(rows, lambda t: t)


def _sdpa_causal_masked_nonfinite(case, m):
    """is_causal with a NaN or +inf score at a masked position: PyTorch's math path adds -inf there
    (inf + -inf = NaN), we select the masked key out"""
    if not _kw(case).get("is_causal"):
        return False
    s, vis = _sdpa_scores(case)
    bad = (torch.isnan(s) | (s == math.inf)) & ~vis
    return math.isnan(m.torch) and not math.isnan(m.ours) and _has(bad, lambda t: t)


def _sdpa_masked_gradients(case, m):
    """is_causal with an inf or NaN in q, k or v: PyTorch computes dS = P (dP - sum(P dP)) at masked
    positions too, so 0 * inf = NaN reaches dq/dk through keys the row never saw; ours keeps them out"""
    if not _kw(case).get("is_causal"):
        return False
    a = _args(case)
    nonfinite = any(_has(_view(case, i), lambda t: ~torch.isfinite(t)) for i in a[:3])
    return nonfinite and math.isnan(m.torch) and not math.isnan(m.ours)


def _sdpa_dead_row_second_gradient(case, m):
    """a row whose visible scores are all -inf (its output is the constant 0): our second gradients there are
    0; PyTorch's are NaN from 0 * inf in its double backward"""
    s, vis = _sdpa_scores(case)
    dead = ((s == -math.inf) | ~vis).all(-1)
    return math.isnan(m.torch) and not math.isnan(m.ours) and _has(dead, lambda t: t)


def _sdpa_low_precision_overflow(case, m):
    """f16/bf16 where a score, dP or dS overflows: both results are non-finite, and which of inf, -inf
    and NaN comes out depends on the order of the roundings"""
    both = not math.isfinite(m.ours) and not math.isfinite(m.torch)
    return _low_precision(case) and m.nonfinite_differs() and both


def _sdpa_zero_keys(case, m):
    """S = 0 keys: we return the empty weighted sum, 0; PyTorch returns NaN"""
    k = _view(case, _args(case)[1])
    return k.dim() >= 2 and k.shape[-2] == 0 and math.isnan(m.torch) and m.ours == 0


def _sdpa_gqa_heads_not_dividing(case, detail):
    """enable_gqa where the query head count is not a multiple of the key/value head count: ampgrad
    raises ShapeError always; PyTorch 2.15 returns the empty result unchecked when the output is empty"""
    q, k, v = (_view(case, i) for i in _args(case)[:3])
    if q.dim() < 3 or k.dim() < 3 or ("ShapeError" not in detail and "enable_gqa" not in detail):
        return False
    heads_q, heads_kv = q.shape[-3], k.shape[-3]
    not_dividing = heads_kv == 0 or heads_q % heads_kv != 0
    empty_output = q.shape[-2] == 0 or v.shape[-1] == 0 or q.numel() == 0
    return not_dividing and empty_output


def _sdpa_causal_negative_scale(case, m):
    """is_causal with a negative scale: PyTorch 2.15's CPU flash kernel gives NaN rows (its causal mask
    goes in before the scale, so -inf * scale = +inf); its math path and ours give the masked softmax"""
    kw = _kw(case)
    scale = kw.get("scale")
    return bool(kw.get("is_causal")) and scale is not None and scale < 0 and m.what == "nan" and math.isnan(m.torch)


# Errors on one side only: the predicate takes (case, detail), detail being compare()'s text.
KNOWN_RAISES = [
    KnownDiff("sdpa: enable_gqa head counts that do not divide, with an empty output", ("sdpa_gqa",),
              ("ampgrad_raises_forward",), "Errors where PyTorch raises", _sdpa_gqa_heads_not_dividing),
]


KNOWN = [
    KnownDiff("bce: the sign of inf at p = -0", ("bce",), ("grads2",), SECTION_SWEEP, _bce_neg_zero),
    KnownDiff("topk: ties picked in index order", ("topk",), ("grads", "grads2"),
              "Gradients at NaN, ties and bounds", _topk_ties),
    KnownDiff("gelu: +inf input gives +inf", ("gelu", "gelu_tanh"), ("outputs",), SECTION_SWEEP, _gelu_pos_inf),
    KnownDiff("layer_norm: inf in the input or the weight", ("layer_norm",), ("outputs", "grads", "grads2"),
              SECTION_SWEEP, _layer_norm_inf),
    KnownDiff("rms_norm: inf in the input or the weight", ("rms_norm",), ("grads2",), SECTION_SWEEP,
              _layer_norm_inf),
    KnownDiff("layer_norm: f16 double backward, rstd^3 overflows f16", ("layer_norm",), ("grads2",),
              SECTION_SWEEP, _layer_norm_f16_rstd_cubed),
    KnownDiff("rms_norm: one element per row, derivatives are a cancellation", ("rms_norm",), ("grads", "grads2"),
              SECTION_SWEEP, _rms_norm_single_element_cancellation),
    KnownDiff("layer_norm: a row flat to a few ulps, gradients are rounding noise", ("layer_norm",),
              ("grads", "grads2"), SECTION_SWEEP, _layer_norm_flat_row),
    KnownDiff("prod: an f16/bf16 partial product out of range", ("prod_all", "prod_dim"),
              ("outputs", "grads", "grads2"), SECTION_SWEEP, _prod_f16_partial_out_of_range),
    KnownDiff("prod: double backward with a zero and a NaN or inf", ("prod_all", "prod_dim"), ("grads2",),
              SECTION_SWEEP, _prod_zero_and_nonfinite),
    KnownDiff("norm: the 2-norm's second gradient at a zero vector", ("norm", "norm_all"), ("grads2",),
              SECTION_SWEEP, _norm2_zero_vector),
    KnownDiff("sdpa: a row of NaN (and -inf) scores", ("sdpa", "sdpa_gqa"), ("outputs", "grads", "grads2"), SECTION_SWEEP,
              _sdpa_all_nan_row),
    KnownDiff("sdpa: is_causal with a NaN or +inf score at a masked position", ("sdpa", "sdpa_gqa"),
              ("outputs", "grads", "grads2"), SECTION_SWEEP, _sdpa_causal_masked_nonfinite),
    KnownDiff("sdpa: is_causal gradients at masked positions", ("sdpa", "sdpa_gqa"), ("grads", "grads2"), SECTION_SWEEP,
              _sdpa_masked_gradients),
    KnownDiff("sdpa: second gradients through a dead row", ("sdpa", "sdpa_gqa"), ("grads2",), SECTION_SWEEP,
              _sdpa_dead_row_second_gradient),
    KnownDiff("sdpa: zero keys", ("sdpa", "sdpa_gqa"), ("outputs",), SECTION_SWEEP, _sdpa_zero_keys),
    KnownDiff("sdpa: is_causal with a negative scale (PyTorch's flash kernel gives NaN)", ("sdpa", "sdpa_gqa"),
              ("outputs", "grads", "grads2"), SECTION_SWEEP, _sdpa_causal_negative_scale),
    KnownDiff("sdpa: f16/bf16 overflow", ("sdpa", "sdpa_gqa"), ("grads", "grads2"), SECTION_SWEEP,
              _sdpa_low_precision_overflow),
]


def explain(case, kind, detail):
    """-> the KnownDiff that explains this mismatch, or None"""
    if kind.startswith(("ampgrad_raises_", "torch_raises_")):
        for known in KNOWN_RAISES:
            if case["op"] in known.ops and kind in known.kinds:
                try:
                    if known.applies(case, detail):
                        return known
                except Exception:  # noqa: BLE001 -- as below
                    continue
        return None
    m = parse_detail(detail)
    if m is None:
        return None
    for known in KNOWN:
        if case["op"] in known.ops and kind in known.kinds:
            try:
                if known.applies(case, m):
                    return known
            except Exception:  # noqa: BLE001 -- a predicate that cannot evaluate explains nothing
                continue
    return None
