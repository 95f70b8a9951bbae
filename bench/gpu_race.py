#!/usr/bin/env python3
# gpu_race.py: the GPU race. GPT-2 124M (T = 1024) training steps, ampgrad (bench_gpt_step) against
# PyTorch eager AMP (bench/torch_gpt_step.py) run alternately on the same GPU, bf16 and then fp16
# with a GradScaler, each side with its fused AdamW; then, after every eager row, PyTorch under
# torch.compile once (bf16 by default: compiling takes a minute or more of scarce GPU time), where it
# works. --json gets each side's line as soon as it is measured. Both sides run the same model, batch and step (docs/benchmarks.md, "The GPU
# race"), and print one JSON line each; this script prints the table: ms/step, tokens/s, the ratio
# to PyTorch eager's tokens/s, MFU (llm.c's convention), peak device memory and host syncs per step.
#
#   python3 bench/gpu_race.py --ampgrad build/bench/bench_gpt_step --batch 8 --rounds 2 [--json out.jsonl]
# In a GPU bundle (../shared/gpu, scripts/gpu/run.sh's "peer" step) the defaults find both sides.
import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def default_ampgrad():
    for path in (os.path.join(HERE, "bench_gpt_step"), os.path.join(HERE, "..", "build", "bench", "bench_gpt_step")):
        if os.path.exists(path):
            return path
    return "bench_gpt_step"


def run_side(cmd, timeout):
    """One benchmark process; its last output line is a JSON object. None (and why) on failure."""
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, f"timed out after {timeout} s"
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        return None, f"exit {proc.returncode}: {(proc.stderr or proc.stdout).strip()[-600:]}"
    return json.loads(lines[-1]), None


def race(args):
    """Every eager round of every dtype first, then the torch.compile rows (a cold compile may take
    minutes: if the caller's time runs out there, the eager rows are already in --json)."""
    common = ["--preset", args.preset, "--batch", str(args.batch), "--steps", str(args.steps),
              "--repeats", str(args.repeats), "--warmup", str(args.warmup), "--device", args.device]
    torch_cmd = [sys.executable, os.path.join(HERE, "torch_gpt_step.py")] + common
    results = []
    json_out = open(args.json, "w") if args.json else None

    def record(label, cmd):
        result, why = run_side(cmd, args.timeout)
        print(f"# {label}: " + (why or f"{result['step_ms']:.1f} ms/step"), flush=True)
        if result:
            results.append(result)
            if json_out:                                   # at once: a killed race keeps what it measured
                json_out.write(json.dumps(result) + "\n")
                json_out.flush()

    for dtype in args.dtypes:
        for r in range(args.rounds):                       # alternate, so drift hits both sides alike
            for name, cmd in (("ampgrad", [args.ampgrad] + common), ("pytorch", torch_cmd)):
                record(f"{name} {dtype} round {r + 1}", cmd + ["--dtype", dtype])
    for dtype in args.compile_dtypes:
        record(f"pytorch-compile {dtype}", torch_cmd + ["--dtype", dtype, "--compile"])
    if json_out:
        json_out.close()
    return results


def table(results):
    """Medians over rounds per (impl, dtype), with tokens/s relative to PyTorch eager's."""
    groups = {}
    for r in results:
        groups.setdefault((r["dtype"], r["impl"]), []).append(r)
    eager = {dtype: statistics.median(x["tokens_per_s"] for x in rs)
             for (dtype, impl), rs in groups.items() if impl == "pytorch"}
    print(f"{'dtype':5} {'impl':16} {'ms/step':>9} {'tokens/s':>10} {'vs eager':>8} {'MFU':>6} "
          f"{'peak MiB':>9} {'syncs/step':>10}")
    for (dtype, impl), rs in sorted(groups.items()):
        tps = statistics.median(x["tokens_per_s"] for x in rs)
        ms = statistics.median(x["step_ms"] for x in rs)
        mfu = rs[0].get("mfu")
        ratio = f"{tps / eager[dtype]:.2f}x" if dtype in eager else "-"
        print(f"{dtype:5} {impl:16} {ms:9.1f} {tps:10.0f} {ratio:>8} {'-' if mfu is None else f'{100 * mfu:.1f}%':>6} "
              f"{rs[0].get('peak_tensor_mib') or 0:9.0f} {rs[0].get('host_syncs_per_step', 0):10.2f}")


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--ampgrad", default=default_ampgrad(), help="the bench_gpt_step program")
    ap.add_argument("--preset", default="gpt2")
    ap.add_argument("--device", default="cuda", help="cuda; cpu only rehearses the script (with --preset tiny)")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--dtypes", nargs="+", default=["bf16", "f16"])
    ap.add_argument("--compile-dtypes", nargs="*", default=["bf16"],
                    help="dtypes to run once more under torch.compile (none: skip it; it compiles for a minute)")
    ap.add_argument("--timeout", type=int, default=150, help="seconds per benchmark process")
    ap.add_argument("--json", help="also write every side's JSON line to this file")
    args = ap.parse_args()
    results = race(args)
    if not results:
        sys.exit("gpu_race: no side produced a result")
    table(results)


if __name__ == "__main__":
    main()
