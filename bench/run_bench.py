#!/usr/bin/env python3
# run_bench.py: runs every ampgrad benchmark beside its PyTorch peer and prints one table with
# the ratios and the targets. It builds nothing: it runs the binaries of an existing
# (release) build dir, and gives both sides the same thread count (OMP_NUM_THREADS for ampgrad's
# OpenMP, torch.set_num_threads for PyTorch). "CPU" rows are process CPU time (all threads),
# steadier than wall time on a shared machine; with several threads they include spin-waiting.
#
#   ninja -C build && python3 bench/run_bench.py --build-dir build --threads 2
import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

# (name, ampgrad binary, PyTorch script, arguments common to both)
BENCHMARKS = [
    ("autograd_overhead", "bench_autograd_overhead", "torch_autograd_overhead.py", ["--nodes", "100000", "--size", "4"]),
    ("mlp_step", "bench_mlp_step", "torch_mlp_step.py", ["--batch", "64", "--hidden", "256"]),
    ("engine_overhead", "bench_engine_overhead", "engine_overhead.py", ["--nodes", "100000", "--hook-nodes", "10000"]),
] + [
    (f"gpt_{preset}_{dtype}", "bench_gpt_step", "torch_gpt_step.py", ["--preset", preset, "--dtype", dtype])
    for preset in ("tiny", "small") for dtype in ("f32", "bf16", "f16")
] + [
    (f"llama_{preset}_{dtype}", "bench_llama_step", "torch_llama_step.py", ["--preset", f"llama-{preset}", "--dtype", dtype])
    for preset in ("nano", "tiny") for dtype in ("f32", "bf16")
] + [
    ("llama_ops", "bench_llama_ops", "torch_llama_ops.py", []),
]

# Llama step target (issue 25): at most 0.9x transformers' LlamaForCausalLM step, in f32 and bf16 autocast.
LLAMA_TARGET = 0.9

# GPT step targets (issue 9, section 8): f32 at most 0.8x PyTorch's f32 step; bf16 and f16
# autocast no slower than PyTorch's bf16 autocast step (the f16 row is compared with that too).
GPT_TARGET = {"f32": 0.8, "bf16": 1.0, "f16": 1.0}

# (benchmark, metric key, label, unit, target ratio ampgrad/pytorch or None)
ROWS = [
    ("autograd_overhead", "forward_ns_per_node", "100k tiny ops: forward per node, wall", "ns", None),
    ("autograd_overhead", "forward_cpu_ns_per_node", "100k tiny ops: forward per node, CPU", "ns", None),
    ("autograd_overhead", "backward_ns_per_node", "100k tiny ops: backward per node, wall", "ns", 1 / 3),
    ("autograd_overhead", "backward_cpu_ns_per_node", "100k tiny ops: backward per node, CPU", "ns", 1 / 3),
    ("mlp_step", "step_ms", "MLP 784-256-10 B=64 SGD: step, wall", "ms", 1.0),
    ("mlp_step", "step_cpu_ms", "MLP 784-256-10 B=64 SGD: step, CPU", "ms", 1.0),
    ("mlp_step", "peak_rss_growth_mib", "MLP: peak RSS growth while training", "MiB", None),
    ("mlp_step", "peak_tensor_mib", "MLP: peak live tensor bytes", "MiB", None),
    ("engine_overhead", "backward_ns_per_node", "engine: backward per node, thread CPU", "ns", 1 / 3),
    ("engine_overhead", "tensor_hook_ns", "engine: per tensor hook, thread CPU", "ns", None),
    ("engine_overhead", "node_hook_ns", "engine: per node post-hook, thread CPU", "ns", None),
] + [
    row for preset in ("tiny", "small") for dtype in ("f32", "bf16", "f16") for row in (
        (f"gpt_{preset}_{dtype}", "step_ms", f"GPT {preset} {dtype}: step, wall", "ms", GPT_TARGET[dtype]),
        (f"gpt_{preset}_{dtype}", "step_cpu_ms", f"GPT {preset} {dtype}: step, CPU", "ms", GPT_TARGET[dtype]),
        (f"gpt_{preset}_{dtype}", "peak_rss_growth_mib", f"GPT {preset} {dtype}: peak RSS growth", "MiB", None))
] + [
    row for preset in ("nano", "tiny") for dtype in ("f32", "bf16") for row in (
        (f"llama_{preset}_{dtype}", "step_ms", f"Llama {preset} {dtype}: step, wall", "ms", LLAMA_TARGET),
        (f"llama_{preset}_{dtype}", "step_cpu_ms", f"Llama {preset} {dtype}: step, CPU", "ms", LLAMA_TARGET))
] + [
    # issue 25's op targets: fused at least as fast as PyTorch (ratio <= 1); the composed rows show
    # what a model writer gets from primitives (the >= 2x fused-vs-composed target is read off the raw JSON)
    ("llama_ops", "rms_norm_fused_us", "RMSNorm (8,256,512) fwd+bwd, fused (PyTorch: F.rms_norm)", "us", 1.0),
    ("llama_ops", "rms_norm_composed_us", "RMSNorm fwd+bwd, composed from primitives", "us", None),
    ("llama_ops", "rotary_fused_us", "RoPE (8,8,256,64) fwd+bwd, fused (PyTorch: rotate_half)", "us", 1.0),
    ("llama_ops", "rotary_composed_us", "RoPE fwd+bwd, composed (rotate_half)", "us", None),
    ("llama_ops", "sdpa_gqa_us", "causal SDPA fwd+bwd, GQA 8 q / 2 kv heads", "us", None),
    ("llama_ops", "sdpa_mha_us", "causal SDPA fwd+bwd, MHA 8 heads", "us", None),
]
# rows whose PyTorch side is another benchmark's: (benchmark, PyTorch benchmark)
PEER_OVERRIDE = {f"gpt_{preset}_f16": f"gpt_{preset}_bf16" for preset in ("tiny", "small")}


