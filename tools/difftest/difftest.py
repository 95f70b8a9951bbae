#!/usr/bin/env python3
"""difftest.py: randomized differential testing of ampgrad against PyTorch (docs/testing.md).

    python3 tools/difftest/difftest.py --cases 20000 --seed 1 [--ops sum,prod] [--replay build/tools/difftest_replay]

Generates seeded random cases over every op (tools/difftest/cases.py), runs each in PyTorch
(forward, backward, double backward; torch_ops.py) and in ampgrad (the replay program,
tools/difftest/replay.cpp, fed JSON lines), and compares: errors by class (both raise, or one
does), then dtypes, shapes and values within dtype-derived tolerances. Each mismatch class (op,
kind) is shrunk to a small reproducer (smaller sizes, no special values, contiguous, f64, no double
backward) and printed as JSON. PyTorch is needed only here, never by the test suite.
"""
import argparse
import collections
import copy
import json
import math
import os
import pathlib
import random
import subprocess
import sys

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import warnings  # noqa: E402

import torch  # noqa: E402

warnings.filterwarnings("ignore")

import torch_ops  # noqa: E402
from known_diffs import DOC, explain  # noqa: E402
from cases import GENERATORS, make_case  # noqa: E402
from gen import _encode  # noqa: E402

EPS = {"f64": 2.2e-16, "f32": 1.2e-7, "f16": 9.8e-4, "bf16": 7.8e-3}
# tolerance = K * eps (relative, and absolute relative to the tensor's largest finite value)
K = {"outputs": {"f64": 1e4, "f32": 64, "f16": 8, "bf16": 4},
     "grads": {"f64": 1e5, "f32": 512, "f16": 32, "bf16": 16},
     "grads2": {"f64": 1e6, "f32": 4096, "f16": 64, "bf16": 32}}

# second gradients: how many roundings of a term of size S / |x| a cancelling sum may carry
# (cancellation_allowance)
CANCEL_ROUNDINGS = 16
# values: how many times PyTorch's own distance from the float64 result ampgrad may be (exact_allowance)
EXACT_FACTOR = 2


def _finite_json(v):
    """JSON has no nan/inf: send them as strings (replay_ops.cpp's num() reads them back)"""
    if isinstance(v, float) and not math.isfinite(v):
        return "nan" if v != v else ("inf" if v > 0 else "-inf")
    return v


class Replay:
    """the ampgrad replay program, kept running: one JSON line in, one out"""

    def __init__(self, path):
        self.path = path
        self.proc = None

    def run(self, case):
        if self.proc is None or self.proc.poll() is not None:
            self.proc = subprocess.Popen([self.path], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                         env=dict(os.environ, OMP_NUM_THREADS="1"))
        wire = {k: case[k] for k in ("inputs", "prog", "outputs", "douts", "vs", "double")}
        wire["prog"] = [dict(s, kw={k: _finite_json(v) for k, v in s["kw"].items()}) for s in wire["prog"]]
        wire["id"] = case["seed"]
        try:
            self.proc.stdin.write(json.dumps(wire) + "\n")
            self.proc.stdin.flush()
            line = self.proc.stdout.readline()
        except BrokenPipeError:
            line = ""
        if not line:
            rc = self.proc.wait()
            self.proc = None
            return {"stage": "crash", "error": f"replay died (exit {rc})"}
        return json.loads(line)


def make_douts_fn(seed):
    rng = torch.Generator().manual_seed(seed)

    def make(outs, leaves):
        douts = [_encode(torch.randn(o.shape, generator=rng, dtype=torch.float64).to(o.dtype))
                 if o.is_floating_point() and o.requires_grad else None for o in outs]
        vs = [_encode(torch.randn(l.shape, generator=rng, dtype=torch.float64)) if l.requires_grad else None
              for l in leaves]
        return douts, vs
    return make


