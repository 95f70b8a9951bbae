#!/usr/bin/env python3
"""tensorboard_read.py: reads `ampgrad train --tensorboard DIR`'s event files with TensorBoard's own
reader (tensorboard.backend.event_processing.event_accumulator, which checks every record's CRCs) and
checks them against the run's other outputs. The oracle runs in the test venv only (scripts/setup.sh);
ampgrad itself never imports tensorboard. Driven by tests/app/tensorboard_app_test.cpp.

Usage: tensorboard_read.py TB_DIR METRICS_JSONL MODEL_SAFETENSORS SAMPLE_TXT HIST_EVERY
Checks:
  - one event file, named events.out.tfevents.<time>.<host>.<pid>.<n>;
  - every "train" record of metrics.jsonl: train/loss, train/lr, train/grad_norm, perf/tokens_per_s
    and perf/data_ms equal its values (as float32), at the same steps; memory/* are positive;
  - every "eval" record: eval/train_loss and eval/val_loss;
  - weights/<name> and grads/<name> histograms at every HIST_EVERY-th step, num = the parameter's
    element count, the buckets sum to num; at the last step (the checkpoint's weights) min, max
    and sum equal the checkpoint's;
  - the text plugin's "sample" holds the sample the program printed.
Exit status: 0 pass, 1 a check failed (each failure printed), 3 tensorboard cannot be imported.
"""
import json
import math
import pathlib
import re
import sys

try:
    import numpy as np
    from safetensors.numpy import load_file
    from tensorboard.backend.event_processing import event_accumulator
    from tensorboard.util import tensor_util
except ImportError as e:
    print(f"tensorboard_read.py: cannot import the oracle ({e}): run scripts/setup.sh (it builds a venv with "
          "tensorboard) or set AMPGRAD_PYTHON", file=sys.stderr)
    sys.exit(3)

failures = []


def check(ok, what):
    if not ok:
        failures.append(what)


def same_f32(a, b):
    return float(np.float32(a)) == b or math.isclose(float(np.float32(a)), b, rel_tol=1e-6)


def main(tb_dir, metrics_path, model_path, sample_path, hist_every):
    files = sorted(pathlib.Path(tb_dir).glob("events.out.tfevents.*"))
    check(len(files) == 1, f"expected one event file in {tb_dir}, found {[f.name for f in files]}")
    check(all(re.fullmatch(r"events\.out\.tfevents\.\d{10}\..+\.\d+\.\d+", f.name) for f in files),
          f"event file names: {[f.name for f in files]}")
    acc = event_accumulator.EventAccumulator(tb_dir, size_guidance={"scalars": 0, "histograms": 0, "tensors": 0})
    acc.Reload()
    tags = acc.Tags()
    scalars = {tag: {e.step: e.value for e in acc.Scalars(tag)} for tag in tags["scalars"]}
    records = [json.loads(line) for line in open(metrics_path)]
    train = [r for r in records if r["kind"] == "train"]
    check(len(train) > 0, "metrics.jsonl has no train records")
    for r in train:
        for tag, key in (("train/loss", "loss"), ("train/lr", "lr"), ("train/grad_norm", "grad_norm"),
                         ("perf/tokens_per_s", "tokens_per_s"), ("perf/data_ms", "data_ms")):
            got = scalars.get(tag, {}).get(r["step"])
            if r[key] is None:   # a grad norm that was not finite: metrics.jsonl has null, TensorBoard nothing
                check(got is None, f"{tag} at step {r['step']}: {got}, but metrics.jsonl has null")
                continue
            check(got is not None and same_f32(r[key], got), f"{tag} at step {r['step']}: {got} vs metrics {r[key]}")
        for tag in ("memory/allocated_bytes", "memory/peak_allocated_bytes"):
            check(scalars.get(tag, {}).get(r["step"], 0) > 0, f"{tag} at step {r['step']} missing or zero")
    check(set(scalars["train/loss"]) == {r["step"] for r in train}, "train/loss steps differ from metrics.jsonl's")
    for r in (r for r in records if r["kind"] == "eval"):
        for tag, key in (("eval/train_loss", "train_loss"), ("eval/val_loss", "val_loss")):
            got = scalars.get(tag, {}).get(r["step"])
            check(got is not None and same_f32(r[key], got), f"{tag} at step {r['step']}: {got} vs metrics {r[key]}")
    check_histograms(acc, tags, load_file(model_path), [r["step"] for r in train], hist_every)
    check_sample(acc, tags, pathlib.Path(sample_path).read_text())
    for f in failures:
        print("FAIL:", f)
    print(f"tensorboard_read.py: {len(tags['scalars'])} scalar tags, {len(tags['histograms'])} histogram tags, "
          f"{len(failures)} failure(s)")
    return 1 if failures else 0


def check_histograms(acc, tags, weights, steps, hist_every):
    want_steps = [s for s in steps if s % hist_every == 0]
    names = [t[len("weights/"):] for t in tags["histograms"] if t.startswith("weights/")]
    check(len(names) > 0, "no weights/ histograms")
    for name in names:
        check(name in weights, f"weights/{name}: no such tensor in the checkpoint")
        if name not in weights:
            continue
        w = weights[name].astype(np.float64)
        for kind in ("weights", "grads"):
            events = acc.Histograms(f"{kind}/{name}")
            check([e.step for e in events] == want_steps, f"{kind}/{name} at steps {[e.step for e in events]}")
            for e in events:
                h = e.histogram_value
                check(h.num == w.size, f"{kind}/{name} step {e.step}: num {h.num}, the parameter has {w.size}")
                check(sum(h.bucket) == h.num, f"{kind}/{name} step {e.step}: buckets sum to {sum(h.bucket)}")
        last = acc.Histograms(f"weights/{name}")[-1]
        if last.step == steps[-1]:   # the checkpoint holds these weights
            h = last.histogram_value
            check(h.min == w.min() and h.max == w.max(), f"weights/{name}: min/max {h.min}/{h.max} vs {w.min()}/{w.max()}")
            check(math.isclose(h.sum, w.sum(), rel_tol=1e-9, abs_tol=1e-9), f"weights/{name}: sum {h.sum} vs {w.sum()}")


def check_sample(acc, tags, sample):
    check("sample" in tags["tensors"], f"no text tag 'sample' (tensors: {tags['tensors']})")
    if "sample" not in tags["tensors"]:
        return
    check("sample" in acc.PluginTagToContent("text"), "'sample' is not marked for the text plugin")
    text = tensor_util.make_ndarray(acc.Tensors("sample")[-1].tensor_proto).item().decode("utf-8")
    check(sample.strip() in text, f"the text sample differs: {text[:200]!r} vs {sample[:200]!r}")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])))
