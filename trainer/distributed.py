"""Which process and device this is: the device to train on, and under torchrun the ranks and the few things they
agree on.

`torchrun --nproc_per_node=N train.py` starts N processes with RANK, LOCAL_RANK and WORLD_SIZE set; each
trains a replica on its own batches and DistributedDataParallel averages their gradients. Without torchrun
there is one process, rank 0 of 1, and nothing here talks to another process.
"""

import hashlib
import logging
import os
import re
import socket
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Optional

import torch
import torch.distributed as dist

from trainer.config import ConfigError

log = logging.getLogger(__name__)


def pick_device(name: str, setting: str = "trainer.device") -> torch.device:
    """`auto` is the best device present: cuda, then mps, then cpu; any other name must be present. `setting` is
    the name the user typed it under, for the one-line refusal."""
    if name != "auto":
        try:
            device = torch.device(name)
        except RuntimeError:
            raise ConfigError(f"{setting}={name}: not a device; use auto, cpu, cuda, cuda:N or mps") from None
        available = {"cpu": True, "cuda": torch.cuda.is_available(), "mps": torch.backends.mps.is_available()}
        if not available.get(device.type, False):
            raise ConfigError(f"{setting}={name}: not available to this machine's torch; use auto or cpu")
        return device
    if torch.cuda.is_available():
        return torch.device("cuda")
    if torch.backends.mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def allow_tf32() -> None:
    """float32 matmuls on tensor cores. Here, not in train.py: joblib's launcher pickles train.py's functions by
    value, with the modules they reach, and torch.backends cannot be pickled."""
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True


@dataclass
class Ranks:
    rank: int = 0
    world_size: int = 1
    device: torch.device = torch.device("cpu")
    control_group: Optional[dist.ProcessGroup] = None  # a CPU (gloo) group for stop signals: no GPU sync in the loop
    processes: list[tuple[str, int]] = field(default_factory=list)  # each rank's (host, process id), in rank order
    waits: int = 0  # above 0 while this process waits on the other ranks (`waiting`)

    @property
    def main(self) -> bool:
        """Rank 0 alone writes the log, TensorBoard, checkpoints and the token cache."""
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.world_size > 1

    def seed(self, seed: int) -> int:
        """Each rank's own seed for drawing batches; rank 0 keeps `seed`, so one process trains as before."""
        return seed + 1_000_003 * self.rank

    @contextmanager
    def waiting(self) -> Iterator[None]:
        """Around a call that waits on the other ranks (a collective, DDP's backward): a rank lost meanwhile leaves
        this process waiting inside C++, where no signal handler runs; trainer/stopping.py's PeerWatch looks."""
        self.waits += 1
        try:
            yield
        finally:
            self.waits -= 1

    def barrier(self) -> None:
        if self.distributed:
            with self.waiting():
                dist.barrier(self.control_group)

    def gather(self, value: object) -> list:
        """Every rank's `value`, in rank order."""
        if not self.distributed:
            return [value]
        gathered = [None] * self.world_size
        with self.waiting():
            dist.all_gather_object(gathered, value, group=self.control_group)
        return gathered

    @contextmanager
    def main_first(self) -> Iterator[None]:
        """Rank 0 runs the block first (e.g. builds the token cache), then the others (which read it)."""
        if not self.main:
            self.barrier()
        yield
        if self.main:
            self.barrier()

    def log_replica_agreement(self, model: torch.nn.Module) -> None:
        """Log whether every rank holds bit-identical weights, as data-parallel training must keep them."""
        if not self.distributed:
            return
        digest = hashlib.sha256()
        for tensor in model.state_dict().values():
            digest.update(tensor.detach().cpu().contiguous().view(torch.uint8).numpy().tobytes())
        agree = len(set(self.gather(digest.hexdigest()))) == 1
        report = log.info if agree else log.error
        report(
            "weights after the last step: %s on all %d processes",
            "identical" if agree else "NOT identical",
            self.world_size,
        )

    def mean(self, values: dict[str, float]) -> dict[str, float]:
        """The mean over ranks of each value, e.g. the losses each rank estimated on its own batches."""
        if not self.distributed:
            return values
        stacked = torch.tensor(list(values.values()), dtype=torch.float64)
        with self.waiting():
            dist.all_reduce(stacked, group=self.control_group)
        return dict(zip(values, (stacked / self.world_size).tolist()))

    def maximum(self, value: int) -> int:
        """The largest of the ranks' values: a stop signal or a failure on one rank stops them all together."""
        if not self.distributed:
            return value
        reduced = torch.tensor(value, dtype=torch.int64)
        with self.waiting():
            dist.all_reduce(reduced, op=dist.ReduceOp.MAX, group=self.control_group)
        return int(reduced)


