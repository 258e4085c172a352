import logging
from dataclasses import replace

import pytest
import torch

from model import (
    Mixer,
    ModelConfig,
    Probe,
    QKInit,
    TinyLM,
    model_problems,
    parameters_of,
    reads_only_the_past,
    stores_scores,
)
from task.loss import mean_loss


def tiny_model(**settings) -> TinyLM:
    torch.manual_seed(0)
    config = ModelConfig(vocab_size=20, block_size=16, d_model=32, d_k=16, d_v=24)
    return TinyLM(replace(config, **settings)).eval()


def test_forward_gives_logits_for_every_position():
    model = tiny_model(n_layer=2)
    assert model(torch.randint(20, (3, 16))).shape == (3, 16, 20)


def logits_before_and_after_changing_the_future(model, i):
    idx = torch.randint(20, (2, 16), generator=torch.Generator().manual_seed(1))
    changed = idx.clone()
    changed[:, i + 1 :] = (changed[:, i + 1 :] + 1) % 20
    return model(idx)[:, : i + 1], model(changed)[:, : i + 1]


@pytest.mark.parametrize("i", [0, 7, 14])
def test_causal_model_ignores_the_tokens_after_each_position(i):
    before, after = logits_before_and_after_changing_the_future(tiny_model(causal=True, n_layer=2), i)
    torch.testing.assert_close(before, after, atol=0, rtol=0)


@pytest.mark.parametrize("i", [0, 7, 14])
def test_unmasked_model_reads_the_tokens_after_each_position(i):
    before, after = logits_before_and_after_changing_the_future(tiny_model(causal=False), i)
    assert (before - after).abs().amax() > 1e-4


def test_forcing_the_mask_on_an_unmasked_model_gives_the_causal_model():
    idx = torch.randint(20, (2, 16))
    forced = tiny_model(causal=False, n_layer=2)(idx, causal=True)
    torch.testing.assert_close(forced, tiny_model(causal=True, n_layer=2)(idx), atol=0, rtol=0)


@pytest.mark.parametrize("qk_norm", [False, True])
@pytest.mark.parametrize("causal", [True, False])
def test_fused_and_reference_paths_train_alike(causal, qk_norm):
    idx = torch.randint(20, (4, 17))
    losses, gradients = [], []
    for fused in (True, False):
        model = tiny_model(causal=causal, fused=fused, qk_norm=qk_norm, n_layer=2).train()
        loss = mean_loss(model(idx[:, :-1]), idx[:, 1:])
        loss.backward()
        losses.append(loss)
        gradients.append([p.grad for p in model.parameters()])
    torch.testing.assert_close(losses[0], losses[1])
    for fused_grad, reference_grad in zip(*gradients):
        torch.testing.assert_close(fused_grad, reference_grad, atol=1e-5, rtol=1e-4)


def test_loss_starts_near_a_uniform_guess():
    model = tiny_model()
    idx = torch.randint(20, (4, 16))
    assert mean_loss(model(idx), idx).item() == pytest.approx(torch.log(torch.tensor(20.0)).item(), abs=0.1)


def test_generate_extends_past_the_block_size():
    model = tiny_model()
    out = model.generate(torch.zeros(2, 1, dtype=torch.long), 40, temperature=0.8, top_k=5)
    assert out.shape == (2, 41)
    assert out.max() < 20


def test_generate_with_top_k_1_is_greedy():
    model = tiny_model()
    prompt = torch.tensor([[3, 4, 5]])
    out = model.generate(prompt, 5, top_k=1)
    greedy = prompt
    for _ in range(5):
        greedy = torch.cat([greedy, model(greedy)[:, -1].argmax(-1, keepdim=True)], dim=1)
    assert torch.equal(out, greedy)


@pytest.mark.parametrize("qk_init, std", [("unit", 256**-0.5), ("gpt2", 0.02), ("torch", (3 * 256) ** -0.5)])
def test_model_draws_wq_and_wk_as_qk_init_says_and_the_rest_gpt2_style(qk_init, std):
    model = tiny_model(qk_init=QKInit(qk_init), d_model=256, d_k=256, d_v=256, n_layer=2)
    for block in model.blocks:
        assert block.attn.W_Q.weight.std().item() == pytest.approx(std, rel=0.03)
        assert block.attn.W_K.weight.std().item() == pytest.approx(std, rel=0.03)
        assert block.attn.W_V.weight.std().item() == pytest.approx(0.02, rel=0.03)


def one_step_lowers_the_loss(model) -> bool:
    """One SGD step on a random batch of 20 tokens lowers the loss on that batch."""
    idx = torch.randint(20, (4, 17))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    before = mean_loss(model(idx[:, :-1]), idx[:, 1:])
    before.backward()
    optimizer.step()
    return mean_loss(model(idx[:, :-1]), idx[:, 1:]).item() < before.item()


@pytest.mark.parametrize(
    "options",
    [{"mlp": False, "qk_init": qk_init} for qk_init in QKInit]
    + [{"qk_norm": True}, {"softcap": 2.0}, {"qk_norm": True, "softcap": 2.0}],
    ids=lambda options: " ".join(f"{key}={value}" for key, value in options.items()),
)
def test_model_trains_one_step_without_mlp_with_every_qk_init_and_with_qk_norm_or_softcap(options):
    model = tiny_model(**options).train()
    assert one_step_lowers_the_loss(model)


def test_qk_norm_adds_only_the_two_gains_and_leaves_checkpoint_keys_alone_when_off():
    projections = {"W_Q.weight", "W_K.weight", "W_V.weight", "W_O.weight"}
    assert set(tiny_model().blocks[0].attn.state_dict()) == projections
    assert set(tiny_model(qk_norm=True).blocks[0].attn.state_dict()) == projections | {"q_norm.weight", "k_norm.weight"}


