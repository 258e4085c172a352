import re

import pytest
import torch
from torch import nn

from attend import trace_text
from data import TokenizerConfig, train_tokenizer
from model import ModelConfig, TinyLM
from task import task_for
from trainer.config import TrainConfig
from viewer.checkpoints import Checkpoint
from viewer.readings import cut_note, read, row_statistics, verdict
from viewer.trace import trace


def lesson_model() -> Checkpoint:
    """A model whose projections give the lesson's vectors for the text "abc" (the lesson's "A numeric trace of one
    attention step"): q_3 = (1, 1); k = (1, 0), (0, 1), (1, 1); v = (1, 0), (0, 2), (2, 2)."""
    tokenizer = train_tokenizer(TokenizerConfig(), "abc")  # ids: [UNK] 0, a 1, b 2, c 3
    model = TinyLM(ModelConfig(vocab_size=4, block_size=3, d_model=4, d_k=2, d_v=2, mlp=False))
    block = model.blocks[0]
    block.ln_attn = nn.Identity()  # the projections read each token's embedding itself: a one-hot e_id
    with torch.no_grad():
        model.token_embedding.weight.copy_(torch.eye(4))
        model.position_embedding.weight.zero_()
        #                                         [UNK]  a       b       c
        block.attn.W_Q.weight.copy_(torch.tensor([[0.0, 0.0, 0.0, 1.0], [0.0, 0.0, 0.0, 1.0]]))
        block.attn.W_K.weight.copy_(torch.tensor([[0.0, 1.0, 0.0, 1.0], [0.0, 0.0, 1.0, 1.0]]))
        block.attn.W_V.weight.copy_(torch.tensor([[0.0, 1.0, 0.0, 2.0], [0.0, 0.0, 2.0, 2.0]]))
    return Checkpoint(model, task_for(TrainConfig(model=model.config), tokenizer), 0, "")


def key_rows(printed: str) -> list[list[str]]:
    """The printed table's rows: j, token, q_i.k_j, scaled, a_ij."""
    return [line.split() for line in printed.splitlines() if re.match(r"\s+\d+\s+'", line)]


def test_the_printed_trace_reads_the_lessons_numbers():
    printed = trace_text(read(lesson_model(), "abc"), layer=0, i=2)
    assert [row[2:] for row in key_rows(printed)] == [
        ["1.000", "0.707", "0.248"],
        ["1.000", "0.707", "0.248"],
        ["2.000", "1.414", "0.503"],
    ]
    assert "divided by sqrt(d_k) = sqrt(2) = 1.414" in printed
    assert "y_i = sum_j a_ij v_j = (1.255, 1.503)" in printed
    assert "dominated by v_2 'c'" in printed  # a_33 = 0.503 on the longest value


def test_without_the_scale_the_lessons_weights_sharpen():
    trained = lesson_model()
    trained.model.blocks[0].attn.scale = False
    printed = trace_text(read(trained, "abc"), layer=0, i=2)
    assert [row[3:] for row in key_rows(printed)] == [["1.000", "0.212"], ["1.000", "0.212"], ["2.000", "0.576"]]
    assert "unscaled, this run feeds the raw scores to the softmax" in printed


def test_the_trace_is_the_reference_attention_of_the_models_own_forward():
    torch.manual_seed(0)
    model = TinyLM(ModelConfig(vocab_size=11, block_size=8, d_model=16, d_k=8, d_v=4, n_layer=2))
    ids = [1, 5, 2, 9, 3]
    layers = trace(model, ids)
    assert len(layers) == 2
    recorded = []
    hooks = [block.attn.register_forward_hook(lambda _, __, output: recorded.append(output)) for block in model.blocks]
    outputs = model(torch.tensor([ids]))
    for hook in hooks:
        hook.remove()
    for layer, block, output in zip(layers, model.blocks, recorded):
        torch.testing.assert_close(block.attn.W_O(layer.output)[None], output, atol=1e-6, rtol=1e-5)  # the fused path
        assert torch.equal(layer.weights.triu(1), torch.zeros(5, 5))  # causal: the future gets exactly 0
        torch.testing.assert_close(layer.weights.sum(-1), torch.ones(5))
    assert outputs.shape == (1, 5, 11)


def test_a_row_that_reads_the_next_token_is_called_the_leak_and_a_one_hot_row_saturated():
    reading = read(lesson_model(), "abc")
    layer = reading.layers[0]
    layer.weights = torch.tensor([[0.2, 0.3, 0.5], [0.001, 0.001, 0.998], [0.3, 0.3, 0.4]])
    assert verdict(reading, 0, 0) == ("most of the weight sits on future tokens (j > i) that the task's mask hides")
    assert verdict(reading, 0, 1) == (
        "1.00 of the weight sits on token 2, the very token it is asked to predict: the leak; "
        "one-hot: the softmax is saturated (largest weight 0.9980)"
    )
    assert verdict(reading, 0, 2) == ""
    stats = row_statistics(layer.weights)
    assert stats["future_mass"] == pytest.approx([0.8, 0.998, 0.0], abs=1e-6)
    assert stats["max_weight"] == pytest.approx([0.5, 0.998, 0.4])


def test_a_text_longer_than_the_context_is_cut_with_a_note():
    reading = read(lesson_model(), "abcab")
    assert reading.ids == [1, 2, 3] and reading.given == 5
    assert cut_note(reading) == "cut to its first 3 of 5 tokens: the model's context is model.block_size=3"
