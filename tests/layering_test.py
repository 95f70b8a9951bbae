#!/usr/bin/env python3
"""layering_test.py: checks with plain text search that ampgrad's dependencies point one way.

  core -> kernels -> autograd -> autograd/ops -> nn, optim, data -> amp, io, dist -> zero, models -> app -> tools, bench
  (kernels/: the kernel contract: registry, kernel list, preconditions, shared formulas, the capability
  table the backends fill, and the GEMM attention path that runs on any backend's kernels)
  (io/ saves and loads nn::Module state and dist/'s DDP wraps an nn::Module, so both sit above nn/;
  data/ needs tensors and a few ops only: the addition task scores any model through a function)
  cpu/, cuda/: backends; they include core/ and kernels/ (and themselves) only, and nothing includes them
  include/ampgrad/ampgrad.h ("ampgrad/..."): the public entry point, reached from tools/ and bench/

A file may include headers of its own folder and of lower layers. Known exceptions are listed in
ALLOWED with the reason; a new upward include fails the test. Also checked:
  - core/ declares no cpu:: or cuda:: symbols (backends reach core through registries);
  - every kernel declared in kernels/kernels.hpp is in the AMPGRAD_KERNELS list (and no more);
  - meson.build installs exactly the headers the public entry points (PUBLIC_ROOTS) reach.
Usage: layering_test.py SOURCE_ROOT   (registered in tests/meson.build, suite cpu)
"""
import pathlib
import re
import sys

LAYERS = {"core": 0, "kernels": 1, "autograd": 2, "autograd/ops": 3, "nn": 4, "optim": 4, "data": 4, "amp": 5,
          "io": 5, "dist": 5, "zero": 6, "models": 6, "ampgrad": 7, "app": 8, "tools": 9, "bench": 9}
BACKENDS = {"cpu", "cuda"}
# (file, included header): why the exception exists. Keep this list short and shrinking.
ALLOWED = {
    **{(f"autograd/{f}", "autograd/ops/ops.hpp"):
       "the engine and its helpers build gradients with differentiable ops (add, sum_to, zeros); "
       "splitting a raw-op layer out of autograd/ops is future work"
       for f in ("anomaly_mode.cpp", "autograd.cpp", "engine.cpp", "engine_hooks.cpp", "gradcheck.cpp",
                 "node.cpp", "tensor_autograd.cpp", "view_history.cpp")},
}
# The one header a user program includes (issue 23: it reaches dist/ and the ZeRO engine and its
# checkpoints too), so a header installed but not reached from it is an error.
PUBLIC_ROOTS = ["include/ampgrad/ampgrad.h"]
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def folder_of(rel):
    parts = rel.split("/")
    if len(parts) > 2 and "/".join(parts[:2]) in LAYERS:
        return "/".join(parts[:2])
    return parts[0]


def check_layers(root):
    errors = []
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if path.suffix not in {".hpp", ".cpp", ".cu", ".cuh", ".h"}:
            continue
        src = folder_of(rel)
        if src not in LAYERS and src not in BACKENDS:
            continue                                   # tests, examples, include/: anything goes
        for inc in INCLUDE.findall(path.read_text(errors="replace")):
            if "/" not in inc:
                continue                               # generated ampgrad_config.h and the like
            dst = folder_of(inc)
            if dst == src or (rel, inc) in ALLOWED:
                continue
            if src in BACKENDS:
                ok = dst in ("core", "kernels")
            elif dst in BACKENDS:
                ok = False
            else:
                ok = dst in LAYERS and LAYERS[dst] < LAYERS[src]
            if not ok:
                errors.append(f"{rel} includes {inc}: {src}/ may not depend on {dst}/")
    return errors


def check_core_names_no_backend(root):
    errors = []
    for folder in ("core", "kernels"):
        for path in sorted((root / folder).glob("*.*")):
            text = path.read_text()
            if re.search(r"namespace\s+(ampgrad::)?(cpu|cuda)\b[^;]*\{", text) and path.name != "cuda_info.hpp":
                errors.append(f"{folder}/{path.name} opens a cpu/cuda namespace: {folder} must not name backend symbols")
    return errors


def check_kernel_list(root):
    errors = []
    for header, macro in (("kernels/kernels.hpp", "AMPGRAD_KERNELS"), ("kernels/fused_kernels.hpp", "AMPGRAD_FUSED_KERNELS")):
        text = (root / header).read_text()
        declared = set(re.findall(r"extern constinit Kernel<.*?>\s*(\w+);", text, re.S))
        listed = re.search(r"#define " + macro + r"\(X\)(.*?)\n\n", text, re.S)
        listed = set(re.findall(r"X\((\w+)\)", listed.group(1))) if listed else set()
        if declared != listed:
            errors.append(f"{header}: declared but not in {macro}: {sorted(declared - listed)}; "
                          f"listed but not declared: {sorted(listed - declared)}")
    return errors


def reachable_headers(root, *starts):
    seen, todo = set(starts[1:]), list(starts)
    while todo:
        rel = todo.pop()
        for inc in INCLUDE.findall((root / rel).read_text()):
            if (root / inc).is_file() and inc not in seen:
                seen.add(inc)
                todo.append(inc)
    return seen


def check_installed_headers(root):
    meson = (root / "meson.build").read_text()
    block = re.search(r"public_headers = files\((.*?)\)", meson, re.S)
    if not block:
        return ["meson.build: no `public_headers = files(...)` list"]
    installed = set(re.findall(r"'([^']+)'", block.group(1)))
    needed = reachable_headers(root, *PUBLIC_ROOTS) - {"include/ampgrad/ampgrad.h"}
    errors = []
    if needed - installed:
        errors.append(f"meson.build does not install headers {PUBLIC_ROOTS} need: {sorted(needed - installed)}")
    if installed - needed:
        errors.append(f"meson.build installs headers {PUBLIC_ROOTS} do not reach: {sorted(installed - needed)}")
    return errors


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()
    errors = (check_layers(root) + check_core_names_no_backend(root) + check_kernel_list(root) +
              check_installed_headers(root))
    for e in errors:
        print("layering:", e)
    print(f"layering: {len(errors)} problem(s); {len(ALLOWED)} known exception(s) listed in {__file__}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
