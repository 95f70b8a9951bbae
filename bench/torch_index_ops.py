#!/usr/bin/env python3
"""torch_index_ops.py: PyTorch peer of bench/index_ops.cpp, and its side-by-side runner.

Same shapes, same four forward ops (index_select of N rows of a (V,C) f32 table, gather of 64
columns per row, scatter_add and index_add of N rows into the table), same timing (median wall time
of --repeats runs after a warm-up), threads from OMP_NUM_THREADS. Prints one JSON line; with
--ampgrad BIN it also runs the ampgrad binary and prints a table with the ratios:

    OMP_NUM_THREADS=2 python3 bench/torch_index_ops.py --ampgrad build/bench/bench_index_ops
"""
import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

OPS = ["index_select", "gather", "scatter_add", "index_add"]


def time_op(op, repeats):
    op()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        op()
        times.append(time.perf_counter() - t0)
    times.sort()
    n = len(times)
    return times[n // 2] if n % 2 else 0.5 * (times[n // 2 - 1] + times[n // 2])


def measure_torch(args):
    import torch
    from torch_common import set_threads
    threads = set_threads()
    torch.manual_seed(0)
    table = torch.randn(args.rows, args.cols)
    row_index = torch.randint(0, args.rows, (args.picks,))
    updates = torch.randn(args.picks, args.cols)
    col_index = torch.randint(0, args.cols, (args.rows, 64))
    row_index_2d = row_index.view(args.picks, 1).expand(args.picks, args.cols).contiguous()
    ops = {"index_select": lambda: torch.index_select(table, 0, row_index),
           "gather": lambda: torch.gather(table, 1, col_index),
           "scatter_add": lambda: torch.scatter_add(table, 0, row_index_2d, updates),
           "index_add": lambda: torch.index_add(table, 0, row_index, updates)}
    out = {"impl": "torch", "threads": threads, "rows": args.rows, "cols": args.cols, "picks": args.picks}
    out.update({f"{name}_ms": 1e3 * time_op(ops[name], args.repeats) for name in OPS})
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=8192)
    ap.add_argument("--cols", type=int, default=768)
    ap.add_argument("--picks", type=int, default=4096)
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--ampgrad", default="", help="the bench_index_ops binary: run it too and compare")
    args = ap.parse_args()
    ours = None
    if args.ampgrad:
        cmd = [args.ampgrad, "--rows", str(args.rows), "--cols", str(args.cols), "--picks", str(args.picks),
               "--repeats", str(args.repeats)]
        ours = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
    theirs = measure_torch(args)
    print(json.dumps(theirs))
    if ours:
        print(json.dumps(ours))
        print(f"\n| op | ampgrad ms | torch ms | torch / ampgrad |\n|---|---|---|---|")
        for name in OPS:
            a, t = ours[f"{name}_ms"], theirs[f"{name}_ms"]
            print(f"| {name} | {a:.3f} | {t:.3f} | {t / a:.2f}x |")


if __name__ == "__main__":
    main()