def test_softcap_on_the_fused_path_says_once_that_training_takes_the_reference_path(caplog):
    with caplog.at_level(logging.INFO, logger="model.tinylm"):
        tiny_model(softcap=30.0, n_layer=2)
        tiny_model(softcap=30.0, fused=False)
    assert [record.getMessage() for record in caplog.records] == [
        "model.softcap=30: the fused attention kernel cannot cap scores; training takes the reference path"
    ]


def test_forcing_the_mask_on_a_finite_mask_model_gives_the_true_masks_twin():
    idx = torch.randint(20, (2, 16))
    finite, true = tiny_model(mask_value=-1e4, n_layer=2), tiny_model(n_layer=2)
    with torch.no_grad():
        for model in (finite, true):
            for layer in model.attention_layers():
                layer.W_Q.weight.copy_(-1e5 * layer.W_K.weight)  # each row 0 scores itself far below -1e4
    torch.testing.assert_close(finite(idx, causal=True), true(idx), atol=0, rtol=0)
    assert (finite(idx) - true(idx)).abs().amax() > 1e-3  # its own mask is beaten: the future gets in


@pytest.mark.parametrize("mixer", [Mixer.gru, Mixer.lstm])
def test_a_recurrent_model_reads_only_the_past_and_has_no_attention_layers(mixer):
    model = tiny_model(mixer=mixer, n_layer=2)
    assert model.attention_layers() == [] and reads_only_the_past(model.config)
    before, after = logits_before_and_after_changing_the_future(model, 7)
    torch.testing.assert_close(before, after, atol=0, rtol=0)
    probe = Probe()
    model(torch.randint(20, (2, 16)), probe=probe, causal=False)  # nothing to capture, no mask to lift
    assert probe.results == []


def test_a_recurrent_model_keeps_the_embeddings_mlp_and_head_and_says_both_parameter_counts(caplog):
    with caplog.at_level(logging.INFO, logger="model.tinylm"):
        gru = tiny_model(mixer=Mixer.gru)
    attending = tiny_model()
    shared = {name for name, _ in attending.named_parameters() if ".attn." not in name}
    assert shared <= {name for name, _ in gru.named_parameters()}
    own, other = (sum(p.numel() for p in model.parameters()) for model in (gru, attending))
    assert parameters_of(gru.config) == own and parameters_of(attending.config) == other
    assert [record.getMessage() for record in caplog.records] == [
        f"model.mixer=gru: {own:,} parameters; with attention in its place (model.mixer=attention) {other:,}"
    ]


def test_without_projections_a_layer_has_no_weights_and_the_model_trains():
    model = tiny_model(projections=False, d_k=32, d_v=32).train()
    assert set(model.blocks[0].attn.state_dict()) == set()
    assert parameters_of(model.config) == parameters_of(tiny_model(d_k=32, d_v=32).config) - 4 * 32 * 32
    assert one_step_lowers_the_loss(model)


def test_a_finite_mask_on_the_fused_path_says_once_that_training_takes_the_reference_path(caplog):
    with caplog.at_level(logging.INFO, logger="model.tinylm"):
        tiny_model(mask_value=-1e4, n_layer=2)
        tiny_model(mask_value=-1e4, fused=False)
        tiny_model(mask_value=float("-inf"))
        parameters_of(ModelConfig(vocab_size=20, mask_value=-1e4))  # counting on the meta device says nothing
    assert [record.getMessage() for record in caplog.records] == [
        "model.mask_value=-10000: the fused kernel's causal mask is minus infinity; training takes the reference "
        "path, which writes this value over the future keys' scores"
    ]


@pytest.mark.parametrize(
    "settings, problem",
    [
        ({"mask_value": float("nan")}, "model.mask_value=nan: must be negative"),
        ({"mask_value": 0.0}, "model.mask_value=0.0: must be negative"),
        ({"mask_value": float("inf")}, "model.mask_value=inf: must be negative"),
        ({"projections": False, "d_k": 16}, "model.d_k=16: must equal model.d_model=32 without projections"),
        ({"projections": False, "d_k": 32, "d_v": 8}, "model.d_v=8: must equal model.d_model=32 without projections"),
        ({"projections": False, "d_k": 32, "d_v": 32, "qk_norm": True}, "model.qk_norm=True: needs the projections"),
        (
            {"mixer": Mixer.gru, "causal": False},
            "model.causal=False: applies to attention only, not to model.mixer=gru",
        ),
        ({"mixer": Mixer.lstm, "mask_value": -1e4}, "model.mask_value=-10000.0: applies to attention only"),
        ({"mixer": Mixer.gru, "softcap": 5.0}, "model.softcap=5.0: applies to attention only"),
    ],
)
def test_each_setting_that_cannot_work_gets_one_line_naming_it(settings, problem):
    config = ModelConfig(vocab_size=20, block_size=16, d_model=32, d_k=32, d_v=32)
    problems = model_problems(replace(config, **settings))
    assert len(problems) == 1 and problems[0].startswith(problem), problems
    assert model_problems(config) == [] and model_problems(replace(config, mask_value=float("-inf"))) == []


@pytest.mark.parametrize(
    "settings, stores",
    [({}, False), ({"fused": False}, True), ({"softcap": 5.0}, True), ({"mask_value": -1e4}, True),
     ({"mask_value": -1e4, "causal": False}, False), ({"mixer": Mixer.gru}, False)],
)  # fmt: skip
def test_stores_scores_says_which_settings_train_through_the_reference_path(settings, stores):
    assert stores_scores(replace(ModelConfig(), **settings)) is stores
