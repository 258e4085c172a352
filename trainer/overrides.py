"""Hydra's command-line overrides (`key=value`, `+key=value`, `~key`), parsed and named in one place: what a run's
command line set (its .hydra/overrides.yaml), which of them name it, what a sweep varies, and one written back.

The keys left out of a run's name are configs/train.yaml's own `hydra.job.config.override_dirname.exclude_keys`,
the ones Hydra leaves out of a sweep job's directory name: the run's name and its directory's agree.
"""

import re
from functools import cache
from pathlib import Path
from typing import Any

from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import OmegaConf

PARSER = OverridesParser.create()  # built once: it compiles Hydra's override grammar
TRAIN_YAML = Path(__file__).resolve().parents[1] / "configs" / "train.yaml"


# What names a run whose command line set nothing (and what the HParams tab shows of it): the lesson's switches.
SWITCHES = ["model.scale", "model.causal", "model.d_k"]


def override_key(override: str) -> str:
    """The key an override sets: "+model.d_k=64" -> "model.d_k", "~trainer.resume" -> "trainer.resume"."""
    return override.lstrip("+~").split("=")[0]


def override_values(overrides: list[str]) -> dict[str, Any]:
    """The overrides as typed values, parsed as Hydra does: {"model.d_k": 64, "model.scale": False, ...}."""
    return {override.key_or_group: override.value() for override in PARSER.parse_overrides(overrides)}


def read_overrides(run_dir: Path) -> list[str]:
    """What the command line set for the run in `run_dir` (Hydra's .hydra/overrides.yaml); [] for a run Hydra did
    not start."""
    path = run_dir / ".hydra" / "overrides.yaml"
    return [str(item) for item in OmegaConf.load(path)] if path.exists() else []


@cache
def unnamed_keys() -> frozenset[str]:
    """The keys that name no run: paths, and what every job of a sweep shares (the sweep directory names the
    preset); read from configs/train.yaml, which tells Hydra to leave them out of a job's directory name."""
    exclude_keys = OmegaConf.load(TRAIN_YAML).hydra.job.config.override_dirname.exclude_keys
    return frozenset(exclude_keys)


def naming_overrides(overrides: list[str]) -> list[str]:
    """The overrides that name a run: all but those of unnamed_keys()."""
    return [override for override in overrides if override_key(override) not in unnamed_keys()]


def keys_varied_by_sweep(run_dir: Path) -> list[str]:
    """The keys the sweep that the run in `run_dir` is a job of varies, from the sweep's multirun.yaml: a preset's
    sweeper params and the command line's sweeps (a=1,2); [] for a run outside a sweep."""
    path = run_dir.parent / "multirun.yaml"
    if not path.exists():
        return []
    hydra = OmegaConf.load(path).hydra
    overrides = PARSER.parse_overrides(list(hydra.overrides.task))
    swept = [override.key_or_group for override in overrides if override.is_sweep_override()]
    return list(dict.fromkeys([*swept, *(hydra.sweeper.get("params") or {})]))


def switches_label(settings: dict) -> str:
    """A run's switches as its plain settings hold them: "model.scale=True model.causal=True model.d_k=128"."""
    values = flatten(settings)
    return " ".join(f"{key}={values[key]}" for key in SWITCHES)


def flatten(tree: dict, prefix: str = "") -> dict:
    """{"model": {"d_k": 128, "x": None}} -> {"model.d_k": 128}: unset settings would only crowd the table."""
    flat = {}
    for key, value in tree.items():
        if isinstance(value, dict):
            flat |= flatten(value, f"{prefix}{key}.")
        elif value is not None:
            flat[prefix + key] = value
    return flat


# What Hydra's override grammar reads unquoted as a plain string (hydra/grammar/OverrideLexer.g4: ID and
# UNQUOTED_CHAR): ASCII letters, digits and a few signs, not Python's Unicode \w (é) nor `~`. Left out: `\` (it
# starts escapes), `$` (interpolations), `:`, and whitespace (stripped at the ends).
UNQUOTED = re.compile(r"[A-Za-z0-9_/+.%*@?|-]+")


def override(key: str, value: str) -> str:
    """`key=value` that Hydra parses back to the same string `value`: one holding other characters (a sweep job's
    directory, 1_model.causal=False; /home/josé; ~), or a word Hydra reads as another type (null, true, 12), is
    quoted."""
    if not (UNQUOTED.fullmatch(value) and PARSER.parse_override(f"{key}={value}").value() == value):
        value = '"' + escape_for_quotes(value) + '"'
    return f"{key}={value}"


def escape_for_quotes(value: str) -> str:
    """`value` inside Hydra's double quotes: there a backslash escapes only a quote or the backslashes that precede
    one (or the closing quote); anywhere else it is read as itself, so only those runs are doubled."""
    return re.sub(r'(\\*)("|$)', lambda match: match[1] * 2 + ("\\" if match[2] else "") + match[2], value)


def shared_overrides(each: list[list[str]]) -> list[str]:
    """The overrides every list holds (a sweep's fixed ones, its +experiment), in the first's order: said once, not
    in every row or label."""
    return [item for item in each[0] if all(item in overrides for overrides in each)] if each else []


def distinct_overrides(overrides: list[str], shared: list[str]) -> list[str]:
    """The overrides that tell a run from the others listed with it."""
    return [item for item in overrides if item not in shared]
