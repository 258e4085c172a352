"""Runs that differ only in their seed: one configuration each, with its mean, sd and n (summary.seeds)."""

import statistics
from pathlib import Path

import pytest
from test_summary import fake_run, read_csv

from summary.against import keys_to_plot_against
from summary.runs import read_runs
from summary.seeds import by_configuration
from summary.summarize import SUMMARY_FILES, summarize
from trainer.overrides import keys_varied_by_sweep as hparams_columns

LOSSES = {(0.001, 0): 2.0, (0.001, 1): 2.25, (0.001, 2): 2.75, (0.01, 0): 1.5, (0.01, 1): 1.75, (0.01, 2): 2.0}


def seed_sweep(root: Path, unfinished: tuple | None = None, last: dict | None = None) -> Path:
    """A fake optim.lr x trainer.seed sweep: evaluations at steps 0, 10, 20 of trainer.max_steps=20; the run at
    `unfinished` (lr, seed) stops at step 10."""
    for job, ((lr, seed), loss) in enumerate((last or LOSSES).items()):
        run_dir = root / f"{job}_optim.lr={lr},trainer.seed={seed}"
        values = [4.0, 3.0 + seed / 10, loss][: 2 if (lr, seed) == unfinished else 3]
        fake_run(run_dir, {"val/loss": values}, ["+experiment=x", f"optim.lr={lr}", f"trainer.seed={seed}"])
        (run_dir / ".hydra" / "config.yaml").write_text("trainer:\n  max_steps: 20\n")
    return root


def test_runs_that_differ_only_in_their_seed_get_their_mean_sd_and_n(tmp_path):
    written = summarize([seed_sweep(tmp_path)], tmp_path)
    assert written == [tmp_path / name for name in SUMMARY_FILES] + [tmp_path / "summary_runs.csv"]
    rows = read_csv(tmp_path / "summary.csv")
    assert [row["overrides"] for row in rows] == ["+experiment=x optim.lr=0.001", "+experiment=x optim.lr=0.01"]
    assert float(rows[0]["val/loss"]) == pytest.approx(statistics.mean([2.0, 2.25, 2.75]))
    assert float(rows[0]["val/loss_sd"]) == pytest.approx(statistics.stdev([2.0, 2.25, 2.75]))
    assert [(row["n"], row["seeds"], row["unfinished"]) for row in rows] == [("3", "0 1 2", "")] * 2
    assert len(read_csv(tmp_path / "summary_runs.csv")) == 6  # every run, as without seeds
    markdown = (tmp_path / "summary.md").read_text()
    assert "| optim.lr=0.001 | 2.333 ± 0.382 |" in markdown and "| optim.lr=0.01 | 1.750 ± 0.250 |" in markdown
    assert "## Every run" in markdown and "| 5_optim.lr=0.01,trainer.seed=2 |" in markdown


def test_an_unfinished_seed_is_counted_apart_and_never_averaged(tmp_path):
    summarize([seed_sweep(tmp_path, unfinished=(0.001, 2))], tmp_path)
    rows = read_csv(tmp_path / "summary.csv")
    assert float(rows[0]["val/loss"]) == pytest.approx(2.125)  # seeds 0 and 1; seed 2 stopped at step 10
    assert (rows[0]["n"], rows[0]["seeds"], rows[0]["unfinished"]) == ("2", "0 1", "2_optim.lr=0.001,trainer.seed=2")
    markdown = (tmp_path / "summary.md").read_text()
    assert "| optim.lr=0.001 | 2.125 ± 0.177 |" in markdown and "| 2 | 1 |" in markdown
    assert "Unfinished: `2_optim.lr=0.001,trainer.seed=2` at step 10 of 20" in markdown


def test_the_curves_are_the_mean_inside_the_band_from_the_lowest_to_the_highest_seed(tmp_path):
    configuration = by_configuration(read_runs([seed_sweep(tmp_path)]))[0]
    assert configuration.curves["val/loss"] == [(0, 4.0), (10, pytest.approx(3.1)), (20, pytest.approx(7 / 3))]
    assert configuration.band("val/loss") == [(0, 4.0, 4.0), (10, 3.0, pytest.approx(3.2)), (20, 2.0, 2.75)]


def test_one_seed_has_no_band_and_no_sd(tmp_path):
    lone = {(0.001, 0): 2.0, (0.01, 1): 1.5}  # the seed differs, but no configuration has two
    summarize([seed_sweep(tmp_path, last=lone)], tmp_path)
    configurations = by_configuration(read_runs([tmp_path]))
    assert [configuration.band("val/loss") for configuration in configurations] == [None, None]
    assert [row["val/loss_sd"] for row in read_csv(tmp_path / "summary.csv")] == ["", ""]


def test_a_sweep_of_seeds_is_plotted_against_its_other_numbers_never_against_the_seed(tmp_path):
    runs = read_runs([seed_sweep(tmp_path)])
    assert keys_to_plot_against(by_configuration(runs), "optim.lr") == ["optim.lr"]
    assert keys_to_plot_against(by_configuration(runs), None) == []  # optim.lr has 2 values, the seed is no key
    summarize([tmp_path], tmp_path, "optim.lr")
    assert (tmp_path / "summary_optim.lr.png").read_bytes().startswith(b"\x89PNG")


def test_hparams_lists_the_seed_when_a_sweep_varies_it(tmp_path):
    (tmp_path / "multirun.yaml").write_text(
        "hydra:\n  overrides:\n    task: [+experiment=leak, 'trainer.seed=0,1,2']\n  sweeper:\n    params:\n"
        "      model.causal: true,false\n"
    )
    (tmp_path / "0_job").mkdir()
    assert hparams_columns(tmp_path / "0_job") == ["trainer.seed", "model.causal"]
