import sys

import pytest

import sample
from conftest import short_run
from trainer.cli import run_with_one_line_errors

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def char_run(short_run_dir):
    """SHORT on the characters of the embedded corpus, trained once per session (conftest's short_run_dir)."""
    return short_run_dir


def run_sample(monkeypatch, capsys, *overrides: str) -> str:
    monkeypatch.setattr(sys, "argv", ["sample.py", *overrides])
    run_with_one_line_errors(sample.main)
    return capsys.readouterr().out


def test_samples_continue_the_prompt_and_repeat_with_the_seed(char_run, monkeypatch, capsys):
    settings = [
        f"ckpt={char_run}",
        "prompt=ROMEO:",
        "num_samples=3",
        "max_new_tokens=40",
        "temperature=0.8",
        "top_k=10",
    ]
    out = run_sample(monkeypatch, capsys, *settings)
    samples = out.split("\n" + "-" * 40 + "\n")
    assert len(samples) == 3 and all(text.startswith("ROMEO:") for text in samples)
    assert len(set(samples)) == 3  # three different continuations
    assert run_sample(monkeypatch, capsys, *settings) == out
    assert run_sample(monkeypatch, capsys, *settings, "seed=2") != out


def test_best_checkpoint_file_can_be_named(char_run, monkeypatch, capsys):
    assert run_sample(monkeypatch, capsys, f"ckpt={char_run / 'best.pt'}", "max_new_tokens=5").strip()


def test_a_character_the_model_never_saw_is_refused_by_name(char_run, monkeypatch, capsys):
    with pytest.raises(SystemExit) as stopped:
        run_sample(monkeypatch, capsys, f"ckpt={char_run}", 'prompt="ROMEO: ☃"')
    assert stopped.value.code == "error: prompt: '☃' never occurred in this model's training text"


def test_byte_level_bpe_encodes_any_prompt(tmp_path, cache_dir, monkeypatch, capsys):
    text = tmp_path / "notes.txt"  # BPE trained on 40 KB, not the whole corpus: a byte-level vocabulary either way
    text.write_text("ROMEO: But soft, what light through yonder window breaks?\n" * 700)
    short_run(tmp_path / "run", cache_dir, "data=text", f"data.path={text}", "tokenizer=bpe",
              "tokenizer.vocab_size=300", "trainer.max_steps=30", "trainer.eval_interval=30")  # fmt: skip
    out = run_sample(monkeypatch, capsys, f"ckpt={tmp_path / 'run'}", 'prompt="ROMEO: ☃"', "max_new_tokens=10")
    assert out.startswith("ROMEO: ☃")


@pytest.mark.parametrize(
    "override, message",
    [("temperature=0", "temperature=0.0: must be positive"), ("top_k=0", "top_k=0: must be positive"),
     ("num_samples=0", "num_samples=0: must be positive"), ("prompt=''", "prompt: must not be empty"),
     ("prompt=ROMEOé", "prompt=ROMEOé: Hydra cannot parse this override; quote a value"),
     ("temperature=nan", "temperature=nan: must be a finite number"),
     ("temperature=1e-300", "temperature=1e-300: must be between 0.001 and 100"),
     ("max_new_tokens=1000000000000", "max_new_tokens=1000000000000: must be between 0 and 100000")],
)  # fmt: skip
def test_bad_sampling_settings_are_refused_naming_them(char_run, monkeypatch, capsys, override, message):
    with pytest.raises(SystemExit) as stopped:
        run_sample(monkeypatch, capsys, f"ckpt={char_run}", override)
    assert message in stopped.value.code
