"""torch_dist_allreduce.py: the PyTorch peer of bench/dist_allreduce.cpp: all-reduce bandwidth of
torch.distributed's Gloo group over loopback, timed the same way (1 KB to 64 MB by x4, f32, sum,
synchronous; a warm-up of 2 calls, then `--repeats` runs of n calls with n = clamp(64 MB / size,
2, 200); the median time per call as rank 0 sees it). Run one process per rank with RANK,
WORLD_SIZE, MASTER_ADDR and MASTER_PORT set (ampgrad-run or torchrun); bench/dist_bench.py does.
"""
import argparse
import json
import os
import statistics
import time

import torch
import torch.distributed as dist


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--min-bytes", type=int, default=1 << 10)
    ap.add_argument("--max-bytes", type=int, default=64 << 20)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    dist.init_process_group("gloo")
    world = dist.get_world_size()
    size = args.min_bytes
    while size <= args.max_bytes:
        t = torch.ones(size // 4)
        calls = min(max((64 << 20) // size, 2), 200)
        for _ in range(2):
            dist.all_reduce(t)
        per_call = []
        for _ in range(args.repeats):
            dist.barrier()
            t0 = time.perf_counter()
            for _ in range(calls):
                dist.all_reduce(t)
            per_call.append((time.perf_counter() - t0) / calls)
        s = statistics.median(per_call)
        algbw = size / s / 1e9
        if dist.get_rank() == 0:
            print("RESULT " + json.dumps({"impl": "torch", "world_size": world, "bytes": size, "us": round(s * 1e6, 2),
                                          "algbw_GBps": round(algbw, 4),
                                          "busbw_GBps": round(algbw * 2 * (world - 1) / world, 4)}), flush=True)
        size *= 4
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
