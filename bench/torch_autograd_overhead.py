# torch_autograd_overhead.py: PyTorch peer of bench/autograd_overhead.cpp. Same chain,
# y = y * 1.0001 + 0.0 on a (S) tensor, same node count, same timing (median of repeats after a
# warm-up, graph freed outside the timed region, wall clock and process CPU time). Prints one JSON line.
import argparse
import json
import time

import torch

from torch_common import median, set_threads


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--nodes", type=int, default=100000)
    ap.add_argument("--size", type=int, default=4)
    ap.add_argument("--repeats", type=int, default=7)
    args = ap.parse_args()
    threads = set_threads()

    fwd_wall, fwd_cpu, bwd_wall, bwd_cpu = [], [], [], []
    for r in range(args.repeats + 1):             # r == 0 is the warm-up
        x = torch.ones(args.size, requires_grad=True)
        w0, c0 = time.perf_counter(), time.process_time()
        y = x
        for _ in range(args.nodes // 2):
            y = y * 1.0001 + 0.0
        w1, c1 = time.perf_counter(), time.process_time()
        y.backward(torch.ones_like(y))
        w2, c2 = time.perf_counter(), time.process_time()
        del y                                     # free the graph outside the timed region
        if r:
            fwd_wall.append(w1 - w0)
            fwd_cpu.append(c1 - c0)
            bwd_wall.append(w2 - w1)
            bwd_cpu.append(c2 - c1)
    n = args.nodes // 2 * 2
    ns = 1e9 / n
    print(json.dumps({"impl": "pytorch", "nodes": n, "size": args.size, "threads": threads,
                      "forward_ns_per_node": round(ns * median(fwd_wall), 1),
                      "backward_ns_per_node": round(ns * median(bwd_wall), 1),
                      "forward_cpu_ns_per_node": round(ns * median(fwd_cpu), 1),
                      "backward_cpu_ns_per_node": round(ns * median(bwd_cpu), 1)}))


if __name__ == "__main__":
    main()
