#!/usr/bin/env python3
"""bench/determinism_cost.py: the step time of `train --deterministic` against the default mode (issue 35
item 4; docs/determinism.md). GPT `small` (6 layers, 256 wide, T = 128), --zero 0 in both modes (the same
engine; the mode only changes how it adds), fp32, --batch sequences per rank per micro-step (8) and --accum
accumulation steps (2), on 1 rank (OMP_NUM_THREADS = all cores) and 2 ranks (cores / 2 each). The modes alternate round by
round, so a machine that others load slows both alike; the table shows the median of the timed steps of
every round (the first `--skip` steps of a run are warm-up).

    python3 bench/determinism_cost.py --build-dir build --rounds 3 --steps 8
"""
import argparse, json, os, statistics, subprocess, tempfile


def step_times(build, ranks, deterministic, steps, skip, threads, port, batch, accum):
    out = tempfile.mkdtemp(prefix="detcost_")
    cmd = [os.path.join(build, "app", "ampgrad"), "train", "--preset", "small", "--zero", "0",
           "--batch-size", str(batch * ranks), "--grad-accum", str(accum), "--steps", str(steps), "--warmup", "2",
           "--eval-every", "100000", "--eval-iters", "1", "--sample-tokens", "0", "--progress", "plain",
           "--log-every", "1", "--out", out]
    if deterministic:
        cmd.append("--deterministic")
    if ranks > 1:
        cmd = [os.path.join(build, "tools", "ampgrad-run"), "--nproc-per-node", str(ranks),
               "--master-port", str(port)] + cmd
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    elapsed = [json.loads(l)["elapsed_s"] for l in open(os.path.join(out, "metrics.jsonl"))
               if json.loads(l).get("kind") == "train"]
    return [1e3 * (b - a) for a, b in zip(elapsed, elapsed[1:])][skip:]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--build-dir", default="build")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--skip", type=int, default=2)
    p.add_argument("--batch", type=int, default=8, help="sequences per rank per micro-step")
    p.add_argument("--accum", type=int, default=2, help="accumulation steps (a power of two)")
    a = p.parse_args()
    cores = os.cpu_count() or 1
    times = {}
    port = 29700
    for r in range(a.rounds):
        for ranks in (1, 2):
            for det in (False, True):
                port += 1
                t = step_times(a.build_dir, ranks, det, a.steps, a.skip, max(1, cores // ranks), port, a.batch, a.accum)
                times.setdefault((ranks, det), []).extend(t)
                print(f"round {r + 1}: {ranks} rank(s), {'deterministic' if det else 'default'}: "
                      f"median {statistics.median(t):.1f} ms", flush=True)
    print("\n| ranks | default (ms/step) | --deterministic (ms/step) | ratio |")
    print("|---|---|---|---|")
    for ranks in (1, 2):
        d, x = statistics.median(times[(ranks, False)]), statistics.median(times[(ranks, True)])
        print(f"| {ranks} | {d:.1f} | {x:.1f} | {x / d:.3f} |")


if __name__ == "__main__":
    main()
