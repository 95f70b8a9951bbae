#!/usr/bin/env python3
# torch_generate.py: the peer of bench/generate.cpp: Hugging Face transformers' greedy
# GPT2LMHeadModel.generate (src/transformers/generation/utils.py) on a GPT-2 of a preset's sizes
# with random weights, with use_cache True and False, timing every new token (a StoppingCriteria
# is called once per step). Prints one JSON object on its last line, in generate.cpp's format.
import argparse
import json
import time

import torch
from transformers import GPT2Config, GPT2LMHeadModel, StoppingCriteria, StoppingCriteriaList

from torch_common import median, set_threads

PRESETS = {"nano": (256, 3, 4, 96), "tiny": (256, 4, 4, 128), "small": (256, 6, 8, 256), "gpt2": (50257, 12, 12, 768)}


class StepClock(StoppingCriteria):
    """Records the time of each generation step; never stops."""

    def __init__(self):
        self.stamps = []

    def __call__(self, input_ids, scores, **kwargs):
        self.stamps.append(time.perf_counter())
        return torch.zeros(input_ids.shape[0], dtype=torch.bool)


def time_generation(model, prompt, new_tokens, use_cache):
    clock = StepClock()
    start, cpu_start = time.perf_counter(), time.process_time()
    with torch.no_grad():
        model.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=new_tokens,
                       min_new_tokens=new_tokens, do_sample=False, use_cache=use_cache, pad_token_id=0,
                       stopping_criteria=StoppingCriteriaList([clock]))
    total, cpu = time.perf_counter() - start, time.process_time() - cpu_start
    steps = [b - a for a, b in zip([start] + clock.stamps[:-1], clock.stamps)]
    return total, steps, cpu


def summarise(runs, args):
    total = median([r[0] for r in runs])
    buckets = []
    for b in range(0, args.new_tokens, args.bucket):
        end = min(args.new_tokens, b + args.bucket)
        ms = sum(1e3 * median([r[1][s] for r in runs]) for s in range(b, end)) / (end - b)
        buckets.append({"position": args.prompt + b, "ms": round(ms, 3)})
    return {"tokens_per_s": round(args.new_tokens / total, 1),
            "tokens_per_cpu_s": round(args.new_tokens / median([r[2] for r in runs]), 1), "seconds": round(total, 4),
            "first_token_ms": round(1e3 * runs[0][1][0], 3), "per_token": buckets}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--preset", default="small")
    p.add_argument("--block-size", type=int, default=512)
    p.add_argument("--prompt", type=int, default=16)
    p.add_argument("--new-tokens", type=int, default=256)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--bucket", type=int, default=32)
    args = p.parse_args()
    threads = set_threads()
    vocab, layers, heads, embd = PRESETS[args.preset]
    cfg = GPT2Config(vocab_size=vocab, n_positions=args.block_size, n_layer=layers, n_head=heads, n_embd=embd,
                     resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, eos_token_id=None, bos_token_id=None)
    torch.manual_seed(0)
    model = GPT2LMHeadModel(cfg).eval()
    model.generation_config.eos_token_id = None
    prompt = torch.randint(0, vocab, (1, args.prompt))
    out = {}
    for use_cache in (True, False):
        time_generation(model, prompt, 8, use_cache)                                # warm-up
        runs = [time_generation(model, prompt, args.new_tokens, use_cache) for _ in range(args.repeats)]
        out["cache" if use_cache else "no_cache"] = summarise(runs, args)
    out["threads"] = threads
    out["torch"] = torch.__version__
    import transformers
    out["transformers"] = transformers.__version__
    print(json.dumps(out))


if __name__ == "__main__":
    main()
