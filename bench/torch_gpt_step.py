# torch_gpt_step.py: PyTorch peer of bench/gpt_step.cpp. The same GPT (token + position
# embeddings, pre-LN blocks with fused QKV, causal F.scaled_dot_product_attention, 4C tanh-GELU
# MLP, final LayerNorm, head tied to the token embedding, mean cross-entropy) and the same step
# (AdamW lr 1e-3, weight decay 0.1, zero_grad(set_to_none), backward, step), with the same timing
# and memory measurement. --dtype bf16/f16 runs the forward under torch.autocast("cpu").
# --ddp (one process per rank, launched by ampgrad-run or torchrun): the parameters become
# nn.Parameters of a module wrapped in torch.nn.parallel.DistributedDataParallel on the Gloo group,
# each rank on its own --batch samples; rank 0 prints (bench/dist_bench.py).
import argparse
import json
import time

import torch
import torch.nn.functional as F

from torch_common import median, proc_status_kib, reset_peak_rss, set_threads

PRESETS = {"tiny": dict(vocab=256, block=64, channels=128, layers=4, heads=4),
           "small": dict(vocab=256, block=128, channels=256, layers=6, heads=8)}


def param(t):
    return t.requires_grad_()


def make_gpt(vocab, block, channels, layers, heads):
    """GPT-2's initialisation, as ampgrad's models::GPT draws it: N(0, 0.02), and the residual
    projections N(0, 0.02 / sqrt(2 L))."""
    C = channels
    proj_std = 0.02 / (2 * layers) ** 0.5
    g = {"wte": param(torch.randn(vocab, C) * 0.02), "wpe": param(torch.randn(block, C) * 0.02),
         "lnf_w": param(torch.ones(C)), "lnf_b": param(torch.zeros(C)), "blocks": []}
    for _ in range(layers):
        g["blocks"].append({
            "ln1_w": param(torch.ones(C)), "ln1_b": param(torch.zeros(C)),
            "attn_w": param(torch.randn(3 * C, C) * 0.02), "attn_b": param(torch.zeros(3 * C)),
            "proj_w": param(torch.randn(C, C) * proj_std), "proj_b": param(torch.zeros(C)),
            "ln2_w": param(torch.ones(C)), "ln2_b": param(torch.zeros(C)),
            "fc_w": param(torch.randn(4 * C, C) * 0.02), "fc_b": param(torch.zeros(4 * C)),
            "fc2_w": param(torch.randn(C, 4 * C) * proj_std), "fc2_b": param(torch.zeros(C))})
    return g


def parameters(g):
    ps = [g["wte"], g["wpe"], g["lnf_w"], g["lnf_b"]]
    for b in g["blocks"]:
        ps += [b[k] for k in ("ln1_w", "ln1_b", "attn_w", "attn_b", "proj_w", "proj_b",
                              "ln2_w", "ln2_b", "fc_w", "fc_b", "fc2_w", "fc2_b")]
    return ps


class GptModule(torch.nn.Module):
    """The dict-of-tensors model as a Module (DDP needs one, and calls its forward)."""

    def __init__(self, g, heads):
        super().__init__()
        self.g, self.heads, n = g, heads, 0
        for d in [g] + g["blocks"]:
            for k, v in list(d.items()):
                if isinstance(v, torch.Tensor):
                    d[k] = torch.nn.Parameter(v.detach())
                    self.register_parameter(f"p{n}", d[k])
                    n += 1

    def forward(self, idx, targets):
        return gpt_loss(self.g, idx, targets, self.heads)


def attention(b, x, heads):
    B, T, C = x.shape
    q, k, v = F.linear(x, b["attn_w"], b["attn_b"]).split(C, dim=2)     # 3 x (B,T,C)
    q, k, v = (t.view(B, T, heads, C // heads).transpose(1, 2) for t in (q, k, v))   # (B,NH,T,HS)
    y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    return F.linear(y.transpose(1, 2).reshape(B, T, C), b["proj_w"], b["proj_b"])


def gpt_loss(g, idx, targets, heads):
    B, T = idx.shape
    C = g["wte"].shape[1]
    x = F.embedding(idx, g["wte"]) + F.embedding(torch.arange(T), g["wpe"])   # (B,T,C)
    for b in g["blocks"]:
        x = x + attention(b, F.layer_norm(x, (C,), b["ln1_w"], b["ln1_b"]), heads)
        h = F.gelu(F.linear(F.layer_norm(x, (C,), b["ln2_w"], b["ln2_b"]), b["fc_w"], b["fc_b"]),
                   approximate="tanh")                                        # (B,T,4C)
        x = x + F.linear(h, b["fc2_w"], b["fc2_b"])
    x = F.layer_norm(x, (C,), g["lnf_w"], g["lnf_b"])
    logits = F.linear(x, g["wte"])                                            # (B,T,V)
    return F.cross_entropy(logits.reshape(B * T, -1), targets.reshape(B * T))


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--preset", default="tiny", choices=sorted(PRESETS))
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--dtype", default="f32", choices=["f32", "bf16", "f16"])
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--ddp", action="store_true")
    args = ap.parse_args()
    threads = set_threads()
    cfg = PRESETS[args.preset]
    amp_dtype = {"f32": None, "bf16": torch.bfloat16, "f16": torch.float16}[args.dtype]

    torch.manual_seed(0)
    rss_before = proc_status_kib("VmRSS")
    peak_reset = reset_peak_rss()
    g = make_gpt(**cfg)
    world = 1
    if args.ddp:
        import torch.distributed as dist
        dist.init_process_group("gloo")
        world = dist.get_world_size()
        model = torch.nn.parallel.DistributedDataParallel(GptModule(g, cfg["heads"]))
    else:
        model = lambda i, t: gpt_loss(g, i, t, cfg["heads"])  # noqa: E731
    params = parameters(g)
    idx = torch.randint(0, cfg["vocab"], (args.batch, cfg["block"]))          # (B,T)
    targets = torch.randint(0, cfg["vocab"], (args.batch, cfg["block"]))      # (B,T)
    opt = torch.optim.AdamW(params, lr=1e-3, weight_decay=0.1)

    def step():
        with torch.autocast("cpu", dtype=amp_dtype, enabled=amp_dtype is not None):
            loss = model(idx, targets)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss.item()

    last_loss = 0.0
    for _ in range(args.warmup):
        last_loss = step()
    warm_loss = last_loss
    wall, cpu = [], []
    for _ in range(args.repeats):
        w0, c0 = time.perf_counter(), time.process_time()
        for _ in range(args.steps):
            last_loss = step()
        wall.append((time.perf_counter() - w0) / args.steps)
        cpu.append((time.process_time() - c0) / args.steps)
    peak = proc_status_kib("VmHWM")
    if args.ddp and dist.get_rank() != 0:
        dist.destroy_process_group()
        return
    print(json.dumps({"impl": "pytorch", "torch": torch.__version__, "world_size": world, "preset": args.preset,
                      "dtype": args.dtype,
                      "params": sum(p.numel() for p in params), "threads": threads,
                      "step_ms": round(1e3 * median(wall), 3), "step_cpu_ms": round(1e3 * median(cpu), 3),
                      "peak_rss_growth_mib": round((peak - rss_before) / 1024, 1), "peak_rss_reset": peak_reset,
                      "warm_loss": round(warm_loss, 4), "final_loss": round(last_loss, 4)}), flush=True)
    if args.ddp:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
