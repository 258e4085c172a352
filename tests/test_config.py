import pytest
import torch
from hydra.errors import ConfigCompositionException

from conftest import ROOT, cli, compose_config
from data import Source, TokenizerKind
from model import QKInit
from trainer.config import ConfigError, TrainConfig, plain_config, to_train_config, to_typed
from trainer.distributed import pick_device

# The settings an option cannot do without (null in its YAML, and checked when the data is loaded).
REQUIRED = {"data=text": ["data.path=notes.txt"], "data=hub": ["data.name=karpathy/tiny_shakespeare"]}
GROUPS = ["model", "data", "tokenizer", "optim", "trainer"]  # the schema's groups; experiment presets are tested apart
OPTIONS = sorted(f"{group}={option.stem}" for group in GROUPS for option in (ROOT / "configs" / group).glob("*.yaml"))


def test_every_group_has_options():
    assert {option.split("=")[0] for option in OPTIONS} == set(GROUPS)


@pytest.mark.parametrize("option", OPTIONS)
def test_every_option_of_every_group_composes_into_the_schema(option):
    config = to_train_config(compose_config(option, *REQUIRED.get(option, [])))
    assert isinstance(config, TrainConfig)


def test_defaults_are_the_lessons_model_on_the_embedded_corpus():
    config = to_train_config(compose_config())
    assert config.model.scale and config.model.causal and config.model.qk_init is QKInit.unit
    assert config.model.n_layer == 1 and config.model.d_k == config.model.d_model
    assert config.data.source is Source.shakespeare and config.tokenizer.kind is TokenizerKind.char


@pytest.mark.parametrize("option", OPTIONS)
def test_the_plain_settings_a_checkpoint_holds_are_plain_values_and_build_the_same_config(option):
    config = to_train_config(
        compose_config(option, *REQUIRED.get(option, []), "trainer.precision=bf16", "model.mask_value=-1e4")
    )
    plain = plain_config(config)

    def values(node: dict) -> list:
        return [item for value in node.values() for item in (values(value) if isinstance(value, dict) else [value])]

    assert all(value is None or type(value) in (str, int, float, bool) for value in values(plain))  # weights_only
    assert plain["trainer"]["precision"] == "bf16" and plain["model"]["qk_init"] == config.model.qk_init.name
    assert to_typed(TrainConfig, plain) == config


def test_a_config_built_leaves_nothing_in_the_next_one_built_from_the_same_schema():
    with pytest.raises(ConfigError, match=r"^model.heads: Key 'heads' not in 'ModelConfig'$"):
        to_typed(TrainConfig, {"model": {"d_k": 7, "heads": 2}})  # refused half-way through the merge
    assert to_typed(TrainConfig, {"model": {"d_k": 7}}).model.d_k == 7
    assert to_typed(TrainConfig, {}) == TrainConfig()  # the schema as it was: one build per process serves them all


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


@pytest.mark.parametrize("override", ["+foo=1", "+trainer.max_step=100", "+model.heads=4"])
def test_key_added_with_plus_is_rejected_too(override):
    key = override[1:].split("=")[0]
    with pytest.raises(ConfigError, match=rf"^{key}: Key '\w+' not in '\w+Config'$"):
        to_train_config(compose_config(override))


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["model.d_k=0"], "model.d_k=0: must be positive"),
        (["model.n_layer=-1"], "model.n_layer=-1: must be positive"),
        (["trainer.max_steps=0"], "trainer.max_steps=0: must be positive"),
        (["trainer.eval_interval=0"], "trainer.eval_interval=0: must be positive"),
        (["optim.lr=0"], "optim.lr=0.0: must be positive"),
        (["optim.warmup_steps=-1"], "optim.warmup_steps=-1: must not be negative"),
        (["optim.min_lr=0.01"], "optim.min_lr=0.01: must not exceed optim.lr=0.003"),
        (["model.dropout=1.0"], "model.dropout=1.0: must be at least 0 and below 1"),
        (["data.val_fraction=0"], "data.val_fraction=0.0: must be between 0 and 1"),
        (["model.vocab_size=100"], "model.vocab_size=100: comes from the tokenizer"),
        (["tokenizer=bpe", "tokenizer.vocab_size=200"], "tokenizer.vocab_size=200: must be at least 256"),
        (["tokenizer.vocab_size=500"], "tokenizer.vocab_size=500: applies to tokenizer=bpe only"),
        (["trainer.keep_checkpoints=-1"], "trainer.keep_checkpoints=-1: must not be negative"),
        (["trainer.keep_checkpoints=101"], "trainer.keep_checkpoints=101: must be at most 100: each is a copy of"),
        (
            ["model.d_v=0", "trainer.batch_size=0"],
            "model.d_v=0: must be positive; trainer.batch_size=0: must be positive",
        ),
    ],
)
def test_out_of_range_value_is_rejected_naming_the_key(overrides, message):
    with pytest.raises(ConfigError) as error:
        to_train_config(compose_config(*overrides))
    assert str(error.value).startswith(message)


@pytest.mark.parametrize("name, message", [("cuda:0", "not available"), ("gpu", "not a device")])
def test_unavailable_or_unknown_device_is_rejected(name, message):
    if name.startswith("cuda") and torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    with pytest.raises(ConfigError, match=rf"^trainer.device={name}: {message}"):
        pick_device(name)


def test_cli_rejects_an_unknown_key_in_one_line(tmp_path):
    result = cli("train.py", "model.d_kk=3", f"hydra.run.dir={tmp_path}")
    assert result.returncode == 1
    assert result.stderr == "error: model.d_kk: Key 'd_kk' not in 'ModelConfig'\n"
    assert not (tmp_path / "train.log").exists()  # rejected before any work


def test_cli_rejects_a_bad_value_in_one_line_before_any_work(tmp_path):
    result = cli("train.py", "model.d_k=0", f"hydra.run.dir={tmp_path}")
    assert result.returncode != 0
    assert result.stderr.strip() == "error: model.d_k=0: must be positive"
    assert not list(tmp_path.glob("events.out.tfevents.*"))


def test_cli_names_the_missing_setting_in_one_line(tmp_path):
    result = cli("train.py", "data=text", f"hydra.run.dir={tmp_path}", f"data.cache_dir={tmp_path}")
    assert result.returncode != 0
    assert result.stderr.strip() == "error: data.path: data=text needs a file, e.g. data.path=notes.txt"
