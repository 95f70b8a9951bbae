# torch_common.py: helpers shared by the PyTorch peers of the C++ benchmarks: thread count,
# median, and resident memory read from /proc exactly as bench/bench_util.hpp reads it.
import os
import statistics

import torch


def set_threads():
    """Use OMP_NUM_THREADS (set by run_bench.py) for intra-op threads, as ampgrad's OpenMP does."""
    n = int(os.environ.get("OMP_NUM_THREADS", os.cpu_count() or 1))
    torch.set_num_threads(n)
    torch.set_num_interop_threads(1)
    return n


def median(values):
    return statistics.median(values)


def proc_status_kib(field):
    """A field of /proc/self/status in KiB: VmRSS (resident now) or VmHWM (peak resident)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return -1


def reset_peak_rss():
    """Reset VmHWM to the current RSS; False if the kernel refuses."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False
