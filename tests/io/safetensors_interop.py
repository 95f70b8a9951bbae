#!/usr/bin/env python3
"""safetensors_interop.py: the Python side of tests/io/safetensors_interop_test.cpp.

  check FILE   read FILE (written by ampgrad) with the `safetensors` package and check every
               tensor, dtype, shape, value and the metadata against expected_from_ampgrad()
  write FILE   write FILE with safetensors.numpy.save_file for ampgrad to read back

Exit status 0 on success, 1 on a mismatch, 3 when numpy or safetensors cannot be imported
(the C++ test reports that as a failure, naming the interpreter).
"""
import json
import struct
import sys

try:
    import numpy as np
    import safetensors
    from safetensors import safe_open
    from safetensors.numpy import save_file
except ImportError as e:
    print(f"safetensors_interop.py: {sys.executable} cannot import numpy and safetensors ({e}); "
          "run scripts/setup.sh (it builds a venv with both) or set AMPGRAD_PYTHON", file=sys.stderr)
    sys.exit(3)


def expected_from_ampgrad():
    """name -> (safetensors dtype, shape, little-endian bytes); mirrors the C++ test's values."""
    def raw(values, fmt):
        return struct.pack("<" + fmt * len(values), *values)
    f64 = [i * 0.125 - 0.25 for i in range(6)]
    f32 = [i * 0.5 - 1.0 for i in range(6)]
    specials = [float("nan"), float("inf"), float("-inf"), -0.0, 2.0 ** -149]
    return {
        "f64": ("F64", [2, 3], raw(f64, "d")),
        "f32": ("F32", [3, 2], raw(f32, "f")),
        "specials": ("F32", [5], raw(specials, "f")),
        "f16": ("F16", [4], np.array([1.0, -2.5, 65504.0, 2.0 ** -24], dtype=np.float16).tobytes()),
        "bf16": ("BF16", [3], raw([0x3F80, 0xC020, 0x7F80], "H")),
        "i64": ("I64", [2, 2], raw([-(2 ** 62), 3, 2 ** 62 + 1, -1], "q")),
        "i32": ("I32", [5], raw([-(2 ** 31), -1, 0, 7, 2 ** 31 - 1], "i")),
        "bool": ("BOOL", [2, 2], bytes([1, 0, 0, 1])),
        "empty": ("F32", [0, 3], b""),
        "scalar": ("F64", [], raw([3.5], "d")),
    }


def check(path):
    want = expected_from_ampgrad()
    with open(path, "rb") as f:
        content = f.read()
    got = {name: info for name, info in safetensors.deserialize(content)}
    problems = []
    if set(got) != set(want):
        problems.append(f"tensor names {sorted(got)} != {sorted(want)}")
    for name, (dtype, shape, data) in want.items():
        if name not in got:
            continue
        g = got[name]
        if g["dtype"] != dtype or list(g["shape"]) != shape or bytes(g["data"]) != data:
            problems.append(f"{name}: got {g['dtype']} {list(g['shape'])} {bytes(g['data']).hex()}, "
                            f"want {dtype} {shape} {data.hex()}")
    # The numpy API reads the same values (every dtype numpy has).
    with safe_open(path, framework="np") as f:
        metadata = f.metadata()
        for name, (dtype, shape, data) in want.items():
            if dtype == "BF16" or name not in got:
                continue
            arr = f.get_tensor(name)
            if list(arr.shape) != shape or arr.tobytes() != data:
                problems.append(f"{name}: numpy read {arr!r}")
    want_meta = {"framework": "ampgrad", "note": "h\u00e9llo", "ampgrad.tied": json.dumps({"f32_alias": "f32"})}
    if metadata is None or {k: metadata.get(k) for k in ("framework", "note")} != \
            {k: want_meta[k] for k in ("framework", "note")}:
        problems.append(f"metadata {metadata!r}")
    elif json.loads(metadata.get("ampgrad.tied", "null")) != {"f32_alias": "f32"}:
        problems.append(f"tied record {metadata.get('ampgrad.tied')!r}")
    # The data section starts 8-byte aligned, as the Python writer lays it out.
    (n,) = struct.unpack("<Q", content[:8])
    if (8 + n) % 8 != 0:
        problems.append(f"header length {n}: data section not 8-byte aligned")
    for p in problems:
        print("MISMATCH", p, file=sys.stderr)
    return 1 if problems else 0


def write(path):
    tensors = {
        "a_f64": np.arange(6, dtype=np.float64).reshape(2, 3) * 0.25 - 1.0,
        "b_f32": np.linspace(-1.0, 1.0, 24, dtype=np.float32).reshape(2, 3, 4),
        "c_f16": np.array([0.5, -1.5, 2.0 ** -24, 65504.0, -0.0], dtype=np.float16),
        "d_i64": np.array([[-(2 ** 62), 2 ** 62 + 1], [5, -7]], dtype=np.int64),
        "e_i32": np.array([-(2 ** 31), 2 ** 31 - 1, 3], dtype=np.int32),
        "f_bool": np.array([True, False, True], dtype=bool),
        "g_scalar": np.array(2.5, dtype=np.float32),
        "h_empty": np.zeros((3, 0), dtype=np.float64),
    }
    save_file(tensors, path, metadata={"writer": "python", "safetensors": safetensors.__version__})
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("check", "write"):
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    sys.exit(check(sys.argv[2]) if sys.argv[1] == "check" else write(sys.argv[2]))
