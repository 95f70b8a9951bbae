# torch_llama_step.py: PyTorch peer of bench/llama_step.cpp: transformers' LlamaForCausalLM
# (modeling_llama.py, attn_implementation "sdpa") with the same config as ampgrad's preset (tied
# head, grouped-query attention), the same batch and the same step: mean cross-entropy of the
# logits against next-token targets, AdamW lr 1e-3 and weight decay 0.1, zero_grad(set_to_none),
# backward, step. --dtype bf16 runs the forward under torch.autocast. Same timing as the C++ side.
# --lora R wraps the model with PEFT's get_peft_model (rank R, alpha 2R, q,k,v,o_proj); --seq T.
import argparse
import json
import time

import torch
import torch.nn.functional as F
from transformers import LlamaConfig, LlamaForCausalLM

from torch_common import median, set_threads

# ampgrad's models::LlamaConfig::preset, field for field
PRESETS = {
    "llama-nano": dict(vocab_size=256, hidden_size=96, intermediate_size=256, num_hidden_layers=3,
                       num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64),
    "llama-tiny": dict(vocab_size=256, hidden_size=128, intermediate_size=352, num_hidden_layers=4,
                       num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64),
    "llama-124m": dict(vocab_size=50257, hidden_size=768, intermediate_size=2304, num_hidden_layers=12,
                       num_attention_heads=12, num_key_value_heads=4, max_position_embeddings=1024),
}


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--preset", default="llama-nano", choices=sorted(PRESETS))
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--dtype", default="f32", choices=["f32", "bf16"])
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--lora", type=int, default=0)
    ap.add_argument("--seq", type=int, default=0)
    args = ap.parse_args()
    threads = set_threads()
    p = PRESETS[args.preset]
    torch.manual_seed(0)
    cfg = LlamaConfig(**p, rms_norm_eps=1e-5, tie_word_embeddings=True, attn_implementation="sdpa")
    model = LlamaForCausalLM(cfg).float().train()
    if args.lora:
        from peft import LoraConfig, get_peft_model
        model = get_peft_model(model, LoraConfig(r=args.lora, lora_alpha=2 * args.lora, lora_dropout=0.0,
                                                 target_modules=["q_proj", "k_proj", "v_proj", "o_proj"]))
    V, T = p["vocab_size"], args.seq or p["max_position_embeddings"]
    idx = torch.randint(0, V, (args.batch, T))
    targets = torch.randint(0, V, (args.batch, T))
    opt = torch.optim.AdamW([q for q in model.parameters() if q.requires_grad], lr=1e-3, weight_decay=0.1)
    amp = args.dtype == "bf16"

    def step():
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=amp):
            logits = model(input_ids=idx).logits                                   # (B,T,V)
            loss = F.cross_entropy(logits.reshape(-1, V).float(), targets.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss

    warm = 0.0
    for _ in range(args.warmup):
        warm = step().item()
    wall, cpu = [], []
    for _ in range(args.repeats):
        w0, c0 = time.perf_counter(), time.process_time()
        for _ in range(args.steps):
            loss = step()
        last = loss.item()
        wall.append((time.perf_counter() - w0) / args.steps)
        cpu.append((time.process_time() - c0) / args.steps)
    n_params = sum(q.numel() for q in model.parameters())
    opt_bytes = sum(t.numel() * t.element_size() for s in opt.state.values() for t in s.values() if torch.is_tensor(t))
    print(json.dumps({"impl": "pytorch-transformers", "torch": torch.__version__, "preset": args.preset,
                      "seq": T, "lora": args.lora, "optimizer_bytes": opt_bytes,
                      "dtype": args.dtype, "batch": args.batch, "params": n_params, "threads": threads,
                      "step_ms": round(1e3 * median(wall), 3), "step_cpu_ms": round(1e3 * median(cpu), 3),
                      "tokens_per_s": round(args.batch * T / median(wall), 1), "warm_loss": round(warm, 4),
                      "final_loss": round(last, 4)}), flush=True)


if __name__ == "__main__":
    main()
