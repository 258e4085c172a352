import json

import pytest
import torch
from hydra import compose, initialize_config_dir
from omegaconf import DictConfig
from torch.utils.flop_counter import FlopCounterMode

import bench
from benchmark.recurrence import growth_fit, layer_pass, recurrence_summary
from benchmark.report import check_targets
from benchmark.settings import Section
from benchmark.training import growth_exponent, training_flops_per_token
from conftest import ROOT, cli
from model import Mixer, ModelConfig, TinyLM
from task.loss import mean_loss
from trainer.config import ConfigError


def compose_bench(*overrides: str) -> DictConfig:
    with initialize_config_dir(config_dir=str(ROOT / "configs"), version_base="1.3"):
        return compose("bench", overrides=list(overrides))


def test_flops_per_token_counts_every_matmul_and_the_attention_over_all_keys():
    d, d_k, d_v, vocab, T, layers = 8, 4, 6, 10, 16, 2
    model = TinyLM(ModelConfig(vocab_size=vocab, block_size=T, d_model=d, d_k=d_k, d_v=d_v, n_layer=layers))
    per_layer = 2 * (d * d_k + d * d_k + d * d_v + d_v * d)  # W_Q, W_K, W_V, W_O
    per_layer += 2 * (d * 4 * d + 4 * d * d)  # the MLP
    per_layer += 2 * T * d_k + 2 * T * d_v  # q.k for T keys, then the weighted sum of T values
    forward = layers * per_layer + 2 * d * vocab  # and the LM head; the embeddings are lookups
    assert training_flops_per_token(model) == 3 * forward


def test_memory_growth_exponent_is_1_for_linear_and_2_for_quadratic_growth():
    assert growth_exponent({1024: 100.0, 2048: 200.0}) == pytest.approx(1.0)
    assert growth_exponent({2048: 400.0, 1024: 100.0}) == pytest.approx(2.0)
    assert growth_exponent({1024: 0.0, 2048: 200.0}) is None  # nothing measured at the smaller size


def test_targets_hold_or_fail_on_the_measured_ratios_and_are_left_open_when_not_measured():
    exponents = {
        "between": [1024, 2048],
        "step": {"fused": 0.9, "explicit": 1.4},
        "layer": {"fused": 1.0, "explicit": 1.9},
    }
    results = {
        "throughput": {"full_over_compute": 0.95},
        "startup": {"cold_s": 16.0, "warm_s": 2.0},
        "attention_summary": {"speedup": {"step": {256: 2.5, 1024: 1.7}}, "memory_exponent": exponents},
    }
    verdicts = [(target["measured"], target["holds"]) for target in check_targets(results)]
    assert verdicts == [
        ("95%", True),
        ("1.70x", False),
        ("exponent 0.90", True),
        ("exponent 1.40", False),
        ("exponent 1.00", True),
        ("exponent 1.90", True),
        ("2.00 s", True),
        ("16.00 s", False),
    ]
    verdicts = [target["holds"] for target in check_targets({"throughput": {"full_over_compute": 0.8}})]
    assert verdicts == [False] + [None] * 7


def test_bench_config_composes_the_train_groups_and_checks_the_bench_settings():
    config, settings = bench.to_bench_config(compose_bench("model.d_k=64", "bench.block_sizes=[64,128]"))
    assert config.model.d_k == 64 and config.trainer.batch_size == 32  # TrainConfig's defaults
    assert settings.block_sizes == [64, 128] and settings.sections == list(Section)
    with pytest.raises(ConfigError, match=r"^bench\.repats: Key 'repats' not in 'BenchSettings'"):
        bench.to_bench_config(compose_bench("+bench.repats=3"))
    with pytest.raises(ConfigError, match=r"bench\.repeats=0: must be positive"):
        bench.to_bench_config(compose_bench("bench.repeats=0"))
    with pytest.raises(
        ConfigError, match=r"bench\.attention_batch_size=8: must be a multiple of 16, trainer\.grad_acc"
    ):
        bench.to_bench_config(compose_bench("trainer.grad_accum_steps=16"))  # the step splits the batch in 16
    with pytest.raises(ConfigError, match=r"^optim\.lr=0\.0: must be positive"):
        bench.to_bench_config(compose_bench("optim.lr=0"))


@pytest.fixture(scope="module")
def bench_run(tmp_path_factory, cache_dir) -> tuple[dict, str]:
    """`python bench.py` at tiny sizes (in this process: conftest's cli): every section, one block size (1024) for
    the attention comparison, its training step on a batch of 4 (the attention layer's batch) rather than 32."""
    tmp = tmp_path_factory.mktemp("bench")
    text = tmp / "text.txt"
    text.write_text("To be, or not to be, that is the question.\n" * 500)
    finished = cli(
        "bench.py",
        "data=text",
        f"data.path={text}",
        f"data.cache_dir={cache_dir}",
        "model.d_model=16",
        "trainer.batch_size=4",
        "model.d_k=16",
        "model.d_v=16",
        "bench.warmup_steps=1",
        "bench.repeats=1",
        "bench.startup_repeats=1",
        "bench.repeat_seconds=0.01",
        "bench.block_sizes=[1024]",
        "bench.attention_batch_size=4",
        "bench.matmul_size=64",
        f"bench.json_path={tmp / 'out.json'}",
        f"hydra.run.dir={tmp / 'run'}",
    )
    assert finished.returncode == 0, finished.stderr
    return json.loads((tmp / "out.json").read_text()), finished.stdout


