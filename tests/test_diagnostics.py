import math
from functools import partial

import matplotlib.text
import numpy as np
import pytest
import torch
from matplotlib.backends.backend_agg import FigureCanvasAgg
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from torch.utils.tensorboard import SummaryWriter

from data import Source, TokenizerConfig, train_tokenizer
from data.synthetic import copy_text, far_targets
from model import Mask, Mixer, ModelConfig, Probe, TinyLM, attention, future_keys
from model.statistics import attention_stats, entropy, hidden_mass, max_weight, saturated_frac, self_weight
from task import Evaluation, task_for
from task.loss import mean_loss
from task.next_token import FAR_SEED, far_token
from trainer.config import TrainConfig, TrainerConfig
from trainer.diagnostics import (
    log_attention,
    log_grad_norms,
    log_mask_readings,
    pattern_figure,
    pattern_picture,
    probe_windows,
    token_labels,
)
from trainer.evaluate import estimate_loss
from trainer.step import TrainStep

TEXT = "To be, or not to be, that is the question:\nWhether 'tis nobler in the mind to suffer\n" * 20
STATS = [
    "entropy",
    "max_weight",
    "saturated_frac",
    "jacobian_norm",
    "logit_std",
    "logit_max",
    "future_mass",
    "past_mass",
    "self_weight",
]


def uniform_causal(T: int) -> torch.Tensor:
    """Row i spreads its weight evenly over keys 0..i."""
    return torch.ones(T, T).tril() / torch.arange(1, T + 1)[:, None]


def test_uniform_causal_rows_have_entropy_log_of_their_length():
    weights = uniform_causal(6)  # zeros above the diagonal: 0 log 0 must count as 0
    for i in range(6):
        assert entropy(weights[i : i + 1]).item() == pytest.approx(math.log(i + 1))
    assert entropy(weights).item() == pytest.approx(sum(math.log(i + 1) for i in range(6)) / 6)


def test_one_hot_row_is_saturated_and_a_uniform_row_is_not():
    weights = torch.tensor([[0.0, 1.0, 0.0, 0.0], [0.25, 0.25, 0.25, 0.25], [0.0, 0.01, 0.99, 0.0]])
    assert max_weight(weights).item() == pytest.approx((1 + 0.25 + 0.99) / 3)
    assert saturated_frac(weights).item() == pytest.approx(1 / 3)  # 0.99 itself does not exceed 0.99


def test_hidden_mass_is_the_mean_weight_on_the_keys_the_mask_hides():
    weights = torch.tensor([[0.5, 0.5, 0.0], [0.2, 0.2, 0.6], [0.3, 0.3, 0.4]])
    assert hidden_mass(weights, future_keys(3)).item() == pytest.approx((0.5 + 0.6 + 0) / 3)  # above the diagonal
    assert hidden_mass(weights, Mask(2).hidden_keys(3)).item() == pytest.approx((0 + 0.6 + 0) / 3)  # after a prefix
    assert hidden_mass(uniform_causal(5), future_keys(5)).item() == 0


def test_logit_stats_read_the_scaled_scores_and_ignore_masked_ones():
    # The largest scaled score, 10 / sqrt(4), sits above the diagonal: under the mask the softmax never sees it.
    q = torch.tensor([[1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0]])
    k = torch.tensor([[2.0, 0.0, 0.0, 0.0], [10.0, 4.0, 0.0, 0.0]])
    future = future_keys(2)
    unmasked = attention_stats(attention(q, k, torch.eye(2), causal=False), future, applied=False)
    for mask_value in (float("-inf"), -1e4, 100.0):  # whatever the mask wrote over the future, it is left out
        masked = attention_stats(attention(q, k, torch.eye(2), causal=True, mask_value=mask_value), future)
        assert masked["logit_max"].item() == pytest.approx(2.0)  # of 1, 0 and 2 (the scaled scores j <= i)
        assert masked["logit_std"].item() == pytest.approx(torch.tensor([1.0, 0.0, 2.0]).std().item())
    assert unmasked["logit_max"].item() == pytest.approx(5.0)


def tiny_model(**settings) -> TinyLM:
    torch.manual_seed(0)
    return TinyLM(ModelConfig(**{"vocab_size": 40, "block_size": 16, "d_model": 32, "d_k": 16, "d_v": 16} | settings))


@pytest.mark.parametrize("causal", [True, False])
def test_capturing_the_attention_leaves_the_logits_as_the_fused_path_gives_them(causal):
    model, idx = tiny_model(causal=causal, n_layer=2).eval(), torch.randint(40, (3, 16))
    probe = Probe()
    torch.testing.assert_close(model(idx, probe=probe), model(idx), atol=1e-5, rtol=1e-5)
    assert len(probe.results) == 2


