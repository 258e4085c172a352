import math

import pytest
import torch

from model import softmax_jacobian_norm


def autograd_norms(rows: torch.Tensor) -> torch.Tensor:
    """||d softmax(s) / ds||_F at each row's scores s, from autograd's Jacobian (float64)."""
    return torch.stack(
        [torch.autograd.functional.jacobian(lambda s: torch.softmax(s, -1), s).norm() for s in rows.double()]
    )


def test_matches_autograds_jacobian_on_random_and_causal_rows():
    scores = 3 * torch.randn(12, 12, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    causal = scores.masked_fill(torch.ones(12, 12, dtype=torch.bool).triu(1), float("-inf"))  # rows with zeros
    for rows in (scores, causal):
        expected = autograd_norms(rows).mean()
        torch.testing.assert_close(softmax_jacobian_norm(torch.softmax(rows, -1)), expected)


@pytest.mark.parametrize("gap", [8.0, 12.0, 20.0])
def test_stays_accurate_in_float32_on_nearly_one_hot_rows(gap):
    # One score `gap` above 63 others: sum p^2 - 2 sum p^3 + (sum p^2)^2 in float32 gives nan or noise here.
    scores = torch.randn(64, 64, generator=torch.Generator().manual_seed(1))
    scores[:, 0] += gap
    weights = torch.softmax(scores, -1)
    jacobians = torch.diag_embed(weights.double()) - weights.double()[:, :, None] * weights.double()[:, None, :]
    expected = jacobians.norm(dim=(-2, -1)).mean()  # the definition, in float64, at the same float32 weights
    torch.testing.assert_close(softmax_jacobian_norm(weights).double(), expected, rtol=1e-5, atol=0)


@pytest.mark.parametrize("n", [1, 2, 7, 64])
def test_uniform_row_over_n_keys_gives_sqrt_of_1_over_n_minus_1_over_n_squared(n):
    row = torch.full((1, n), 1 / n, dtype=torch.float64)
    assert softmax_jacobian_norm(row).item() == pytest.approx(math.sqrt(1 / n - 1 / n**2))


def test_one_hot_rows_give_zero():
    assert softmax_jacobian_norm(torch.eye(5)[[3, 0, 4]]).item() == 0.0


def test_averages_over_every_leading_dimension():
    weights = torch.softmax(torch.randn(2, 3, 4, 4, generator=torch.Generator().manual_seed(2)), -1)
    per_row = torch.stack([softmax_jacobian_norm(row) for row in weights.reshape(-1, 1, 4)])
    torch.testing.assert_close(softmax_jacobian_norm(weights), per_row.mean())
