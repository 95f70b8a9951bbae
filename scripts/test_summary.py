#!/usr/bin/env python3
# test_summary.py: reads Meson's testlog.json (one JSON object per test program) and prints one
# line per program with its doctest case counts, then a last line "N passed, N failed", followed by
# "(in: NAME, ...)" naming the programs that failed.
# A program that crashed or timed out before doctest's summary counts as one failure.
# Exit status: 1 if anything failed or no test ran, else 0.
import json
import re
import sys

DOCTEST = re.compile(r"\[doctest\] test cases:\s*(\d+)\s*\|\s*(\d+) passed\s*\|\s*(\d+) failed")
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def summarize(path):
    passed = failed = skipped = 0
    failed_names = []
    try:
        with open(path) as f:
            records = [json.loads(line) for line in f if line.strip()]
    except OSError as e:
        print(f"no test log: {e}")
        print("0 passed, 1 failed")
        return 1
    for r in records:
        result = r.get("result", "ERROR")
        out = ANSI.sub("", (r.get("stdout") or "") + (r.get("stderr") or ""))
        cases = DOCTEST.findall(out)
        if cases:
            _, p, fl = map(int, cases[-1])
            if result not in ("OK", "SKIP") and fl == 0:
                fl = 1                       # crashed/timed out after doctest's summary, or a sanitizer report
            detail = f"{p} passed, {fl} failed test cases"
        else:                                 # a script test, or a program that died before its summary
            p, fl = (1, 0) if result == "OK" else (0, 0) if result == "SKIP" else (0, 1)
            skipped += result == "SKIP"
            detail = "skipped" if result == "SKIP" else f"{p} passed, {fl} failed"
        passed += p
        failed += fl
        if fl:
            failed_names.append(r.get("name", "?").split(" / ")[-1])
        print(f"  {r.get('name', '?'):<34} {result:<8} {detail}  ({r.get('duration', 0):.1f} s)")
    if skipped:
        print(f"{skipped} test program(s) skipped")
    # The last line is what .ci/run's summary quotes: it names the failed programs, so that a CI log
    # whose middle is cut off still says which test failed.
    print(f"{passed} passed, {failed} failed" + (f" (in: {', '.join(failed_names)})" if failed_names else ""))
    return 1 if failed or not records else 0


if __name__ == "__main__":
    sys.exit(summarize(sys.argv[1] if len(sys.argv) > 1 else "build/meson-logs/testlog.json"))
