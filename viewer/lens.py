"""A TinyLM opened in TransformerLens (tinylm's optional extra: pip install -e ".[lens]"), so that its caches, hooks
and patching read a tinylm run: a run's directory or checkpoint in one call (`open_run`), or any TinyLM
(`transformer_lens_model`).

TransformerLens 4 removed HookedTransformer; a model of one's own goes through its TL-native model
(`TransformerBridge.boot_native`), built offline, into which the TinyLM's weights are copied. Only the model's config,
state_dict and LayerNorm eps are read. The run's tokenizer goes with it, wrapped as the HuggingFace tokenizer
TransformerLens takes (`PreTrainedTokenizerFast` around the `tokenizers` one), so that `to_tokens`, `to_str_tokens`
and `generate` work. What TransformerLens cannot compute as tinylm does is refused, each setting named
(`lens_problems`), and so is a run with no checkpoint to read: one line, which a notebook shows alone (`Refused`).
"""

import math
from pathlib import Path

import torch
from tokenizers import Tokenizer
from torch import Tensor

from model.attention import mask_value
from model.config import Mixer, ModelConfig
from model.tinylm import TinyLM
from trainer.checkpoint import CheckpointError
from trainer.config import ConfigError
from viewer.checkpoints import load, named_checkpoint

try:
    from transformer_lens.config import TransformerBridgeConfig
    from transformer_lens.model_bridge import TransformerBridge
    from transformer_lens.model_bridge.generalized_components import NormalizationBridge
    from transformers import PreTrainedTokenizerFast
except ModuleNotFoundError as missing:
    raise ModuleNotFoundError(
        f'{missing}: TransformerLens is tinylm\'s optional extra: pip install -e ".[lens]"'
    ) from missing


class Refused(ConfigError):
    """A run or model TransformerLens cannot open as tinylm computes it, in one line naming why; IPython shows the
    line alone, as it does lab.RunFailed's, instead of a traceback."""

    def _render_traceback_(self) -> list[str]:
        return [str(self)]


def open_run(run: str | Path) -> TransformerBridge:
    """The model of a run's directory (its best.pt, else its last.pt, the first whole one) or of a checkpoint file,
    opened in TransformerLens with its tokenizer; a Refused line where there is none to read or TransformerLens cannot
    represent it."""
    try:
        checkpoint = load(named_checkpoint(str(run), "run").path)
    except CheckpointError as error:
        raise Refused(str(error)) from None
    return transformer_lens_model(checkpoint.model, checkpoint.tokenizer)


def lens_problems(config: ModelConfig) -> list[str]:
    """The settings of `config` that TransformerLens's native model cannot compute as tinylm does, one line each."""
    problems = []
    if config.mixer is not Mixer.attention:
        problems.append(f"model.mixer={config.mixer.value}: TransformerLens has attention blocks only")
    if config.d_k != config.d_v:
        problems.append(
            f"model.d_k={config.d_k} with model.d_v={config.d_v}: TransformerLens has one width, d_head, for q, k and v"
        )
    if config.causal and mask_value(config) > -math.inf:
        problems.append(f"model.mask_value={config.mask_value:g}: TransformerLens masks the future with -inf only")
    if config.qk_norm:
        problems.append("model.qk_norm=True: TransformerLens's native attention has no norm of q and k")
    return problems


def transformer_lens_model(model: TinyLM, tokenizer: Tokenizer | None = None) -> TransformerBridge:
    """`model` as TransformerLens's native model, in eval mode on the model's device, with the same logits: the same
    weights, zero biases where tinylm has none; with `tokenizer`, the one it was trained with, its text calls work.
    A Refused line names each setting it cannot represent."""
    problems = lens_problems(model.config)
    if problems:
        raise Refused("; ".join(problems))
    own = model.state_dict()
    device = own["lm_head.weight"].device
    bridge = TransformerBridge.boot_native(lens_config(model), tokenizer=wrapped(tokenizer), device=device)
    weights = {
        "embed.weight": own["token_embedding.weight"],
        "pos_embed.weight": own["position_embedding.weight"],
        "ln_final.weight": own["ln_f.weight"],
        "ln_final.bias": own["ln_f.bias"],
        "unembed.weight": own["lm_head.weight"],
        "unembed.bias": own["lm_head.weight"].new_zeros(model.config.vocab_size),  # tinylm's head has no bias
    }
    for n in range(model.config.n_layer):
        weights |= block_weights(own, n, model.config)
    bridge.load_state_dict(weights, strict=True)
    compute_as_tinylm(bridge, model.config)
    return bridge.eval()


