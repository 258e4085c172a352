"""`python train.py --help` (configs/hydra/help/tinylm.yaml), checked against the configs it describes."""

import re

import pytest
from omegaconf import OmegaConf

from conftest import ROOT, cli, compose_config

SETTING = re.compile(r"  (?P<key>[a-z_]+\.[a-z_]+)=(?P<default>\S+) {2,}\S")  # "  model.d_k=128    what it is"
PRESET = re.compile(r"  python train\.py \+experiment=(?P<name>\w+) +(?P<time>\d+ (s|min)( \d+ s)?)  +\S")
MAX_LINES = 55  # one screen of a terminal


@pytest.fixture(scope="module")
def page() -> str:
    result = cli("train.py", "--help")
    assert result.returncode == 0, result.stderr
    return result.stdout


def section(page: str, title: str) -> list[str]:
    """The non-blank lines under the heading `== TITLE... ==`, up to the next heading."""
    lines = page.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"== {title}"))
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("== ")), len(lines))
    return [line for line in lines[start + 1 : end] if line.strip()]


def shown_settings(page: str) -> dict[str, str]:
    lines = section(page, "Settings")
    assert all(SETTING.match(line) for line in lines), "a settings line is not `  key=default  meaning`"
    return dict(SETTING.match(line).group("key", "default") for line in lines)


def test_help_fits_a_terminal(page):
    assert page.startswith("tinylm: ")
    assert len(page.splitlines()) <= MAX_LINES


def test_help_lists_every_config_group_with_its_options(page):
    groups = sorted(path for path in (ROOT / "configs").iterdir() if path.is_dir() and path.name != "hydra")
    listed = section(page, "Config groups")
    for group in groups:
        assert f"{group.name}: {', '.join(sorted(option.stem for option in group.glob('*.yaml')))}" in listed


def test_every_setting_shown_is_in_the_schema_with_the_default_shown(page):
    shown = shown_settings(page)
    assert {"model.scale", "model.causal", "model.d_k", "model.qk_init"} <= shown.keys()  # the lesson's switches
    defaults = compose_config()
    absent = object()
    assert [key for key in shown if OmegaConf.select(defaults, key, default=absent) is absent] == []
    # Each default given back as an override, parsed by Hydra as a user's would be, changes nothing.
    as_shown = compose_config(*(f"{key}={default}" for key, default in shown.items()))
    assert {key: OmegaConf.select(as_shown, key) for key in shown} == {
        key: OmegaConf.select(defaults, key) for key in shown
    }


def test_help_names_every_preset_with_its_run_time(page):
    presets = [PRESET.match(line) for line in section(page, "Presets")]
    assert all(presets), "a preset line is not `  python train.py +experiment=NAME  TIME  what it shows`"
    assert sorted(preset["name"] for preset in presets) == sorted(
        path.stem for path in (ROOT / "configs" / "experiment").glob("*.yaml")
    )


def test_help_does_not_offer_model_vocab_size(page):
    # The tokenizer decides it; only tokenizer.vocab_size (bpe) may be set.
    assert "vocab_size" not in page.replace("tokenizer.vocab_size", "")