def run_json(cmd, env):
    """Run one benchmark program and return the JSON object on its last output line."""
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"run_bench: {' '.join(cmd)} failed (exit {proc.returncode}):\n{proc.stdout}{proc.stderr}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def median_of(runs):
    """Per key, the median over the rounds of the numeric values (other values from the first run)."""
    merged = dict(runs[0])
    for key, value in runs[0].items():
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            merged[key] = statistics.median(r[key] for r in runs if key in r)
    return merged


def fmt(value):
    if value is None:
        return "-"
    return f"{value:.3g}" if abs(value) < 100 else f"{value:.0f}"


def main():
    ap = argparse.ArgumentParser(description="ampgrad vs PyTorch benchmarks")
    ap.add_argument("--build-dir", default="build", help="a configured and built (release) ampgrad build dir")
    ap.add_argument("--threads", type=int, default=os.cpu_count(), help="threads for both sides")
    ap.add_argument("--repeats", type=int, default=None, help="timed repeats per benchmark (default: each one's own)")
    ap.add_argument("--rounds", type=int, default=3,
                    help="run each pair this many times, alternating ampgrad and PyTorch; report the medians")
    ap.add_argument("--only", default=None,
                    help="comma-separated benchmark-name prefixes to run (e.g. gpt_tiny,gpt_small_f32)")
    args = ap.parse_args()

    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads), PYTHONPATH=HERE)
    results = {}
    only = args.only.split(",") if args.only else None
    for name, binary, script, common in BENCHMARKS:
        if only and not any(name.startswith(prefix) for prefix in only):
            continue
        exe = os.path.join(args.build_dir, "bench", binary)
        if not os.path.exists(exe):
            sys.exit(f"run_bench: {exe} not found; build first: ninja -C {args.build_dir}")
        print(f"running {name} ...", file=sys.stderr)
        extra = ["--repeats", str(args.repeats)] if args.repeats else []
        rounds = [(run_json([exe] + common + extra, env),
                   run_json([sys.executable, os.path.join(HERE, script)] + common + extra, env))
                  for _ in range(max(args.rounds, 1))]
        results[name] = (median_of([r[0] for r in rounds]), median_of([r[1] for r in rounds]))

    import torch  # only for its version string; the peers ran in their own processes
    load = os.getloadavg()[0]
    print(f"ampgrad vs PyTorch {torch.__version__} | {args.threads} threads | {os.cpu_count()} cores "
          f"({platform.machine()}) | median of {max(args.rounds, 1)} alternating rounds "
          f"| load average {load:.1f} | {datetime.date.today().isoformat()}\n")
    print("| benchmark | ampgrad | PyTorch | ampgrad / PyTorch | target | met |")
    print("|---|---:|---:|---:|---:|:---:|")
    for bench, key, label, unit, target in ROWS:
        peer = PEER_OVERRIDE.get(bench, bench) if key.startswith("step") else bench
        if bench not in results or peer not in results:
            continue
        ours, theirs = results[bench][0].get(key), results[peer][1].get(key)
        if peer != bench:
            label += f" (PyTorch: {peer})"
        ratio = ours / theirs if ours is not None and theirs else None
        met = "-" if target is None or ratio is None else ("yes" if ratio <= target else "no")
        target_str = "-" if target is None else f"<= {target:.2f}"
        print(f"| {label} ({unit}) | {fmt(ours)} | {fmt(theirs)} | {fmt(ratio)} | {target_str} | {met} |")
    print("\nraw:", json.dumps(results))


if __name__ == "__main__":
    main()
