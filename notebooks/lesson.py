# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Self-attention, trained: the lesson as a notebook
#
# The lesson *Transformers and Self-Attention* builds attention step by step: a query scored against keys, the scores
# divided by $\sqrt{d_k}$, a softmax into weights, the values mixed in those proportions, and a causal mask for a
# language model. This notebook runs its arguments with tinylm, a language model whose core is one single-head
# self-attention layer trained on Shakespeare:
#
# 1. the numeric trace of the lesson, on its own numbers;
# 2. **the leak**: the same model trained with and without the causal mask;
# 3. **saturation**: the scores left undivided by $\sqrt{d_k}$, at one width;
# 4. the Attention panel, on a sentence you type;
# 5. the other side of the switch: the layer without the mask, as an encoder filling in blanks;
# 6. TensorBoard inside the notebook, with its Attention tab;
# 7. the leaky model opened in TransformerLens;
# 8. the leak's numbers, read back from the runs' files.
#
# Every run here is a run of `train.py` (`lab.train("+experiment=leak")` is `python train.py +experiment=leak`): it
# writes its own directory under `multirun/` beside this notebook, which TensorBoard, `report.py` and `attend.py` read
# as any other. A progress bar shows each run; its log goes to its `train.log`. Interrupt the kernel (■) to stop a
# run: it saves a checkpoint first, as Ctrl-C does, and says how to resume it.

# %% [markdown]
# ## Setup
#
# Where tinylm is not installed (Colab), this cell gets it: set `REPOSITORY` to the git URL you clone tinylm from, or
# leave it empty and upload the repository as `tinylm.zip` beside the notebook first (`docs/notebook.md`).
# Installed, it only makes tinylm's modules importable from its repository.

# %%
import importlib.util
import subprocess
import sys
import zipfile
from pathlib import Path

REPOSITORY = ""  # a git URL of tinylm, where it is not installed; "" to use an uploaded tinylm.zip instead

if importlib.util.find_spec("tensorboard_plugin_tinylm") is None:
    if REPOSITORY:
        subprocess.run(["git", "clone", "--depth=1", REPOSITORY, "tinylm"], check=True)
        source = Path("tinylm")
    else:
        zipfile.ZipFile("tinylm.zip").extractall("tinylm-zip")
        source = next(Path("tinylm-zip").glob("**/train.py")).parent
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "-e", str(source), "anywidget"], check=True)
    sys.path.insert(0, str(source.resolve()))  # this kernel started before the install

from tensorboard_plugin_tinylm.sources import use_sources

use_sources()  # tinylm's modules (lab, model, viewer, ...) importable from its repository

import lab

size = lab.size()
print(size)

# %% [markdown]
# Each experiment below runs at the size printed above: on a GPU each preset's own size; on a CPU 300 steps an
# experiment, so that each takes about a minute on 2 cores (`docs/notebook.md` has their times).
#
# ## 1. The numeric trace, on the lesson's numbers
#
# Three tokens, $d_k = d_v = 2$, and the output $\mathbf{y}_3$ of the third position. The lesson gives
# $\mathbf{q}_3 = (1, 1)$, the keys $(1,0), (0,1), (1,1)$ and the values $(1,0), (0,2), (2,2)$; the queries of
# positions 1 and 2 are not given, so any will do. `attention()` is the function tinylm's layer computes with.

# %%
import torch

from model import attention

q = torch.tensor([[0.3, -0.2], [0.5, 0.1], [1.0, 1.0]])  # q_1, q_2: any; q_3 = (1, 1)
k = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
v = torch.tensor([[1.0, 0.0], [0.0, 2.0], [2.0, 2.0]])

scaled = attention(q, k, v, scale=True, causal=True)
print("step 1, score q3·kj:        ", scaled.raw[2].tolist())
print("step 2, divided by √2:      ", [round(x, 3) for x in scaled.scores[2].tolist()])
print("step 3, softmax:            ", [round(x, 3) for x in scaled.weights[2].tolist()])
print("step 4, y3 = Σ a3j vj:      ", [round(x, 3) for x in scaled.output[2].tolist()])
unscaled = attention(q, k, v, scale=False, causal=True)
print("softmax of the raw scores:  ", [round(x, 3) for x in unscaled.weights[2].tolist()], "(sharper, unscaled)")
print("row 1 with the causal mask: ", [round(x, 3) for x in scaled.weights[0].tolist()], "(keys 2 and 3 get 0)")

