"""The TensorBoard tags a run writes that other code reads back (the sweep summary, the HParams tab), and the Custom
Scalars layout that puts the lesson's comparisons on shared axes."""

# Final values of these make a run's row in the sweep summary and its metrics in TensorBoard's HParams tab.
FINAL_TAGS = [
    "train/loss",
    "val/loss",
    "val/loss_causal",
    "attn/entropy",
    "attn/saturated_frac",
    "attn/jacobian_norm",
    "attn/logit_max",
]

# TensorBoard's Custom Scalars dashboard: each chart draws its tags (regular expressions) for every run on one set of
# axes, so a leak sweep shows the honest loss (mask forced on) beside the one the model reports.
LAYOUT = {
    "the lesson": {
        "leak: val/loss (reported) against val/loss_causal (mask forced on), train/loss": [
            "Multiline", ["^val/loss$", "^val/loss_causal$", "^train/loss$"]
        ],
        "saturation: attention entropy (nats) and the share of rows with a max weight > 0.99": [
            "Multiline", ["^attn/entropy$", "^attn/saturated_frac$"]
        ],
    },
    "what the attention does": {
        "attention logits: largest and spread of the scaled scores": ["Multiline", ["^attn/logit_max$", "^attn/logit_std$"]],
        "weight on future keys (0 under the causal mask)": ["Multiline", ["^attn/future_mass$"]],
        "gradient norms of W^Q, W^K, W^V before clipping": ["Multiline", ["^grad/"]],
    },
}  # fmt: skip