def test_future_mass_is_exactly_zero_for_a_causal_model_and_not_for_an_unmasked_one():
    idx = torch.randint(40, (3, 16))
    masses = {}
    for causal in (True, False):
        probe = Probe()
        tiny_model(causal=causal)(idx, probe=probe)
        masses[causal] = attention_stats(probe.results[0], future_keys(16), causal)["future_mass"].item()
    assert masses[True] == 0.0 and masses[False] > 0.1


def evaluated(model: TinyLM, batch_size: int = 4, eval_iters: int = 3, **data) -> TrainConfig:
    """The settings an evaluation of `model` reads: its own, and the batches' number and size."""
    config = TrainConfig(model=model.config, trainer=TrainerConfig(batch_size=batch_size, eval_iters=eval_iters))
    for key, value in data.items():
        setattr(config.data, key, value)
    return config


def losses(model: TinyLM) -> dict[str, float]:
    tokens = np.random.default_rng(0).integers(40, size=500)
    config = evaluated(model)
    splits = {"train": tokens, "val": tokens[::-1].copy()}
    return estimate_loss(model, task_for(config, None), splits, config, 1, torch.device("cpu"))


def test_val_causal_is_the_val_loss_itself_for_a_causal_model():
    result = losses(tiny_model(causal=True))
    assert set(result) == {"train", "val", "val_causal"} and result["val_causal"] == result["val"]


def test_val_causal_of_an_unmasked_model_is_its_causal_twins_val_loss_on_the_same_batches():
    unmasked, twin = tiny_model(causal=False), tiny_model(causal=True)
    twin.load_state_dict(unmasked.state_dict())
    result = losses(unmasked)
    assert result["val_causal"] != result["val"]
    assert result["val_causal"] == pytest.approx(losses(twin)["val"], rel=1e-6)


@pytest.fixture(scope="module")
def tokenizer():
    return train_tokenizer(TokenizerConfig(), TEXT)


def test_token_labels_draw_whitespace_and_name_special_tokens(tokenizer):
    ids = tokenizer.encode("e, q\n").ids + [tokenizer.token_to_id("[UNK]")]
    assert token_labels(tokenizer, ids) == ["e", ",", "␣", "q", "↵", "[UNK]"]


def events(run_dir) -> EventAccumulator:
    accumulator = EventAccumulator(str(run_dir), size_guidance={"scalars": 0, "images": 0, "histograms": 0})
    accumulator.Reload()
    return accumulator


def test_log_attention_writes_every_layers_scalars_histogram_and_pattern_under_its_tag(tmp_path, tokenizer):
    tokens = np.array(tokenizer.encode(TEXT).ids)
    model = tiny_model(vocab_size=tokenizer.get_vocab_size(), n_layer=2).train()
    task = task_for(evaluated(model), tokenizer)
    windows = probe_windows(task, tokens, seed=3, device=torch.device("cpu"))
    assert torch.equal(windows, probe_windows(task, tokens, seed=3, device=torch.device("cpu")))
    with SummaryWriter(tmp_path) as writer:
        log_attention(writer, model, windows, tokenizer, step=7)
    assert model.training

    accumulator = events(tmp_path)
    tags = accumulator.Tags()
    assert set(tags["scalars"]) == {f"attn/{name}" for name in STATS} | {f"attn/{name}/1" for name in STATS}
    assert set(tags["histograms"]) == {"attn/logits", "attn/logits/1"}
    assert set(tags["images"]) == {"attn/pattern", "attn/pattern/1"}
    assert accumulator.Scalars("attn/future_mass/1")[0].value == 0.0
    assert 0 < accumulator.Scalars("attn/entropy")[0].value <= math.log(16)
    histogram = accumulator.Histograms("attn/logits")[0]
    assert histogram.step == 7
    assert histogram.histogram_value.num == len(windows) * 16 * 17 / 2  # the scores on and below the diagonal
    assert histogram.histogram_value.max == pytest.approx(accumulator.Scalars("attn/logit_max")[0].value)
    image = accumulator.Images("attn/pattern")[0]
    assert image.step == 7 and image.width > 300 and image.encoded_image_string.startswith(b"\x89PNG")


BPE_LABELS = ["First", "␣Citizen", ":", "↵", "Before", "␣we", "␣proceed", "␣any", "␣further", ",", "␣hear", "↵↵"]


