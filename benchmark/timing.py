"""Timing and peak memory that hold on a shared, noisy machine."""

import ctypes
import re
import statistics
import time
from pathlib import Path
from typing import Any, Callable, Optional

import torch

from benchmark.settings import BenchSettings


def synchronize(device: torch.device) -> None:
    """Wait for the device's queued work, so that the clock measures it."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elif device.type == "mps":
        torch.mps.synchronize()


def measure(
    calls: dict[Any, Callable[[], Any]], settings: BenchSettings, device: torch.device, warmup: int
) -> dict[Any, list[float]]:
    """Seconds per call of each callable, one figure per repeat. Their repeats take turns, so that a slow spell on a
    shared machine falls on all of them alike (a ratio of two is taken repeat by repeat); each repeat makes enough
    calls to last about settings.repeat_seconds."""
    calls_per_repeat = {}
    for name, call in calls.items():
        for _ in range(warmup):
            call()
        synchronize(device)
        started = time.perf_counter()
        call()  # a first timed call tells how many make a repeat
        synchronize(device)
        calls_per_repeat[name] = max(1, round(settings.repeat_seconds / (time.perf_counter() - started)))
    seconds = {name: [] for name in calls}
    for _ in range(settings.repeats):
        for name, call in calls.items():
            started = time.perf_counter()
            for _ in range(calls_per_repeat[name]):
                call()
            synchronize(device)
            seconds[name].append((time.perf_counter() - started) / calls_per_repeat[name])
    return seconds


def with_spread(figures: dict[str, list[float]]) -> dict[str, Any]:
    """Each figure's median over the repeats as NAME, and its smallest and largest as NAME_range."""
    return {
        key: value
        for name, values in figures.items()
        for key, value in ((name, statistics.median(values)), (f"{name}_range", [min(values), max(values)]))
    }


PROC_SELF = Path("/proc/self")  # Linux


def memory_high_water(device: torch.device) -> int:
    """Bytes: the CUDA allocator's peak, or on a Linux CPU the process's peak resident set size."""
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device)
    return 1024 * int(re.search(r"^VmHWM:\s*(\d+) kB", (PROC_SELF / "status").read_text(), re.MULTILINE)[1])


def reset_memory_high_water(device: torch.device) -> Optional[int]:
    """Lower the high-water mark to the memory in use now and return it, the baseline of a peak measured next;
    None where this cannot be done (a CPU that is not Linux's, MPS)."""
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
        return torch.cuda.memory_allocated(device)
    if device.type != "cpu" or not PROC_SELF.exists():
        return None
    (PROC_SELF / "clear_refs").write_text("5")  # "5": the peak resident set size down to the current one
    return memory_high_water(device)


def map_allocations_one_by_one() -> None:
    """Have glibc map every allocation of 64 KiB or more on its own and unmap it when freed, so that the resident set
    follows the memory in use: by default it keeps freed memory in its heap, where a later step reuses it unseen,
    and the high-water mark then depends on the order of earlier allocations."""
    libc = ctypes.CDLL(None)
    if hasattr(libc, "mallopt"):  # glibc
        libc.mallopt(-3, 64 * 1024)  # M_MMAP_THRESHOLD, which also stops glibc from adjusting it
