"""The task is one seam: a task of these tests' own (predict the token two ahead), written in this file alone and
chosen by its settings (task.name=two_ahead), trains, evaluates and is read by the viewer; and the loss is the mean
over every scored token, however the micro-batches of a step split them."""

from dataclasses import replace

import pytest
import torch

from conftest import short_run
from model import ModelConfig, TinyLM, reads_only_the_past
from task import IGNORE, Batch, Task, register
from task.curves import AS_TRAINED_STRIP, MASK_PUT_BACK
from task.loss import mean_loss
from trainer.config import OptimConfig, TrainConfig, TrainerConfig
from trainer.step import TrainStep
from viewer.checkpoints import load
from viewer.predictions import predict
from viewer.readings import read
from viewer.words import NEXT_TOKEN, WORDS


@register
class TwoAhead(Task):
    """Each position is scored on the token two after it."""

    name = "two_ahead"
    honest = "val_causal"
    continues_text = False
    curves = {"val_causal": MASK_PUT_BACK}

    def span(self, block_size: int) -> int:
        return block_size + 2

    def batch(self, windows, generator) -> Batch:
        return Batch(windows[:, :-2], windows[:, 2:])

    def sees_targets(self, config) -> bool:
        return not reads_only_the_past(config)

    def target_key(self, query: int) -> int:
        return query + 2

    def targets(self, ids, following, hidden):
        return [*ids[2:], following, None][: len(ids)]

    def strips(self, config):
        return [AS_TRAINED_STRIP]

    def query_inputs(self, ids, queries):
        return torch.tensor([ids])

    def nothing_to_score(self, labels):
        return "two tokens or fewer: nothing two ahead to score"


# What the viewer says of it: the next token's words, but for its target and what a query without one lacks.
WORDS[TwoAhead.name] = replace(
    NEXT_TOKEN,
    target="token two ahead",
    missing="the text ends within two tokens",
    no_counterfactual="what the look contributes needs the token two ahead",
    too_short="two tokens or fewer: nothing two ahead to score",
)


@pytest.mark.slow
def test_a_task_of_its_own_trains_evaluates_and_is_read_through_the_seam(tmp_path, cache_dir):
    run_dir = tmp_path / "two_ahead"
    losses = short_run(run_dir, cache_dir, "task.name=two_ahead", "trainer.max_steps=20", "trainer.eval_interval=10")
    assert set(losses) == {"train", "val", "val_causal"} and losses["val"] < 4.0  # below a guess among 77 tokens
    checkpoint = load(run_dir / "last.pt")
    assert isinstance(checkpoint.task, TwoAhead) and checkpoint.step == 20
    reading = read(checkpoint, "To be, or not to be")
    assert reading.targets[:3] == reading.ids[2:5] and reading.targets[-2:] == [None, None]
    (strip,) = predict(checkpoint, reading).strips
    assert strip.losses[-2:] == [None, None] and all(loss is not None for loss in strip.losses[:-2])


def micro_batch_loss(labels: torch.Tensor, parts: int) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """The loss TrainStep returns and the gradients it leaves, for one batch in `parts` micro-batches."""
    torch.manual_seed(0)
    model = TinyLM(ModelConfig(vocab_size=20, block_size=8, d_model=16, d_k=16, d_v=16))
    config = TrainConfig(model=model.config, optim=OptimConfig(lr=0.0, grad_clip=0.0), trainer=TrainerConfig())
    config.trainer.grad_accum_steps = parts
    step = TrainStep.of(config, model, torch.optim.SGD(model.parameters(), lr=0.0))
    inputs = torch.randint(20, (4, 8), generator=torch.Generator().manual_seed(1))
    loss = step(inputs, labels, lr=0.0)
    return loss, [p.grad.clone() for p in model.parameters()]


def test_micro_batches_scoring_different_counts_give_the_whole_batchs_loss_and_gradients():
    labels = torch.randint(20, (4, 8), generator=torch.Generator().manual_seed(2))
    labels[0, 1:] = IGNORE  # the first micro-batch of two scores 1 + 8 tokens, the second 16
    whole, whole_gradients = micro_batch_loss(labels, 1)
    split, split_gradients = micro_batch_loss(labels, 2)
    assert split.item() == pytest.approx(whole.item(), abs=1e-6)
    for a, b in zip(whole_gradients, split_gradients):
        torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-5)
    inputs = torch.randint(20, (4, 8), generator=torch.Generator().manual_seed(1))
    torch.manual_seed(0)
    model = TinyLM(ModelConfig(vocab_size=20, block_size=8, d_model=16, d_k=16, d_v=16))
    assert whole.item() == pytest.approx(mean_loss(model(inputs), labels).item(), abs=1e-6)  # per scored token