def values_close(got, want, dtype_name, k, extra=None):
    """got, want: float64 torch tensors of one shape -> None or a description; extra: an optional
    per-element absolute allowance (same shape) added to the tolerance (cancellation_allowance)"""
    gn, wn = torch.isnan(got), torch.isnan(want)
    if not torch.equal(gn, wn):
        i = (gn != wn).nonzero()[0].tolist()
        return f"nan mismatch at {i}: ampgrad {got[tuple(i)].item()} torch {want[tuple(i)].item()}"
    gi, wi = torch.isinf(got), torch.isinf(want)
    finite = ~(gn | wn | gi | wi)
    if not torch.equal(got[gi | wi], want[gi | wi]) or not torch.equal(gi, wi):
        i = ((gi != wi) | ((gi | wi) & (got != want))).nonzero()[0].tolist()
        return f"inf mismatch at {i}: ampgrad {got[tuple(i)].item()} torch {want[tuple(i)].item()}"
    if not finite.any():
        return None
    tol = k * EPS.get(dtype_name, EPS["f32"])
    scale = max(1.0, want[finite].abs().max().item())
    err = (got - want).abs()
    allowed = tol * scale + tol * want.abs()
    if extra is not None:
        allowed = allowed + extra
    bad = finite & (err > allowed)
    if bad.any():
        i = bad.nonzero()[0].tolist()
        return f"value at {i}: ampgrad {got[tuple(i)].item()!r} torch {want[tuple(i)].item()!r} (tol {tol:.3g})"
    return None


def compute_floor(case):
    """the least precise floating dtype among the case's inputs (None if none is floating)"""
    names = [i["dtype"] for i in case.get("inputs", []) if i["dtype"] in EPS]
    return max(names, key=lambda n: EPS[n]) if names else None


def cancellation_allowance(case, ref, leaf, tol_name):
    """The rounding error a second gradient may carry even where its exact value cancels to ~0.

    grads2[leaf][i] is d/dx_i of sum_k (g_k * v_k) (g: the first gradients, v: the case's random
    vectors). Each term of that derivative has, by dimensional analysis, the size of the quantity
    differentiated over the variable: about S / |x_i| with S = sum_k max|g_k| * max|v_k|. Terms of
    that size are rounded to the dtype before they are added, so even a sum that should cancel
    exactly can be off by eps * S / |x_i| (norm(x) at x = 0.001 in bf16: terms of 1000, one ulp of
    1000 is 8, against an exact 0). This returns CANCEL_ROUNDINGS * eps * S / |x_i| per element (a few
    roundings of a few such terms), and 0 where x_i is 0 or not finite (no allowance there).
    docs/testing.md.
    """
    grads, vs = ref.get("grads") or [], case.get("vs") or []
    total = 0.0
    for g, v in zip(grads, vs):
        if g is None or v is None or not g.is_floating_point() or g.numel() == 0:
            continue
        gv, vv = g.detach().to(torch.float64), torch_ops.decode(v).to(torch.float64)
        gmax = gv[torch.isfinite(gv)].abs().max().item() if torch.isfinite(gv).any() else 0.0
        vmax = vv[torch.isfinite(vv)].abs().max().item() if torch.isfinite(vv).any() else 0.0
        total += gmax * vmax
    x = torch_ops.decode(case["inputs"][leaf]).to(torch.float64)
    usable = torch.isfinite(x) & (x != 0)
    ax = torch.where(usable, x.abs(), torch.ones_like(x))
    allowance = CANCEL_ROUNDINGS * EPS[tol_name] * total / ax
    return torch.where(usable, allowance, torch.zeros_like(x))


def f64_reference(case):
    """PyTorch's result for the same case computed in float64: every floating input upcast (its values
    are exact in f64), the output gradients and the double-backward vectors as the low-precision run
    used them (rounded to their dtype). None when that run fails. Only a yardstick (exact_allowance):
    dtype-dependent details (e.g. an exponent rounded to bf16) are not reproduced."""
    c64 = copy.deepcopy(case)
    for inp in c64["inputs"]:
        if inp["dtype"] in EPS:
            inp["dtype"] = "f64"
    c64["douts"] = [None if d is None else dict(d, dtype="f64") for d in case.get("douts", [])]
    vs = []
    for inp, v in zip(case["inputs"], case.get("vs", [])):
        if v is None or inp["dtype"] not in EPS:
            vs.append(v)
            continue
        vs.append(_encode(torch_ops.decode(v).to(torch_ops.DTYPES[inp["dtype"]]).to(torch.float64)))
    c64["vs"] = vs
    ref = torch_ops.run_case(c64, None)
    return None if "error" in ref else ref


def exact_allowance(want, exact):
    """(EXACT_FACTOR + 1) * |want - exact| per element: by the triangle inequality, |got - want| within it
    is implied by ampgrad being no further than EXACT_FACTOR times PyTorch's own error from the
    float64 result (docs/testing.md). 0 where either is not finite."""
    if exact is None or list(exact.shape) != list(want.shape) or not exact.is_floating_point():
        return None
    w, e = want.detach().to(torch.float64), exact.detach().to(torch.float64)
    d = (w - e).abs()
    return torch.where(torch.isfinite(d), (EXACT_FACTOR + 1) * d, torch.zeros_like(d))


