"""dist_bench.py: ampgrad::dist beside torch.distributed (Gloo on both sides, over loopback), in
one command (docs/benchmarks.md, "All-reduce" and "Data-parallel step"):

    python3 bench/dist_bench.py --build-dir build --nproc 2

1. all-reduce bus bandwidth, 1 KB to 64 MB (bench/dist_allreduce.cpp, bench/torch_dist_allreduce.py);
2. the data-parallel step overhead on the GPT `tiny` preset: the step of bench/gpt_step.cpp and
   bench/torch_gpt_step.py alone (one process) and with --ddp on --nproc processes, each with the
   same per-rank batch (--skip-gpt leaves it out).
Everything is launched by ampgrad-run (one process per rank, OMP_NUM_THREADS=1). With --rounds R
each side runs R times, alternating, and the tables show the median of each figure (Markdown).
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


def run_gpt(build, nproc, prog, ddp, steps):
    extra = ["--preset", "tiny", "--steps", str(steps), "--repeats", "3", "--warmup", "2"] + (["--ddp"] if ddp else [])
    cmd = [os.path.join(build, "tools", "ampgrad-run"), "--nproc-per-node", str(nproc if ddp else 1),
           "--master-port", str(free_port())] + prog + extra
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    for line in out.splitlines():
        at = line.find("{")
        if at >= 0 and '"step_ms"' in line:
            return json.loads(line[at:])
    raise RuntimeError("no result from " + " ".join(cmd) + ":\n" + out)


def gpt_table(args):
    progs = {"ampgrad": [os.path.join(args.build_dir, "bench", "bench_gpt_step")],
             "torch": [sys.executable, os.path.join(HERE, "torch_gpt_step.py")]}
    res = {(impl, ddp): [] for impl in progs for ddp in (False, True)}
    for _ in range(args.rounds):
        for impl, prog in progs.items():
            for ddp in (False, True):
                res[(impl, ddp)].append(run_gpt(args.build_dir, args.nproc, prog, ddp, args.gpt_steps))
    print(f"\nGPT tiny f32 training step (B=16 per rank, AdamW, 1 thread per process): alone vs "
          f"DistributedDataParallel on {args.nproc} processes; median of {args.rounds} round(s)\n")
    print("| impl | alone: step (ms) | DDP: step (ms) | DDP / alone | alone: CPU (ms) | DDP: CPU (ms) |")
    print("|---|---:|---:|---:|---:|---:|")
    for impl in progs:
        a = statistics.median(r["step_ms"] for r in res[(impl, False)])
        d = statistics.median(r["step_ms"] for r in res[(impl, True)])
        ac = statistics.median(r["step_cpu_ms"] for r in res[(impl, False)])
        dc = statistics.median(r["step_cpu_ms"] for r in res[(impl, True)])
        print(f"| {impl} | {a:.1f} | {d:.1f} | {d / a:.2f} | {ac:.1f} | {dc:.1f} |")


def human(n):
    return f"{n >> 20} MB" if n >= 1 << 20 else f"{n >> 10} KB"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build-dir", default="build")
    ap.add_argument("--nproc", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--max-bytes", type=int, default=64 << 20)
    ap.add_argument("--skip-gpt", action="store_true")
    ap.add_argument("--gpt-steps", type=int, default=3)
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
    if not args.skip_gpt:
        gpt_table(args)


if __name__ == "__main__":
    main()
