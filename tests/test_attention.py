import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.profiler import profile

from model import ModelConfig, Probe, QKInit, SingleHeadSelfAttention, attention

TOGGLES = [(scale, causal) for scale in (True, False) for causal in (True, False)]


def lesson_trace():
    """The lesson's three tokens, d_k = d_v = 2; only q_3 is given, so q_1 and q_2 are arbitrary."""
    q = torch.tensor([[0.3, -0.2], [0.5, 0.1], [1.0, 1.0]])
    k = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    v = torch.tensor([[1.0, 0.0], [0.0, 2.0], [2.0, 2.0]])
    return q, k, v


def test_reproduces_the_lesson_trace_for_y3_scaled():
    y, weights = attention(*lesson_trace(), scale=True, causal=True)[:2]
    assert weights[2].tolist() == pytest.approx([0.248, 0.248, 0.503], abs=5e-4)
    assert y[2].tolist() == pytest.approx([1.255, 1.503], abs=5e-4)


def test_reproduces_the_lesson_trace_for_y3_unscaled():
    y, weights = attention(*lesson_trace(), scale=False, causal=True)[:2]
    assert weights[2].tolist() == pytest.approx([0.212, 0.212, 0.576], abs=5e-4)
    # 0.212 (1,0) + 0.212 (0,2) + 0.576 (2,2)
    assert y[2].tolist() == pytest.approx([1.364, 1.576], abs=5e-4)


@pytest.mark.parametrize(
    "d_k, unscaled_winner",
    [(4, 0.88), (16, 0.98), (64, 0.9997), (1024, 1.0000)],
)
def test_reproduces_the_lesson_table_of_one_sigma_gaps(d_k, unscaled_winner):
    # Two keys whose raw scores differ by one standard deviation, sqrt(d_k): sqrt(d_k) against 0.
    q = torch.ones(1, d_k, dtype=torch.float64)
    k = torch.stack([torch.ones(d_k, dtype=torch.float64) / math.sqrt(d_k), torch.zeros(d_k, dtype=torch.float64)])
    v = torch.eye(2, dtype=torch.float64)
    unscaled = attention(q, k, v, scale=False, causal=False).weights
    scaled = attention(q, k, v, scale=True, causal=False).weights
    decimals = len(str(unscaled_winner).split(".")[1])
    assert round(unscaled[0, 0].item(), decimals) == unscaled_winner
    assert round(scaled[0, 0].item(), 2) == 0.73  # the same at every d_k


def naive_attention(q, k, v, scale, causal):
    """The lesson's sums written out, one query and one key at a time."""
    T, d_k = q.shape
    out = torch.zeros(T, v.shape[1], dtype=torch.float64)
    for i in range(T):
        keys = range(i + 1) if causal else range(T)
        scores = [sum(q[i, c] * k[j, c] for c in range(d_k)) / (math.sqrt(d_k) if scale else 1) for j in keys]
        top = max(scores)
        exps = [math.exp(s - top) for s in scores]
        for j, e in zip(keys, exps):
            out[i] += e / sum(exps) * v[j]
    return out


@pytest.mark.parametrize("scale, causal", TOGGLES)
def test_matches_a_naive_loop_on_random_inputs(scale, causal):
    g = torch.Generator().manual_seed(0)
    q, k = torch.randn(6, 5, generator=g, dtype=torch.float64), torch.randn(6, 5, generator=g, dtype=torch.float64)
    v = torch.randn(6, 3, generator=g, dtype=torch.float64)
    y = attention(q, k, v, scale=scale, causal=causal).output
    torch.testing.assert_close(y, naive_attention(q, k, v, scale, causal))


def test_returns_the_scaled_scores_it_fed_the_softmax_with_minus_inf_where_masked():
    scores = attention(*lesson_trace(), scale=True, causal=True).scores
    assert scores[2].tolist() == pytest.approx([1 / math.sqrt(2), 1 / math.sqrt(2), 2 / math.sqrt(2)])
    assert scores[0, 1:].tolist() == [float("-inf")] * 2 and scores[1, 2].item() == float("-inf")


def test_future_keys_get_exactly_zero_weight_even_when_every_score_is_far_below_minus_1e4():
    # Real scores of -20000: a finite stand-in for -inf such as -1e4 would win the softmax.
    q = torch.full((4, 2), 100.0)
    k = torch.full((4, 2), -100.0)
    weights = attention(q, k, torch.randn(4, 3), scale=False, causal=True).weights
    assert (weights.triu(diagonal=1) == 0).all()
    torch.testing.assert_close(weights.sum(-1), torch.ones(4))


