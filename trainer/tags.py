"""The TensorBoard tags a run writes that other code reads back: the sweep summary, the HParams tab."""

# Final values of these make a run's row in the sweep summary and its metrics in TensorBoard's HParams tab.
FINAL_TAGS = ["train/loss", "val/loss", "val/loss_causal", "attn/entropy", "attn/saturated_frac"]
