import subprocess
import sys

import pytest
from hydra.errors import ConfigCompositionException

from conftest import ROOT, compose_config
from data import Source, TokenizerKind
from model import QKInit
from trainer import TrainConfig, to_train_config

# The settings an option cannot do without (its ??? values).
REQUIRED = {"data=text": ["data.path=notes.txt"], "data=hub": ["data.name=karpathy/tiny_shakespeare"]}
OPTIONS = sorted(f"{group.name}={option.stem}" for group in (ROOT / "configs").iterdir() if group.is_dir()
                 for option in group.glob("*.yaml"))  # fmt: skip


def test_every_group_has_options():
    groups = {option.split("=")[0] for option in OPTIONS}
    assert groups == {"model", "data", "tokenizer", "optim", "trainer"}


@pytest.mark.parametrize("option", OPTIONS)
def test_every_option_of_every_group_composes_into_the_schema(option):
    config = to_train_config(compose_config(option, *REQUIRED.get(option, [])))
    assert isinstance(config, TrainConfig)


def test_defaults_are_the_lessons_model_on_the_embedded_corpus():
    config = to_train_config(compose_config())
    assert config.model.scale and config.model.causal and config.model.qk_init is QKInit.unit
    assert config.model.n_layer == 1 and config.model.d_k == config.model.d_model
    assert config.data.source is Source.shakespeare and config.tokenizer.kind is TokenizerKind.char


def test_overrides_reach_typed_settings():
    config = to_train_config(
        compose_config("model.scale=false", "model.d_k=512", "model.qk_init=gpt2", "optim.lr=1e-3", "tokenizer=bpe")
    )
    assert config.model.scale is False and config.model.d_k == 512 and config.model.qk_init is QKInit.gpt2
    assert config.optim.lr == 1e-3 and config.tokenizer.vocab_size == 1024


@pytest.mark.parametrize(
    "override, message",
    [
        ("model.d_kk=3", "Key 'd_kk' not in 'ModelConfig'"),
        ("model.d_k=abc", "Value 'abc' of type 'str' could not be converted to Integer"),
        ("model.qk_init=xavier", "Invalid value 'xavier', expected one of [unit, gpt2, torch]"),
        ("trainer.max_steps=1.5", "could not be converted to Integer"),
        ("model=gpt", "Could not find 'model/gpt'"),
    ],
)
def test_bad_override_is_rejected_naming_the_key(override, message):
    with pytest.raises(ConfigCompositionException) as error:
        compose_config(override)
    assert message in str(error.value) + str(error.value.__cause__)


def run_train(*overrides: str, timeout: int = 60) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "train.py", *overrides], cwd=ROOT, capture_output=True, text=True, timeout=timeout
    )


def test_cli_rejects_an_unknown_key_without_a_traceback(tmp_path):
    result = run_train("model.d_kk=3", f"hydra.run.dir={tmp_path}")
    assert result.returncode != 0
    assert "full_key: model.d_kk" in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "train.log").exists()  # rejected before any work


def test_cli_names_the_missing_setting_in_one_line(tmp_path):
    result = run_train("data=text", f"hydra.run.dir={tmp_path}", f"data.cache_dir={tmp_path}")
    assert result.returncode != 0
    assert result.stderr.strip() == "error: data.path: data=text needs a file, e.g. data.path=notes.txt"
