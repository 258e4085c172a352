"""viewer/predictions.py, the one computation of the loss strips, the top fives and the counterfactual looks: against
the evaluation's own numbers on real validation windows, and on a hand-built model whose answers are known."""

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from conftest import SHORT, compose_config, curve, events, short_run
from data import TokenizerConfig, prepare_tokens, train_tokenizer
from model import CAUSAL, ModelConfig, TinyLM
from task import task_for
from task.curves import batches_loss
from trainer.config import TrainConfig, to_train_config
from viewer.checkpoints import Checkpoint, load
from viewer.predictions import distribution, predict, words
from viewer.readings import read, read_ids
from viewer.words import NEXT_TOKEN

LEAKY = [
    "model.causal=false",
    "trainer.device=cpu",
    "trainer.max_steps=40",
    "trainer.eval_interval=40",
    "trainer.eval_iters=2",
]
STEEP = 40.0  # the hand-built model's score for the next token: a weight of 1 - 4e-8 on it
BOOST = 8.0  # how far the value it reads lifts that token's logit


@pytest.fixture(scope="module")
def leaky_run(tmp_path_factory, cache_dir):
    run_dir = tmp_path_factory.mktemp("leaky")
    short_run(run_dir, cache_dir, *LEAKY)
    return run_dir


@pytest.mark.slow
def test_the_strips_means_over_validation_windows_are_val_loss_and_val_loss_causal(leaky_run, cache_dir):
    """The evaluation's own windows (train.py draws the train split's, then the val split's, from one generator
    seeded with trainer.seed + 1): the strips' means over them are the logged curves' last values."""
    config = to_train_config(compose_config(*SHORT, f"data.cache_dir={cache_dir}", *LEAKY))
    data, settings = prepare_tokens(config.data, config.tokenizer), config.trainer
    task = task_for(config, data.tokenizer)
    generator = torch.Generator().manual_seed(settings.seed + 1)
    cpu = torch.device("cpu")
    for _ in range(settings.eval_iters):
        task.draw(data.train, settings.batch_size, generator, cpu)
    batches = [task.draw(data.val, settings.batch_size, generator, cpu) for _ in range(settings.eval_iters)]
    trained = load(leaky_run / "last.pt")
    logged = events(leaky_run)
    val, val_causal = (curve(logged, tag)[-1] for tag in ("val/loss", "val/loss_causal"))
    assert val[0] == val_causal[0] == trained.step == 40
    assert batches_loss(trained.model, batches, CAUSAL) == pytest.approx(val[1], abs=1e-5)  # the same windows
    assert batches_loss(trained.model, batches, CAUSAL, causal=True) == pytest.approx(val_causal[1], abs=1e-5)
    means = []
    for x, y in batches:
        for window_x, window_y in zip(x.tolist(), y.tolist()):
            reading = read_ids(trained, [*window_x, window_y[-1]])  # block_size + 1 tokens: all block_size scored
            strips = predict(trained, reading).strips
            assert None not in strips[0].losses and [strip.tag for strip in strips] == ["val/loss", "val/loss_causal"]
            means.append([strip.mean for strip in strips])
    strip_val, strip_causal = (sum(column) / len(column) for column in zip(*means))
    assert strip_val == pytest.approx(val[1], abs=1e-5)
    assert strip_causal == pytest.approx(val_causal[1], abs=1e-5)
    assert abs(strip_causal - strip_val) > 0.01  # the two strips are two forwards: the mask was put back


def next_token_reader(causal: bool = False) -> Checkpoint:
    """A model whose one attention layer reads the next token, for the text "abcde": q_i . k_j = STEEP when
    j = i + 1 (positions, one-hot), v_j is token j's one-hot, and the output adds BOOST v to the residual, which
    holds token i's one-hot; the LM head reads the token one-hots back. No LayerNorm, no MLP: its logits are
    e_token(i) + BOOST sum_j a_ij e_token(j), whatever the weights a_ij are."""
    tokenizer = train_tokenizer(TokenizerConfig(), "abcde")  # ids: [UNK] 0, a 1 ... e 5
    vocab, block = 6, 5
    width = vocab + block  # d_model: a token's one-hot, then its position's
    config = ModelConfig(vocab, block, width, d_k=block, d_v=vocab, mlp=False, causal=causal)
    model = TinyLM(config)
    block_0 = model.blocks[0]
    block_0.ln_attn, model.ln_f = nn.Identity(), nn.Identity()
    tokens, positions = torch.eye(vocab, width), torch.eye(width)[vocab:]
    next_position = torch.zeros(block, width)  # q_i = STEEP sqrt(d_k) e_(i+1): after the scale, a score of STEEP
    for i in range(block - 1):
        next_position[i + 1, vocab + i] = STEEP * math.sqrt(block)
    with torch.no_grad():
        model.token_embedding.weight.copy_(tokens)
        model.position_embedding.weight.copy_(positions)
        block_0.attn.W_Q.weight.copy_(next_position)
        block_0.attn.W_K.weight.copy_(positions)
        block_0.attn.W_V.weight.copy_(tokens)
        block_0.attn.W_O.weight.copy_(BOOST * tokens.T)
        model.lm_head.weight.copy_(tokens)
    return Checkpoint(model.eval(), task_for(TrainConfig(model=config), tokenizer), 0, "")