def layer_of(**settings) -> SingleHeadSelfAttention:
    """The layer a TinyLM with these settings builds (ModelConfig, whole)."""
    return SingleHeadSelfAttention(ModelConfig(**settings))


def make_layer(scale, causal, d_k=16, d_v=16, d_model=32, **options):
    torch.manual_seed(0)
    layer = layer_of(d_model=d_model, d_k=d_k, d_v=d_v, scale=scale, causal=causal, qk_init=QKInit.unit, **options)
    with torch.no_grad():
        for norm in (layer.q_norm, layer.k_norm):  # gains away from 1, so that a gain left out would show
            if isinstance(norm, nn.LayerNorm):
                norm.weight.uniform_(0.5, 2.0)
    return layer


@pytest.mark.parametrize("qk_norm", [False, True])
@pytest.mark.parametrize("d_k, d_v", [(16, 16), (24, 8), (8, 24)])
@pytest.mark.parametrize("scale, causal", TOGGLES)
def test_fused_path_equals_reference_path(scale, causal, d_k, d_v, qk_norm):
    layer = make_layer(scale, causal, d_k, d_v, qk_norm=qk_norm)
    x = torch.randn(3, 10, 32)
    probe = Probe()
    fused, reference = layer(x), layer(x, probe=probe)
    torch.testing.assert_close(fused, reference, atol=1e-5, rtol=1e-5)
    assert probe.results[0].weights.shape == probe.results[0].scores.shape == (3, 10, 10)


@pytest.mark.parametrize("qk_norm", [False, True])
@pytest.mark.parametrize("scale, causal", TOGGLES)
def test_training_path_takes_the_fused_flash_kernel_without_padding(scale, causal, qk_norm):
    layer = make_layer(scale, causal, d_k=16, d_v=16, qk_norm=qk_norm)
    with profile() as prof:
        layer(torch.randn(2, 12, 32)).sum().backward()
    kernels = {event.key for event in prof.key_averages()}
    assert "aten::_scaled_dot_product_flash_attention_for_cpu" in kernels
    assert "aten::_scaled_dot_product_attention_math" not in kernels
    assert "aten::constant_pad_nd" not in kernels  # q, k, v reach the kernel as they are


def test_one_projection_matmul_gives_each_weight_its_own_gradient():
    layer, x = make_layer(True, True, d_k=24, d_v=8), torch.randn(2, 12, 32)
    layer(x).sum().backward()
    weights = [W.weight.detach().requires_grad_() for W in (layer.W_Q, layer.W_K, layer.W_V)]
    q, k, v = (x @ W.T for W in weights)  # the lesson's three projections
    layer.W_O(attention(q, k, v).output).sum().backward()
    for W, separate in zip((layer.W_Q, layer.W_K, layer.W_V), weights):
        torch.testing.assert_close(W.weight.grad, separate.grad)


def test_qk_norm_layer_norms_q_and_k_over_their_features_with_their_own_gains():
    layer, x = make_layer(True, True, d_k=16, d_v=8, qk_norm=True), torch.randn(2, 12, 32)
    probe = Probe()
    layer(x, probe=probe)
    q = F.layer_norm(layer.W_Q(x), (16,), layer.q_norm.weight)
    k = F.layer_norm(layer.W_K(x), (16,), layer.k_norm.weight)
    torch.testing.assert_close(probe.results[0].scores, attention(q, k, layer.W_V(x)).scores)


@pytest.mark.parametrize("scale", [True, False])
def test_qk_norm_bounds_the_scores_however_large_wq_and_wk_grow(scale):
    d_k = 16
    bound = (math.sqrt(d_k) if scale else d_k) * 2.0 * 2.0  # |LN(q)| <= sqrt(d_k); the gains are at most 2
    for qk_norm, bounded in ((True, True), (False, False)):
        layer = make_layer(scale, True, d_k=d_k, qk_norm=qk_norm)
        with torch.no_grad():
            layer.W_Q.weight.mul_(1000)
            layer.W_K.weight.mul_(1000)
        probe = Probe()
        layer(torch.randn(2, 12, 32), probe=probe)
        scores = probe.results[0].scores[probe.results[0].scores.isfinite()]
        assert (scores.abs().max() <= bound) == bounded


