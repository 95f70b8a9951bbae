#!/usr/bin/env python3
"""make_fixtures.py: write PyTorch reference values for the tests into tests/fixtures/*.json.

PyTorch is a test *oracle* only: this script is run by hand (pip's torch 2.x, CPU) and its
output is committed; building and running the tests never needs PyTorch.

Each module in tools/fixtures/ (one per op family: elementwise.py, reduce.py, ...) exposes
`cases()`, yielding (name, tensors, params). Run:  python3 tools/make_fixtures.py [family ...]
"""
import importlib
import pathlib
import sys

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from fixtures.common import write_fixture  # noqa: E402


def main(argv):
    families = argv or sorted(p.stem for p in (HERE / "fixtures").glob("*.py") if p.stem not in ("common", "__init__"))
    out_dir = HERE.parent / "tests" / "fixtures"
    out_dir.mkdir(parents=True, exist_ok=True)
    count = 0
    for fam in families:
        mod = importlib.import_module(f"fixtures.{fam}")
        for name, tensors, params in mod.cases():
            write_fixture(out_dir / f"{name}.json", tensors, params)
            count += 1
    print(f"wrote {count} fixtures to {out_dir}")


if __name__ == "__main__":
    main(sys.argv[1:])
