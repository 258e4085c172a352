"""report.py and the sweep callback on what a crash or a kill leaves, the figure against a swept number, and runs of
different tasks scored on the same tokens (--after-prefix)."""

import logging
import statistics
from pathlib import Path

import pytest
import torch
from hydra import compose, initialize_config_dir
from hydra.utils import instantiate
from omegaconf import OmegaConf
from test_summary import fake_run, read_csv, run_report
from torch.nn.functional import cross_entropy
from torch.utils.tensorboard import SummaryWriter

from conftest import ROOT, SWEEP, train_sweep
from summary.after_prefix import after_prefix_loss
from summary.against import sweep_lines
from summary.runs import SummaryError, read_runs
from summary.summarize import summarize
from task import IGNORE
from viewer.checkpoints import load

PNG = b"\x89PNG"


def finished_run(run_dir: Path, d_k: int = 16, max_steps: int = 20) -> None:
    """A run with losses at steps 0, 10, 20 and a Hydra config whose trainer.max_steps is 20: it finished."""
    fake_run(run_dir, {"train/loss": [4.0, 3.0, 2.0], "val/loss": [4.1, 3.1, 2.1]}, [f"model.d_k={d_k}"])
    (run_dir / ".hydra" / "config.yaml").write_text(f"trainer:\n  max_steps: {max_steps}\n")


def warnings_of(caplog) -> list[str]:
    return [record.getMessage() for record in caplog.records if record.levelno >= logging.WARNING]


def events_file(run_dir: Path, content: bytes) -> Path:
    path = run_dir / "events.out.tfevents.1.host.1.0"
    path.parent.mkdir(parents=True)
    path.write_bytes(content)
    return path


@pytest.mark.parametrize("content", [b"", b"not what SummaryWriter writes\n" * 20], ids=["zero-length", "junk"])
def test_an_unreadable_events_file_is_skipped_with_one_warning_naming_it(tmp_path, caplog, content):
    finished_run(tmp_path / "16")
    broken = events_file(tmp_path / "64", content)
    summarize([tmp_path], tmp_path)
    assert warnings_of(caplog) == [f"{broken}: unreadable events file (empty, or not TensorBoard's); skipped"]
    assert [row["run"] for row in read_csv(tmp_path / "summary.csv")] == ["16"]
    assert (tmp_path / "summary.png").read_bytes().startswith(PNG)


