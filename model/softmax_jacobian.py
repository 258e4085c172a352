"""How much the softmax still passes on: the size of its Jacobian at the attention weights, without a backward."""

from torch import Tensor


def softmax_jacobian_norm(weights: Tensor) -> Tensor:
    """Mean over query rows p of weights (..., T) of ||diag(p) - p p^T||_F: 0 for a one-hot row, sqrt(1/n - 1/n^2)
    for a uniform row over n keys.

    ||J||_F^2 = sum_i p_i^2 (1 - p_i)^2 (the diagonal) + sum_{i != j} p_i^2 p_j^2, which is
    sum p^2 - 2 sum p^3 + (sum p^2)^2. That last form subtracts numbers near 1 for a nearly one-hot row and
    in float32 comes out negative (nan) there, exactly where saturation is studied; so the off-diagonal sum
    is split around each row's largest weight p_t, with r_j = p_j^2 for the other keys:
    2 p_t^2 sum r + (sum r)^2 - sum r^2, every term small when the row is nearly one-hot.
    """
    top = weights.argmax(-1, keepdim=True)
    rest = weights.scatter(-1, top, 0.0).square()  # r_j: the squared weights of every key but the largest
    rest_sum = rest.sum(-1)
    top_squared = weights.gather(-1, top).squeeze(-1).square()
    diagonal = (weights * (1 - weights)).square().sum(-1)
    off_diagonal = 2 * top_squared * rest_sum + rest_sum.square() - rest.square().sum(-1)
    return (diagonal + off_diagonal).sqrt().mean()
