"""What bench.py measures and how often: the `bench` settings of configs/bench.yaml."""

from dataclasses import dataclass, field
from enum import Enum
from typing import Optional


class Section(Enum):
    throughput = "throughput"  # tokens/s of the full step and of the compute alone; FLOP utilisation
    attention = "attention"  # fused against explicit attention per block size: time and peak memory
    recurrence = "recurrence"  # one attention, GRU and LSTM layer per sequence length: the serial cost
    startup = "startup"  # train.py from process start to its first training step, cold and warm
    tokenization = "tokenization"  # MB/s of each tokenizer option in configs/tokenizer


@dataclass
class BenchSettings:
    sections: list[Section] = field(default_factory=lambda: list(Section))
    warmup_steps: int = 3  # untimed calls before each measurement: allocator, caches, lazy init, compilation
    repeats: int = 5  # timed repeats in a process; every figure is their median
    startup_repeats: int = 3  # train.py runs to the first step, cold and warm each
    repeat_seconds: float = 1.0  # each repeat makes enough calls to last about this long
    block_sizes: list[int] = field(default_factory=lambda: [64, 256, 1024, 2048])  # attention's and recurrence's
    attention_batch_size: int = 8  # the same at every block size, so per-sequence memory growth shows (both sections)
    matmul_size: int = 2048  # n of the n x n matmul that measures this machine's FLOP/s
    json_path: Optional[str] = None  # default: bench.json in the run directory
