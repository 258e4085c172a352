"""The TensorBoard tags a run writes that other code reads back (the sweep summary, the HParams tab), and the Custom
Scalars layout that puts the lesson's comparisons on shared axes."""

from task import TASKS, TaskConfig

SPLIT_TAGS = {"train": "train/loss_eval", "val": "val/loss"}  # an evaluation's loss on each split


def loss_tag(key: str) -> str:
    """The tag of an evaluation's loss: "train" and "val" the splits', "val_NAME" a task's extra curve val/loss_NAME."""
    return SPLIT_TAGS.get(key) or f"val/loss_{key.removeprefix('val_')}"


# Every task's extra curves, each tag once: the default task's first (a plain run's headline), then the others'.
_TASK_ORDER = sorted(TASKS.values(), key=lambda task: task.name != TaskConfig.name)
CURVE_TAGS = list(dict.fromkeys(loss_tag(key) for task in _TASK_ORDER for key in task.curves))

# Final values of these make a run's row in the sweep summary and its metrics in TensorBoard's HParams tab, whose
# first columns are the headline ones. A run that does not log a tag (only data=copy logs val/loss_far, only the
# reference path attn/train_*, no recurrent model attn/*) leaves its cell empty.
FINAL_TAGS = [
    "val/loss",
    *CURVE_TAGS,
    "attn/entropy",
    "attn/saturated_frac",
    "attn/jacobian_norm",
    "attn/logit_max",
    "attn/self_weight",
    "attn/train_future_mass",
    "attn/train_mask_margin",
    "train/loss",
]


def chart(*tags: str) -> list:
    """A Custom Scalars chart: these tags (regular expressions, matched whole) of every run on one set of axes."""
    return ["Multiline", [f"^{tag}$" for tag in tags]]


# TensorBoard's Custom Scalars dashboard: each chart draws its tags for every run on one set of axes, so a leak sweep
# shows the loss a model reports beside the honest one (mask forced on).
LAYOUT = {
    "the lesson": {
        "leak: val/loss (reported) and val/loss_causal (mask forced on)": chart("val/loss", "val/loss_causal"),
        "attention entropy, nats (0: every query reads one key)": chart("attn/entropy"),
        "the gradient the softmax passes (Jacobian norm)": chart("attn/jacobian_norm"),
        "finite mask: weight on future keys in the training forward pass": chart("attn/train_future_mass"),
        "finite mask: smallest allowed score above the mask value (below 0: the future wins)": chart(
            "attn/train_mask_margin"
        ),
        "finite mask: smallest allowed score the softmax is fed": chart("attn/train_allowed_min"),
        "projections: the weight a query puts on itself (the diagonal)": chart("attn/self_weight"),
        "recurrence: loss where the next token is the one data.distance back": chart("val/loss_far"),
        "encoder: one blank with every other token in view (val/loss_one_blank) beside val/loss and the right side "
        "hidden (val/loss_causal)": chart("val/loss_one_blank", "val/loss", "val/loss_causal"),
        "encoder: the scored tokens hidden (val/loss_hidden), which copying cannot fake, beside val/loss": chart(
            "val/loss_hidden", "val/loss"
        ),
        "encoder: weight on the left (past keys) and on the right (future keys)": chart(
            "attn/past_mass", "attn/future_mass"
        ),
        "masks: the prefix LM with its prefix closed (val/loss_closed), the same weights, beside val/loss": chart(
            "val/loss_closed", "val/loss"
        ),
    },
    "what the attention does": {
        "largest attention logit (scaled score)": chart("attn/logit_max"),
        "share of queries with a max weight above 0.99": chart("attn/saturated_frac"),
        "weight on future keys (0 under the causal mask)": chart("attn/future_mass"),
        "train/loss": chart("train/loss"),
        "gradient norms of W^Q, W^K, W^V before clipping": ["Multiline", ["^grad/"]],
    },
}


# The tags each preset's lesson is read from, in the order its sweep's Custom Scalars shows their charts.
PRESET_TAGS = {
    "leak": ["val/loss", "attn/entropy", "attn/future_mass"],
    "saturation": ["attn/entropy", "attn/jacobian_norm", "attn/logit_max"],
    "ablation": ["val/loss", "attn/entropy", "attn/jacobian_norm"],
    "init": ["attn/entropy", "attn/jacobian_norm", "attn/logit_max"],
    "lr_sensitivity": ["attn/logit_max", "attn/entropy", "attn/jacobian_norm"],
    "finite_mask": ["attn/train_future_mass", "attn/train_mask_margin", "attn/train_allowed_min", "val/loss"],
    "projections": ["attn/self_weight", "val/loss"],
    "recurrence": ["val/loss_far", "val/loss"],
    "search": ["val/loss"],
    "encoder": ["val/loss_one_blank", "val/loss_hidden", "attn/past_mass"],
    "masks": ["val/loss", "val/loss_closed", "attn/past_mass"],
    "order": ["val/loss", "val/loss_one_blank", "attn/self_weight"],
}

PREFIXES = {name.replace("_", " ") for name in PRESET_TAGS}  # "finite mask: ..." names the preset a chart is for


def layout(overrides: list[str]) -> dict:
    """LAYOUT as a run with these command-line overrides writes it: a preset's sweep opens on a section of its own
    charts, named after it and titled without it (a leak sweep on its losses, not on another preset's charts); the
    others follow."""
    presets = [item.split("=", 1)[1] for item in overrides if item.lstrip("+").startswith("experiment=")]
    tags = PRESET_TAGS.get(presets[0], []) if presets else []
    charts = {title: chart for section in LAYOUT.values() for title, chart in section.items()}
    own = [title for tag in tags for title in charts if charts[title][1][0] == f"^{tag}$"]
    if not own:
        return LAYOUT
    rest = {name: {title: c for title, c in section.items() if title not in own} for name, section in LAYOUT.items()}
    first = {
        title.partition(": ")[2] if title.partition(": ")[0] in PREFIXES else title: charts[title] for title in own
    }
    return {presets[0]: first} | {name: section for name, section in rest.items() if section}