@pytest.mark.parametrize(
    "labels",
    [
        pytest.param(list("Before␣we␣proceed␣any␣fu"), id="characters"),
        pytest.param(BPE_LABELS * 2, id="bpe-tokens"),
        pytest.param(BPE_LABELS * 5, id="a-longer-text"),
    ],
)
def test_the_pattern_figure_shows_every_label_and_name_whole_and_apart(labels):
    figure = pattern_figure(uniform_causal(len(labels)), labels, "layer 0, step 600: model.causal=false,trainer.seed=1")
    canvas = FigureCanvasAgg(figure)
    canvas.draw()  # as TensorBoard's add_figure does
    renderer = canvas.get_renderer()
    texts = [text for text in figure.findobj(matplotlib.text.Text) if text.get_visible() and text.get_text()]
    boxes = {text.get_text(): text.get_window_extent(renderer) for text in texts}
    assert {text.get_text() for text in texts} >= set(labels)
    inside = figure.bbox.padded(1)
    assert [
        name
        for name, box in boxes.items()
        if not inside.contains(box.x0, box.y0) or not inside.contains(box.x1, box.y1)
    ] == []
    names = [name for name in boxes if name.startswith(("key j", "query i", "attention weight"))]
    assert len(names) == 3
    assert [(name, label) for name in names for label in set(labels) if boxes[name].overlaps(boxes[label])] == []


def test_log_grad_norms_records_every_layers_projection_gradients_before_clipping(tmp_path):
    model, idx = tiny_model(n_layer=2).train(), torch.randint(40, (4, 17))
    twin = tiny_model(n_layer=2).train()
    mean_loss(twin(idx[:, :-1]), idx[:, 1:]).backward()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    with SummaryWriter(tmp_path) as writer:
        logger = partial(log_grad_norms, writer, model, 1)
        TrainStep(model, optimizer, grad_clip=1e-3)(idx[:, :-1], idx[:, 1:], lr=0.1, on_gradients=logger)

    accumulator = events(tmp_path)
    for layer, suffix in ((0, ""), (1, "/1")):
        for name, projection in (("wq", "W_Q"), ("wk", "W_K"), ("wv", "W_V")):
            raw = getattr(twin.blocks[layer].attn, projection).weight.grad.norm().item()
            assert raw > 1e-3  # so clipping to 1e-3 would have shrunk it
            assert accumulator.Scalars(f"grad/{name}_norm{suffix}")[0].value == pytest.approx(raw, rel=1e-5)


def test_self_weight_is_the_mean_weight_on_the_diagonal():
    assert self_weight(torch.eye(4)).item() == 1.0
    assert self_weight(uniform_causal(4)).item() == pytest.approx((1 + 1 / 2 + 1 / 3 + 1 / 4) / 4)
    assert self_weight(torch.eye(4).roll(1, 0)).item() == 0.0  # each query on the key before it


def test_without_projections_a_query_puts_more_weight_on_itself_than_with_them():
    idx = torch.randint(40, (3, 16))
    weights = {}
    for projections in (True, False):
        probe = Probe()
        tiny_model(projections=projections, d_k=32, d_v=32)(idx, probe=probe)
        weights[projections] = attention_stats(probe.results[0], future_keys(16))["self_weight"].item()
    assert weights[False] > weights[True]  # |x_i|^2 is row i's largest score


def test_val_causal_of_a_finite_mask_model_is_its_true_mask_twins_val_loss():
    finite, true = tiny_model(mask_value=-1e4), tiny_model()
    with torch.no_grad():
        for model in (finite, true):
            model.blocks[0].attn.W_Q.weight.copy_(-1e5 * model.blocks[0].attn.W_K.weight)  # the mask beaten
    result = losses(finite)
    assert result["val_causal"] != result["val"]
    assert result["val_causal"] == pytest.approx(losses(true)["val"], rel=1e-6)


def test_mask_readings_log_the_future_mass_the_smallest_allowed_score_and_its_margin_above_a_finite_mask(tmp_path):
    idx = torch.randint(40, (4, 17))
    kinds = {"finite": {"mask_value": -1e4, "fused": False}, "true": {"fused": False}, "fused": {}}
    models = {name: tiny_model(**settings).train() for name, settings in kinds.items()}
    for name, model in models.items():
        with torch.no_grad():
            model.blocks[0].attn.W_Q.weight.copy_(-1e5 * model.blocks[0].attn.W_K.weight)
        mean_loss(model(idx[:, :-1]), idx[:, 1:]).backward()
        with SummaryWriter(tmp_path / name) as writer:
            log_mask_readings(writer, model, step=3)
    finite, true = events(tmp_path / "finite"), events(tmp_path / "true")
    assert finite.Scalars("attn/train_future_mass")[0].value > 0 == true.Scalars("attn/train_future_mass")[0].value
    allowed_min = finite.Scalars("attn/train_allowed_min")[0].value
    assert allowed_min < -1e4 and true.Scalars("attn/train_allowed_min")[0].value == allowed_min
    assert finite.Scalars("attn/train_mask_margin")[0].value == pytest.approx(allowed_min + 1e4)
    assert "attn/train_mask_margin" not in true.Tags()["scalars"]  # minus infinity: no margin to measure
    assert not (tmp_path / "fused").exists() or events(tmp_path / "fused").Tags()["scalars"] == []


