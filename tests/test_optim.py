import pytest

from conftest import compose_config
from trainer.config import to_train_config
from trainer.optim import learning_rate


def test_learning_rate_warms_up_linearly_then_decays_to_min_lr():
    optim = to_train_config(compose_config("optim.lr=1.0", "optim.min_lr=0.1", "optim.warmup_steps=10")).optim
    lrs = [learning_rate(step, optim, 110) for step in range(1, 111)]
    assert lrs[:10] == pytest.approx([0.1 * i for i in range(1, 11)])
    assert lrs[59] == pytest.approx(0.55)  # half way through the cosine
    assert lrs[-1] == pytest.approx(0.1)
    assert all(a >= b for a, b in zip(lrs[9:], lrs[10:]))