def test_softcap_squashes_the_scaled_scores_it_feeds_the_softmax():
    q, k, v = lesson_trace()
    capped = attention(q, k, v, softcap=1.0)
    plain = attention(q, k, v)
    finite = plain.scores.isfinite()
    torch.testing.assert_close(capped.scores[finite], torch.tanh(plain.scores[finite]))
    assert (capped.scores.isfinite() == finite).all()  # the mask comes after the cap
    torch.testing.assert_close(capped.weights, torch.softmax(capped.scores, -1))


@pytest.mark.parametrize("causal", [True, False])
def test_softcap_bounds_the_scores_even_for_huge_inputs(causal):
    layer = make_layer(False, causal, softcap=5.0)
    probe = Probe()
    layer(1e4 * torch.randn(2, 12, 32), probe=probe)
    scores = probe.results[0].scores[probe.results[0].scores.isfinite()]
    assert scores.abs().max() <= 5.0 and scores.abs().max() > 4.9  # capped, not merely small


@pytest.mark.parametrize("fused", [True, False])
@pytest.mark.parametrize("scale, causal", TOGGLES)
def test_softcap_layer_takes_the_reference_path_with_capped_scores(scale, causal, fused):
    layer, x = make_layer(scale, causal, d_k=24, d_v=8, softcap=2.0, fused=fused, qk_norm=True), torch.randn(2, 12, 32)
    probe = Probe()
    unrecorded, recorded = layer(x), layer(x, probe=probe)
    assert torch.equal(unrecorded, recorded)
    q, k = layer.q_norm(layer.W_Q(x)), layer.k_norm(layer.W_K(x))
    reference = attention(q, k, layer.W_V(x), scale=scale, causal=causal, softcap=2.0)
    torch.testing.assert_close(recorded, layer.W_O(reference.output))
    torch.testing.assert_close(probe.results[0].scores, reference.scores)


def projected_std(qk_init, d_model=256, d_k=256):
    torch.manual_seed(0)
    layer = layer_of(d_model=d_model, d_k=d_k, d_v=d_k, qk_init=qk_init)
    x = torch.nn.functional.layer_norm(torch.randn(64, d_model), (d_model,))
    return layer.W_Q(x).std().item(), layer.W_K.weight.std().item()


def test_unit_qk_init_gives_unit_variance_queries_on_layer_normed_inputs():
    q_std, w_std = projected_std(QKInit.unit)
    assert q_std == pytest.approx(1.0, rel=0.1)
    assert w_std == pytest.approx(256**-0.5, rel=0.05)


def test_gpt2_and_torch_qk_init_draw_small_weights():
    assert projected_std(QKInit.gpt2)[1] == pytest.approx(0.02, rel=0.05)
    # PyTorch's default: uniform with bound 1/sqrt(d_model), so std 1/sqrt(3 d_model)
    assert projected_std(QKInit.torch)[1] == pytest.approx((3 * 256) ** -0.5, rel=0.05)


def test_reweigh_mixes_the_values_with_the_weights_it_returns_and_the_layer_takes_that_path():
    torch.manual_seed(0)
    q, k, v = torch.randn(3, 5, 4), torch.randn(3, 5, 4), torch.randn(3, 5, 6)
    plain = attention(q, k, v)
    same = attention(q, k, v, reweigh=lambda weights: weights)
    assert torch.equal(same.output, plain.output) and torch.equal(same.weights, plain.weights)
    first_key = attention(
        q, k, v, reweigh=lambda weights: torch.zeros_like(weights).index_fill(-1, torch.tensor([0]), 1)
    )
    assert torch.allclose(first_key.output, v[:, :1].expand(-1, 5, -1))  # every query reads key 0 alone
    layer = layer_of(d_model=8, d_k=4, d_v=4)
    x = torch.randn(2, 5, 8)
    no_look = layer(x, probe=Probe({0: torch.zeros_like}))  # no look at all: nothing mixed, W^O of zero is zero
    assert torch.equal(no_look, torch.zeros_like(no_look))
    assert torch.allclose(layer(x, probe=Probe({0: lambda weights: weights})), layer(x), atol=1e-6)