def test_report_says_a_damaged_events_file_in_one_warning_line(tmp_path):
    finished_run(tmp_path / "16")
    broken = events_file(tmp_path / "64", b"")
    result = run_report(str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert result.stderr.splitlines() == [
        f"WARNING: {broken}: unreadable events file (empty, or not TensorBoard's); skipped"
    ]


def test_a_truncated_events_file_gives_its_readable_events_and_is_flagged(tmp_path, caplog):
    run_dir = tmp_path / "run"
    writer = SummaryWriter(run_dir)
    for step, value in enumerate([4.0, 3.0, 2.0]):
        writer.add_scalar("val/loss", value, 10 * step)
    writer.close()
    events = next(run_dir.glob("events.out.tfevents.*"))
    events.write_bytes(events.read_bytes()[:-5])  # into the last record: the crc of val/loss at step 20
    summarize([tmp_path], tmp_path)
    assert warnings_of(caplog) == [f"{events}: events file cut short mid-record; its readable events are used"]
    [row] = read_csv(tmp_path / "summary.csv")
    assert (row["val/loss"], row["last_step"], row["truncated"]) == ("3.0", "10", "true")
    assert "Events cut short mid-record (a crash while writing): `run`." in (tmp_path / "summary.md").read_text()


def test_a_run_that_stopped_before_its_max_steps_is_marked_unfinished(tmp_path):
    finished_run(tmp_path / "16")
    finished_run(tmp_path / "64", d_k=64, max_steps=100)
    summarize([tmp_path], tmp_path)
    rows = read_csv(tmp_path / "summary.csv")
    assert [(row["last_step"], row["max_steps"], row["finished"]) for row in rows] == [
        ("20", "20", "true"), ("20", "100", "false")
    ]  # fmt: skip
    markdown = (tmp_path / "summary.md").read_text()
    assert "| 20/20 | yes |" in markdown and "| 20/100 | **no** |" in markdown
    assert "Unfinished: `64` at step 20 of 100." in markdown


def test_max_steps_is_the_last_resumes(tmp_path):
    finished_run(tmp_path / "16", max_steps=10)
    resumed = tmp_path / "16" / ".hydra" / "resume-2025-01-01_12-00-00-000000"
    resumed.mkdir()
    (resumed / "config.yaml").write_text("trainer:\n  max_steps: 20\n")
    assert read_runs([tmp_path])[0].finished


def test_a_killed_sweep_is_summarized_from_the_jobs_that_logged(tmp_path, caplog):
    finished_run(tmp_path / "0_model.d_k=16")
    (tmp_path / "1_model.d_k=64" / ".hydra").mkdir(parents=True)  # started, killed before its first event
    summarize([tmp_path], tmp_path)
    assert warnings_of(caplog) == []
    assert [row["run"] for row in read_csv(tmp_path / "summary.csv")] == ["0_model.d_k=16"]


def lr_sweep(sweep_dir: Path) -> None:
    """A fake optim.lr x model.qk_norm sweep, as the lr_sensitivity preset makes one."""
    for job, (lr, norm) in enumerate((lr, norm) for lr in (1e-3, 1e-2, 1e-1) for norm in (True, False)):
        overrides = [f"model.qk_norm={norm}", f"optim.lr={lr}"]
        fake_run(sweep_dir / f"{job}_{','.join(overrides)}", {"val/loss": [4.0, 2.0 + lr]}, overrides)


def test_report_plots_the_final_values_against_a_swept_number(tmp_path):
    lr_sweep(tmp_path)
    result = run_report(str(tmp_path), "--x", "optim.lr")
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "summary_optim.lr.png").read_bytes().startswith(PNG)
    lines, legend = sweep_lines(read_runs([tmp_path]), "optim.lr")
    assert [[run.settings["optim.lr"] for run in line.runs] for line in lines] == [[1e-3, 1e-2, 1e-1]] * 2
    assert [label for label, _ in legend] == ["model.qk_norm", "true", "false"]


@pytest.mark.parametrize(
    "key, why", [("model.qk_norm", "its values are not all numbers"), ("model.d_k", "the runs do not sweep it")]
)
def test_a_key_that_is_no_swept_number_is_refused_before_anything_is_written(tmp_path, key, why):
    lr_sweep(tmp_path)
    with pytest.raises(SummaryError, match=f"^cannot plot against {key}: {why}; swept numeric keys: optim.lr$"):
        summarize([tmp_path], tmp_path, x=key)
    assert not (tmp_path / "summary.csv").exists()


def test_report_against_a_key_that_is_no_swept_number_fails_in_one_line(tmp_path):
    lr_sweep(tmp_path)
    result = run_report(str(tmp_path), "--x", "model.qk_norm")
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        "error: cannot plot against model.qk_norm: its values are not all numbers; swept numeric keys: optim.lr"
    ]


def sweep_summary(*overrides: str):
    """The callback as Hydra builds it from configs/train.yaml and the command line's overrides."""
    import train  # noqa: F401  registers the schema, configs/train.yaml's first default (run alone, nothing else has)

    with initialize_config_dir(config_dir=str(ROOT / "configs"), version_base="1.3"):
        config = compose("train", overrides=list(overrides), return_hydra_config=True)
    return instantiate(config.hydra.callbacks.sweep_summary)


def end_of_sweep(sweep_dir: Path):
    return OmegaConf.create({"hydra": {"sweep": {"dir": str(sweep_dir)}}})


