#!/usr/bin/env python3
"""llmc_write_datafile.py: the Python side of tests/data/token_shards_interop_test.cpp.

Writes token shards the way llm.c's dev/data/data_common.py (write_datafile) does, with numpy: a
header np.zeros(256, dtype=np.int32) with [0] magic, [1] version, [2] token count, then
header.tobytes() followed by the tokens as uint16 (GPT-2: magic 20240520, version 1) or uint32
(Llama 3: magic 20240801, version 7) .tobytes(). Written from that description, not copied.

  llmc_write_datafile.py OUT_DIR   writes OUT_DIR/gpt2_val_000000.bin, OUT_DIR/llama3_train_000001.bin
                                   and OUT_DIR/expected.json (the token lists)

Exit status 0 on success, 3 when numpy cannot be imported (the C++ test reports it as a failure).
"""
import json
import pathlib
import sys

try:
    import numpy as np
except ImportError as e:
    print(f"llmc_write_datafile.py: {sys.executable} cannot import numpy ({e}); run scripts/setup.sh "
          "(it builds a venv with numpy) or set AMPGRAD_PYTHON", file=sys.stderr)
    sys.exit(3)

FORMATS = {"gpt-2": (20240520, 1, np.uint16), "llama-3": (20240801, 7, np.uint32)}


def write_datafile(path, tokens, model):
    magic, version, dtype = FORMATS[model]
    header = np.zeros(256, dtype=np.int32)
    header[0], header[1], header[2] = magic, version, len(tokens)
    tokens_np = np.array(tokens).astype(dtype)
    with open(path, "wb") as f:
        f.write(header.tobytes())
        f.write(tokens_np.tobytes())


def main():
    out = pathlib.Path(sys.argv[1])
    rng = np.random.default_rng(20240520)
    gpt2 = [50256] + rng.integers(0, 50257, size=1000).tolist() + [0, 65535, 50256, 198]
    llama = [128000] + rng.integers(0, 128256, size=777).tolist() + [65536, 128255, 0]
    write_datafile(out / "gpt2_val_000000.bin", gpt2, "gpt-2")
    write_datafile(out / "llama3_train_000001.bin", llama, "llama-3")
    (out / "expected.json").write_text(json.dumps({"gpt2": gpt2, "llama3": llama}))


if __name__ == "__main__":
    main()
