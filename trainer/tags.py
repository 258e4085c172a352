"""The TensorBoard tags a run writes that other code reads back (the sweep summary, the HParams tab), and the Custom
Scalars layout that puts the lesson's comparisons on shared axes."""

# Final values of these make a run's row in the sweep summary and its metrics in TensorBoard's HParams tab, whose
# first columns are the headline ones.
FINAL_TAGS = [
    "val/loss",
    "val/loss_causal",
    "attn/entropy",
    "attn/saturated_frac",
    "attn/jacobian_norm",
    "attn/logit_max",
    "train/loss",
]

# TensorBoard's Custom Scalars dashboard: each chart draws its tags (regular expressions) for every run on one set of
# axes, so a leak sweep shows the loss a model reports beside the honest one (mask forced on).
LAYOUT = {
    "the lesson": {
        "leak: val/loss (reported) and val/loss_causal (mask forced on)": [
            "Multiline", ["^val/loss$", "^val/loss_causal$"]
        ],
        "saturation: attention entropy, nats (0: every query reads one key)": ["Multiline", ["^attn/entropy$"]],
        "saturation: the gradient the softmax passes (Jacobian norm)": ["Multiline", ["^attn/jacobian_norm$"]],
    },
    "what the attention does": {
        "largest attention logit (scaled score)": ["Multiline", ["^attn/logit_max$"]],
        "share of queries with a max weight above 0.99": ["Multiline", ["^attn/saturated_frac$"]],
        "weight on future keys (0 under the causal mask)": ["Multiline", ["^attn/future_mass$"]],
        "train/loss": ["Multiline", ["^train/loss$"]],
        "gradient norms of W^Q, W^K, W^V before clipping": ["Multiline", ["^grad/"]],
    },
}  # fmt: skip