def wrapped(tokenizer: Tokenizer | None) -> PreTrainedTokenizerFast | None:
    """tinylm's tokenizer as the HuggingFace one TransformerLens takes. Its padding, where texts of several lengths
    are tokenized together, is the token of id 0; TransformerLens adds an end-of-text token after tinylm's vocabulary,
    which the model never predicts, so generation runs its whole length."""
    if tokenizer is None:
        return None
    return PreTrainedTokenizerFast(tokenizer_object=tokenizer, pad_token=tokenizer.id_to_token(0))


def lens_config(model: TinyLM) -> TransformerBridgeConfig:
    """TransformerLens's settings for `model`: one head of width d_k, pre-LayerNorm blocks, learned positions."""
    config = model.config
    return TransformerBridgeConfig(
        d_model=config.d_model,
        d_head=config.d_k,
        n_layers=config.n_layer,
        n_ctx=config.block_size,
        d_vocab=config.vocab_size,
        n_heads=1,
        d_mlp=4 * config.d_model,
        act_fn="gelu",  # F.gelu, the erf form, as tinylm's nn.GELU()
        eps=model.ln_f.eps,
        normalization_type="LN",
        attn_only=not config.mlp,
        attention_dir="causal" if config.causal else "bidirectional",
        use_attn_scale=config.scale,
        attn_scores_soft_cap=config.softcap if config.softcap else -1.0,  # -1: no cap
        seed=0,  # its own random init, overwritten, leaves the caller's random stream as it was
        default_prepend_bos=False,  # tinylm reads a text as it is: no beginning-of-text token before it
    )


def compute_as_tinylm(bridge: TransformerBridge, config: ModelConfig) -> None:
    """Two of TransformerLens's computations (4.3) made tinylm's, without which its logits would differ:
    - the scores divided by sqrt(d_k), or by 1 unscaled: its native attention divides by sqrt(d_head) whatever
      use_attn_scale says. Its divisor, `scale`, is read first (a version without it fails here, not silently) and
      set where it differs; W^Q multiplied by sqrt(d_k) instead would round q.
    - the LayerNorms through torch's own layer_norm, as tinylm's: its default writes the norm out in Python ops for its
      hooks, which round differently, enough to move a saturated softmax. Hooks still see every step of the norm.
    """
    divisor = math.sqrt(config.d_k) if config.scale else 1.0
    for block in bridge.blocks:
        attention = block.attn.original_component
        if attention.scale != divisor:
            attention.scale = divisor
    for module in bridge.modules():
        if isinstance(module, NormalizationBridge):
            module.use_native_layernorm_autograd = True


def block_weights(own: dict[str, Tensor], n: int, config: ModelConfig) -> dict[str, Tensor]:
    """Block n's weights under TransformerLens's names, from the TinyLM's state_dict `own`."""
    block = f"blocks.{n}."
    renamed = {"ln1": "ln_attn"} | ({"ln2": "ln_mlp", "mlp.in": "mlp.0", "mlp.out": "mlp.2"} if config.mlp else {})
    weights = {
        f"{block}{tl}.{key}": own[f"{block}{ours}.{key}"] for tl, ours in renamed.items() for key in ("weight", "bias")
    }
    if config.projections:
        W = {name: own[f"{block}attn.W_{name.upper()}.weight"] for name in "qkvo"}
    else:  # q = k = v = x and no W^O: identities
        W = {name: torch.eye(config.d_model).to(own["lm_head.weight"]) for name in "qkvo"}
    for name, weight in W.items():
        weights |= {f"{block}attn.{name}.weight": weight, f"{block}attn.{name}.bias": weight.new_zeros(len(weight))}
    return weights
