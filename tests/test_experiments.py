import functools
import itertools
import math
from enum import Enum

import pytest
from hydra import compose, initialize_config_dir
from hydra.types import RunMode
from omegaconf import DictConfig

from conftest import ROOT, compose_config
from data import Source
from model import QKInit
from trainer.config import ConfigError, TrainConfig, objective_key, to_train_config, without_shared_settings
from trainer.overrides import PARSER

# What each preset sweeps (the issue's grids): setting -> its values, in the order the jobs run.
GRIDS = {
    "leak": {"model.causal": [True, False]},
    "saturation": {"model.d_k": [16, 64, 256, 1024], "model.scale": [True, False]},
    "ablation": {"model.causal": [True, False], "model.scale": [True, False]},
    "init": {"model.qk_init": ["unit", "gpt2", "torch"], "model.scale": [True, False]},
    "lr_sensitivity": {"optim.lr": [1e-3, 2.5e-3, 6.3e-3, 1.6e-2, 4e-2, 1e-1], "model.qk_norm": [False, True]},
    "finite_mask": {"model.mask_value": [-1e4, float("-inf")]},
    "projections": {"model.projections": [True, False]},
    "recurrence": {"data.distance": [4, 16, 32, 60], "model.mixer": ["attention", "gru"]},
}


# The encoder preset sweeps four configs of the encoder group, (a) to (d), each a task, a mask and what is hidden.
ENCODER = {
    "a_next_token": ("next_token", True, True),
    "b_both_sides": ("fill_blank", False, True),
    "c_left_side": ("fill_blank", True, True),
    "d_nothing_hidden": ("fill_blank", False, False),
}
# The masks and order presets sweep configs of the mask group: each a task and whether its mask is applied.
MASKS = {"causal_lm": ("next_token", True), "prefix_lm": ("prefix_lm", True), "fully_visible": ("fill_blank", False)}
SWEEPS = sorted([*GRIDS, "encoder", "masks", "order"])


@functools.cache  # composed once for the tests that read it
def preset_hydra(preset: str) -> DictConfig:
    """The Hydra settings of `python train.py +experiment=PRESET`."""
    import train  # noqa: F401  registers the schema, configs/train.yaml's first default

    with initialize_config_dir(config_dir=str(ROOT / "configs"), version_base="1.3"):
        return compose("train", overrides=[f"+experiment={preset}"], return_hydra_config=True).hydra


def sweep_grid(preset: str) -> dict[str, list]:
    """The preset's hydra.sweeper.params, typed as Hydra's sweeper reads them: {"model.scale": "true,false"} ->
    {"model.scale": [True, False]}, {"model.mask_value": "-1e4,-inf"} -> {"model.mask_value": [-1e4, -inf]}."""
    hydra = preset_hydra(preset)
    assert hydra.sweep.dir.startswith(f"multirun/{preset}/")  # each experiment's sweeps side by side
    return {
        key: list(PARSER.parse_overrides([f"{key}={values}"])[0].sweep_iterator())
        for key, values in hydra.sweeper.params.items()
    }


@functools.cache  # composed once for the tests that read it
def preset_jobs(preset: str) -> list[tuple[dict, TrainConfig]]:
    """Each job of the preset's sweep: the values it sweeps, and its checked config."""
    jobs = []
    grid = sweep_grid(preset)
    for values in itertools.product(*grid.values()):
        job = dict(zip(grid, values))
        jobs.append(
            (job, to_train_config(compose_config(f"+experiment={preset}", *(f"{k}={v}" for k, v in job.items()))))
        )
    return jobs


def test_there_is_a_preset_for_each_experiment():
    presets = sorted(path.stem for path in (ROOT / "configs" / "experiment").glob("*.yaml"))
    assert presets == sorted(SWEEPS + ["search"])  # search: a search space, not a grid


def test_the_search_preset_minimises_what_main_returns_over_lr_d_k_scale_and_causal_into_its_sweep_dir():
    hydra = preset_hydra("search")
    assert hydra.sweeper._target_.endswith("OptunaSweeper") and hydra.sweeper.sampler._target_.endswith("TPESampler")
    assert hydra.sweeper.direction == "minimize" and hydra.mode is RunMode.MULTIRUN
    assert hydra.sweeper.storage == f"sqlite:///{hydra.sweep.dir}/optuna.db"  # a stopped search continues there
    assert sorted(hydra.sweeper.params) == ["model.causal", "model.d_k", "model.scale", "optim.lr"]
    assert objective_key(to_train_config(compose_config("+experiment=search"))) == "val_causal"