def compare_tensor(got_json, want, kind, floor=None, extra_fn=None):
    if want is None and got_json is None:
        return None
    if want is None or got_json is None:                 # an unused input: None and zeros agree
        t = want if want is not None else torch_ops.decode(got_json)
        return None if not t.is_floating_point() or bool((t == 0).all()) else f"{kind}: one side has no gradient"
    got = torch_ops.decode(got_json)
    want_name = torch_ops.NAMES[want.dtype]
    if got_json["dtype"] != want_name:
        return f"{kind} dtype: ampgrad {got_json['dtype']} torch {want_name}"
    if list(got.shape) != list(want.shape):
        return f"{kind} shape: ampgrad {list(got.shape)} torch {list(want.shape)}"
    if not want.is_floating_point():
        return None if torch.equal(got, want) else f"{kind} values differ (exact dtype {want_name})"
    # A gradient is computed in the op's compute dtype: the gradient to an f64 0-d input of an f32 op
    # (0-d tensors do not promote) has f32 accuracy, though its dtype is f64. So gradients are held
    # to the least precise input dtype when it is coarser than their own (outputs are already in the
    # result dtype).
    tol_name = want_name
    if kind != "outputs" and floor is not None and EPS[floor] > EPS.get(want_name, 0.0):
        tol_name = floor
    extra = extra_fn(tol_name) if extra_fn is not None else None
    if extra is not None and list(extra.shape) != list(want.shape):
        extra = None                                     # a layout the rule does not cover
    return values_close(got.to(torch.float64), want.detach().to(torch.float64), tol_name, K[kind][tol_name],
                        extra)


def compare(mine, ref, floor=None, case=None, ref64=None):
    """-> (kind, detail) or None; floor: compute_floor(case); case: enables the second-gradient
    cancellation allowance (cancellation_allowance); ref64: f64_reference(case), enables
    exact_allowance"""
    if "error" in ref or "error" in mine:
        if "error" in ref and "error" in mine:
            return None
        if "error" in ref and "not implemented" in ref["error"]:
            return "torch_unsupported", ref["error"][:200]       # e.g. no double backward of a fused kernel
        if mine.get("stage") == "crash":
            return "crash", mine["error"]
        if "error" in mine:
            return f"ampgrad_raises_{mine['stage']}", f"ampgrad: {mine['error'][:300]} | torch ok"
        return f"torch_raises_{ref['stage']}", f"torch: {ref['error'][:300]} | ampgrad ok"
    for kind in ("outputs", "grads", "grads2"):
        want, got = ref.get(kind), mine.get(kind)
        if want is None and got is None:
            continue
        if want is None or got is None or len(want) != len(got):
            return kind, f"{kind}: present on one side only"
        exacts = (ref64 or {}).get(kind) or []
        for i, (g, w) in enumerate(zip(got, want)):
            def extra_fn(tol_name, i=i, w=w):
                parts = []
                if kind == "grads2" and case is not None:
                    parts.append(cancellation_allowance(case, ref, i, tol_name))
                if w is not None and i < len(exacts) and exacts[i] is not None:
                    parts.append(exact_allowance(w, exacts[i]))
                parts = [p for p in parts if p is not None and list(p.shape) == list(w.shape)]
                return sum(parts) if parts else None
            d = compare_tensor(g, w, kind, floor, extra_fn)
            if d:
                return kind, f"[{i}] {d}"
    return None


def run_one(op, seed, replay, limits=None):
    case = make_case(op, seed, limits)
    ref = torch_ops.run_case(case, make_douts_fn(seed))
    if "douts" not in case or "vs" not in case:
        case["douts"], case["vs"] = [], []
    mine = replay.run(case)
    res = compare(mine, ref, compute_floor(case), case)
    if res and res[0] in ("outputs", "grads", "grads2") and "value at" in res[1]:
        res = compare(mine, ref, compute_floor(case), case, f64_reference(case))   # exact_allowance
    return case, res


SHRINKS = [{"double": False}, {"layouts": False}, {"special": False}, {"dtype": "f64"}, {"dtype": "f32"},
           {"max_size": 1}, {"max_size": 2}, {"max_size": 3}, {"max_rank": 1}, {"max_rank": 2}]


