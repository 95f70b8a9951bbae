# torch_mlp_step.py: PyTorch peer of bench/mlp_step.cpp. Same model (784 -> 256 -> 10, relu,
# cross_entropy), same hand-written SGD (p -= lr * dp under no_grad, grads set to None), same
# timing (wall and process CPU, medians over repeats of `steps` steps after a warm-up) and
# memory measurement.
import argparse
import json
import time

import torch
import torch.nn.functional as F

from torch_common import median, proc_status_kib, reset_peak_rss, set_threads


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    threads = set_threads()
    lr, inputs, classes = 0.01, 784, 10

    torch.manual_seed(0)
    rss_before = proc_status_kib("VmRSS")
    peak_reset = reset_peak_rss()
    x = torch.randn(args.batch, inputs)                                # (B,784)
    y = torch.randint(0, classes, (args.batch,))                       # (B)
    w1 = (torch.randn(args.hidden, inputs) * 0.05).requires_grad_()    # (256,784)
    b1 = torch.zeros(args.hidden, requires_grad=True)                  # (256)
    w2 = (torch.randn(classes, args.hidden) * 0.05).requires_grad_()   # (10,256)
    b2 = torch.zeros(classes, requires_grad=True)                      # (10)
    params = [w1, b1, w2, b2]

    def step():
        h = F.relu(F.linear(x, w1, b1))                                # (B,256)
        loss = F.cross_entropy(F.linear(h, w2, b2), y)                 # ()
        for p in params:
            p.grad = None
        loss.backward()
        with torch.no_grad():
            for p in params:
                p.add_(p.grad, alpha=-lr)
        return loss.item()

    for _ in range(10):                                                # warm-up
        step()
    wall, cpu, last_loss = [], [], 0.0
    for _ in range(args.repeats):
        w0, c0 = time.perf_counter(), time.process_time()
        for _ in range(args.steps):
            last_loss = step()
        wall.append((time.perf_counter() - w0) / args.steps)
        cpu.append((time.process_time() - c0) / args.steps)
    peak = proc_status_kib("VmHWM")
    print(json.dumps({"impl": "pytorch", "batch": args.batch, "hidden": args.hidden, "threads": threads,
                      "step_ms": round(1e3 * median(wall), 4), "step_cpu_ms": round(1e3 * median(cpu), 4),
                      "peak_rss_growth_mib": round((peak - rss_before) / 1024, 1),
                      "peak_rss_reset": peak_reset, "final_loss": round(last_loss, 4)}))


if __name__ == "__main__":
    main()
