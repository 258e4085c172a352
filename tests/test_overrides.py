"""Overrides parsed and named in one place: the keys a run's name leaves out are configs/train.yaml's own."""

from hydra import compose, initialize_config_dir

from conftest import ROOT
from trainer.overrides import (
    PARSER,
    keys_varied_by_sweep,
    naming_overrides,
    override,
    override_key,
    override_values,
    read_overrides,
    unnamed_keys,
)


def test_the_keys_that_name_no_run_are_those_hydra_leaves_out_of_a_job_directorys_name():
    with initialize_config_dir(config_dir=str(ROOT / "configs"), version_base="1.3"):
        hydra = compose("train", return_hydra_config=True).hydra
    assert unnamed_keys() == set(hydra.job.config.override_dirname.exclude_keys)
    assert {"experiment", "data.path", "trainer.resume"} <= unnamed_keys()


def test_a_runs_name_leaves_out_paths_and_the_preset():
    given = ["+experiment=leak", "model.causal=false", "data.path=notes.txt", "trainer.resume=auto", "optim.lr=0.01"]
    assert naming_overrides(given) == ["model.causal=false", "optim.lr=0.01"]


def test_override_key_strips_the_add_and_delete_signs():
    assert [override_key(item) for item in ("+model.d_k=64", "~trainer.resume", "a=b=c")] == [
        "model.d_k",
        "trainer.resume",
        "a",
    ]


def test_override_values_are_typed_as_hydra_parses_them():
    assert override_values(["model.d_k=64", "model.scale=false", "optim.lr=1e-3"]) == {
        "model.d_k": 64,
        "model.scale": False,
        "optim.lr": 1e-3,
    }


def test_a_value_with_hydras_syntax_is_quoted_so_that_it_parses_back_the_same():
    for value in ("/runs/day/time", "/runs/1_model.causal=True,x y", 'a "quoted" path'):
        (parsed,) = PARSER.parse_overrides([override("trainer.resume", value)])
        assert (parsed.key_or_group, parsed.value()) == ("trainer.resume", value)
    assert override("trainer.resume", "/runs/day/time") == "trainer.resume=/runs/day/time"


def test_overrides_are_read_from_hydras_file_and_none_for_a_run_hydra_did_not_start(tmp_path):
    assert read_overrides(tmp_path) == []
    (tmp_path / ".hydra").mkdir()
    (tmp_path / ".hydra" / "overrides.yaml").write_text("- model.d_k=64\n- +experiment=leak\n")
    assert read_overrides(tmp_path) == ["model.d_k=64", "+experiment=leak"]


def test_the_keys_a_sweep_varies_are_its_command_lines_sweeps_and_its_presets_params(tmp_path):
    job = tmp_path / "0_model.scale=true"
    job.mkdir()
    assert keys_varied_by_sweep(job) == []  # no multirun.yaml: not a sweep's job
    (tmp_path / "multirun.yaml").write_text(
        "hydra:\n  overrides:\n    task: ['model.scale=true,false', trainer.max_steps=5]\n"
        "  sweeper:\n    params:\n      optim.lr: 1e-3,1e-2\n      model.scale: true,false\n"
    )
    assert keys_varied_by_sweep(job) == ["model.scale", "optim.lr"]
