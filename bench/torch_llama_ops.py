# torch_llama_ops.py: PyTorch peer of bench/llama_ops.cpp: forward + backward of torch's
# F.rms_norm and its composition, transformers' RoPE (rotate_half, modeling_llama.py's
# apply_rotary_pos_emb: PyTorch has no fused op, so "fused" and "composed" are both it), and
# F.scaled_dot_product_attention with enable_gqa (NH/NKV query heads per KV head) and without
# (NKV = NH). Same shapes, same timing; one JSON line of median microseconds.
import argparse
import json
import time

import torch
import torch.nn.functional as F

from torch_common import median, set_threads


def time_us(forward, inputs, iters, repeats):
    def once():
        for t in inputs:
            t.grad = None
        forward().sum().backward()
    for _ in range(3):
        once()
    runs = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(iters):
            once()
        runs.append(1e6 * (time.perf_counter() - t0) / iters)
    return median(runs)


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    for name, default in (("batch", 8), ("seq", 256), ("hidden", 512), ("heads", 8), ("kv-heads", 2),
                          ("head-dim", 64), ("iters", 20), ("repeats", 5)):
        ap.add_argument(f"--{name}", type=int, default=default)
    a = ap.parse_args()
    threads = set_threads()
    torch.manual_seed(0)
    eps = 1e-5
    x = torch.randn(a.batch, a.seq, a.hidden, requires_grad=True)
    w = (1 + 0.1 * torch.randn(a.hidden)).requires_grad_()
    q = torch.randn(a.batch, a.heads, a.seq, a.head_dim, requires_grad=True)
    inv_freq = 1.0 / (500000.0 ** (torch.arange(0, a.head_dim, 2).float() / a.head_dim))
    freqs = torch.outer(torch.arange(a.seq).float(), inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos(), emb.sin()                                                  # (T,HS)
    kg, vg = (torch.randn(a.batch, a.kv_heads, a.seq, a.head_dim, requires_grad=True) for _ in range(2))
    km, vm = (torch.randn(a.batch, a.heads, a.seq, a.head_dim, requires_grad=True) for _ in range(2))
    n, r = a.iters, a.repeats
    out = {"impl": "pytorch", "torch": torch.__version__, "threads": threads,
           "rms_norm_fused_us": time_us(lambda: F.rms_norm(x, (a.hidden,), w, eps), [x, w], n, r),
           "rms_norm_composed_us": time_us(lambda: x * torch.rsqrt((x * x).mean(-1, keepdim=True) + eps) * w,
                                           [x, w], n, r)}
    out["rotary_composed_us"] = time_us(lambda: q * cos + rotate_half(q) * sin, [q], n, r)
    out["rotary_fused_us"] = out["rotary_composed_us"]
    out["sdpa_gqa_us"] = time_us(lambda: F.scaled_dot_product_attention(q, kg, vg, is_causal=True, enable_gqa=True),
                                 [q, kg, vg], n, r)
    out["sdpa_mha_us"] = time_us(lambda: F.scaled_dot_product_attention(q, km, vm, is_causal=True), [q, km, vm], n, r)
    print(json.dumps({k: round(v, 1) if isinstance(v, float) else v for k, v in out.items()}), flush=True)


if __name__ == "__main__":
    main()
