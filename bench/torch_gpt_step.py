# torch_gpt_step.py: PyTorch peer of bench/gpt_step.cpp. The same GPT (token + position
# embeddings, pre-LN blocks with fused QKV, causal F.scaled_dot_product_attention, 4C tanh-GELU
# MLP, final LayerNorm, head tied to the token embedding, mean cross-entropy) and the same step
# (AdamW lr 1e-3, weight decay 0.1, zero_grad(set_to_none), backward, step), with the same timing
# and memory measurement. --dtype bf16/f16 runs the forward under torch.autocast; f16 also scales
# the loss with torch.amp.GradScaler, as ampgrad's side does.
# --device cuda: the model on cuda:0, the fused AdamW (as ampgrad's, and as llm.c's), the loss
# read once per timed repeat; reports tokens/s, MFU by llm.c's convention (6N + 6LCT FLOPs per
# token over the card's dense bf16 peak, looked up by its name), peak device memory
# (torch.cuda.max_memory_allocated / reserved), and the host syncs per step that
# torch.cuda.set_sync_debug_mode("warn") reports. --compile runs the loss under torch.compile.
# The gpt2 preset pads the vocabulary to 50304 rows, as ampgrad's GPT and llm.c do, and drops the
# padded logits before the loss.
# --ddp (one process per rank, launched by ampgrad-run or torchrun): the parameters become
# nn.Parameters of a module wrapped in torch.nn.parallel.DistributedDataParallel on the Gloo group,
# each rank on its own --batch samples; rank 0 prints (bench/dist_bench.py).
import argparse
import json
import time
import warnings

import torch
import torch.nn.functional as F

from torch_common import median, proc_status_kib, reset_peak_rss, set_threads

PRESETS = {"tiny": dict(vocab=256, block=64, channels=128, layers=4, heads=4),
           "small": dict(vocab=256, block=128, channels=256, layers=6, heads=8),
           "gpt2": dict(vocab=50257, block=1024, channels=768, layers=12, heads=12)}

# Dense bf16 peak FLOP/s by GPU name, most specific first (NVIDIA data sheets; ampgrad's twin is
# core/device_properties.cpp).
PEAK_BF16 = [("H200", 989e12), ("H100 PCIe", 756e12), ("H100 NVL", 835e12), ("H100", 989e12), ("A100", 312e12)]


def padded(vocab):
    return (vocab + 63) // 64 * 64


def param(t):
    return t.requires_grad_()


def make_gpt(vocab, block, channels, layers, heads, device="cpu"):
    """GPT-2's initialisation, as ampgrad's models::GPT draws it: N(0, 0.02), and the residual
    projections N(0, 0.02 / sqrt(2 L)). wte has the padded vocabulary's rows."""
    C = channels
    proj_std = 0.02 / (2 * layers) ** 0.5
    g = {"wte": param(torch.randn(padded(vocab), C) * 0.02), "wpe": param(torch.randn(block, C) * 0.02),
         "lnf_w": param(torch.ones(C)), "lnf_b": param(torch.zeros(C)), "blocks": []}
    for _ in range(layers):
        g["blocks"].append({
            "ln1_w": param(torch.ones(C)), "ln1_b": param(torch.zeros(C)),
            "attn_w": param(torch.randn(3 * C, C) * 0.02), "attn_b": param(torch.zeros(3 * C)),
            "proj_w": param(torch.randn(C, C) * proj_std), "proj_b": param(torch.zeros(C)),
            "ln2_w": param(torch.ones(C)), "ln2_b": param(torch.zeros(C)),
            "fc_w": param(torch.randn(4 * C, C) * 0.02), "fc_b": param(torch.zeros(4 * C)),
            "fc2_w": param(torch.randn(C, 4 * C) * proj_std), "fc2_b": param(torch.zeros(C))})
    if device != "cpu":
        with torch.no_grad():
            g = {k: (v.to(device).requires_grad_() if isinstance(v, torch.Tensor) else
                     [{bk: bv.to(device).requires_grad_() for bk, bv in b.items()} for b in v]) for k, v in g.items()}
    g["vocab"] = vocab
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
    x = F.embedding(idx, g["wte"]) + F.embedding(torch.arange(T, device=idx.device), g["wpe"])   # (B,T,C)
    for b in g["blocks"]:
        x = x + attention(b, F.layer_norm(x, (C,), b["ln1_w"], b["ln1_b"]), heads)
        h = F.gelu(F.linear(F.layer_norm(x, (C,), b["ln2_w"], b["ln2_b"]), b["fc_w"], b["fc_b"]),
                   approximate="tanh")                                        # (B,T,4C)
        x = x + F.linear(h, b["fc2_w"], b["fc2_b"])
    x = F.layer_norm(x, (C,), g["lnf_w"], g["lnf_b"])
    logits = F.linear(x, g["wte"])[:, :, :g["vocab"]]                         # (B,T,V)
    return F.cross_entropy(logits.reshape(B * T, -1), targets.reshape(B * T))