@pytest.mark.parametrize("preset", sorted(GRIDS))
def test_every_job_of_every_preset_composes_into_the_schema(preset):
    assert sweep_grid(preset) == GRIDS[preset]
    for job, config in preset_jobs(preset):
        for key, value in job.items():
            section, name = key.split(".")
            setting = getattr(getattr(config, section), name)
            assert (setting.value if isinstance(setting, Enum) else setting) == value


@pytest.mark.parametrize("preset", SWEEPS)
def test_every_preset_job_checkpoints_at_least_as_often_as_it_evaluates(preset):
    # A killed job resumed from its last.pt (trainer.resume) then loses at most one evaluation interval.
    for _, config in preset_jobs(preset):
        assert config.trainer.ckpt_interval <= config.trainer.eval_interval


@pytest.mark.parametrize("preset", SWEEPS)
def test_every_preset_is_a_sweep_without_dash_m(preset):
    assert preset_hydra(preset).mode is RunMode.MULTIRUN


@pytest.mark.parametrize("preset, d_k, qk_init", [("saturation", None, "unit"), ("ablation", 512, "unit"),
                                                  ("init", 256, None)])  # fmt: skip
def test_saturation_presets_fix_what_they_do_not_sweep(preset, d_k, qk_init):
    config = to_train_config(compose_config(f"+experiment={preset}"))
    assert d_k is None or config.model.d_k == d_k
    assert qk_init is None or config.model.qk_init is QKInit(qk_init)


def test_the_finite_mask_preset_crosses_minus_1e4_with_minus_infinity_on_the_reference_path_at_lr_0_1():
    for job, config in preset_jobs("finite_mask"):
        assert config.model.fused is False and config.optim.lr == 0.1  # lr_sensitivity's plain scores pass 10^4 here
        assert config.model.mask_value == job["model.mask_value"] and config.model.causal
    assert math.isinf(GRIDS["finite_mask"]["model.mask_value"][1])


def test_the_encoder_preset_runs_the_four_configs_on_the_same_text_with_qk_norm_hiding_40_percent():
    assert sweep_grid("encoder") == {"+encoder": list(ENCODER)}
    for job, config in preset_jobs("encoder"):
        task, causal, hide = ENCODER[job["+encoder"]]
        assert (config.task.name, config.model.causal) == (task, causal) and config.model.qk_norm
        assert task == "next_token" or (config.task.blank_share, config.task.hide) == (0.4, hide)
        assert config.data.source is Source.shakespeare


def test_the_encoder_presets_blank_share_is_set_once_for_its_three_blank_filling_runs_and_refused_elsewhere():
    for job, (task, _, _) in ENCODER.items():
        cfg = compose_config("+experiment=encoder", f"+encoder={job}", "+encoder.blank_share=0.15")
        config = to_train_config(without_shared_settings(cfg, {"encoder": job}))
        assert config.task.blank_share == (None if task == "next_token" else 0.15)
    with pytest.raises(ConfigError, match=r"^encoder: Key 'encoder' not in 'TrainConfig'"):
        to_train_config(without_shared_settings(compose_config("+encoder.blank_share=0.15"), {}))  # not a preset job


def test_the_masks_preset_runs_t5s_three_patterns_at_one_and_two_layers_over_three_seeds():
    assert sweep_grid("masks") == {"+mask": list(MASKS), "model.n_layer": [1, 2], "trainer.seed": [0, 1, 2]}
    for job, config in preset_jobs("masks"):
        assert (config.task.name, config.model.causal) == MASKS[job["+mask"]] and config.model.qk_norm
        assert config.task.name != "fill_blank" or config.task.blank_share == 0.4


def test_the_order_preset_crosses_the_causal_and_the_fully_visible_runs_with_positions_and_none():
    grid = {"+mask": ["causal_lm", "fully_visible"], "model.positions": ["learned", "none"], "model.n_layer": [1, 2]}
    assert sweep_grid("order") == grid | {"trainer.seed": [0, 1, 2]}
    for job, config in preset_jobs("order"):
        assert (config.task.name, config.model.causal) == MASKS[job["+mask"]]
        assert config.model.positions.value == job["model.positions"]
    masks = {(job["+mask"], job["model.n_layer"], job["trainer.seed"]): config for job, config in preset_jobs("masks")}
    for job, config in preset_jobs("order"):  # its runs with positions are the masks preset's, setting for setting
        if job["model.positions"] == "learned":
            assert config == masks[job["+mask"], job["model.n_layer"], job["trainer.seed"]]


def test_the_recurrence_preset_trains_on_the_copy_text_and_plots_against_the_distance():
    for job, config in preset_jobs("recurrence"):
        assert config.data.source is Source.copy and config.data.distance == job["data.distance"]
        assert config.data.distance <= config.model.block_size == 64
    assert preset_hydra("recurrence").callbacks.sweep_summary.x == "data.distance"
