import csv
import itertools
import subprocess
import time
import urllib.parse
from pathlib import Path

import pytest
from torch.utils.tensorboard import SummaryWriter

from conftest import SWEEP, cli, get_json
from summary.figures import MASK, honest_tag
from summary.runs import RunCurves, find_runs, read_runs, swept_keys
from summary.styles import encode
from summary.summarize import SUMMARY_FILES, summarize
from trainer.tags import FINAL_TAGS

DIAGNOSTICS = ["val/loss_causal", "attn/entropy", "attn/saturated_frac"]  # logged by train.py at every evaluation


def fake_run(run_dir: Path, scalars: dict[str, list[float]], overrides: list[str] | None = None, seconds: float = 0):
    """A run as train.py leaves it: an events file (values at steps 0, 10, 20...) and Hydra's overrides.yaml."""
    writer = SummaryWriter(run_dir)
    started = time.time()
    for tag, values in scalars.items():
        for index, value in enumerate(values):
            writer.add_scalar(tag, value, 10 * index, walltime=started + seconds * (index + 1) / len(values))
    writer.close()
    if overrides is not None:
        (run_dir / ".hydra").mkdir()
        (run_dir / ".hydra" / "overrides.yaml").write_text("".join(f"- {override}\n" for override in overrides))


def read_csv(path: Path) -> list[dict[str, str]]:
    with path.open() as file:
        return list(csv.DictReader(file))


def test_summary_holds_each_runs_final_values_and_leaves_missing_tags_empty(tmp_path):
    fake_run(tmp_path / "0_model.scale=True", {"val/loss": [4.0, 2.5, 2.0], "attn/entropy": [2.0, 1.2]},
             ["+experiment=x", "model.scale=True"])  # fmt: skip
    fake_run(tmp_path / "1_model.scale=False", {"val/loss": [4.0, 3.0, 2.75]}, ["+experiment=x", "model.scale=False"])
    written = summarize([tmp_path], tmp_path)
    assert written == [tmp_path / name for name in SUMMARY_FILES]

    rows = read_csv(tmp_path / "summary.csv")
    assert list(rows[0]) == [
        "run",
        "overrides",
        *FINAL_TAGS,
        "wall_s",
        "last_step",
        "max_steps",
        "finished",
        "truncated",
    ]
    assert [row["run"] for row in rows] == ["0_model.scale=True", "1_model.scale=False"]
    assert rows[0]["overrides"] == "+experiment=x model.scale=True"
    assert float(rows[0]["val/loss"]) == 2.0 and float(rows[0]["attn/entropy"]) == pytest.approx(1.2)
    assert float(rows[1]["val/loss"]) == 2.75 and rows[1]["attn/entropy"] == "" and rows[1]["train/loss"] == ""

    markdown = (tmp_path / "summary.md").read_text()
    assert "Overrides of every run: `+experiment=x`." in markdown
    empty = " |" * FINAL_TAGS[1:].index("attn/entropy")  # the losses it did not log: val/loss_causal, ...
    row = f"| 0_model.scale=True | model.scale=True | 2.000 |{empty} 1.200 | | | | | | | | 0 |"
    assert row in markdown.replace("  ", " ")
    assert (tmp_path / "summary.png").read_bytes().startswith(b"\x89PNG")


def test_wall_time_runs_from_the_first_to_the_last_event(tmp_path):
    fake_run(tmp_path, {"val/loss": [4.0, 3.0]}, seconds=90)
    assert read_runs([tmp_path])[0].wall_s == pytest.approx(90, abs=2)


def test_runs_are_found_below_every_directory_in_natural_order(tmp_path):
    for job in ("10_b", "2_a", "nested/deeper/run"):
        fake_run(tmp_path / "sweep" / job, {"val/loss": [1.0]})
    fake_run(tmp_path / "single", {"val/loss": [1.0]})
    runs = find_runs([tmp_path / "sweep", tmp_path / "single"])
    assert runs == [tmp_path / path for path in ("single", "sweep/2_a", "sweep/10_b", "sweep/nested/deeper/run")]
    assert [run.name for run in read_runs([tmp_path / "sweep"])] == ["2_a", "10_b", "nested/deeper/run"]
    assert [run.name for run in read_runs([tmp_path / "single"])] == ["single"]  # not "."


def sweep(tmp_path: Path, grid: dict[str, list], scalars: dict[str, list[float]] | None = None) -> list[RunCurves]:
    """Fake runs of every combination of `grid`'s values, as a sweep of those keys leaves them."""
    combinations = list(itertools.product(*grid.values()))
    for job, values in enumerate(combinations):
        overrides = [f"{key}={value}" for key, value in zip(grid, values)]
        fake_run(tmp_path / f"{job}_{','.join(overrides)}", scalars or {"val/loss": [4.0, 3.0]}, overrides)
    return read_runs([tmp_path])