def llmc_mfu(cfg, n_params, tokens_per_s, device):
    """llm.c's MFU (train_gpt2.cu, gpt2_estimate_mfu), or None where the peak is unknown."""
    if device == "cpu":
        return None
    name = torch.cuda.get_device_name(0)
    peak = next((flops for key, flops in PEAK_BF16 if key in name), None)
    if peak is None:
        return None
    flops_per_token = 6 * n_params + 6 * cfg["layers"] * cfg["channels"] * cfg["block"]
    return tokens_per_s * flops_per_token / peak


class SyncCounter:
    """Host synchronisations that torch.cuda.set_sync_debug_mode("warn") reports, inside `with`."""

    def __init__(self, device):
        self.device, self.count = device, 0

    def __enter__(self):
        if self.device != "cpu":
            self.caught = warnings.catch_warnings(record=True)
            self.records = self.caught.__enter__()
            warnings.simplefilter("always")
            torch.cuda.set_sync_debug_mode("warn")
        return self

    def __exit__(self, *exc):
        if self.device != "cpu":
            torch.cuda.set_sync_debug_mode("default")
            self.count += sum("synchroniz" in str(w.message) for w in self.records)
            self.caught.__exit__(*exc)


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--preset", default="tiny", choices=sorted(PRESETS))
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--dtype", default="f32", choices=["f32", "bf16", "f16"])
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--compile", action="store_true", help="run the loss under torch.compile")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--ddp", action="store_true")
    return ap.parse_args()


def make_step(model, opt, scaler, amp_dtype, device, idx, targets):
    def step():
        with torch.autocast(device, dtype=amp_dtype, enabled=amp_dtype is not None):
            loss = model(idx, targets)
        opt.zero_grad(set_to_none=True)
        if scaler is None:
            loss.backward()
            opt.step()
        else:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        return loss
    return step


def sync(device):
    if device != "cpu":
        torch.cuda.synchronize()


def main():
    args = parse_args()
    threads = set_threads()
    cfg = PRESETS[args.preset]
    amp_dtype = {"f32": None, "bf16": torch.bfloat16, "f16": torch.float16}[args.dtype]
    device = args.device

    torch.manual_seed(0)
    rss_before = proc_status_kib("VmRSS")
    peak_reset = reset_peak_rss()
    if device != "cpu":
        torch.cuda.reset_peak_memory_stats()
    g = make_gpt(**cfg, device=device)
    world = 1
    if args.ddp:
        import torch.distributed as dist
        dist.init_process_group("gloo")
        world = dist.get_world_size()
        model = torch.nn.parallel.DistributedDataParallel(GptModule(g, cfg["heads"]))
    else:
        model = lambda i, t: gpt_loss(g, i, t, cfg["heads"])  # noqa: E731
    if args.compile:
        model = torch.compile(model)
    params = parameters(g)
    idx = torch.randint(0, cfg["vocab"], (args.batch, cfg["block"])).to(device)          # (B,T)
    targets = torch.randint(0, cfg["vocab"], (args.batch, cfg["block"])).to(device)      # (B,T)
    opt = torch.optim.AdamW(params, lr=1e-3, weight_decay=0.1, **({"fused": True} if device != "cpu" else {}))
    scaler = torch.amp.GradScaler(device) if amp_dtype == torch.float16 else None
    step = make_step(model, opt, scaler, amp_dtype, device, idx, targets)

    warm_loss = 0.0
    for _ in range(args.warmup):
        warm_loss = step().item()
    wall, cpu, syncs = [], [], SyncCounter(device)
    for _ in range(args.repeats):
        sync(device)
        w0, c0 = time.perf_counter(), time.process_time()
        with syncs:
            for _ in range(args.steps):
                loss = step()
        sync(device)
        wall.append((time.perf_counter() - w0) / args.steps)
        cpu.append((time.process_time() - c0) / args.steps)
    last_loss = loss.item()
    peak = proc_status_kib("VmHWM")
    if args.ddp and dist.get_rank() != 0:
        dist.destroy_process_group()
        return
    n_params = sum(p.numel() for p in params)
    tokens_per_s = args.batch * cfg["block"] * world / median(wall)
    mfu = llmc_mfu(cfg, n_params, tokens_per_s, device)
    print(json.dumps({"impl": "pytorch" + ("-compile" if args.compile else ""), "torch": torch.__version__,
                      "device": device, "device_name": torch.cuda.get_device_name(0) if device != "cpu" else "cpu",
                      "world_size": world, "preset": args.preset, "dtype": args.dtype, "batch": args.batch,
                      "params": n_params, "threads": threads,
                      "step_ms": round(1e3 * median(wall), 3), "step_cpu_ms": round(1e3 * median(cpu), 3),
                      "tokens_per_s": round(tokens_per_s, 1), "mfu": None if mfu is None else round(mfu, 4),
                      "host_syncs_per_step": round(syncs.count / (args.repeats * args.steps), 2),
                      "peak_rss_growth_mib": round((peak - rss_before) / 1024, 1), "peak_rss_reset": peak_reset,
                      "peak_tensor_mib": round(torch.cuda.max_memory_allocated() / 2**20, 2) if device != "cpu" else None,
                      "peak_reserved_mib": round(torch.cuda.max_memory_reserved() / 2**20, 2) if device != "cpu" else None,
                      "warm_loss": round(warm_loss, 4), "final_loss": round(last_loss, 4)}), flush=True)
    if args.ddp:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
