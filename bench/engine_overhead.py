#!/usr/bin/env python3
"""engine_overhead.py: PyTorch peer of bench/engine_overhead.cpp, and its side-by-side runner.

Same chain (y = y * 1.0001 on a (S) tensor, N nodes), same three backward runs (plain, a tensor
hook on every intermediate, a node post-hook on every node), same timing (CPU time of the calling
thread, median of repeats after a warm-up; the graph is freed outside the timed region). The
hooks are Python functions, as PyTorch users write them; hooked chains have --hook-nodes nodes
(PyTorch crashes freeing a 100k-node chain with a Python hook on every node). Prints one JSON line; with --ampgrad BIN it also runs the ampgrad
binary with the same arguments and prints a table with the ratios:

    python3 bench/engine_overhead.py --ampgrad build/bench/bench_engine_overhead --threads 1
"""
import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def time_backward(torch, nodes, size, hooks):
    x = torch.ones(size, requires_grad=True)
    y = x
    for _ in range(nodes):
        y = y * 1.0001
        if hooks == "tensor":
            y.register_hook(lambda g: None)
        elif hooks == "node":
            y.grad_fn.register_hook(lambda gi, go: None)
    seed = torch.ones_like(y)
    t0 = time.thread_time()
    y.backward(seed)
    return time.thread_time() - t0


def time_forward(torch, nodes, size):
    x = torch.ones(size, requires_grad=True)
    t0 = time.thread_time()
    y = x
    for _ in range(nodes):
        y = y * 1.0001
    return time.thread_time() - t0


def measure_torch(args):
    import torch
    from torch_common import median, set_threads
    threads = set_threads()
    def repeat(run):                                      # its own warm-up (r == 0) per measurement
        return [t for r, t in enumerate(run() for _ in range(args.repeats + 1)) if r]

    fwd = repeat(lambda: time_forward(torch, args.nodes, args.size))
    plain = repeat(lambda: time_backward(torch, args.nodes, args.size, None))
    short_plain = repeat(lambda: time_backward(torch, args.hook_nodes, args.size, None))
    tensor_hooks = repeat(lambda: time_backward(torch, args.hook_nodes, args.size, "tensor"))
    node_hooks = repeat(lambda: time_backward(torch, args.hook_nodes, args.size, "node"))
    n, hn, hook_base = args.nodes, args.hook_nodes, median(short_plain)
    return {"impl": "pytorch", "torch": torch.__version__, "nodes": n, "hook_nodes": hn, "size": args.size,
            "threads": threads,
            "forward_ns_per_node": round(1e9 * median(fwd) / n, 1),
            "backward_ns_per_node": round(1e9 * median(plain) / n, 1),
            "tensor_hook_ns": round(1e9 * (median(tensor_hooks) - hook_base) / hn, 1),
            "node_hook_ns": round(1e9 * (median(node_hooks) - hook_base) / hn, 1)}


def main():
    ap = argparse.ArgumentParser(description="engine overhead per node and per hook (PyTorch peer)")
    ap.add_argument("--nodes", type=int, default=100000)
    ap.add_argument("--hook-nodes", type=int, default=10000)
    ap.add_argument("--size", type=int, default=4)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--threads", type=int, default=None, help="sets OMP_NUM_THREADS for both sides")
    ap.add_argument("--ampgrad", default=None, help="path to bench_engine_overhead: run it too and compare")
    args = ap.parse_args()
    if args.threads:
        os.environ["OMP_NUM_THREADS"] = str(args.threads)
    ours = None
    if args.ampgrad:
        cmd = [args.ampgrad, "--nodes", str(args.nodes), "--hook-nodes", str(args.hook_nodes), "--size",
               str(args.size), "--repeats", str(args.repeats)]
        out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=os.environ.copy()).stdout
        ours = json.loads(out.strip().splitlines()[-1])
    theirs = measure_torch(args)
    if ours is None:
        print(json.dumps(theirs))
        return
    print(f"engine overhead, chain of {args.nodes} nodes ({args.hook_nodes} with hooks) on a ({args.size}) "
          f"tensor, {theirs['threads']} thread(s), CPU time of the calling thread, torch {theirs['torch']}")
    print(f"{'metric':<34}{'ampgrad':>12}{'pytorch':>12}{'ratio':>8}")
    for key, label in [("forward_ns_per_node", "forward per node (ns)"),
                       ("backward_ns_per_node", "backward per node (ns)"),
                       ("tensor_hook_ns", "per tensor hook (ns)"),
                       ("node_hook_ns", "per node post-hook (ns)")]:
        ratio = ours[key] / theirs[key] if theirs[key] > 0 else float("nan")
        print(f"{label:<34}{ours[key]:>12.1f}{theirs[key]:>12.1f}{ratio:>8.2f}")
    print("target: backward per node at most 1/3 of PyTorch's (ratio <= 0.33)")


if __name__ == "__main__":
    main()
