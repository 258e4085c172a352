"""Filling blanks (task=fill_blank): the blanks a batch draws, the strip against the curve it estimates, and
sample.py and attend.py on a run that fills blanks, every refusal one line."""

import re
import shutil

import pytest
import torch

from conftest import BLANKS, cli, compose_config
from data import DataError, TokenizerConfig, train_tokenizer
from model import ModelConfig
from task import IGNORE, task_for
from task.curves import batches_loss
from task.fill_blank import BLANK, blank_count
from trainer.config import ConfigError, TrainConfig, objective_key, to_train_config
from viewer.checkpoints import load
from viewer.predictions import predict
from viewer.readings import read_ids

TEXT = "To be, or not to be, that is the question"
SHORT_TEXT = "To be, or not to be, that is"  # within the blank-filling run's 32 tokens of context
ONE_BLANK = "To be, or n_t to be, that is"  # the o of "not" a blank


def filler(block_size: int = 16, share: float = 0.4, hide: bool = True, text: str = TEXT):
    config = TrainConfig(model=ModelConfig(block_size=block_size))
    config.task.name, config.task.blank_share, config.task.hide = "fill_blank", share, hide
    return task_for(config, train_tokenizer(TokenizerConfig(), text))


def test_every_window_gets_its_share_of_blanks_inside_it_drawn_afresh_and_the_same_from_the_same_seed():
    task, windows = filler(), torch.randint(1, 20, (64, 16))
    x, y = task.batch(windows, torch.Generator().manual_seed(0))
    scored = y != IGNORE
    assert blank_count(0.4, 16) == 6 and (scored.sum(1) == 6).all()  # at least one, never outside the window
    assert (x[scored] == task.blank).all() and (x[~scored] == windows[~scored]).all()
    assert (y[scored] == windows[scored]).all()
    again, _ = task.batch(windows, torch.Generator().manual_seed(0))
    other, _ = task.batch(windows, torch.Generator().manual_seed(1))
    assert torch.equal(again, x) and not torch.equal(other, x)  # the same at every evaluation, not at every step
    shown, _ = filler(hide=False).batch(windows, torch.Generator().manual_seed(0))
    assert torch.equal(shown, windows)  # task.hide=false: the scored tokens stay in the input
    assert blank_count(0.01, 16) == 1  # an empty target set would be a NaN loss


@pytest.mark.parametrize(
    "override, problem",
    [
        ("task.blank_share=0", "task.blank_share=0.0: must be above 0 and below 1"),
        ("task.blank_share=1", "task.blank_share=1.0: must be above 0 and below 1"),
        ("task.blank_share=0.995", "task.blank_share=0.995: hides all 64 tokens of a window (model.block_size)"),
    ],
)
def test_a_share_that_hides_nothing_or_everything_is_refused_naming_it(override, problem):
    with pytest.raises(ConfigError, match=f"^{re.escape(problem)}"):
        to_train_config(compose_config("task=fill_blank", override))


def test_fill_blank_settings_with_another_task_are_refused_and_a_search_minimises_the_hidden_loss():
    with pytest.raises(ConfigError, match=r"^task.blank_share=0.4: applies to task=fill_blank, not to task=next_token"):
        to_train_config(compose_config("task.blank_share=0.4"))
    assert objective_key(to_train_config(compose_config("task=fill_blank", "model.causal=false"))) == "val_hidden"


def test_the_blank_is_a_token_no_typed_text_gives():
    task = filler(text=f"{TEXT} _{BLANK}")  # a text holding the marker and the blank's name as characters
    assert task.tokenizer.token_to_id(BLANK) == task.tokenizer.get_vocab_size() - 1
    assert task.encode("To _ or", "text").count(task.blank) == 1
    typed = task.encode(f"To \\_ or {BLANK}", "text")  # a literal marker, and the name typed
    assert task.blank not in typed and task.tokenizer.decode(typed) == f"To _ or {BLANK}"


def test_a_typed_nul_is_a_character_of_the_text_not_an_escaped_marker():
    task = filler(text=f"{TEXT}\0_")
    ids = task.encode("b\0o _\\_", "text")
    assert ids == [task.tokenizer.token_to_id(char) for char in "b\0o "] + [task.blank, task.tokenizer.token_to_id("_")]
    with pytest.raises(DataError, match=r"^text: '\\x00' never occurred in this model's training text$"):
        filler().encode("b\0o _", "text")  # the refusal names the NUL typed, not the marker


