#!/usr/bin/env python3
# data_prepare.py: `ampgrad data prepare --tokenizer gpt2` beside the approach of llm.c's
# dev/data/fineweb.py (karpathy/llm.c): tiktoken's GPT-2 encoding in a multiprocessing.Pool
# (imap over the documents, chunksize 16, [eot] + encode_ordinary(text) per document, uint16
# shards of a fixed size written with a 256-int32 header). Both read the same .jsonl corpus (Tiny
# Shakespeare repeated to --mb MB, cut into documents of about 3 KB) on 1 thread/process and on
# --threads; the figures are MB/s of input text over the wall time of the whole run (start-up and
# the tokenizer's load included), that divided by the threads, and MB per CPU-second (the CPU time
# of all the run's processes: steadier than wall time on a shared machine). The two sides' shards
# must be byte-identical (checked).
#
# tiktoken is a benchmark peer only (never a dependency of ampgrad or of its tests):
#   python3 -m venv /tmp/prepare-venv && /tmp/prepare-venv/bin/pip install tiktoken numpy
#   ninja -C build app/ampgrad
#   /tmp/prepare-venv/bin/python bench/data_prepare.py --build-dir build --mb 50 --threads 2
import argparse
import base64
import datetime
import json
import multiprocessing as mp
import os
import pathlib
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import tiktoken

ROOT = pathlib.Path(__file__).resolve().parent.parent
GPT2_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
EOT = "<|endoftext|>"


def gpt2_encoding():
    """tiktoken's GPT-2 encoding from the ranks ampgrad embeds (tiktoken.get_encoding("gpt2") would download them)."""
    ranks = {}
    for line in (ROOT / "data" / "gpt2.tiktoken").read_text().splitlines():
        token, rank = line.split()
        ranks[base64.b64decode(token)] = int(rank)
    return tiktoken.Encoding("gpt2", pat_str=GPT2_PATTERN, mergeable_ranks=ranks, special_tokens={EOT: len(ranks)})


def make_corpus(path, mb):
    text = (ROOT / "data" / "tinyshakespeare.txt").read_text()
    paragraphs = text.split("\n\n")
    docs, current = [], []
    for p in paragraphs:
        current.append(p)
        if sum(len(x) for x in current) >= 3000:
            docs.append("\n\n".join(current))
            current = []
    if current:
        docs.append("\n\n".join(current))
    with open(path, "w") as f:
        written = 0
        while written < mb * 1e6:
            for d in docs:
                line = json.dumps({"text": d}) + "\n"
                f.write(line)
                written += len(line)
    return path.stat().st_size


# ---- the fineweb.py approach (reimplemented from its description) ----
_enc = None


def _init_worker():
    global _enc
    _enc = gpt2_encoding()


def tokenize(doc):
    eot = _enc._special_tokens[EOT]
    tokens = [eot]
    tokens.extend(_enc.encode_ordinary(doc["text"]))
    tokens_np = np.array(tokens)
    assert (0 <= tokens_np).all() and (tokens_np < 2**16).all(), "token dictionary too large for uint16"
    return tokens_np.astype(np.uint16)


def write_datafile(filename, tokens_np):
    header = np.zeros(256, dtype=np.int32)
    header[0], header[1], header[2] = 20240520, 1, len(tokens_np)
    with open(filename, "wb") as f:
        f.write(header.tobytes())
        f.write(tokens_np.tobytes())


def documents(corpus):
    with open(corpus) as f:
        for line in f:
            yield json.loads(line)


def run_fineweb_style(corpus, out, procs, shard_size):
    os.makedirs(out, exist_ok=True)
    with mp.Pool(procs, initializer=_init_worker) as pool:
        shard_index, token_count = 0, 0
        buf = np.empty((shard_size,), dtype=np.uint16)
        for tokens in pool.imap(tokenize, documents(corpus), chunksize=16):
            while len(tokens) > 0:
                take = min(shard_size - token_count, len(tokens))
                buf[token_count:token_count + take] = tokens[:take]
                token_count += take
                tokens = tokens[take:]
                if token_count == shard_size:
                    split = "val" if shard_index == 0 else "train"
                    write_datafile(os.path.join(out, f"py_{split}_{shard_index:06d}.bin"), buf)
                    shard_index, token_count = shard_index + 1, 0
        if token_count:
            split = "val" if shard_index == 0 else "train"
            write_datafile(os.path.join(out, f"py_{split}_{shard_index:06d}.bin"), buf[:token_count])


def run_ampgrad(build, corpus, out, threads, shard_size):
    subprocess.run([str(build / "app" / "ampgrad"), "data", "prepare", "--input", str(corpus), "--tokenizer", "gpt2",
                    "--output", str(out), "--name", "py", "--shard-tokens", str(shard_size), "--threads", str(threads),
                    "--progress", "plain"], check=True, capture_output=True)


def cpu_seconds():
    """CPU time of this process and of its children that have ended (the Pool's workers, ampgrad)."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def timed(fn, repeats, out):
    """Median wall seconds and median CPU seconds of `repeats` runs, each into a fresh folder."""
    wall, cpu = [], []
    for _ in range(repeats):
        shutil.rmtree(out, ignore_errors=True)   # a fresh folder each time (ampgrad would skip a complete one)
        c, t = cpu_seconds(), time.perf_counter()
        fn()
        wall.append(time.perf_counter() - t)
        cpu.append(cpu_seconds() - c)
    return statistics.median(wall), statistics.median(cpu)


def same_shards(a, b):
    names = sorted(p.name for p in a.glob("py_*.bin"))
    return names == sorted(p.name for p in b.glob("py_*.bin")) and all(
        (a / n).read_bytes() == (b / n).read_bytes() for n in names)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build-dir", default="build")
    ap.add_argument("--mb", type=float, default=50)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--shard-tokens", type=int, default=10_000_000)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    build = pathlib.Path(args.build_dir).resolve()
    work = pathlib.Path(tempfile.mkdtemp(prefix="ampgrad_prepare_bench_"))
    try:
        corpus = work / "corpus.jsonl"
        size = make_corpus(corpus, args.mb)
        rows = []
        for threads in sorted({1, args.threads}):
            a_out, p_out = work / f"ampgrad_{threads}", work / f"python_{threads}"
            a = timed(lambda: run_ampgrad(build, corpus, a_out, threads, args.shard_tokens), args.repeats, a_out)
            p = timed(lambda: run_fineweb_style(corpus, p_out, threads, args.shard_tokens), args.repeats, p_out)
            assert same_shards(a_out, p_out), "ampgrad's shards differ from the fineweb.py-style ones"
            rows.append(("ampgrad data prepare", threads, *a))
            rows.append((f"fineweb.py style (tiktoken {tiktoken.__version__}, Pool)", threads, *p))
        cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
        print(f"GPT-2 shards from {size / 1e6:.1f} MB of .jsonl ({args.shard_tokens:,}-token shards), median of "
              f"{args.repeats}; {cpu}, {os.cpu_count()} cores, {datetime.date.today()}, load average "
              f"{os.getloadavg()[0]:.1f}; shards identical: yes")
        print(f"{'implementation':<48} {'threads':>7} {'wall s':>7} {'MB/s':>7} {'MB/s/core':>9} {'CPU s':>6} "
              f"{'MB/CPU-s':>8}")
        for name, threads, secs, cpu_secs in rows:
            mbps = size / 1e6 / secs
            print(f"{name:<48} {threads:>7} {secs:>7.2f} {mbps:>7.2f} {mbps / threads:>9.2f} {cpu_secs:>6.2f} "
                  f"{size / 1e6 / cpu_secs:>8.2f}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