def expected_p(ids: list[int], i: int, weights: list[float]) -> float:
    """The hand-built model's probability of token i+1 when query i's weights are `weights` (one per key)."""
    logits = torch.zeros(6)
    logits[ids[i]] += 1.0
    for j, weight in enumerate(weights):
        logits[ids[j]] += BOOST * weight
    return F.softmax(logits, dim=-1)[ids[i + 1]].item()


def test_the_counterfactuals_of_a_model_that_reads_the_next_token_are_the_known_ones():
    trained = next_token_reader()
    reading = read(trained, "abcde")
    ids, keys = reading.ids, len(reading.ids)
    assert reading.layers[0].weights[1, 2] > 0.999  # it reads the next token
    predictions = predict(trained, reading)
    as_trained, put_back = predictions.strips
    for i in range(keys - 1):
        found = predictions.counterfactuals[i]
        assert found.trained > 0.99 and found.trained == pytest.approx(as_trained.predictions[i].p_next)
        assert found.masked == pytest.approx(expected_p(ids, i, [1 / (i + 1)] * (i + 1)), abs=1e-6)  # j <= i alike
        assert found.uniform == pytest.approx(expected_p(ids, i, [1 / keys] * keys), abs=1e-6)  # every key alike
        assert found.no_look == pytest.approx(expected_p(ids, i, []), abs=1e-6)  # the residual: token i alone
        assert found.masked < 0.05 and found.uniform < 0.2  # the look is what predicts it
        # one layer: masking query i's future is the mask put back for its prediction
        assert found.masked == pytest.approx(put_back.predictions[i].p_next, abs=1e-6)
        label = reading.labels[i + 1]
        assert found.words == (
            f"masking the future takes p({label!r}) from 1.00 to {found.masked:.2g}: the prediction was read, "
            "not inferred"
        )
    assert predictions.counterfactuals[-1] is None and as_trained.losses[-1] is None


def test_with_the_mask_the_same_model_looks_uniformly_and_says_where_matters_not():
    trained = next_token_reader(causal=True)
    reading = read(trained, "abcde")
    predictions = predict(trained, reading)
    assert len(predictions.strips) == 1 and predictions.strips[0].causal  # nothing to put back
    found = predictions.counterfactuals[2]
    assert found.trained == pytest.approx(found.masked, abs=1e-6) == pytest.approx(found.uniform, abs=1e-6)
    assert found.no_look == pytest.approx(expected_p(reading.ids, 2, []), abs=1e-6)
    assert found.words.startswith("uniform weights give p('d') ") and found.words.endswith(
        "that it looks matters, not where"
    )


def test_temperature_one_is_the_softmax_of_the_logits_and_a_low_one_sharpens():
    torch.manual_seed(0)
    logits = torch.randn(4, 11) * 3
    torch.testing.assert_close(distribution(logits, 1.0), F.softmax(logits, dim=-1))
    sharp, flat = distribution(logits, 0.25), distribution(logits, 4.0)
    assert torch.equal(sharp.argmax(-1), logits.argmax(-1))
    assert (sharp.amax(-1) > distribution(logits, 1.0).amax(-1)).all() and (flat.amax(-1) < sharp.amax(-1)).all()
    trained = next_token_reader(causal=True)
    reading = read(trained, "abcde")
    for temperature in (1.0, 0.25):
        top = predict(trained, reading, temperature=temperature).strips[0].predictions[2].top
        logits = trained.model(torch.tensor([reading.ids]))[0, 2]
        assert [p for _, p in top] == pytest.approx(F.softmax(logits / temperature, -1).topk(5).values.tolist())
    cold = predict(trained, reading, temperature=0.25).strips[0].predictions[2]
    warm = predict(trained, reading, temperature=1.0).strips[0].predictions[2]
    assert cold.top[0][0] == warm.top[0][0] and cold.top[0][1] > warm.top[0][1]
    assert cold.loss == warm.loss  # the loss is the model's, at temperature 1, whatever is shown


@pytest.mark.parametrize(
    "numbers, causal, expected",
    [
        (
            {"trained": 1.0, "masked": 0.45, "uniform": 0.047, "no_look": 0.0012},
            False,
            "masking the future takes p('r') from 1.00 to 0.45: part of the prediction was read, part inferred",
        ),
        (
            {"trained": 0.2, "masked": 0.8, "uniform": 0.3, "no_look": 0.3},
            False,
            "masking the future raises p('r') from 0.20 to 0.80: what it read ahead pointed elsewhere",
        ),
        (
            {"trained": 0.004, "masked": 0.004, "uniform": 0.01, "no_look": 0.012},
            True,
            "p('r') is at most 0.012 whichever way it looks (0.004 as trained): it does not expect it here",
        ),
        (
            {"trained": 0.41, "masked": 0.41, "uniform": 0.2, "no_look": 0.43},
            True,
            "without the look p('r') is 0.43 (0.41 as trained): the residual alone predicts it",
        ),
        (
            {"trained": 0.6, "masked": 0.6, "uniform": 0.1, "no_look": 0.05},
            True,
            "where it looks raises p('r') from 0.10 (uniform weights) to 0.60 (0.05 without the look): the look "
            "matters",
        ),
        (
            {"trained": 0.1, "masked": 0.1, "uniform": 0.3, "no_look": 0.5},
            True,
            "its look lowers p('r'): 0.10 as trained, 0.30 with uniform weights, 0.50 without the look",
        ),
    ],
)
def test_the_sentence_names_what_the_four_probabilities_show(numbers, causal, expected):
    assert words("r", numbers, causal, NEXT_TOKEN) == expected