@pytest.mark.slow
def test_the_strip_over_a_validation_window_is_the_one_blank_curves_terms(blank_run_dir, shared_cache_dir):
    """Each token blanked alone, the strip's terms, against the one code path val/loss_one_blank scores them by
    (FillBlank.blanked_alone), position by position on a validation window: their means agree to 1e-5."""
    from data import prepare_tokens

    checkpoint = load(blank_run_dir / "last.pt")
    config = to_train_config(compose_config(*BLANKS, "model.causal=false", f"data.cache_dir={shared_cache_dir}"))
    val = prepare_tokens(config.data, config.tokenizer).val
    window = torch.from_numpy(val[: checkpoint.model.config.block_size].astype("int64"))
    strip = predict(checkpoint, read_ids(checkpoint, window.tolist())).strips[0]
    assert strip.tag == "val/loss_one_blank"
    positions = torch.arange(window.numel())
    batch = checkpoint.task.blanked_alone(window.expand(window.numel(), -1), positions)
    with torch.no_grad():
        curve = batches_loss(checkpoint.model, [batch], checkpoint.task.mask)
    assert strip.mean == pytest.approx(curve, abs=1e-5)


@pytest.mark.slow
def test_sample_fills_the_blanks_and_says_in_one_line_it_does_not_continue_a_text(blank_run_dir):
    filled = cli("sample.py", f"ckpt={blank_run_dir}", f'prompt="{ONE_BLANK}"', "likeliest=true")
    assert filled.returncode == 0, filled.stderr
    text = filled.stdout.strip()
    assert len(text) == len(SHORT_TEXT) and text[:11] == SHORT_TEXT[:11] and text[12:] == SHORT_TEXT[12:]  # only it
    assert cli("sample.py", f"ckpt={blank_run_dir}", f'prompt="{ONE_BLANK}"', "likeliest=true").stdout == filled.stdout
    refused = cli("sample.py", f"ckpt={blank_run_dir}", f'prompt="{SHORT_TEXT}"')
    assert refused.returncode == 1 and refused.stderr.strip() == (
        "error: prompt: this run fills blanks (task=fill_blank) and does not continue a text: mark each missing "
        "token with _ (a literal _ is \\_)"
    )


@pytest.mark.slow
def test_attend_on_a_blank_prints_its_both_sides_its_top_five_and_the_right_side_counterfactual(
    blank_run_dir, tmp_path
):
    result = cli("attend.py", f"ckpt={blank_run_dir}", f'text="{ONE_BLANK}"', f"out={tmp_path / 'blank.png'}")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "query i=11 '□': its five likeliest hidden tokens at temperature 1" in out
    assert "every key j: this run does not mask the future" in out  # both sides of the blank
    assert "what the look contributes, p(" in out and "right side hidden" in out  # the task names the mask
    assert (tmp_path / "blank.png").read_bytes().startswith(b"\x89PNG")
    nothing = cli("attend.py", f"ckpt={blank_run_dir}", "text=___")
    assert nothing.returncode == 1 and nothing.stderr.strip() == (
        "error: text='___': every token is a blank: give some text around the blanks (a literal _ is \\_)"
    )


@pytest.mark.slow
def test_attend_on_a_sweep_of_a_next_token_run_and_a_blank_filler_traces_the_one_that_reads_blanks(
    leak_sweep, blank_run_dir, tmp_path
):
    sweep = tmp_path / "sweep"
    shutil.copytree(next(leak_sweep.glob("0_*")), sweep / "0_next_token")  # model.causal=true
    shutil.copytree(blank_run_dir, sweep / "1_fill_blank")
    traced = cli("attend.py", f"ckpt={sweep}", f'text="{ONE_BLANK}"', f"out={tmp_path / 'pngs'}")
    assert (traced.returncode, traced.stderr) == (0, "")
    skipped = "== skipped 0_next_token: cannot read this text (text: '_' never occurred in this model's training text)"
    assert f"{skipped}\n" in traced.stdout
    assert "== 1_fill_blank" in traced.stdout and "query i=11 '□'" in traced.stdout
    alone = cli("attend.py", f"ckpt={sweep / '0_next_token'}", f'text="{ONE_BLANK}"')
    assert (alone.returncode, alone.stderr.strip()) == (
        1,
        "error: text: '_' never occurred in this model's training text",
    )  # a text no run reads: the one line it always was
