#!/usr/bin/env python3
"""sort_ops.py: PyTorch peer of bench/sort_ops.cpp, and its side-by-side runner.

Same shapes and timing (wall time, the best of --repeats after a warm-up): sort forward and
backward (32,4096), topk 50 of (8,50257), cumsum forward and backward (64,2048), flip (64,2048).
With --ampgrad BIN it runs the ampgrad binary too and prints both with the ratio ampgrad / PyTorch:

    OMP_NUM_THREADS=2 python3 bench/sort_ops.py --ampgrad build/bench/bench_sort_ops
"""
import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def best_ms(repeats, run):
    run()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        run()
        times.append(1e3 * (time.perf_counter() - t0))
    return min(times)


def measure_torch(repeats):
    import torch
    from torch_common import set_threads
    set_threads()
    torch.manual_seed(0)
    rows = torch.randn(32, 4096, requires_grad=True)
    logits = torch.randn(8, 50257)
    seq = torch.randn(64, 2048, requires_grad=True)
    return {
        "sort_fwd_bwd_32x4096": best_ms(repeats, lambda: torch.sort(rows, -1)[0].sum().backward()),
        "topk50_8x50257": best_ms(repeats, lambda: torch.topk(logits, 50)),
        "cumsum_fwd_bwd_64x2048": best_ms(repeats, lambda: torch.cumsum(seq, -1).sum().backward()),
        "flip_64x2048": best_ms(repeats, lambda: torch.flip(seq.detach(), [-1])),
    }


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--ampgrad", help="build/bench/bench_sort_ops: run it too, side by side")
    p.add_argument("--repeats", type=int, default=20)
    args = p.parse_args()
    ours = None
    if args.ampgrad:
        out = subprocess.run([args.ampgrad, "--repeats", str(args.repeats)], check=True, capture_output=True, text=True)
        ours = json.loads(out.stdout.strip().splitlines()[-1])
    theirs = measure_torch(args.repeats)
    if ours is None:
        print(json.dumps(theirs))
        return
    print(f"{'case':28s} {'ampgrad ms':>11s} {'pytorch ms':>11s} {'ratio':>7s}")
    for key, t in theirs.items():
        print(f"{key:28s} {ours[key]:11.3f} {t:11.3f} {ours[key] / t:7.2f}")


if __name__ == "__main__":
    main()
