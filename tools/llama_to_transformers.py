#!/usr/bin/env python3
"""llama_to_transformers.py: turn an `ampgrad train --model llama` checkpoint into a transformers
model folder (config.json + model.safetensors) that LlamaForCausalLM.from_pretrained reads.

The checkpoint's model.safetensors already holds transformers' names (a tied lm_head is left out,
as save_pretrained does), and state.json's "model_config" is a transformers config.json plus two
ampgrad keys, which are dropped here. Needs only the standard library; --check also needs torch and
transformers and prints transformers' loss on the first 8 windows of the run's validation text: close
to `ampgrad eval`'s val_loss, which averages other (random) windows.

  python3 tools/llama_to_transformers.py runs/llama-nano hf-llama-nano [--check]
"""
import argparse
import json
import os
import shutil
import sys


def checkpoint_dir(path):
    if os.path.exists(os.path.join(path, "state.json")):
        return path
    latest = os.path.join(path, "checkpoints", "latest")
    if os.path.exists(latest):
        return os.path.join(path, "checkpoints", open(latest).read().strip())
    sys.exit(f"llama_to_transformers: {path} holds neither state.json nor checkpoints/latest")


def check(out, state):
    import torch
    import torch.nn.functional as F
    from transformers import LlamaForCausalLM
    model, info = LlamaForCausalLM.from_pretrained(out, output_loading_info=True)
    print("loading:", {k: sorted(v) if isinstance(v, set) else v for k, v in info.items()})
    tok = state["tokenizer"]
    if tok["kind"] != "char" or state["run_config"]["data_file"]:
        print("--check: the loss check needs the bundled text and the char tokenizer; skipped")
        return
    here = os.path.dirname(os.path.abspath(__file__))
    text = open(os.path.join(here, "..", "data", "tinyshakespeare.txt"), encoding="utf-8").read()
    index = {cp: i for i, cp in enumerate(tok["code_points"])}
    ids = [index[ord(ch)] for ch in text]
    val = ids[len(ids) * 9 // 10:]                                  # the run's validation split
    T = model.config.max_position_embeddings
    x = torch.tensor(val[: 8 * T]).view(8, T)
    y = torch.tensor(val[1: 8 * T + 1]).view(8, T)
    with torch.no_grad():
        logits = model(input_ids=x).logits
    loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
    print(f"transformers' loss on 8 x {T} validation tokens: {loss.item():.4f}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("checkpoint", help="a checkpoint folder, or a training output folder (its latest checkpoint)")
    ap.add_argument("out", help="the transformers model folder to write")
    ap.add_argument("--check", action="store_true", help="load it with transformers and print a loss")
    a = ap.parse_args()
    src = checkpoint_dir(a.checkpoint)
    state = json.load(open(os.path.join(src, "state.json")))
    if state["run_config"].get("model") != "llama":
        sys.exit(f"llama_to_transformers: {src} is not a Llama checkpoint (run_config.model is "
                 f"{state['run_config'].get('model', 'gpt')!r})")
    if not os.path.exists(os.path.join(src, "model.safetensors")):
        sys.exit(f"llama_to_transformers: {src} has no model.safetensors (a --zero checkpoint: resume it without "
                 f"--zero and save, or read it with `ampgrad eval`)")
    config = {k: v for k, v in state["model_config"].items() if k not in ("checkpoint_blocks", "num_parameters")}
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    shutil.copyfile(os.path.join(src, "model.safetensors"), os.path.join(a.out, "model.safetensors"))
    print(f"wrote {a.out}/config.json and {a.out}/model.safetensors from {src}")
    if a.check:
        check(a.out, state)


if __name__ == "__main__":
    main()
