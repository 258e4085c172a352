import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from hydra import compose, initialize_config_dir
from hydra.core.hydra_config import HydraConfig
from omegaconf import open_dict
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.plugins.hparams.plugin_data_pb2 import HParamsPluginData

import train
import trainer.record
from conftest import ROOT, SHORT, SHORT_RUN, cli, compose_config, curve, events, short_run
from trainer.checkpoint import KEPT

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def run_dir(short_run_dir) -> Path:
    """SHORT_RUN, trained once per session in this process (conftest's short_run_dir): read only."""
    return short_run_dir


def test_short_run_lowers_the_loss(run_dir):
    val = curve(events(run_dir), "val/loss")
    assert [step for step, _ in val] == [0, 30, 60]
    assert val[-1][1] < val[0][1] - 0.5


def test_run_writes_one_events_file_that_tensorboard_reads_back(run_dir):
    assert len(list(run_dir.glob("events.out.tfevents.*"))) == 1
    assert [p for p in run_dir.iterdir() if p.is_dir() and p.name != KEPT] == []  # no extra run for the hparams
    assert not list((run_dir / KEPT).glob("events.*"))  # the kept checkpoints' directory holds no curves
    accumulator = events(run_dir)
    scalars = set(accumulator.Tags()["scalars"])
    assert {"train/loss", "train/loss_eval", "val/loss", "train/lr", "perf/tokens_per_sec"} <= scalars
    assert [step for step, _ in curve(accumulator, "train/loss")] == [10, 20, 30, 40, 50, 60]
    assert all(value > 0 for _, value in curve(accumulator, "perf/tokens_per_sec"))
    lr = [value for _, value in curve(accumulator, "train/lr")]
    assert lr[0] == pytest.approx(3e-3) and lr[-1] == pytest.approx(3e-4)  # warmup ends at step 10


def test_run_logs_its_sample_and_its_hyperparameters(run_dir):
    accumulator = events(run_dir)
    sample = accumulator.Tensors("sample/text_summary")[-1]
    header = "**step 60 · model.scale=True model.causal=True model.d_k=128**\n\n```\n"  # then the text
    assert sample.step == 60 and sample.tensor_proto.string_val[0].decode().startswith(header)
    hparams = accumulator.PluginTagToContent("hparams")
    assert set(hparams) == {"_hparams_/experiment", "_hparams_/session_start_info", "_hparams_/session_end_info"}
    experiment = HParamsPluginData.FromString(hparams["_hparams_/experiment"]).experiment
    # Outside a sweep and with nothing set: the lesson's switches, listed first, the headline metrics first.
    assert [(info.name, info.differs) for info in experiment.hparam_infos] == [
        ("model.scale", True),
        ("model.causal", True),
        ("model.d_k", True),
    ]
    assert [info.name.tag for info in experiment.metric_infos][:2] == ["val/loss", "val/loss_causal"]
    session = HParamsPluginData.FromString(hparams["_hparams_/session_start_info"]).session_start_info
    assert session.hparams["model.scale"].string_value == "true"  # a word, not 1.0
    assert session.hparams["model.d_k"].number_value == 128
    assert (run_dir / "tokenizer.json").exists()


def test_two_runs_with_the_same_config_give_identical_curves(run_dir, tmp_path, cache_dir):
    short_run(tmp_path, cache_dir, *SHORT_RUN)
    for tag in ("train/loss", "val/loss"):
        assert curve(events(tmp_path), tag) == curve(events(run_dir), tag)


def test_unmasked_model_reads_the_answer_and_its_loss_collapses(tmp_path, cache_dir):
    steps = ["trainer.max_steps=150", "trainer.eval_interval=150"]  # the last evaluation is the one read
    causal = short_run(tmp_path / "causal", cache_dir, *steps)["val"]
    unmasked = short_run(tmp_path / "unmasked", cache_dir, *steps, "model.causal=false")["val"]
    print(f"val loss after 150 steps: causal {causal:.3f}, unmasked {unmasked:.3f}")
    assert unmasked < causal - 1.0


