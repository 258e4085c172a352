import csv
import itertools
import os
import subprocess
import sys

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from conftest import ROOT, compose_config
from model import QKInit
from trainer.config import to_train_config

# What each preset sweeps (the grids): setting -> its values, in the order the jobs run.
GRIDS = {
    "leak": {"model.causal": [True, False]},
    "saturation": {"model.d_k": [16, 64, 256, 1024], "model.scale": [True, False]},
    "ablation": {"model.causal": [True, False], "model.scale": [True, False]},
    "init": {"model.qk_init": ["unit", "gpt2", "torch"], "model.scale": [True, False]},
}


def sweep_grid(preset: str) -> dict[str, list]:
    """The preset's hydra.sweeper.params, typed: {"model.scale": "true,false"} -> {"model.scale": [True, False]}."""
    with initialize_config_dir(config_dir=str(ROOT / "configs"), version_base="1.3"):
        hydra = compose("train", overrides=[f"+experiment={preset}"], return_hydra_config=True).hydra
    assert hydra.sweep.dir.startswith(f"multirun/{preset}/")  # each experiment's sweeps side by side
    return {key: list(OmegaConf.create(f"[{values}]")) for key, values in hydra.sweeper.params.items()}


def test_there_is_a_preset_for_each_experiment():
    assert sorted(path.stem for path in (ROOT / "configs" / "experiment").glob("*.yaml")) == sorted(GRIDS)


@pytest.mark.parametrize("preset", sorted(GRIDS))
def test_every_job_of_every_preset_composes_into_the_schema(preset):
    grid = sweep_grid(preset)
    assert grid == GRIDS[preset]
    for values in itertools.product(*grid.values()):
        job = dict(zip(grid, values))
        config = to_train_config(compose_config(f"+experiment={preset}", *(f"{k}={v}" for k, v in job.items())))
        for key, value in job.items():
            section, name = key.split(".")
            setting = getattr(getattr(config, section), name)
            assert (setting.value if isinstance(setting, QKInit) else setting) == value


@pytest.mark.parametrize("preset, d_k, qk_init", [("saturation", None, "unit"), ("ablation", 512, "unit"),
                                                  ("init", 256, None)])  # fmt: skip
def test_saturation_presets_fix_what_they_do_not_sweep(preset, d_k, qk_init):
    config = to_train_config(compose_config(f"+experiment={preset}"))
    assert d_k is None or config.model.d_k == d_k
    assert qk_init is None or config.model.qk_init is QKInit(qk_init)


@pytest.mark.slow
def test_a_preset_sweeps_in_parallel_with_joblib_sharing_the_cores(tmp_path, cache_dir):
    tiny = ["trainer.max_steps=10", "trainer.eval_interval=5", "trainer.eval_iters=2", "trainer.sample_tokens=20"]
    result = subprocess.run(
        [sys.executable, "train.py", "-m", "+experiment=leak", "hydra/launcher=joblib", "hydra.launcher.n_jobs=2",
         *tiny, f"data.cache_dir={cache_dir}", f"hydra.sweep.dir={tmp_path}"],
        cwd=ROOT, capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    with (tmp_path / "summary.csv").open() as file:
        rows = list(csv.DictReader(file))
    assert ["model.causal=True" in row["overrides"].split() for row in rows] == [True, False]
    # joblib starts each job in a process whose OMP_NUM_THREADS is cores // n_jobs; torch takes it.
    threads = max(os.cpu_count() // 2, 1)
    for row in rows:
        assert f"threads={threads};" in (tmp_path / row["run"] / "train.log").read_text()
