"""The mask comes from the task (model/mask.py's Mask, task.mask): the prefix LM's, exactly, on every path through the
attention; the one-layer identity of the prefix LM; word order without positions (model.positions=none); and a
prefix-LM run read by every reader that goes through viewer/."""

import re

import pytest
import torch

import attend
from conftest import cli, compose_config, curve, events, short_run
from model import CAUSAL, Mask, ModelConfig, Positions, Probe, TinyLM
from task import IGNORE, task_for
from task.prefix_lm import PrefixLM
from trainer.config import ConfigError, to_train_config
from trainer.diagnostics import pattern_figure
from viewer.checkpoints import load
from viewer.generation import write
from viewer.predictions import counterfactual_rows, predict
from viewer.readings import read
from viewer.trace import trace

PREFIX = 6  # of a window of 16


def tiny_model(n_layer: int = 1, **settings) -> TinyLM:
    torch.manual_seed(0)
    config = ModelConfig(vocab_size=20, block_size=16, d_model=32, d_k=32, d_v=32, n_layer=n_layer, **settings)
    return TinyLM(config).eval()


def test_the_prefix_lms_mask_opens_the_prefix_both_ways_and_is_causal_after_it():
    hidden = Mask(3).hidden_keys(5).int().tolist()
    assert hidden == [
        [0, 0, 0, 1, 1],
        [0, 0, 0, 1, 1],
        [0, 0, 0, 1, 1],
        [0, 0, 0, 0, 1],
        [0, 0, 0, 0, 0],
    ]
    assert CAUSAL.hidden_keys(3).int().tolist() == [[0, 1, 1], [0, 0, 1], [0, 0, 0]]
    assert Mask(1).triangle and CAUSAL.triangle and not Mask(2).triangle
    assert not Mask(8).hidden_keys(5).any()  # a window no longer than the prefix: fully visible


def test_the_fused_kernel_and_the_reference_path_read_through_the_same_prefix_mask():
    model, idx = tiny_model(n_layer=2), torch.randint(20, (3, 16))
    probe = Probe()
    fused, reference = model(idx, mask=Mask(PREFIX)), model(idx, mask=Mask(PREFIX), probe=probe)
    torch.testing.assert_close(fused, reference, atol=1e-5, rtol=1e-5)
    hidden = Mask(PREFIX).hidden_keys(16)
    for result in probe.results:
        assert (result.weights[:, hidden] == 0).all() and (result.weights[:, ~hidden] > 0).all()
    assert not torch.allclose(fused, model(idx))  # the prefix's rows read ahead: not the causal model's


def test_without_the_mask_the_prefix_lm_hides_nothing():
    model, idx = tiny_model(causal=False), torch.randint(20, (2, 16))
    probe = Probe()
    model(idx, mask=Mask(PREFIX), probe=probe)
    assert (probe.results[0].weights > 0).all()
    torch.testing.assert_close(model(idx, mask=Mask(PREFIX)), model(idx), atol=0, rtol=0)


def test_the_counterfactual_looks_hide_and_spread_over_the_keys_of_the_prefix_mask():
    model, ids, layer = tiny_model(), torch.randint(20, (16,)).tolist(), 0
    hidden = Mask(PREFIX).hidden_keys(16)
    reading = type("Reading", (), {"layers": trace(model, ids, Mask(PREFIX)), "hidden": hidden})()
    for i in (2, PREFIX, 12):
        rows = counterfactual_rows(reading, layer, i)
        assert (rows["masked"][hidden[i]] == 0).all() and rows["masked"].sum().item() == pytest.approx(1)
        visible = int((~hidden[i]).sum())
        assert rows["uniform"].tolist() == pytest.approx([0.0 if h else 1 / visible for h in hidden[i].tolist()])


@pytest.mark.parametrize("fused", [True, False])
def test_at_one_layer_the_prefix_lms_scored_predictions_are_its_weights_under_the_causal_mask(fused):
    # Every scored query (PREFIX - 1 on) reads the prefix's keys and values straight from the embeddings.
    idx = torch.randint(20, (4, 16))
    one, two = tiny_model(fused=fused), tiny_model(n_layer=2, fused=fused)
    scored = slice(PREFIX - 1, None)
    torch.testing.assert_close(one(idx, mask=Mask(PREFIX))[:, scored], one(idx)[:, scored], atol=0, rtol=0)
    assert (two(idx, mask=Mask(PREFIX))[:, scored] - two(idx)[:, scored]).abs().max() > 1e-3  # a second layer mixes


