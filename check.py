"""Is this laptop ready for the class? A check in a few seconds, the day before (docs/class.md, "Before the class"):

    python check.py

Each line checks one thing the class needs, in the order a run needs them: this Python, torch, the default settings,
the embedded corpus, one training step of the default model, TensorBoard with the Attention tab, the port TensorBoard
opens on, and a folder a run can write in. A line starting "ok" passed; a line starting "FAIL" says what is wrong and
what to do, and the exit status is then 1. It trains nothing and writes nothing but a file it removes at once.
"""

import python_version  # noqa: F401 (first: an older Python is refused in one line, python_version.py)
import trainer.startup  # noqa: F401 (first of all: a Ctrl-C while torch loads ends in one line, trainer/startup.py)

# isort: split

import math
import socket
import sys
import tempfile
from collections.abc import Callable
from dataclasses import replace
from functools import cache
from importlib.metadata import entry_points
from pathlib import Path

import torch

TORCH_OLDEST = "2.4"  # pyproject.toml's floor
PORT = 6006  # TensorBoard's
ROOT = Path(__file__).resolve().parent


class Failed(Exception):
    """A check that did not pass: what is wrong and what to do, in one line."""


def python() -> str:
    return f"Python {sys.version.split()[0]} ({sys.executable})"


def torch_build() -> str:
    if torch.__version__ < TORCH_OLDEST:  # a TorchVersion: compared as a version, not as text
        raise Failed(f"torch {torch.__version__}: tinylm needs torch {TORCH_OLDEST} or newer; see the README's install")
    where = "cuda" if torch.cuda.is_available() else "mps" if torch.backends.mps.is_available() else "cpu"
    return f"torch {torch.__version__}, trains on {where} with {torch.get_num_threads()} threads"


@cache
def settings():
    """The default run's settings, composed by Hydra from configs/ and checked as train.py checks them."""
    from hydra import compose, initialize_config_dir

    from train import register_schema
    from trainer.config import to_train_config

    register_schema()
    with initialize_config_dir(config_dir=str(ROOT / "configs"), version_base="1.3"):
        return to_train_config(compose("train"))


@cache
def text_and_tokenizer():
    """The default run's text and its tokenizer, made as train.py makes them."""
    from data import load_text, train_tokenizer

    config = settings()
    text = load_text(config.data)
    return text, train_tokenizer(config.tokenizer, text)


def corpus() -> str:
    text, tokenizer = text_and_tokenizer()
    return f"the corpus: {len(text):,} characters of Shakespeare, a vocabulary of {tokenizer.get_vocab_size()} tokens"


def training_step() -> str:
    """One forward and backward of the default model on the corpus's first windows: a finite loss near a uniform
    guess's, since the weights are fresh."""
    from model import TinyLM
    from task.loss import mean_loss

    config, (text, tokenizer) = settings(), text_and_tokenizer()
    size = config.model.block_size
    ids = torch.tensor(tokenizer.encode(text[: 8 * size + 1]).ids)
    torch.manual_seed(0)
    model = TinyLM(replace(config.model, vocab_size=tokenizer.get_vocab_size()))
    loss = mean_loss(model(ids[:-1].view(8, size)), ids[1:].view(8, size))
    loss.backward()
    if not math.isfinite(loss.item()):
        raise Failed(f"one training step of the default model gave a loss of {loss.item()}: torch computes wrongly")
    uniform = math.log(tokenizer.get_vocab_size())
    return f"one training step of the default model: loss {loss.item():.2f} nats (a uniform guess: {uniform:.2f})"


def tensorboard() -> str:
    import tensorboard as board

    plugins = [entry.name for entry in entry_points(group="tensorboard_plugins")]
    if "tinylm_attention" not in plugins:
        raise Failed("TensorBoard has no Attention tab: install tinylm in this .venv with pip install -e .")
    return f"TensorBoard {board.__version__}, with the Attention tab"


def port() -> str:
    with socket.socket() as listener:
        try:
            listener.bind(("localhost", PORT))
        except OSError as error:
            raise Failed(
                f"port {PORT} is in use ({error.strerror}): another TensorBoard still running? Stop it (Ctrl-C in its "
                f"terminal), or add --port {PORT + 1} to the tensorboard command and open localhost:{PORT + 1}"
            ) from None
    return f"port {PORT} is free for TensorBoard"


def writable() -> str:
    try:
        with tempfile.TemporaryFile(dir=Path.cwd()):
            pass
    except OSError as error:
        raise Failed(
            f"{Path.cwd()}: a run cannot write here ({error.strerror}); run from a folder of your own"
        ) from None
    return f"{Path.cwd()} can hold the runs (outputs/, multirun/)"


CHECKS: list[Callable[[], str]] = [python, torch_build, corpus, training_step, tensorboard, port, writable]


def main() -> int:
    failed = 0
    for check in CHECKS:
        try:
            print(f"ok    {check()}", flush=True)
        except Failed as problem:
            print(f"FAIL  {problem}", flush=True)
            failed += 1
        except Exception as error:  # what no check foresaw: named in one line all the same, and the rest go on
            print(f"FAIL  {check.__name__}: {type(error).__name__}: {error}".splitlines()[0], flush=True)
            failed += 1
    if failed:
        print(f"{failed} of {len(CHECKS)} checks failed: fix them before the class")
        return 1
    print("ready for the class: .venv/bin/python train.py +experiment=leak")
    return 0


if __name__ == "__main__":
    sys.exit(main())
