"""The lesson's claims that the finite_mask, projections and recurrence presets measure, each pinned by its direction
on a tiny run (not its size: the presets' sizes are in docs/experiments.md)."""

import pytest

from conftest import BLANKS, curve, events, short_run

# A tiny copy task: windows of 16 tokens, distances 2 and 14, 100 steps: by then the GRU reads the token 2 back far
# better than the one 14 back, in every seed tried.
COPY = ["data=copy", "model.block_size=16", "model.d_model=32", "model.d_k=32", "model.d_v=32", "optim.lr=1e-2",
        "trainer.max_steps=100", "trainer.eval_interval=50", "trainer.eval_iters=8"]  # fmt: skip


THIRTY = ["trainer.max_steps=30", "trainer.eval_interval=15"]  # half a short run, evaluated as often


def final(run_dir, tag: str) -> float:
    return curve(events(run_dir), tag)[-1][1]


@pytest.mark.slow
def test_a_finite_mask_the_scores_reach_is_beaten_in_training_and_minus_infinity_never_is(tmp_path, cache_dir):
    # -2 stands in for -1e4 at a size where the scores reach it in 30 steps; both train through the reference path.
    for name, mask in (("finite", "-2"), ("true", "-inf")):
        short_run(tmp_path / name, cache_dir, "model.fused=false", f"model.mask_value={mask}", *THIRTY)
    finite, true = events(tmp_path / "finite"), events(tmp_path / "true")
    assert max(value for _, value in curve(finite, "attn/train_future_mass")) > 0  # the future got weight
    assert min(value for _, value in curve(finite, "attn/train_mask_margin")) < 0  # an allowed score below -2
    assert {value for _, value in curve(true, "attn/train_future_mass")} == {0.0}
    assert "attn/train_mask_margin" not in true.Tags()["scalars"]
    # Evaluated with the true mask too: for minus infinity that is its own loss.
    assert curve(true, "val/loss_causal") == curve(true, "val/loss")
    assert [step for step, _ in curve(finite, "val/loss_causal")] == [0, 15, 30]


@pytest.mark.slow
def test_without_projections_each_query_puts_more_weight_on_itself(tmp_path, cache_dir):
    for projections in (True, False):  # 30 steps: the gap is as wide then, in every seed tried
        short_run(tmp_path / str(projections), cache_dir, f"model.projections={projections}", "model.d_k=64",
                  "model.d_v=64", *THIRTY)  # fmt: skip
    assert final(tmp_path / "False", "attn/self_weight") > final(tmp_path / "True", "attn/self_weight")


@pytest.mark.slow
def test_recurrence_reads_a_token_2_back_better_than_one_14_back_and_logs_no_attention(tmp_path, cache_dir):
    for distance in (2, 14):
        short_run(tmp_path / str(distance), cache_dir, *COPY, "model.mixer=gru", f"data.distance={distance}")
    assert final(tmp_path / "2", "val/loss_far") < final(tmp_path / "14", "val/loss_far")
    tags = events(tmp_path / "2").Tags()["scalars"]
    assert {"val/loss", "val/loss_causal", "val/loss_far", "train/loss"} <= set(tags)
    assert not [tag for tag in tags if tag.startswith(("attn/", "grad/"))]  # no attention to read


@pytest.mark.slow
def test_a_blank_filler_reads_the_right_side_one_reading_the_left_cannot_and_one_shown_its_tokens_copies(
    tmp_path, cache_dir, blank_run_dir
):
    # The left side's claim is an identity, true at any step; copying is learnt in a fifth of the steps.
    runs = {
        "left": ["model.causal=true", "trainer.max_steps=20", "trainer.eval_interval=10"],
        "shown": ["model.causal=false", "task.hide=false", "trainer.max_steps=60", "trainer.eval_interval=30"],
    }
    for name, settings in runs.items():
        short_run(tmp_path / name, cache_dir, *BLANKS, *settings)
    both, left, shown = events(blank_run_dir), *(events(tmp_path / name) for name in runs)
    # Both sides: the true mask put back at evaluation hides the right side, and the loss rises.
    assert curve(both, "val/loss_causal")[-1][1] > curve(both, "val/loss")[-1][1] + 0.05
    # The left alone: the mask is its own, so putting it back changes nothing.
    assert curve(left, "val/loss_causal") == curve(left, "val/loss")
    # Shown its tokens: it copies them (val/loss near 0) while the same tokens hidden (val/loss_hidden) stay far above.
    assert curve(shown, "val/loss")[-1][1] < 0.5 < curve(shown, "val/loss_hidden")[-1][1] - 1.0
    assert curve(both, "val/loss_hidden") == curve(both, "val/loss")  # its scored tokens are hidden already
