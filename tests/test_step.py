"""The optimizer step: gradient accumulation, loss scaling for float16, and the precision a GPU must support."""

import pytest
import torch

from model import ModelConfig, TinyLM
from trainer.config import ConfigError, Precision
from trainer.step import TrainStep, check_precision, grad_scaler


def model_and_batch(seed: int = 0) -> tuple[TinyLM, torch.Tensor]:
    torch.manual_seed(seed)
    model = TinyLM(ModelConfig(vocab_size=50, block_size=16, d_model=32, d_k=32, d_v=32))
    return model, torch.randint(50, (8, 17), generator=torch.Generator().manual_seed(seed))


def gradients_of_one_step(grad_accum_steps: int) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
    model, batch = model_and_batch()
    optimizer = torch.optim.AdamW(model.parameters())
    grads = {}

    def keep_gradients() -> None:
        grads.update({name: p.grad.clone() for name, p in model.named_parameters()})

    train_step = TrainStep(model, optimizer, grad_clip=0.0, grad_accum_steps=grad_accum_steps)
    loss = train_step(batch[:, :-1], batch[:, 1:], lr=1e-3, on_gradients=keep_gradients)
    return grads, loss


@pytest.mark.parametrize("grad_accum_steps", [2, 4, 8])
def test_micro_batches_give_the_whole_batchs_gradients_and_loss(grad_accum_steps):
    whole, whole_loss = gradients_of_one_step(1)
    parts, parts_loss = gradients_of_one_step(grad_accum_steps)
    assert parts_loss == pytest.approx(float(whole_loss), rel=1e-6)
    for name, grad in whole.items():
        torch.testing.assert_close(parts[name], grad, rtol=1e-5, atol=1e-7, msg=name)


def test_grad_accum_steps_must_divide_the_batch():
    from conftest import compose_config
    from trainer.config import to_train_config

    with pytest.raises(ConfigError, match="trainer.grad_accum_steps=3: must divide trainer.batch_size=32"):
        to_train_config(compose_config("trainer.grad_accum_steps=3"))


def test_float16_loss_scaling_skips_a_step_whose_gradients_overflow_and_shrinks_the_scale():
    model, batch = model_and_batch()
    optimizer = torch.optim.AdamW(model.parameters())
    assert grad_scaler(torch.device("cpu"), Precision.fp16).is_enabled()
    assert not grad_scaler(torch.device("cpu"), Precision.bf16).is_enabled()
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**127)  # so large that the scaled gradients overflow
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    loss = TrainStep(model, optimizer, 1.0, Precision.fp16, scaler=scaler)(batch[:, :-1], batch[:, 1:], 1e-3)
    assert torch.isfinite(loss)  # the loss itself is fine: only its scaled gradients overflowed
    assert all(torch.equal(p, before[name]) for name, p in model.named_parameters())  # the update was skipped
    assert scaler.get_scale() == 2.0**126
    fitting = grad_scaler(torch.device("cpu"), Precision.fp16)  # 2^16: float16 gradients fit
    TrainStep(model, optimizer, 1.0, Precision.fp16, scaler=fitting)(batch[:, :-1], batch[:, 1:], 1e-3)
    assert not torch.equal(model.lm_head.weight, before["lm_head.weight"]) and fitting.get_scale() == 2.0**16


def test_bf16_on_a_gpu_without_it_is_refused_naming_the_alternative(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda including_emulation=True: False)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "Tesla T4")
    with pytest.raises(
        ConfigError,
        match=r"trainer.precision=bf16: Tesla T4 has no bfloat16 support; use "
        r"trainer.precision=fp16 \(float16 with loss scaling\) or fp32",
    ):
        check_precision(torch.device("cuda"), Precision.bf16)
    check_precision(torch.device("cuda"), Precision.fp16)  # float16 is every GPU's
    check_precision(torch.device("cpu"), Precision.bf16)  # the CPU emulates nothing: it has bfloat16 kernels
