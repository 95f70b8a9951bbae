"""dist_bench.py: all-reduce bus bandwidth over loopback, ampgrad::dist's Gloo group beside
torch.distributed's Gloo group, in one command (docs/benchmarks.md, "All-reduce"):

    python3 bench/dist_bench.py --build-dir build --nproc 2

Both sides are launched by ampgrad-run (one process per rank, OMP_NUM_THREADS=1) and time the
same loop (bench/dist_allreduce.cpp, bench/torch_dist_allreduce.py). With --rounds R each side runs
R times, alternating, and the table shows the median of each figure. Prints a Markdown table.
"""
import argparse
import json
import os
import socket
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(build, nproc, prog, extra):
    cmd = [os.path.join(build, "tools", "ampgrad-run"), "--nproc-per-node", str(nproc),
           "--master-port", str(free_port())] + prog + extra
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    rows = {}
    for line in out.splitlines():
        at = line.find("RESULT ")
        if at >= 0:
            r = json.loads(line[at + 7:])
            rows[r["bytes"]] = r
    return rows


def human(n):
    return f"{n >> 20} MB" if n >= 1 << 20 else f"{n >> 10} KB"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build-dir", default="build")
    ap.add_argument("--nproc", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--max-bytes", type=int, default=64 << 20)
    args = ap.parse_args()
    extra = ["--repeats", str(args.repeats), "--max-bytes", str(args.max_bytes)]
    ours = [os.path.join(args.build_dir, "bench", "bench_dist_allreduce")]
    theirs = [sys.executable, os.path.join(HERE, "torch_dist_allreduce.py")]
    runs = {"ampgrad": [], "torch": []}
    for _ in range(args.rounds):
        runs["ampgrad"].append(run(args.build_dir, args.nproc, ours, extra))
        runs["torch"].append(run(args.build_dir, args.nproc, theirs, extra))

    def med(impl, size, key):
        return statistics.median(r[size][key] for r in runs[impl])

    print(f"all_reduce (sum, f32, synchronous) over loopback, {args.nproc} ranks, Gloo on both sides; "
          f"median of {args.rounds} round(s)\n")
    print("| size | ampgrad time (us) | ampgrad busbw (GB/s) | torch time (us) | torch busbw (GB/s) | ampgrad / torch time |")
    print("|---:|---:|---:|---:|---:|---:|")
    for size in sorted(runs["ampgrad"][0]):
        a_us, t_us = med("ampgrad", size, "us"), med("torch", size, "us")
        print(f"| {human(size)} | {a_us:.1f} | {med('ampgrad', size, 'busbw_GBps'):.3f} | {t_us:.1f} | "
              f"{med('torch', size, 'busbw_GBps'):.3f} | {a_us / t_us:.2f} |")


if __name__ == "__main__":
    main()