def shrink(op, seed, kind, replay, tries=60):
    """a smaller case with the same mismatch kind: lower limits, and other seeds under them"""
    limits, best = {}, None
    case, res = run_one(op, seed, replay, limits)
    best = (case, res)
    for extra in SHRINKS:
        trial = dict(limits, **extra)
        for s in [seed] + [seed * 1000 + j for j in range(tries // len(SHRINKS))]:
            c, r = run_one(op, s, replay, trial)
            if r and r[0] == kind:
                limits, best = trial, (c, r)
                break
    return limits, best


def short_case(case):
    def tensor(t):
        data = t["data"] if len(t["data"]) <= 24 else t["data"][:24] + ["..."]
        return {"dtype": t["dtype"], "shape": t["shape"], "layout": t.get("layout", "c"),
                "requires_grad": t.get("requires_grad", False), "data": data}
    return {"op": case["op"], "seed": case["seed"], "double": case.get("double"), "prog": case["prog"],
            "inputs": [tensor(t) for t in case["inputs"]], "outputs": case["outputs"]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cases", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--ops", default="", help="comma-separated op names (default: all)")
    ap.add_argument("--replay", default=str(HERE.parent.parent / "build" / "tools" / "difftest_replay"))
    ap.add_argument("--no-shrink", action="store_true")
    ap.add_argument("--json", default="", help="write the summary here")
    args = ap.parse_args()
    ops = [o for o in args.ops.split(",") if o] or sorted(GENERATORS)
    torch.set_num_threads(1)
    rng = random.Random(args.seed)
    replay = Replay(args.replay)
    counts = collections.Counter()
    classes = collections.defaultdict(list)
    known = collections.defaultdict(list)           # KnownDiff name -> [(op:kind, seed)]
    known_section = {}
    unsupported = collections.Counter()
    for i in range(args.cases):
        op = ops[i % len(ops)] if i < len(ops) else rng.choice(ops)
        seed = rng.randrange(1 << 31)
        try:
            case, res = run_one(op, seed, replay)
        except Exception as e:  # noqa: BLE001 -- a generator bug must not stop the run
            counts[(op, "harness_error")] += 1
            classes[(op, "harness_error")].append((seed, repr(e)))
            continue
        counts[(op, "cases")] += 1
        if res is None:
            continue
        if res[0] == "torch_unsupported":
            unsupported[op] += 1
            continue
        why = explain(case, res[0], res[1])
        if why is not None:                             # a documented deliberate difference
            known[why.name].append((f"{op}:{res[0]}", seed))
            known_section[why.name] = why.section
            continue
        counts[(op, res[0])] += 1
        classes[(op, res[0])].append((seed, res[1]))
        if (i + 1) % 2000 == 0:
            print(f"... {i + 1} cases", file=sys.stderr)
    total = sum(v for (o, k), v in counts.items() if k == "cases")
    mism = {f"{o}:{k}": v for (o, k), v in sorted(counts.items()) if k != "cases"}
    n_known = sum(len(v) for v in known.values())
    unexplained = sum(mism.values())
    print(f"cases run: {total}; {unexplained + n_known} mismatches ({unexplained} unexplained, in {len(mism)} "
          f"classes), {n_known} known differences listed in {DOC}; "
          f"cases PyTorch cannot run (not implemented): {dict(unsupported)}")
    for key, v in mism.items():
        print(f"  unexplained {key}: {v}")
    for name, hits in sorted(known.items()):
        where = ", ".join(f"{k} seed {s}" for k, s in hits[:4]) + (", ..." if len(hits) > 4 else "")
        print(f"  known ({DOC}, \"{known_section[name]}\"): {name}: {len(hits)} ({where})")
    for (op, kind), hits in sorted(classes.items()):
        print(f"\n=== {op}:{kind} ({len(hits)} cases) e.g. seed {hits[0][0]}: {hits[0][1]}")
        for seed, detail in hits[1:]:
            print(f"    also seed {seed}: {detail}")
        if kind == "harness_error" or args.no_shrink:
            continue
        limits, (case, res) = shrink(op, hits[0][0], kind, replay)
        print(f"minimal reproducer (limits {limits}): {res[1] if res else 'did not reproduce'}")
        print(json.dumps(short_case(case)))
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(
            {"cases": total, "mismatches": mism, "known": {k: len(v) for k, v in known.items()}}, indent=1))
    return 1 if mism else 0                             # unexplained mismatches (harness errors included)


if __name__ == "__main__":
    sys.exit(main())