def test_cli_run_writes_hydra_files_log_and_events_into_its_run_dir(tmp_path, cache_dir):
    short = [*SHORT, "trainer.max_steps=10", "trainer.eval_interval=10"]  # what is written does not grow with steps
    result = cli("train.py", *short, f"data.cache_dir={cache_dir}", f"hydra.run.dir={tmp_path}")
    assert result.returncode == 0, result.stderr
    assert (tmp_path / ".hydra" / "config.yaml").exists()
    log = (tmp_path / "train.log").read_text()
    assert "step 10: train loss" in log and "val loss" in log and "sample after 10 steps" in log
    assert len(list(tmp_path.glob("events.out.tfevents.*"))) == 1


def test_cli_multirun_gives_each_job_its_own_run(tmp_path, cache_dir):
    result = cli(
        "train.py",
        "-m",
        "model.scale=true,false",
        *SHORT,
        "trainer.max_steps=10",
        "trainer.eval_interval=10",
        f"data.cache_dir={cache_dir}",
        f"hydra.sweep.dir={tmp_path}",
    )
    assert result.returncode == 0, result.stderr
    for job, scale in (("0", "True"), ("1", "False")):
        (job_dir,) = tmp_path.glob(f"{job}_*")  # named by its number and its overrides
        assert (job_dir / ".hydra" / "overrides.yaml").read_text().count(f"model.scale={scale}") == 1
        assert "val/loss" in events(job_dir).Tags()["scalars"]


EVALUATION_SECONDS = 1e6  # what each evaluation takes on the recorder's clock: far longer than any training window


def test_evaluation_time_is_left_out_of_throughput(tmp_path, cache_dir, monkeypatch):
    # The recorder's clock, on which each evaluation takes a million seconds: whatever this machine's speed, a window
    # that counted its tokens over an evaluation's time would show fewer than one a second.
    late = [0.0]
    monkeypatch.setattr(trainer.record, "time", SimpleNamespace(perf_counter=lambda: time.perf_counter() + late[0]))
    evaluate = train.estimate_loss

    def slow_evaluate(*args, **kwargs):
        late[0] += EVALUATION_SECONDS
        return evaluate(*args, **kwargs)

    monkeypatch.setattr(train, "estimate_loss", slow_evaluate)
    short_run(tmp_path, cache_dir, "trainer.max_steps=30", "trainer.eval_interval=15", "trainer.log_interval=10")
    # Windows 1-10 (after the evaluation at step 0), 11-20 (around the one at 15), 21-30 (before the last).
    rates = [value for _, value in curve(events(tmp_path), "perf/tokens_per_sec")]
    # A window whose clock ran through an evaluation counts its tokens over more than EVALUATION_SECONDS, however fast
    # the steps: below this rate. (Comparing the windows with each other, or with a real sleep, fails on a busy
    # machine.)
    composed = compose_config(*SHORT)
    tokens_per_window = 10 * composed.trainer.batch_size * composed.model.block_size
    assert len(rates) == 3 and min(rates) > tokens_per_window / EVALUATION_SECONDS


def test_main_returns_the_loss_with_the_mask_on_so_a_sweeper_never_prefers_a_leaky_run(tmp_path, cache_dir):
    with initialize_config_dir(config_dir=str(ROOT / "configs"), version_base="1.3"):
        cfg = compose(
            "train",
            [*SHORT, "trainer.max_steps=30", "model.causal=false", f"data.cache_dir={cache_dir}"],
            return_hydra_config=True,
        )
    cfg.hydra.runtime.output_dir = str(tmp_path)  # what Hydra sets when it starts the job
    HydraConfig.instance().set_config(cfg)
    with open_dict(cfg):
        del cfg["hydra"]  # the task sees the config without Hydra's node, as under @hydra.main
    objective = train.main(cfg)  # a DictConfig argument: @hydra.main calls the function as it is
    val, val_causal = (curve(events(tmp_path), tag)[-1][1] for tag in ("val/loss", "val/loss_causal"))
    assert objective == pytest.approx(val_causal) and val_causal > val  # the leak already shows


def test_every_evaluation_leaves_its_attention_pattern_though_it_is_drawn_while_training_goes_on(run_dir):
    accumulator = EventAccumulator(str(run_dir), size_guidance={"images": 0})
    accumulator.Reload()
    assert [image.step for image in accumulator.Images("attn/pattern")] == [0, 30, 60]