def test_the_prefix_lm_scores_only_after_its_prefix():
    config = to_train_config(compose_config("task=prefix_lm", "model.block_size=16"))
    task = task_for(config, train_tokenizer())
    assert isinstance(task, PrefixLM) and task.mask == Mask(8)  # task.prefix_share=0.5
    windows = torch.arange(2 * 17).reshape(2, 17)
    inputs, labels = task.batch(windows, torch.Generator())
    assert (inputs == windows[:, :-1]).all()
    assert (labels[:, :7] == IGNORE).all() and (labels[:, 7:] == windows[:, 8:]).all()  # position 7 predicts 8
    assert task.targets(list(range(10)), 10, {}) == [None] * 7 + [8, 9, 10]


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["task=prefix_lm", "task.prefix_share=1.0"], "task.prefix_share=1.0: must be above 0 and below 1"),
        (["task=prefix_lm", "task.prefix_share=0.01"], "task.prefix_share=0.01: a prefix of 1 of the 64 tokens"),
        (["task=prefix_lm", "model.mixer=gru"], "task=prefix_lm: its prefix is read both ways, which a recurrence"),
        (["task.prefix_share=0.5"], "task.prefix_share=0.5: applies to task=prefix_lm, not to task=next_token"),
    ],
)
def test_a_prefix_that_cannot_work_is_refused_naming_the_setting(overrides, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        to_train_config(compose_config(*overrides))


def train_tokenizer():
    from data import TokenizerConfig
    from data import train_tokenizer as trained

    return trained(TokenizerConfig(), "To be, or not to be, that is the question:\n")


def blank_prediction(model: TinyLM, ids: list[int], blank: int) -> torch.Tensor:
    return model(torch.tensor([ids]))[0, blank]


@pytest.mark.parametrize("n_layer", [1, 2])
def test_without_positions_or_a_mask_a_blanks_prediction_ignores_the_order_of_the_other_tokens(n_layer):
    ids, blank = [3, 7, 1, 9, 4, 0, 12, 5, 8, 2, 11, 6], 5  # token 0 stands for the blank
    order = torch.randperm(len(ids), generator=torch.Generator().manual_seed(1)).tolist()
    shuffled = [ids[j] for j in order if j != blank]
    shuffled.insert(blank, ids[blank])  # the blank where it was, every other token elsewhere
    assert shuffled != ids
    bag = tiny_model(n_layer, positions=Positions.none, causal=False)
    difference = (blank_prediction(bag, ids, blank) - blank_prediction(bag, shuffled, blank)).abs().max()
    assert difference < 1e-6
    causal = tiny_model(n_layer, positions=Positions.none)  # the mask alone tells a position its left from its right
    assert (blank_prediction(causal, ids, blank) - blank_prediction(causal, shuffled, blank)).abs().max() > 1e-4
    learned = tiny_model(n_layer, causal=False)
    assert (blank_prediction(learned, ids, blank) - blank_prediction(learned, shuffled, blank)).abs().max() > 1e-4


def test_a_model_without_positions_has_no_position_embedding():
    assert tiny_model(positions=Positions.none).position_embedding is None
    assert tiny_model().position_embedding.weight.shape == (16, 32)


@pytest.mark.slow
def test_a_next_token_run_without_positions_trains_and_writes_its_val_loss(tmp_path, cache_dir):
    losses = short_run(tmp_path, cache_dir, "model.positions=none", "trainer.max_steps=20", "trainer.eval_interval=20")
    val = curve(events(tmp_path), "val/loss")
    assert [step for step, _ in val] == [0, 20] and val[-1][1] == pytest.approx(losses["val"])
    assert val[-1][1] < val[0][1]


@pytest.mark.slow
def test_a_prefix_lm_run_is_read_by_every_reader_through_its_mask(tmp_path, cache_dir, monkeypatch):
    losses = short_run(tmp_path, cache_dir, "task=prefix_lm", "trainer.max_steps=20", "trainer.eval_interval=20")
    assert losses["val_closed"] == losses["val"] and losses["val_causal"] == losses["val"]  # one layer, true mask
    recorded = events(tmp_path)
    assert [image.step for image in recorded.Images("attn/mask")] == [0]  # the mask it trained with, drawn once
    prefix = 16  # task.prefix_share=0.5 of SHORT's model.block_size=32
    checkpoint = load(tmp_path / "last.pt")
    text = "To be, or not to be, that is the question: whether 'tis nobler"
    reading = read(checkpoint, text)
    assert torch.equal(reading.hidden, Mask(prefix).hidden_keys(len(reading.ids)))
    assert (reading.layers[0].weights[reading.hidden] == 0).all()
    assert reading.targets[: prefix - 1] == [None] * (prefix - 1) and reading.targets[prefix - 1] == reading.ids[prefix]
    strips = predict(checkpoint, reading).strips
    assert [strip.name for strip in strips] == ["as trained"] and strips[0].losses[prefix - 1] is not None
    prompt = checkpoint.task.encode(text[:20], "prompt")
    (written,) = write(checkpoint.task, checkpoint.model, prompt, 30)
    assert written[:20] == prompt and len(written) == 50  # the prompt, read as the prefix, continued
    sampled = cli("sample.py", f"ckpt={tmp_path}", f'prompt="{text[:20]}"', "max_new_tokens=30", "device=cpu")
    assert sampled.returncode == 0 and sampled.stdout.startswith(text[:20]), sampled.stderr
    drawn = []  # what attend.py hatches: the figure function's inputs
    monkeypatch.setattr(attend, "pattern_figure", lambda *args: drawn.append(args) or pattern_figure(*args))
    for query in (3, 20):
        attended = cli("attend.py", f"ckpt={tmp_path}", f'text="{text}"', f"query={query}", f"out={tmp_path / 'a.png'}")
        assert attended.returncode == 0, attended.stderr
        seen = "(the prefix, tokens 0 to 15, is read both ways; the mask hides the rest)"
        assert (
            f"query i={query} {reading.labels[query]!r}, keys j <= {max(query, prefix - 1)} {seen}" in attended.stdout
        )
        rows = re.findall(r"^ +(\d+)  '.*' +-?\d+\.\d+ +-?\d+\.\d+ +\d\.\d+", attended.stdout, re.MULTILINE)
        assert [int(j) for j in rows] == list(range(max(query, prefix - 1) + 1))  # the keys it sees, traced
    hatch, hidden = drawn[-1][3:]
    assert hatch and torch.equal(hidden, reading.hidden)  # the triangle after the prefix, not the plain one
