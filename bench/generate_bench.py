#!/usr/bin/env python3
# generate_bench.py: greedy generation with and without the KV cache, ampgrad (bench_generate)
# beside Hugging Face transformers' generate (torch_generate.py), on the same GPT sizes, prompt
# length, token count and threads (OMP_NUM_THREADS for ampgrad, torch.set_num_threads for PyTorch).
# Prints tokens/s (wall and per process CPU second) and the cost of a token against its position.
#
#   ninja -C build bench/bench_generate && python3 bench/generate_bench.py --build-dir build --threads 2
import argparse
import datetime
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def run_json(cmd, env):
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--build-dir", default="build")
    p.add_argument("--python", default=sys.executable, help="an interpreter with torch and transformers")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--preset", default="small")
    p.add_argument("--block-size", type=int, default=512)
    p.add_argument("--prompt", type=int, default=16)
    p.add_argument("--new-tokens", type=int, default=256)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--bucket", type=int, default=32)
    a = p.parse_args()
    common = ["--preset", a.preset, "--block-size", str(a.block_size), "--prompt", str(a.prompt),
              "--new-tokens", str(a.new_tokens), "--repeats", str(a.repeats), "--bucket", str(a.bucket)]
    env = dict(os.environ, OMP_NUM_THREADS=str(a.threads))
    ours = run_json([os.path.join(a.build_dir, "bench", "bench_generate")] + common, env)
    peer = run_json([a.python, os.path.join(HERE, "torch_generate.py")] + common, env)
    print(f"greedy generation, GPT {a.preset} sizes, block {a.block_size}, prompt {a.prompt}, {a.new_tokens} new "
          f"tokens, batch 1, {a.threads} threads, median of {a.repeats}; {datetime.date.today()}; "
          f"torch {peer['torch']}, transformers {peer['transformers']}\n")
    print("| mode | ampgrad tokens/s | HF tokens/s | ampgrad / HF | ampgrad tokens/CPU-s | HF tokens/CPU-s |")
    print("|---|---|---|---|---|---|")
    for mode in ("cache", "no_cache"):
        o, h = ours[mode], peer[mode]
        print(f"| {mode} | {o['tokens_per_s']} | {h['tokens_per_s']} | {o['tokens_per_s'] / h['tokens_per_s']:.2f}x "
              f"| {o['tokens_per_cpu_s']} | {h['tokens_per_cpu_s']} |")
    print(f"\nms per token (mean over {a.bucket} steps) against the position of the token's input:\n")
    print("| position | ampgrad cache | ampgrad no cache | HF cache | HF no cache |")
    print("|---|---|---|---|---|")
    for i, bucket in enumerate(ours["cache"]["per_token"]):
        row = [ours["cache"], ours["no_cache"], peer["cache"], peer["no_cache"]]
        print(f"| {bucket['position']} | " + " | ".join(f"{r['per_token'][i]['ms']:.2f}" for r in row) + " |")
    print("\n" + json.dumps({"ampgrad": ours, "hf": peer}))


if __name__ == "__main__":
    main()