def test_a_saturation_sweep_gets_a_colour_per_d_k_and_a_line_style_per_scale(tmp_path):
    runs = sweep(tmp_path, {"model.d_k": [16, 64, 256, 1024], "model.scale": [True, False]})
    encoding = encode(runs, swept_keys(runs))
    colours = {run.settings["model.d_k"]: style.color for run, style in zip(runs, encoding.styles)}
    assert len({repr(colour) for colour in colours.values()}) == 4
    assert all(
        repr(style.color) == repr(colours[run.settings["model.d_k"]]) for run, style in zip(runs, encoding.styles)
    )
    assert [style.linestyle for style in encoding.styles] == ["-", "--"] * 4  # scaled solid, unscaled dashed
    labels = [label for label, _ in encoding.legend]
    assert labels == ["model.d_k", "16", "64", "256", "1024", "model.scale", "true", "false"]


def test_model_causal_gives_the_line_style_so_its_forced_mask_line_pairs_with_the_unmasked_one(tmp_path):
    leaky = {"val/loss": [4.0, 1.0], "val/loss_causal": [4.0, 3.5]}
    runs = sweep(tmp_path, {"model.causal": [True, False], "model.scale": [True, False]}, leaky)
    runs[0].curves["val/loss_causal"] = runs[1].curves["val/loss_causal"] = runs[0].curves["val/loss"]  # masked
    encoding = encode(runs, swept_keys(runs), style_first=MASK)
    assert [style.linestyle for style in encoding.styles] == ["-", "-", "--", "--"]
    assert [label for label, _ in encoding.legend][:1] == ["model.scale"]
    assert [honest_tag(run) for run in runs] == [None, None, "val/loss_causal", "val/loss_causal"]


def test_a_lone_switch_gives_both_colour_and_line_style(tmp_path):
    runs = sweep(tmp_path, {"model.causal": [True, False]})
    encoding = encode(runs, swept_keys(runs))
    assert [(style.color, style.linestyle) for style in encoding.styles] == [("#ff7043", "-"), ("#0077bb", "--")]
    assert [(label, style and style.linestyle) for label, style in encoding.legend] == [
        ("model.causal", None), ("true", "-"), ("false", "--")
    ]  # fmt: skip


def test_runs_the_overrides_cannot_tell_apart_get_a_colour_each(tmp_path):
    for name in ("a/0_model.scale=True", "b/0_model.scale=True"):
        fake_run(tmp_path / name, {"val/loss": [4.0, 3.0]}, ["model.scale=True"])
    runs = read_runs([tmp_path])
    encoding = encode(runs, swept_keys(runs))
    assert [style.color for style in encoding.styles] == ["#ff7043", "#0077bb"]  # TensorBoard's first two
    assert [label for label, _ in encoding.legend] == ["a/0_model.scale=True", "b/0_model.scale=True"]


def run_report(*args: str) -> subprocess.CompletedProcess:
    """`python report.py ARGS`, in this process (conftest's cli)."""
    return cli("report.py", *args)


def test_report_writes_the_summary_of_several_directories_where_asked(tmp_path):
    fake_run(tmp_path / "a", {"val/loss": [3.0]}, ["model.d_k=16"])
    fake_run(tmp_path / "b", {"val/loss": [2.0]}, ["model.d_k=64"])
    result = run_report(str(tmp_path / "a"), str(tmp_path / "b"), "--out", str(tmp_path / "out"))
    assert result.returncode == 0, result.stderr
    assert "| a | model.d_k=16 |" in result.stdout
    assert [row["run"] for row in read_csv(tmp_path / "out" / "summary.csv")] == ["a", "b"]


@pytest.mark.parametrize("make, message", [(False, "no such directory"), (True, "no TensorBoard events files")])
def test_report_without_runs_fails_in_one_line(tmp_path, make, message):
    if make:
        (tmp_path / "empty").mkdir()
    result = run_report(str(tmp_path / "empty"))
    assert result.returncode == 1
    assert result.stderr.strip() == f"error: {tmp_path / 'empty'}: {message}" + (" in it or below it" if make else "")


@pytest.fixture(scope="module")
def sweep_dir(leak_sweep) -> Path:
    """The session's `python train.py +experiment=leak SWEEP` (conftest): a multirun of two jobs that lasts seconds;
    data.cache_dir is a path, so it must stay out of the job names, and the preset too."""
    return leak_sweep


