"""zero_memory.py: the ZeRO memory table of docs/benchmarks.md in one command:

    python3 bench/zero_memory.py --build-dir build

For stages 0 (DistributedDataParallel + master weights), 1, 2, 3 and world sizes 1, 2, 4 it runs
bench/zero_memory.cpp under ampgrad-run (one process per rank, OMP_NUM_THREADS=1) and prints a
Markdown table: per-rank model-state bytes (rank 0; every rank is within a partition's padding of
it), the ZeRO paper's figure (2-byte params and grads, K = 12), the figure for this engine's byte
widths (f32 gradient partition), the ratios, whether every rank is within 5% of that figure, and
the median step time (wall and CPU). Extra arguments go to every run (e.g. --width 1024 --layers 2, or
--grad-accum fp16 for 2-byte gradient partitions, where "ours" is the paper's figure).
"""
import argparse
import json
import os
import socket
import subprocess


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(build, nproc, stage, extra):
    cmd = [os.path.join(build, "tools", "ampgrad-run"), "--nproc-per-node", str(nproc), "--master-port",
           str(free_port()), os.path.join(build, "bench", "bench_zero_memory"), "--stage", str(stage)] + extra
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    rows = [json.loads(line[line.find("RESULT ") + 7:]) for line in out.splitlines() if "RESULT " in line]
    if len(rows) != nproc:
        raise RuntimeError(f"{' '.join(cmd)}: {len(rows)} results of {nproc}:\n{out}")
    return sorted(rows, key=lambda r: r["rank"])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build-dir", default="build")
    ap.add_argument("--worlds", default="1,2,4")
    ap.add_argument("--stages", default="0,1,2,3")
    args, extra = ap.parse_known_args()
    mib = 1 << 20
    print("| stage | N | params MiB | grads MiB | optimizer MiB | total MiB | paper MiB | ours MiB | total/paper "
          "| total/ours | all ranks within 5% | step ms (rank 0) | step CPU ms (rank 0) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for stage in [int(s) for s in args.stages.split(",")]:
        for n in [int(w) for w in args.worlds.split(",")]:
            rows = run(args.build_dir, n, stage, extra)
            r = rows[0]
            ok = all(abs(x["vs_ours"] - 1) <= 0.05 for x in rows)
            print(f"| {stage} | {n} | {r['params'] / mib:.2f} | {r['grads'] / mib:.2f} | {r['optimizer'] / mib:.2f} "
                  f"| {r['total'] / mib:.2f} | {r['paper'] / mib:.2f} | {r['ours_formula'] / mib:.2f} "
                  f"| {r['vs_paper']:.3f} | {r['vs_ours']:.3f} | {'yes' if ok else 'NO'} | {r['step_ms']:.0f} | {r['cpu_ms']:.0f} |",
                  flush=True)
    print(f"\nΨ = {rows[0]['psi']:,} parameters; reduce bucket {rows[0]['bucket']:,} elements; "
          f"gradient partition {rows[0]['grad_accum']}.")


if __name__ == "__main__":
    main()
