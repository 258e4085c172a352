"""What the recorder writes, on a tiny run built but not trained: a maintainer adding a diagnostic or a logger
changes trainer/record.py and this file."""

import socket
import time

import pytest
from torch.utils.tensorboard import SummaryWriter

from conftest import compose_config, curve, events
from task.loss import mean_loss
from trainer.config import to_train_config
from trainer.distributed import Ranks
from trainer.evaluate import estimate_loss
from trainer.overrides import SWITCHES
from trainer.record import Recorder
from trainer.run import build_run


@pytest.fixture(scope="module")
def run(tmp_path_factory, cache_dir):
    text = tmp_path_factory.mktemp("text") / "text.txt"
    text.write_text("To be, or not to be, that is the question.\n" * 40)
    settings = [
        "data=text",
        f"data.path={text}",
        f"data.cache_dir={cache_dir}",
        "model.block_size=16",
        "model.d_model=16",
        "model.d_k=16",
        "model.d_v=16",
        "trainer.max_steps=10",
        "trainer.eval_interval=5",
        "trainer.batch_size=4",
        "trainer.sample_tokens=5",
    ]
    return build_run(to_train_config(compose_config(*settings)), Ranks())


def test_a_training_window_is_logged_as_its_mean_loss_its_learning_rate_and_its_throughput(run, tmp_path):
    with Recorder(run, tmp_path, resumed=False) as recorder:
        recorder.training(step=10, lr=1e-3, steps=5, loss_sum=12.5)
    recorded = events(tmp_path)
    assert curve(recorded, "train/loss") == [(10, 2.5)]
    assert curve(recorded, "train/lr") == [(10, pytest.approx(1e-3))]
    assert curve(recorded, "perf/tokens_per_sec")[0][1] > 0


def test_an_evaluation_is_logged_with_what_the_attention_does_and_a_sample(run, tmp_path):
    with Recorder(run, tmp_path, resumed=False) as recorder:
        recorder.evaluation(step=5, losses={"train": 3.0, "val": 3.5, "val_causal": 3.5} | far_curve(run))
        recorder.flush()
    recorded = events(tmp_path)
    assert curve(recorded, "val/loss") == [(5, 3.5)] and curve(recorded, "val/loss_causal") == [(5, 3.5)]
    assert curve(recorded, "train/loss_eval") == [(5, 3.0)] and "attn/entropy" in recorded.Tags()["scalars"]
    assert recorded.Tensors("sample/text_summary")[0].step == 5


def test_a_run_is_labelled_by_what_its_command_line_set_paths_and_presets_left_out(run, tmp_path):
    (tmp_path / ".hydra").mkdir()
    (tmp_path / ".hydra" / "overrides.yaml").write_text("- +experiment=leak\n- model.d_k=64\n- data.path=x.txt\n")
    with Recorder(run, tmp_path, resumed=False) as recorder:
        assert recorder.label == "model.d_k=64" and recorder.hparams == ["model.d_k"]
    with Recorder(run, tmp_path / "plain", resumed=False) as recorder:  # nothing set: the lesson's switches
        assert recorder.label == "model.scale=True model.causal=True model.d_k=16" and recorder.hparams == SWITCHES


def far_curve(run) -> dict[str, float]:
    """data=copy's val/loss_far as an evaluation measures it for the run, {} for another text."""
    splits = {"train": run.data.train, "val": run.data.val}
    losses = estimate_loss(run.model, run.task, splits, run.config, 0, run.ranks.device, len(run.data.train))
    return {key: value for key, value in losses.items() if key == "val_far"}


def built(*settings: str):
    """A run built as train.py builds it, but not trained: its model as initialised."""
    return build_run(to_train_config(compose_config(*settings)), Ranks())


TINY_COPY = ["data=copy", "data.distance=4", "model.block_size=16", "model.d_model=16", "model.d_k=16",
             "model.d_v=16", "trainer.batch_size=4", "trainer.eval_iters=2", "trainer.sample_tokens=5"]  # fmt: skip


@pytest.mark.parametrize("mixer", ["attention", "gru"])
def test_an_evaluation_on_the_copy_text_logs_the_loss_where_the_far_token_decides(tmp_path, cache_dir, mixer):
    run = built(*TINY_COPY, f"data.cache_dir={cache_dir}", f"model.mixer={mixer}")
    with Recorder(run, tmp_path, resumed=False) as recorder:
        recorder.evaluation(step=5, losses={"train": 3.0, "val": 3.5, "val_causal": 3.5} | far_curve(run))
        recorder.flush()
    recorded = events(tmp_path)
    ((step, far),) = curve(recorded, "val/loss_far")
    assert step == 5 and 0 < far < 5  # about ln 26 before any training
    attention_tags = [tag for tag in recorded.Tags()["scalars"] if tag.startswith("attn/")]
    assert bool(attention_tags) == (mixer == "attention")  # a recurrent model has none, and no error


def test_a_training_window_logs_what_the_mask_let_through_in_that_steps_forward_pass(run, tmp_path, cache_dir):
    finite = built(*TINY_COPY, f"data.cache_dir={cache_dir}", "model.mask_value=-1e4")
    x, y = finite.batch()
    mean_loss(finite.model.train()(x), y)  # the training forward pass: the reference path keeps its reading
    with Recorder(finite, tmp_path / "finite", resumed=False) as recorder:
        recorder.training(step=10, lr=1e-3, steps=5, loss_sum=12.5)
    recorded = events(tmp_path / "finite")
    assert curve(recorded, "attn/train_future_mass") == [(10, 0.0)]  # healthy scores never reach -1e4
    ((_, margin),) = curve(recorded, "attn/train_mask_margin")
    assert margin == pytest.approx(curve(recorded, "attn/train_allowed_min")[0][1] + 1e4)
    with Recorder(run, tmp_path / "fused", resumed=False) as recorder:  # the fused kernel keeps no reading
        recorder.training(step=10, lr=1e-3, steps=5, loss_sum=12.5)
    assert not [tag for tag in events(tmp_path / "fused").Tags()["scalars"] if tag.startswith("attn/train_")]


def test_a_resume_in_the_second_its_earlier_run_began_still_drops_what_came_after_the_checkpoint(run, tmp_path):
    """TensorBoard reads event files in name order: second made, host, process id. The earlier run's file here is
    of this second and sorts after any process id of ours: the resumed run's file must still come after it."""
    earlier = SummaryWriter(tmp_path)
    for step in (10, 20, 30):  # logged after the checkpoint at step 0 (the run's, as built)
        earlier.add_scalar("train/loss", 9.0, step)
    earlier.close()
    (written,) = tmp_path.glob("events.out.tfevents.*")
    time.sleep(1 - time.time() % 1)  # the start of a second, which the resumed run begins in, this host's
    written.rename(tmp_path / f"events.out.tfevents.{int(time.time()):010d}.{socket.gethostname()}.9999999999.0")
    with Recorder(run, tmp_path, resumed=True) as recorder:
        recorder.training(step=10, lr=1e-3, steps=5, loss_sum=12.5)
    assert curve(events(tmp_path), "train/loss") == [(10, 2.5)]