started: Optional[Ranks] = None  # this process's ranks under torchrun, once start() has joined the process group


def start(device_name: str) -> Ranks:
    """Join torchrun's process group (gloo on CPU, nccl on CUDA) when started by torchrun."""
    if "RANK" not in os.environ:
        return Ranks(device=pick_device(device_name))
    rank, local_rank, world_size = (int(os.environ[key]) for key in ("RANK", "LOCAL_RANK", "WORLD_SIZE"))
    device = pick_device(device_name)
    if device.type == "cuda":
        if local_rank >= torch.cuda.device_count():
            raise ConfigError(f"torchrun: local rank {local_rank} but only {torch.cuda.device_count()} GPUs here")
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
    elif device.type != "cpu":
        raise ConfigError(f"trainer.device={device_name}: torchrun training runs on cuda or cpu")
    dist.init_process_group("nccl" if device.type == "cuda" else "gloo", rank=rank, world_size=world_size)
    control_group = dist.new_group(backend="gloo") if device.type == "cuda" else None  # None: the default (gloo) group
    global started
    started = Ranks(rank, world_size, device, control_group)
    started.processes = started.gather((socket.gethostname(), os.getpid()))  # to name a rank that is lost later
    return started


def stop(ranks: Ranks) -> None:
    """Leave the process group; not after a rank was lost (the error in flight says so), where leaving it would
    wait on the lost rank or abort the process."""
    if ranks.distributed and not peer_lost(sys.exc_info()[1]):
        dist.destroy_process_group()


# How gloo says that the process at the other end of a connection is gone: its socket closed or reset.
PEER_GONE = re.compile(r"Connection (closed|reset) by peer|Broken pipe|Connection refused", re.IGNORECASE)


def peer_lost(error: Optional[BaseException]) -> bool:
    """Whether `error`, or one it was raised while handling, is gloo's word that another rank's process is gone."""
    while error is not None:
        if isinstance(error, RuntimeError) and "gloo" in str(error) and PEER_GONE.search(str(error)):
            return True
        error = error.__cause__ or error.__context__
    return False


# What became of a rank's process, in the words of the line that names it lost.
ENDED, STOPPED, RUNNING = "ended", "stopped answering", "running"


def lost_ranks(ranks: Ranks) -> dict[int, str]:
    """The ranks lost, each with what became of its process (`unanswering`); with two ranks, the other one."""
    lost = unanswering(ranks)
    if not lost and ranks.world_size == 2:  # on another host, or not ended yet: the other one all the same
        lost = {1 - ranks.rank: ENDED}
    return lost


def unanswering(ranks: Ranks) -> dict[int, str]:
    """The other ranks on this host whose process has ended (or is a zombie that torchrun has yet to reap) or is
    stopped (SIGSTOP, a debugger), each with which of the two."""
    host = socket.gethostname()
    states = {rank: process_state(pid) for rank, (where, pid) in enumerate(ranks.processes) if where == host}
    return {rank: state for rank, state in states.items() if rank != ranks.rank and state != RUNNING}


def process_state(pid: int) -> str:
    """ENDED, STOPPED or RUNNING: what the process `pid` is now."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            state = stat.read().rsplit(")", 1)[1].split()[0]  # the state, after the command
    except (FileNotFoundError, ProcessLookupError):
        return ENDED
    except OSError:  # no /proc (macOS): a signal 0 says whether the process exists
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return ENDED
        except PermissionError:
            pass
        return RUNNING
    return ENDED if state in ("Z", "X") else STOPPED if state in ("T", "t") else RUNNING


def quiet_other_ranks(ranks: Ranks) -> None:
    """Only rank 0 writes the run's log (train.log and the console); the others report warnings only."""
    if not ranks.main:
        root = logging.getLogger()
        for handler in [h for h in root.handlers if isinstance(h, logging.FileHandler)]:
            root.removeHandler(handler)
            handler.close()
        root.setLevel(logging.WARNING)