@pytest.mark.slow
def test_sweep_jobs_are_named_by_number_and_overrides_without_paths(sweep_dir):
    jobs = sorted(path.name for path in sweep_dir.iterdir() if path.is_dir())
    names = [",".join(sorted([*SWEEP, f"model.causal={causal}"])) for causal in ("True", "False")]  # Hydra sorts them
    assert jobs == [f"0_{names[0]}", f"1_{names[1]}"]


@pytest.mark.slow
def test_multirun_ends_with_its_summary_that_report_rebuilds_identically(sweep_dir, tmp_path):
    rows = read_csv(sweep_dir / "summary.csv")
    assert [row["run"].split(",")[0] for row in rows] == ["0_model.block_size=32", "1_model.block_size=32"]
    assert all(float(row["val/loss"]) > 0 and float(row["train/loss"]) > 0 for row in rows)
    assert [(row["last_step"], row["max_steps"], row["finished"]) for row in rows] == [("10", "10", "true")] * 2
    assert (sweep_dir / "summary.png").read_bytes().startswith(b"\x89PNG")
    assert "| model.causal=False |" in (sweep_dir / "summary.md").read_text()

    assert run_report(str(sweep_dir), "--out", str(tmp_path)).returncode == 0
    for name in ("summary.csv", "summary.md"):
        assert (tmp_path / name).read_text() == (sweep_dir / name).read_text()


@pytest.mark.slow
def test_sweep_summary_has_the_attention_diagnostics(sweep_dir):
    for row in read_csv(sweep_dir / "summary.csv"):
        assert all(float(row[tag]) >= 0 for tag in DIAGNOSTICS), row


@pytest.fixture(scope="module")
def tensorboard_url(sweep_tensorboard):
    """`tensorboard --logdir SWEEP --port 0`, as a user starts it, once it has read both jobs (conftest's)."""
    return sweep_tensorboard


@pytest.mark.slow
def test_tensorboard_shows_the_jobs_named_by_their_directories(tensorboard_url, sweep_dir):
    assert get_json(tensorboard_url + "data/runs") == sorted(path.name for path in sweep_dir.iterdir() if path.is_dir())


@pytest.mark.slow
@pytest.mark.parametrize("tag", ["train/loss", "val/loss", *DIAGNOSTICS])
def test_tensorboard_serves_every_jobs_scalars_over_http(tensorboard_url, tag):
    for run in get_json(tensorboard_url + "data/runs"):
        query = urllib.parse.urlencode({"run": run, "tag": tag})
        points = get_json(f"{tensorboard_url}data/plugin/scalars/scalars?{query}")  # [[wall_time, step, value], ...]
        assert [step for _, step, _ in points][-1] == 10 and all(value >= 0 for _, _, value in points)


@pytest.mark.slow
def test_tensorboard_hparams_tab_lists_the_swept_key_first_and_the_summarys_metrics(tensorboard_url):
    experiment = get_json(tensorboard_url + "data/plugin/hparams/experiment", {"experimentName": ""})
    # The swept key first: model.causal, which outside a sweep follows model.scale (tests/test_train.py).
    assert [info["name"] for info in experiment["hparamInfos"]][0] == "model.causal"
    assert [info["name"]["tag"] for info in experiment["metricInfos"]] == FINAL_TAGS


@pytest.mark.slow
def test_tensorboard_custom_scalars_chart_both_losses_of_every_run_on_one_set_of_axes(tensorboard_url):
    layout = get_json(tensorboard_url + "data/plugin/custom_scalars/layout")
    charts = [chart for category in layout["category"] for chart in category["chart"]]
    leak = [chart for chart in charts if chart["multiline"]["tag"] == ["^val/loss$", "^val/loss_causal$"]]
    assert len(leak) == 1 and layout["category"][0]["title"] == "leak"  # the leak sweep opens on its own charts


def test_a_setting_another_runs_overrides_give_is_read_from_a_runs_config_not_left_unset(tmp_path):
    fake_run(tmp_path / "masks" / "0_model.n_layer=1", {"val/loss": [2.0]}, ["model.n_layer=1"])
    (tmp_path / "masks" / "0_model.n_layer=1" / ".hydra" / "config.yaml").write_text("model:\n  positions: learned\n")
    fake_run(tmp_path / "order" / "0_model.positions=none", {"val/loss": [2.4]}, ["model.positions=none"])
    masks, order = read_runs([tmp_path])  # two sweeps: the first left model.positions at its default
    assert masks.settings["model.positions"] == "learned" and "model.n_layer" not in order.settings  # no config
    assert swept_keys([masks, order]) == ["model.n_layer", "model.positions"]