def test_a_recurrent_model_gets_no_attention_diagnostics_and_no_error(tmp_path, tokenizer):
    tokens = np.array(tokenizer.encode(TEXT).ids)
    vocab_size = tokenizer.get_vocab_size()
    model, idx = tiny_model(vocab_size=vocab_size, mixer=Mixer.gru).train(), torch.randint(vocab_size, (4, 17))
    mean_loss(model(idx[:, :-1]), idx[:, 1:]).backward()
    with SummaryWriter(tmp_path) as writer:
        windows = probe_windows(task_for(evaluated(model), tokenizer), tokens, seed=3, device=torch.device("cpu"))
        log_attention(writer, model, windows, tokenizer, step=1)
        log_grad_norms(writer, model, step=1)
        log_mask_readings(writer, model, step=1)
        writer.add_scalar("train/loss", 1.0, 1)
    assert events(tmp_path).Tags()["scalars"] == ["train/loss"]


def test_far_targets_mark_exactly_the_copied_letters_whose_original_is_in_the_window():
    d, block_size = 5, 16
    text = np.frombuffer(copy_text(d, 2000).encode(), dtype=np.uint8)
    starts = torch.arange(0, 2000 - block_size - 1, 7)
    far = far_targets(starts, block_size, d)
    for start, row in zip(starts.tolist(), far):
        for p in range(block_size):
            target = start + p + 1
            copied = (target % (2 * d + 1)) in range(d, 2 * d)
            assert bool(row[p]) == (copied and p + 1 >= d)
            if row[p]:
                assert text[target] == text[target - d]


def test_far_loss_is_the_loss_at_the_far_positions_only():
    d, block_size = 4, 16
    model = tiny_model(vocab_size=27)
    letters = np.frombuffer(copy_text(d, 3000).encode(), dtype=np.uint8).astype(np.int64)
    tokens = (letters - ord("a") + 1).clip(0)  # a line break is 0, a letter 1 to 26
    train, val = tokens[:2000], tokens[2000:]
    config = evaluated(model, eval_iters=2, source=Source.copy, distance=d)
    task, cpu = task_for(config, None), torch.device("cpu")
    far = far_token(Evaluation(task, model, [], 0.0, config.data, 4, 2, val, len(train), 0, cpu))
    generator = torch.Generator().manual_seed(0 + FAR_SEED)
    picked = []
    for _ in range(2):
        starts = torch.randint(len(val) - block_size, (4,), generator=generator)
        windows = torch.from_numpy(val[starts.numpy()[:, None] + np.arange(block_size + 1)].astype(np.int64))
        with torch.no_grad():
            logits = model(windows[:, :-1])
        losses = torch.nn.functional.cross_entropy(logits.transpose(1, 2), windows[:, 1:], reduction="none")
        picked.append(losses[far_targets(2000 + starts, block_size, d)])
    assert far == pytest.approx(torch.cat(picked).mean().item(), rel=1e-5)


def drawn_whole(*args) -> np.ndarray:
    canvas = FigureCanvasAgg(pattern_figure(*args))
    canvas.draw()  # as TensorBoard's add_figure draws a figure
    return np.asarray(canvas.buffer_rgba())[:, :, :3]


@pytest.mark.parametrize("hatch, hidden", [(True, None), (True, ~future_keys(12)), (False, None)])
def test_each_pattern_picture_drawn_over_the_last_ones_background_is_the_whole_figures(hatch, hidden):
    torch.manual_seed(0)
    labels = [f"t{i % 5}" for i in range(12)]
    for step in (0, 30, 60, 10**6):  # new weights and title each time; the last title wraps to a second line
        weights = torch.softmax(torch.randn(12, 12) * step / 30, dim=-1)
        title = f"layer 0, step {step}, mean a_ii 0.5" + (": model.causal=false,trainer.seed=1,data=copy" * (step > 60))
        args = (weights, labels, title, hatch, hidden)
        assert np.array_equal(pattern_picture(*args), drawn_whole(*args)), (step, hatch)