# %% [markdown]
# The lesson's one-sigma argument: two keys whose raw scores differ by one standard deviation, $\sqrt{d_k}$. Unscaled,
# the winner's weight climbs to 1 as $d_k$ grows; scaled, it stays at 0.73 at every width.

# %%
for d_k in (4, 16, 64, 1024):
    query = torch.ones(1, d_k, dtype=torch.float64)
    keys = torch.stack([torch.ones(d_k, dtype=torch.float64) / d_k**0.5, torch.zeros(d_k, dtype=torch.float64)])
    values = torch.eye(2, dtype=torch.float64)
    raw = attention(query, keys, values, scale=False, causal=False).weights[0, 0].item()
    divided = attention(query, keys, values, scale=True, causal=False).weights[0, 0].item()
    print(f"d_k {d_k:5}: the winner's weight {raw:.4f} unscaled, {divided:.2f} scaled")

# %% [markdown]
# ## 2. The leak: the causal mask on and off
#
# `+experiment=leak` trains the same model twice, with the mask (`model.causal=true`) and without it. Without it,
# position $i$ reads position $i+1$, the very token it is asked to predict: its `val/loss` falls towards zero, while
# `val/loss_causal`, the same model evaluated with the mask put back, ends worse than a uniform guess among the
# corpus's 77 characters ($\ln 77 = 4.34$ nats). The table keeps the columns this section reads: both losses and the
# attention entropy, which collapses without the mask (each query reads one key). Interrupted (■), the sweep's runs
# stop with their checkpoints and the cell says how to finish them; the cells that read the sweep say it is
# unfinished until then.

# %%
from IPython.display import display

leak = lab.train("+experiment=leak", *size.overrides)
display(*lab.summary(leak, "val/loss", "val/loss_causal", "attn/entropy"))

# %% [markdown]
# ## 3. Saturation at one width
#
# With unit-variance queries and keys, unscaled scores have standard deviation $\sqrt{d_k}$: at $d_k = 256$ the
# softmax of the unscaled model puts almost all of each query's weight on one key (its attention entropy near zero),
# and its gradients through the other keys vanish (the Jacobian norm, the gradient the softmax passes back, near 0).
# The scaled twin is trained beside it.

# %%
saturation = lab.train("+experiment=saturation", "model.d_k=256", *size.overrides)
display(*lab.summary(saturation, "val/loss", "attn/entropy", "attn/saturated_frac", "attn/jacobian_norm"))

# %% [markdown]
# ## 4. The Attention panel, on a sentence you type
#
# The panel of TensorBoard's Attention tab, here in the notebook: type in the box, point at a row of a heat map (a
# query) or at a token of a loss strip, click to keep it. Under each heat map the lesson's steps for that query, each
# token's loss as trained and with the mask put back, the query's prediction, and what its look contributes; a slider
# per panel goes back through the checkpoints the run kept. Point at a query of the unmasked run: its weight sits on
# the next token, the one it predicts.

# %%
from tensorboard_plugin_tinylm.widget import AttentionPanel

AttentionPanel(lab.finished(leak))

# %% [markdown]
# ## 5. The other side of the switch: filling in blanks
#
# Without the mask, the layer is what an encoder uses: it reads both sides. `+experiment=encoder` trains four runs;
# here two of them: (a) the causal language model, predicting each next token from its left, and (b) a model that
# fills in blanks (40% of each window hidden) reading both sides of each blank. (b)'s `val/loss_one_blank` hides one
# token of each window with every other in view, the number to set beside (a)'s `val/loss`; the cell after the
# figure prints both, and their difference at this size.
#
# Expect (b) to be above (a) here: that says the blank-filler learns more slowly, not
# that reading both sides hurts. A next-token model scores every position of a window, each with its whole left
# context; the blank-filler scores the 40% it hid, and its blanks hide 40% of the context around each. BERT's authors
# found the same (a masked language model converges more slowly than a left-to-right one, their appendix C.1). At the
# preset's 1500 steps (a) still leads; at 3000 the two are level, (b) lower in one seed of three. What reading the
# right side is worth is (b) against (c), the same task read from the left only: (b) is lower, in every seed
# (`docs/experiments.md`, the encoder section).

