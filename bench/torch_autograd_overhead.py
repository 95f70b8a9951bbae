# torch_autograd_overhead.py: PyTorch peer of bench/autograd_overhead.cpp. Same chain,
# y = y * 1.0001 + 0.0 on a (S) tensor, same node count, same timing (median of repeats after a
# warm-up, graph freed outside the timed region). Prints one JSON line.
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

    forward_s, backward_s = [], []
    for r in range(args.repeats + 1):             # r == 0 is the warm-up
        x = torch.ones(args.size, requires_grad=True)
        t0 = time.perf_counter()
        y = x
        for _ in range(args.nodes // 2):
            y = y * 1.0001 + 0.0
        t1 = time.perf_counter()
        y.backward(torch.ones_like(y))
        t2 = time.perf_counter()
        del y                                     # free the graph outside the timed region
        if r:
            forward_s.append(t1 - t0)
            backward_s.append(t2 - t1)
    n = args.nodes // 2 * 2
    print(json.dumps({"impl": "pytorch", "nodes": n, "size": args.size, "threads": threads,
                      "forward_ns_per_node": round(1e9 * median(forward_s) / n, 1),
                      "backward_ns_per_node": round(1e9 * median(backward_s) / n, 1)}))


if __name__ == "__main__":
    main()
