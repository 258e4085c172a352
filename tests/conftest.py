import atexit
import os
import shutil
import tempfile

# Tests never touch the network, and keep the HF datasets cache out of the user's home.
# Both must be set before `datasets` is first imported.
os.environ["HF_HUB_OFFLINE"] = "1"
if "HF_DATASETS_CACHE" not in os.environ:
    os.environ["HF_DATASETS_CACHE"] = tempfile.mkdtemp(prefix="tinylm-hf-")
    atexit.register(shutil.rmtree, os.environ["HF_DATASETS_CACHE"], ignore_errors=True)
# The suite runs in two pytest-xdist workers (pyproject's addopts): each, and the train.py processes it starts,
# computes on one thread, so that the two share the cores instead of fighting over them.
if "PYTEST_XDIST_WORKER" in os.environ:
    os.environ["OMP_NUM_THREADS"] = "1"

from pathlib import Path  # noqa: E402

import pytest  # noqa: E402
from hydra import compose, initialize_config_dir  # noqa: E402
from omegaconf import DictConfig  # noqa: E402

from trainer.config import register_schema  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
register_schema()


def compose_config(*overrides: str) -> DictConfig:
    """configs/train.yaml composed by Hydra, as `python train.py OVERRIDES` would."""
    with initialize_config_dir(config_dir=str(ROOT / "configs"), version_base="1.3"):
        return compose("train", overrides=list(overrides))


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory) -> Path:
    """One token cache for the whole session, so the corpus is tokenized once."""
    return tmp_path_factory.mktemp("token-cache")
