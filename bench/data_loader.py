#!/usr/bin/env python3
"""data_loader.py: the token-shard loader's memory and speed, and the cost of gradient accumulation
(docs/data.md; numbers in docs/benchmarks.md). Never a test: it times things.

  python3 bench/data_loader.py --build-dir build [--gb 4] [--steps 200] [--workdir /tmp/ampgrad_loader_bench]

1. Makes a synthetic shard set of --gb GB in llm.c's format (uint16 ids below 256, so the byte
   tokenizer's model reads it; 20 train shards and a val shard), unless it is there already.
2. Trains the same model --steps steps on it and on a 2 M-token set, each in a fresh process, and
   reports the peak resident set (the kernel's ru_maxrss, which counts mapped shard pages) of both:
   the difference is what the corpus costs in memory. Also the batch fetch time against the step time
   (metrics.jsonl's data_ms).
3. `ampgrad bench` with --grad-accum 8 against 8 plain micro-steps of the same batch: the step time
   ratio.
"""
import argparse
import json
import os
import platform
import subprocess
import sys
import time

import numpy as np

HEADER_INTS = 256
MAGIC, VERSION = 20240520, 1


def write_shard(path, tokens):
    header = np.zeros(HEADER_INTS, dtype=np.int32)
    header[0], header[1], header[2] = MAGIC, VERSION, len(tokens)
    with open(path + ".tmp", "wb") as f:
        f.write(header.tobytes())
        f.write(tokens.astype(np.uint16).tobytes())
    os.replace(path + ".tmp", path)


def make_set(folder, total_tokens, shards):
    os.makedirs(folder, exist_ok=True)
    rng = np.random.default_rng(0)
    per = total_tokens // shards
    names = [os.path.join(folder, "synth_val_000000.bin")] + [
        os.path.join(folder, f"synth_train_{i:06d}.bin") for i in range(1, shards + 1)]
    for i, name in enumerate(names):
        n = 1_000_000 if i == 0 else per
        if os.path.exists(name) and os.path.getsize(name) == 1024 + 2 * n:
            continue
        write_shard(name, rng.integers(0, 256, size=n, dtype=np.uint16))
    return folder


def cpu_name():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor()


def run_measured(argv):
    """Runs argv; returns (exit code, output, peak RSS in MB, seconds)."""
    start = time.time()
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    out = p.stdout.read()
    _, status, usage = os.wait4(p.pid, 0)
    return os.waitstatus_to_exitcode(status), out, usage.ru_maxrss / 1024.0, time.time() - start


def train(ampgrad, data, out, steps, args):
    argv = [ampgrad, "train", "--data", data, "--tokenizer", "byte", "--preset", args.preset, "--batch-size",
            str(args.batch_size), "--steps", str(steps), "--warmup", "10", "--eval-every", "0", "--eval-iters", "1",
            "--sample-tokens", "0", "--progress", "plain", "--log-every", "50", "--out", out]
    code, text, rss, seconds = run_measured(argv)
    if code != 0:
        sys.exit(f"ampgrad train failed ({code}):\n{text}")
    records = [json.loads(l) for l in open(os.path.join(out, "metrics.jsonl")) if '"train"' in l]
    data_ms = np.median([r["data_ms"] for r in records[5:]])
    step_ms = np.median(np.diff([r["elapsed_s"] for r in records[5:]])) * 1e3
    return rss, data_ms, step_ms, seconds


def bench_ms(ampgrad, args, accum, batch):
    argv = [ampgrad, "bench", "--preset", args.preset, "--batch-size", str(batch), "--grad-accum", str(accum),
            "--warmup-steps", "2", "--timed-steps", str(args.bench_steps)]
    code, text, _, _ = run_measured(argv)
    if code != 0:
        sys.exit(f"ampgrad bench failed:\n{text}")
    for line in text.splitlines():
        if "ms/step" in line:
            return float(line.split("ms/step")[0].split()[-1])
    sys.exit(f"no ms/step in:\n{text}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build-dir", default="build")
    ap.add_argument("--workdir", default="/tmp/ampgrad_loader_bench")
    ap.add_argument("--gb", type=float, default=4.0)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--preset", default="nano")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--bench-steps", type=int, default=5)
    args = ap.parse_args()
    ampgrad = os.path.join(args.build_dir, "app", "ampgrad")
    big_tokens = int(args.gb * 1e9 / 2)
    t0 = time.time()
    big = make_set(os.path.join(args.workdir, "big"), big_tokens, 20)
    small = make_set(os.path.join(args.workdir, "small"), 2_000_000, 2)
    print(f"shard sets ready in {time.time() - t0:.0f} s: {big_tokens / 1e9:.2f} B tokens ({args.gb} GB) and 2 M tokens")
    print(f"CPU: {cpu_name()}, {os.cpu_count()} cores, OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}")
    rss_small, data_small, step_small, _ = train(ampgrad, small, os.path.join(args.workdir, "run_small"), args.steps, args)
    rss_big, data_big, step_big, secs = train(ampgrad, big, os.path.join(args.workdir, "run_big"), args.steps, args)
    print(f"peak RSS, {args.preset} batch {args.batch_size}, {args.steps} steps: 2 M-token set {rss_small:.0f} MB, "
          f"{args.gb} GB set {rss_big:.0f} MB: the corpus adds {rss_big - rss_small:.0f} MB")
    print(f"batch fetch {data_big:.3f} ms of a {step_big:.1f} ms step ({100 * data_big / step_big:.2f}%); "
          f"the {args.gb} GB run took {secs:.0f} s in all (its start checks every token)")
    one = bench_ms(ampgrad, args, 1, args.batch_size)
    eight = bench_ms(ampgrad, args, 8, args.batch_size)
    print(f"--grad-accum 8: {eight:.1f} ms/step; 8 plain micro-steps: {8 * one:.1f} ms; ratio {eight / (8 * one):.3f}")


if __name__ == "__main__":
    main()
