"""+experiment=search through Hydra's real Optuna sweeper: what main returns is what the search minimises."""

import csv
import importlib.util
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from conftest import cli
from summary.runs import read_runs

if TYPE_CHECKING:
    import optuna

# The search extra: pip install -e ".[search]". Looked for, not imported: optuna takes 2 s to import, which every
# worker would pay while collecting, and only the one that runs these tests needs it (imported there).
pytestmark = pytest.mark.skipif(not importlib.util.find_spec("optuna"), reason='pip install -e ".[search]"')

# Three trials long enough for the leak to show: at step 50 an unmasked model's val/loss is near 0.9, a masked one's
# near 3.2 (at d_model 32 it takes longer than 150 steps).
TINY = ["trainer.max_steps=50", "trainer.eval_interval=25", "trainer.ckpt_interval=50", "trainer.eval_iters=4",
        "trainer.sample_tokens=1", "trainer.batch_size=8", "model.block_size=16", "optim.warmup_steps=20"]  # fmt: skip
# Only the mask is searched (a value on the command line fixes a searched key); the sampler's seed 0, the preset's,
# then draws causal false, true, false.
FIXED = ["optim.lr=0.01", "model.d_k=16", "model.scale=true"]


def search(sweep_dir: Path, cache_dir: Path, trials: int, subdir: str = "${hydra.job.num}") -> "optuna.Study":
    result = cli(
        "train.py",
        "+experiment=search",
        f"hydra.sweeper.n_trials={trials}",
        *FIXED,
        *TINY,
        f"data.cache_dir={cache_dir}",
        f"hydra.sweep.dir={sweep_dir}",
        f"hydra.sweep.subdir={subdir}",
    )  # the tiny settings would make names too long for a directory
    assert result.returncode == 0, result.stderr
    import optuna

    return optuna.load_study(study_name="tinylm", storage=f"sqlite:///{sweep_dir}/optuna.db")


@pytest.fixture(scope="module")
def searched(tmp_path_factory, cache_dir) -> tuple[Path, "optuna.Study"]:
    sweep_dir = tmp_path_factory.mktemp("search")
    return sweep_dir, search(sweep_dir, cache_dir, trials=3)


@pytest.mark.slow
def test_every_trial_returns_its_val_loss_causal_and_an_unmasked_trial_is_never_the_best(searched):
    sweep_dir, study = searched
    trials = {trial.number: trial for trial in study.trials}
    runs = {int(run.name.split("_")[0]): run for run in read_runs([sweep_dir])}  # job N is trial N
    assert sorted(trials) == sorted(runs) == [0, 1, 2]
    for number, trial in trials.items():
        assert trial.params["model.causal"] == runs[number].settings["model.causal"]
        assert trial.value == pytest.approx(runs[number].final("val/loss_causal"), rel=1e-6)  # events hold float32
    unmasked = [runs[number] for number, trial in trials.items() if not trial.params["model.causal"]]
    masked = [runs[number] for number, trial in trials.items() if trial.params["model.causal"]]
    assert unmasked and masked
    # The leak would fool val/loss here: an unmasked trial has the lowest. The search, on val/loss_causal, is not.
    assert min(run.final("val/loss") for run in unmasked) < min(run.final("val/loss") for run in masked)
    assert study.best_trial.params["model.causal"] is True


@pytest.mark.slow
def test_the_summary_lists_the_trials_like_any_sweep(searched):
    sweep_dir, study = searched
    with (sweep_dir / "summary.csv").open() as file:
        rows = list(csv.DictReader(file))
    assert [row["run"].split("_")[0] for row in rows] == ["0", "1", "2"]
    for row, trial in zip(rows, study.trials):
        assert f"model.causal={trial.params['model.causal']}" in row["overrides"].split()


@pytest.mark.slow
def test_a_search_started_again_in_its_directory_continues_its_study(searched, cache_dir):
    sweep_dir, _ = searched
    # Hydra numbers a launch's jobs from 0 again, and job 0's directory holds a finished run, which no fresh run
    # may replace: the second launch names its jobs apart.
    study = search(sweep_dir, cache_dir, trials=1, subdir="again_${hydra.job.num}")
    assert [trial.number for trial in study.trials] == [0, 1, 2, 3]


def test_a_search_refused_at_its_first_trial_takes_back_its_new_study_and_keeps_one_it_continues(tmp_path, searched):
    fresh = tmp_path / "search"
    refused = cli("train.py", "+experiment=search", "trainer.max_steps=0", f"hydra.sweep.dir={fresh}")
    assert (refused.returncode, refused.stderr) == (1, "error: trainer.max_steps=0: must be positive\n")
    assert not fresh.exists()  # nor its optuna.db, which the sweeper wrote before the trial
    continued = shutil.copytree(searched[0], tmp_path / "continued")  # a copy: the refused trial joins its study
    before = sorted(path.name for path in continued.iterdir())
    assert cli("train.py", "+experiment=search", "trainer.max_steps=0", f"hydra.sweep.dir={continued}").returncode == 1
    assert sorted(path.name for path in continued.iterdir()) == before  # the study it continued, optuna.db, stays
