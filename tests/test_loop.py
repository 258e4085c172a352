"""The training loop's parts on their own, in milliseconds: when it logs, evaluates and saves; how it stops on a
signal or a non-finite loss; and that the recorder of ranks other than 0 answers every call rank 0's does."""

import inspect
import os
import signal
from pathlib import Path

import pytest
import torch

from trainer.config import TrainerConfig
from trainer.distributed import Ranks
from trainer.record import NullRecorder, Recorder
from trainer.schedule import Schedule
from trainer.stopping import Interrupted, NonFiniteGuard, NonFiniteLoss, StopSignals

SCHEDULE = Schedule(max_steps=25, log_interval=10, eval_interval=20, ckpt_interval=15)


def test_schedule_trains_the_steps_after_those_done_up_to_max_steps():
    assert list(SCHEDULE.steps(0)) == list(range(1, 26))
    assert list(SCHEDULE.steps(20)) == [21, 22, 23, 24, 25]
    assert list(SCHEDULE.steps(25)) == []
    assert Schedule.of(TrainerConfig(max_steps=7, log_interval=2)) == Schedule(7, 2, 500, 500)


def test_schedule_logs_evaluates_and_saves_every_so_many_steps_and_always_at_the_last():
    steps = SCHEDULE.steps(0)
    assert [step for step in steps if SCHEDULE.logs(step)] == [10, 20, 25]
    assert [step for step in steps if SCHEDULE.evaluates(step)] == [20, 25]
    assert [step for step in steps if SCHEDULE.saves(step)] == [15, 25]
    assert [step for step in steps if SCHEDULE.is_last(step)] == [25]


def test_schedule_reads_the_loss_only_where_it_waits_for_the_device_anyway():
    assert [step for step in SCHEDULE.steps(0) if SCHEDULE.reads_loss(step)] == [10, 15, 20, 25]


def test_schedule_log_window_is_log_interval_steps_or_fewer_at_the_last_step():
    assert [SCHEDULE.window(step) for step in (10, 20, 25)] == [10, 10, 5]


def test_non_finite_guard_names_the_first_step_whose_loss_was_not_a_number(tmp_path):
    guard, checkpoint = NonFiniteGuard(torch.device("cpu")), tmp_path / "last.pt"
    for step in (1, 2):
        guard.watch(step, torch.tensor(2.5))
    guard.check(Ranks(), checkpoint)  # finite so far: nothing raised
    guard.watch(3, torch.tensor(float("nan")))
    guard.watch(4, torch.tensor(1.0))
    guard.watch(5, torch.tensor(float("inf")))
    with pytest.raises(NonFiniteLoss, match="non-finite at step 3; .* no checkpoint had been written yet"):
        guard.check(Ranks(), checkpoint)
    checkpoint.write_bytes(b"")
    with pytest.raises(NonFiniteLoss, match=f"at step 3; .*{checkpoint}, the last good checkpoint, is kept"):
        guard.check(Ranks(), checkpoint)


def test_a_signal_only_asks_the_loop_to_stop_and_the_old_handlers_come_back_after():
    before = signal.getsignal(signal.SIGTERM)
    with StopSignals() as stop:
        assert stop.agreed(Ranks()) is None
        os.kill(os.getpid(), signal.SIGTERM)  # the process goes on
        assert stop.requested is signal.SIGTERM and stop.agreed(Ranks()) is signal.SIGTERM
    assert signal.getsignal(signal.SIGTERM) is before


def test_a_second_ctrl_c_stops_at_once():
    with StopSignals() as stop:
        stop.handle(signal.SIGINT, None)
        assert stop.requested is signal.SIGINT
        with pytest.raises(KeyboardInterrupt):
            stop.handle(signal.SIGINT, None)


@pytest.mark.parametrize(
    "received, processes, launcher",
    [(signal.SIGTERM, 1, "python"), (signal.SIGINT, 2, "torchrun --standalone --nproc_per_node=2")],
)
def test_interrupted_says_where_the_run_is_and_the_command_that_resumes_it(received, processes, launcher):
    stopped = Interrupted(received, 25, Path("/runs/run/last.pt"), processes)
    assert str(stopped) == (
        f"stopped by {received.name} after step 25; /runs/run/last.pt holds it. "
        f"Resume with: {launcher} train.py trainer.resume=/runs/run"  # a plain path as it is
    )
    assert stopped.exit_status == 128 + received  # the shell's convention


def public_methods(cls: type) -> dict[str, list[str]]:
    """Each method a caller may use (the context manager's included), with its parameters' names."""
    return {
        name: list(inspect.signature(member).parameters)
        for name, member in inspect.getmembers(cls, inspect.isfunction)
        if not name.startswith("_") or name in ("__enter__", "__exit__")
    }


def test_null_recorder_answers_every_public_method_of_the_recorder_with_the_same_parameters():
    recorder = public_methods(Recorder)
    assert {"stepped", "training", "evaluation", "finished", "flush", "gradient_norms"} <= set(recorder)
    assert public_methods(NullRecorder) == recorder