def test_a_finite_mask_replaces_the_future_scores_with_its_value_and_leaves_the_allowed_ones():
    q, k, v = lesson_trace()
    plain, finite = attention(q, k, v), attention(q, k, v, mask_value=-1e4)
    future = torch.ones(3, 3, dtype=torch.bool).triu(diagonal=1)
    assert (finite.scores[future] == -1e4).all()  # replaced, as Hugging Face GPT-2 did with masked_bias: not added
    assert torch.equal(finite.scores[~future], plain.scores[~future])
    torch.testing.assert_close(finite.weights, plain.weights)  # exp(-1e4) is 0 beside scores near 1


def test_a_finite_mask_gives_the_future_the_weight_once_every_allowed_score_falls_below_it():
    # The allowed scores at -20000: below -1e4, so the "masked" keys win; minus infinity still gives them nothing.
    q, k, v = torch.full((4, 2), 100.0), torch.full((4, 2), -100.0), torch.randn(4, 3)
    beaten = attention(q, k, v, scale=False, mask_value=-1e4).weights
    assert beaten.triu(diagonal=1).sum(-1)[:-1].min() > 0.99  # every row with a future key reads the future
    assert (attention(q, k, v, scale=False).weights.triu(diagonal=1) == 0).all()


@pytest.mark.parametrize("mask_value", [None, float("-inf")])
@pytest.mark.parametrize("scale, causal", TOGGLES)
def test_fused_path_equals_reference_path_for_every_mask_value_both_can_write(scale, causal, mask_value):
    # The fused kernel's is_causal writes minus infinity (null says the same); unmasked, no value is written at all.
    layer, x = make_layer(scale, causal, mask_value=mask_value), torch.randn(3, 10, 32)
    probe = Probe()
    torch.testing.assert_close(layer(x), layer(x, probe=probe), atol=1e-5, rtol=1e-5)
    future = torch.ones(10, 10, dtype=torch.bool).triu(diagonal=1)
    assert probe.results[0].scores[0][future].isneginf().all() == causal


@pytest.mark.parametrize("fused", [True, False])
def test_a_finite_mask_trains_through_the_reference_path_whichever_kernel_is_asked_for(fused):
    layer, x = make_layer(True, True, mask_value=-1e4, fused=fused), torch.randn(2, 12, 32)
    with profile() as prof:
        y = layer(x)
        y.sum().backward()
    assert "aten::_scaled_dot_product_flash_attention_for_cpu" not in {event.key for event in prof.key_averages()}
    q, k, v = layer.project(x)
    torch.testing.assert_close(y, layer.W_O(attention(q, k, v, mask_value=-1e4).output))


def test_forcing_the_mask_on_writes_minus_infinity_whatever_the_layers_mask_value():
    layer, x = make_layer(True, True, mask_value=-1e4), torch.randn(2, 12, 32)
    with torch.no_grad():
        layer.W_Q.weight.copy_(-1e5 * layer.W_K.weight)  # q_0 . k_0 = -1e5 |k_0|^2: row 0 scores below the mask
    q, k, v = layer.project(x)
    true_mask = layer.W_O(attention(q, k, v).output)
    torch.testing.assert_close(layer(x, causal=True), true_mask)
    assert not torch.allclose(layer(x), true_mask)  # its own mask lets the future in


def test_a_training_forward_pass_on_the_reference_path_reads_what_its_mask_let_through():
    layer, x = make_layer(True, True, mask_value=-1e4, fused=False).eval(), torch.randn(2, 12, 32)
    with torch.no_grad():
        layer.train()(x)
    layer.eval()(x)
    assert layer.reading is None  # neither an evaluation nor a sample (no gradient) is a training step
    probe = Probe()
    layer.train()(x, probe=probe)
    assert layer.reading.hidden_mass.item() == 0
    assert layer.reading.allowed_min.item() == probe.results[0].scores.tril().min().item() > -1e4
    with torch.no_grad():
        layer.W_Q.weight.copy_(-1e5 * layer.W_K.weight)  # row 0's one allowed score below the mask
    layer(x)
    assert layer.reading.hidden_mass.item() > 0 and layer.reading.allowed_min.item() < -1e4


def test_without_projections_the_layer_scores_x_i_dot_x_j_and_mixes_the_x_j_themselves():
    for fused in (True, False):
        layer, x = layer_of(d_model=32, d_k=32, d_v=32, projections=False, fused=fused), torch.randn(2, 12, 32)
        assert list(layer.parameters()) == []  # no W^Q, W^K, W^V, W^O
        q, k, v = layer.project(x)
        assert q is x and k is x and v is x
        torch.testing.assert_close(layer(x), attention(x, x, x).output, atol=1e-5, rtol=1e-5)