# %%
encoder = lab.train("+experiment=encoder", "+encoder=a_next_token,b_both_sides", *size.overrides)
display(*lab.summary(encoder, "val/loss", "val/loss_one_blank", "val/loss_causal"))

# %%
from summary.runs import read_runs

by_run = {run.settings["encoder"]: run for run in read_runs([lab.finished(encoder)])}
next_token, one_blank = by_run["a_next_token"].final("val/loss"), by_run["b_both_sides"].final("val/loss_one_blank")
print(f"(a) the next token from its left:      val/loss           {next_token:.3f} nats a token")
print(f"(b) a lone blank from both of its sides: val/loss_one_blank {one_blank:.3f} nats a token")
print(f"(b) less (a): {one_blank - next_token:+.3f} nats a token, at this size")

# %% [markdown]
# The panel on these two runs: in (b)'s panel type `_` for a blank (the panel draws it as □), or shift-click a token
# to hide it, and see which side of the blank it reads.

# %%
AttentionPanel(lab.finished(encoder))

# %% [markdown]
# ## 6. TensorBoard, inside the notebook
#
# The leak's two runs in TensorBoard: Custom Scalars puts both losses of each run on one chart (its `leak` section),
# the Images tab shows the attention patterns, and the Attention tab is the panel above. For the other runs, give
# `--logdir` their directory (`saturation`, `encoder`) or all of `multirun`.

# %%
import os
import shutil

beside = Path(sys.executable).with_name("tensorboard")  # a virtual environment's, where its bin/ is not on PATH
if not shutil.which("tensorboard") and beside.exists():
    os.environ["TENSORBOARD_BINARY"] = str(beside)
logdir = lab.finished(leak)
# %load_ext tensorboard
# %tensorboard --logdir {logdir} --samples_per_plugin images=1000

# %% [markdown]
# ## 7. The leaky model in TransformerLens
#
# TransformerLens is the library the field uses to take a model apart (caches, hooks, patching). tinylm's optional
# extra `lens` opens a run in it with its tokenizer, in one call (`open_run`, `docs/transformer-lens.md`): a run
# with d_k = d_v and no QK-norm: of this notebook's six runs, the leak's two. Saturation's (d_k 256 beside d_v 128)
# and the encoder's (QK-norm) are refused in one line naming the setting. Without the extra this cell says so and goes
# on.

# %%
import matplotlib.pyplot as plt

from viewer.checkpoints import choose, load

TEXT = "To be, or not to be, that is the question:"
try:
    from viewer.lens import open_run
except ModuleNotFoundError as missing:
    print(f"skipped: {missing}")
else:
    unmasked = next(lab.finished(leak).glob("*model.causal=False"))
    model = open_run(unmasked)  # its best.pt, with the tokenizer it was trained with
    tokens = model.to_tokens(TEXT)
    logits, cache = model.run_with_cache(tokens)
    pattern = cache["blocks.0.attn.hook_pattern"][0, 0]  # row i: query i's weights over the keys
    with torch.no_grad():
        tinylm = load(choose(unmasked).path).model
        print(f"TransformerLens's logits are tinylm's to {(logits - tinylm(tokens)).abs().max():.1e}")
    print(f"each query's weight on the next token, the one it predicts: {pattern.diagonal(1).mean():.2f} on average")
    print("the tokens it read:", model.to_str_tokens(TEXT)[:8], "...")
    plt.imshow(pattern, cmap="Blues", vmin=0, vmax=1)
    plt.xlabel("key j")
    plt.ylabel("query i")
    plt.title("blocks.0.attn.hook_pattern, the unmasked run")
    plt.show()

# %% [markdown]
# ## 8. The leak's numbers, read back
#
# The last evaluation of each run of the leak, from its TensorBoard events: the unmasked run's `val/loss` is the
# lowest, and its `val/loss_causal`, the same model with the mask put back, the highest.

# %%
leak_losses = {
    ("masked" if run.settings["model.causal"] else "unmasked"): {
        tag: round(value, 4) for tag in ("val/loss", "val/loss_causal") if (value := run.final(tag)) is not None
    }
    for run in read_runs([lab.finished(leak)])
}
leak_losses