@pytest.mark.slow
def test_bench_writes_every_section_to_json_and_prints_it_as_tables(bench_run):
    results, printed = bench_run
    assert {
        "machine",
        "settings",
        "model",
        "throughput",
        "attention",
        "attention_summary",
        "recurrence",
        "recurrence_summary",
        "startup",
        "tokenization",
        "targets",
    } <= set(results)
    assert results["model"]["d_model"] == 16 and results["settings"]["sections"][0] == "throughput"
    throughput = results["throughput"]
    assert throughput["full_step_tokens_per_s"] > 0 and throughput["compute_tokens_per_s"] > 0
    assert throughput["mfu"] == pytest.approx(throughput["achieved_flops_per_s"] / throughput["matmul_flops_per_s"])
    assert [(row["block_size"], row["fused"]) for row in results["attention"]] == [(1024, True), (1024, False)]
    assert all(row["step_ms"] > 0 and row["layer_ms"] > 0 for row in results["attention"])
    assert set(results["attention_summary"]["speedup"]) == {"step", "layer"}
    assert [(row["kind"], row["length"]) for row in results["recurrence"]] == [
        ("attention", 1024),
        ("gru", 1024),
        ("lstm", 1024),
    ] and all(row["ms"] > 0 for row in results["recurrence"])
    assert set(results["recurrence_summary"]["over_attention"]) == {"gru", "lstm"}
    assert "| length | batch | attention ms | gru ms | lstm ms | gru / attention | lstm / attention |" in printed
    assert set(results["tokenization"]["mb_per_s"]) == {"bpe", "char"}
    assert 0 < results["startup"]["warm_s"] < 60 and 0 < results["startup"]["cold_s"] < 60
    assert "| training, full step (batch 4 x block 64), tokens/s |" in printed
    assert "| 1024 | 4 |" in printed and "| target (2-core CPU) | measured | holds |" in printed


@pytest.mark.slow
def test_explicit_path_holds_the_block_by_block_matrices_that_the_fused_kernel_never_stores(bench_run):
    results, _ = bench_run
    fused, explicit = results["attention"]
    one_matrix_mb = 4 * 1024 * 1024 * 4 / 2**20  # batch x T x T float32 scores
    assert explicit["step_peak_mb"] - fused["step_peak_mb"] > one_matrix_mb
    assert fused["layer_peak_mb"] < one_matrix_mb < explicit["layer_peak_mb"] - fused["layer_peak_mb"]


def test_flops_per_token_is_what_torch_counts_on_the_reference_path():
    model = TinyLM(ModelConfig(vocab_size=77, fused=False))  # the default size on the embedded corpus
    batch = torch.randint(77, (2, model.config.block_size + 1))
    with FlopCounterMode(display=False) as counter:
        mean_loss(model(batch[:, :-1]), batch[:, 1:]).backward()  # forward and backward, as a training step
    tokens = batch[:, :-1].numel()
    assert counter.get_total_flops() / tokens == training_flops_per_token(model) == 1_337_088


def test_growth_fit_is_the_exponent_of_a_power_law_through_the_points():
    assert growth_fit([64, 256, 1024], [1.0, 4.0, 16.0]) == pytest.approx(1.0)
    assert growth_fit([64, 128, 256], [2.0, 8.0, 32.0]) == pytest.approx(2.0)


def test_recurrence_summary_fits_each_kind_and_divides_each_recurrent_time_by_attentions():
    ms = {("attention", 64): 1.0, ("attention", 256): 16.0, ("gru", 64): 10.0, ("gru", 256): 40.0}
    rows = [{"kind": kind, "length": length, "ms": value} for (kind, length), value in ms.items()]
    summary = recurrence_summary(rows)
    assert summary["lengths"] == [64, 256] and summary["threads"] == torch.get_num_threads()
    assert summary["exponent"] == {"attention": pytest.approx(2.0), "gru": pytest.approx(1.0)}
    assert summary["over_attention"] == {"gru": {64: 10.0, 256: 2.5}}


@pytest.mark.parametrize("kind", ["attention", "gru", "lstm"])
def test_each_layer_pass_runs_forward_and_backward_at_the_same_width(kind):
    config, _ = bench.to_bench_config(compose_bench("model.d_model=16", "model.d_k=16", "model.d_v=16"))
    run = layer_pass(config, Mixer(kind), length=12, batch_size=2, device=torch.device("cpu"))
    run()
    layer_input = run.__closure__  # the pass holds its layer and its input, and gradients reach both
    tensors = [cell.cell_contents for cell in layer_input if isinstance(cell.cell_contents, torch.Tensor)]
    assert tensors and all(t.grad is not None and t.shape == (2, 12, 16) for t in tensors)