def test_the_sweep_callback_plots_against_the_key_the_command_line_names(tmp_path):
    callback = sweep_summary("hydra.callbacks.sweep_summary.x=optim.lr")
    lr_sweep(tmp_path)
    callback.on_multirun_end(end_of_sweep(tmp_path))
    assert (tmp_path / "summary_optim.lr.png").read_bytes().startswith(PNG)


def test_the_sweep_callback_plots_against_a_number_with_three_values_unasked(tmp_path):
    lr_sweep(tmp_path)
    sweep_summary().on_multirun_end(end_of_sweep(tmp_path))
    assert sorted(path.name for path in tmp_path.glob("summary*")) == [
        "summary.csv", "summary.md", "summary.png", "summary_optim.lr.png"
    ]  # fmt: skip


def test_the_sweep_callback_with_an_x_it_does_not_sweep_still_writes_the_summary(tmp_path, caplog):
    lr_sweep(tmp_path)
    sweep_summary("hydra.callbacks.sweep_summary.x=model.d_k").on_multirun_end(end_of_sweep(tmp_path))
    assert "cannot plot against model.d_k: the runs do not sweep it" in caplog.text
    assert (tmp_path / "summary.csv").exists() and (tmp_path / "summary_optim.lr.png").exists()


@pytest.mark.slow
def test_after_prefix_scores_every_next_token_run_on_the_same_tokens_and_groups_the_seeds(tmp_path, cache_dir):
    patterns, numbered = "+mask=causal_lm,prefix_lm,fully_visible", "hydra.sweep.subdir=${hydra.job.num}"  # short names
    # 5 steps: what is scored, and how the seeds are grouped, does not depend on how long the runs trained
    runs = [*SWEEP, "trainer.max_steps=5", patterns, "model.n_layer=1", "trainer.seed=0,1", numbered]
    train_sweep(tmp_path, cache_dir, "+experiment=masks", *runs)
    result = run_report(str(tmp_path), "--after-prefix", "0.5")
    assert result.returncode == 0, result.stderr
    windows, found = {}, {}
    for run in read_runs([tmp_path]):
        pattern = next(override for override in run.overrides if override.startswith("+mask="))
        found.setdefault(pattern, []).append((run.path, after_prefix_loss(run.path / "last.pt", 0.5, windows)))
    (batches,) = windows.values()  # one draw of windows, for every run
    prefix = 16  # half of SWEEP's model.block_size=32
    assert all((y[:, : prefix - 1] == IGNORE).all() and (y[:, prefix - 1 :] != IGNORE).all() for _, y in batches)
    path, loss = found["+mask=causal_lm"][0]
    causal = load(path / "last.pt").model
    scored = [cross_entropy(causal(x)[:, prefix - 1 :].flatten(0, 1), y[:, prefix - 1 :].flatten()) for x, y in batches]
    assert loss == pytest.approx(torch.stack(scored).mean().item(), abs=1e-6)
    lines = result.stdout.splitlines()
    for pattern in ("causal_lm", "prefix_lm"):
        losses = [loss for _, loss in found[f"+mask={pattern}"]]
        spread = f"{statistics.mean(losses):.3f} ± {statistics.stdev(losses):.3f}"
        seeds = f"({', '.join(f'{loss:.3f}' for loss in losses)})"
        assert f"| +mask={pattern} | {spread} | {seeds} |" in lines
    assert "| +mask=fully_visible |  |  |" in lines
    skipped = [
        line for line in lines if line.endswith("not scored, its task predicts no next token (task=fill_blank).")
    ]
    assert len(skipped) == 2


@pytest.mark.parametrize(
    "args, message",
    [
        (["--after-prefix", "1"], "argument --after-prefix: '1': the share of each window in the prefix"),
        (["--after-prefix", "0.5", "--x", "optim.lr"], "--x goes with the summary"),
    ],
)
def test_after_prefix_refuses_a_share_or_an_option_it_cannot_take_in_one_line(tmp_path, args, message):
    finished_run(tmp_path / "16")
    result = run_report(str(tmp_path), *args)
    assert result.returncode == 2 and message in result.stderr and len(result.stderr.splitlines()) == 1
