#!/usr/bin/env python3
# tokenizer_encode.py: GPT-2 BPE encode throughput on one thread, ampgrad (bench/tokenizer_encode.cpp)
# beside its peers, Hugging Face `tokenizers` (Rust, ByteLevel BPE built from the same ranks) and
# tiktoken (Rust), on the same text (default: data/tinyshakespeare.txt), in one command. Each side
# encodes the whole text once per repeat; MB/s from the median wall time and from thread CPU time.
# Checks that the three give the same ids. HF keeps its word cache across calls (warm after the
# warm-up); ampgrad's cache lives for one call; tiktoken has none.
#
#   ninja -C build bench/bench_tokenizer_encode
#   /work/torchvenv/bin/python bench/tokenizer_encode.py --build-dir build
import argparse
import datetime
import json
import os
import pathlib
import platform
import statistics
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
os.environ["RAYON_NUM_THREADS"] = "1"          # before tokenizers is imported: one thread
os.environ["TOKENIZERS_PARALLELISM"] = "false"

import make_bpe_fixtures as fx  # noqa: E402  (the HF tokenizer built from the ranks)
import tiktoken  # noqa: E402


def measure(name, encode, text, repeats):
    ids = encode(text)  # warm-up
    wall, cpu = [], []
    for _ in range(repeats):
        w, c = time.perf_counter(), time.thread_time()
        ids = encode(text)
        cpu.append(time.thread_time() - c)
        wall.append(time.perf_counter() - w)
    mb = len(text.encode()) / 1e6
    return {"impl": name, "ids": len(ids), "mb_per_s": mb / statistics.median(wall),
            "cpu_mb_per_s": mb / statistics.median(cpu)}, ids


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build-dir", default="build")
    ap.add_argument("--text", default=str(ROOT / "data" / "tinyshakespeare.txt"))
    ap.add_argument("--repeats", type=int, default=7)
    args = ap.parse_args()
    ranks_path = ROOT / "tests" / "fixtures" / "bpe" / "gpt2.tiktoken"
    out = subprocess.run([str(pathlib.Path(args.build_dir) / "bench" / "bench_tokenizer_encode"), "--ranks", str(ranks_path),
                          "--text", args.text, "--repeats", str(args.repeats)],
                         env=dict(os.environ, OMP_NUM_THREADS="1"), check=True, capture_output=True, text=True)
    rows = [json.loads(out.stdout.strip().splitlines()[-1])]
    text = pathlib.Path(args.text).read_text()
    ranks = fx.load_ranks(ranks_path)
    hf = fx.hf_from_ranks(ranks)
    t0 = time.perf_counter()
    tk = tiktoken.Encoding("gpt2_local", pat_str=fx.GPT2_PATTERN, mergeable_ranks=fx.load_ranks(ranks_path),
                           special_tokens={fx.EOT: len(ranks)})
    tk_load = time.perf_counter() - t0
    row, hf_ids = measure(f"HF tokenizers {fx.tokenizers.__version__}", lambda s: hf.encode(s).ids, text, args.repeats)
    row["load_ms"] = float("nan")   # not comparable: its merges are rebuilt from the ranks in Python first
    rows.append(row)
    row, tk_ids = measure(f"tiktoken {tiktoken.__version__}", tk.encode_ordinary, text, args.repeats)
    row["load_ms"] = 1e3 * tk_load
    rows.append(row)
    assert hf_ids == tk_ids and rows[0]["ids"] == len(hf_ids), "the implementations disagree"
    print(f"GPT-2 BPE encode, one thread, {len(text.encode())} bytes ({len(hf_ids)} ids), median of {args.repeats}; "
          f"{platform.processor() or platform.machine()}, {datetime.date.today()}")
    print(f"{'implementation':<24} {'MB/s wall':>10} {'MB/s CPU':>10} {'load ms':>9}")
    for r in rows:
        load = "n/a" if r["load_ms"] != r["load_ms"] else f"{r['load_ms']:.0f}"
        print(f"{r['impl']:<24} {r['mb_per_s']:>10.2f} {r['cpu_mb_per_s']:>10.2f} {load:>9}")


if __name__ == "__main__":
    main()
