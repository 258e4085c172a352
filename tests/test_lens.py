"""viewer/lens.py: a TinyLM opened in TransformerLens computes tinylm's logits and attention, its hooks read and patch
them, its tokenizer serves TransformerLens's text calls, a run opens in one call, and what it cannot represent (or a
run with nothing to read) is refused in one line naming why, alone in a notebook. Tiny models with random weights,
and the session's trained leak sweep."""

import importlib.util
import math
import os
import shutil

import pytest
import torch

from data import TokenizerConfig, train_tokenizer
from model import ModelConfig, TinyLM
from model.config import Mixer
from trainer.checkpoint import BEST, LAST
from trainer.config import ConfigError
from viewer.checkpoints import choose, load
from viewer.predictions import looked_again
from viewer.trace import trace

# CI installs the extra (.ci/run): there a missing TransformerLens fails these tests.
if not os.environ.get("CI") and importlib.util.find_spec("transformer_lens") is None:
    pytest.skip('needs TransformerLens, the extra: pip install -e ".[lens]"', allow_module_level=True)

TEXT = "To be, or not to be, that is the question"
TOKENIZER = train_tokenizer(TokenizerConfig(), TEXT)
IDS = TOKENIZER.encode(TEXT).ids
TINY = {"block_size": 48, "d_model": 32, "d_k": 16, "d_v": 16}
SETTINGS = {  # each setting TransformerLens represents, on its own and together
    "default": {"n_layer": 2},
    "unscaled": {"scale": False},
    "unscaled at d_k=128": {"scale": False, "d_model": 128, "d_k": 128, "d_v": 128},  # saturated: rounding shows
    "unmasked": {"causal": False},
    "softcap": {"softcap": 2.0},
    "no mlp": {"mlp": False},
    "no projections": {"projections": False, "d_k": 32, "d_v": 32},
    "unmasked, finite mask value unused": {"causal": False, "mask_value": -1e4},
    "unscaled, unmasked, capped": {"scale": False, "causal": False, "softcap": 3.0, "n_layer": 2},
}
REFUSED = {  # setting -> the start of its one line
    "mixer": ({"mixer": Mixer.gru}, "model.mixer=gru: "),
    "d_k": ({"d_k": 8}, "model.d_k=8 with model.d_v=16: "),
    "mask_value": ({"mask_value": -1e4}, "model.mask_value=-10000: "),
    "qk_norm": ({"qk_norm": True}, "model.qk_norm=True: "),
}


@pytest.fixture(scope="module")
def lens():
    """viewer/lens.py, imported by the worker that runs these tests: TransformerLens takes seconds to import, which
    every worker would otherwise pay while it collects the suite."""
    from viewer import lens

    return lens


def tiny_model(**settings) -> TinyLM:
    """A TinyLM of TINY's size with every weight moved off its init: the norms' gains and biases and the MLP's
    biases are not their ones and zeros, so a weight copied to the wrong place shows in the logits."""
    torch.manual_seed(0)
    model = TinyLM(ModelConfig(vocab_size=TOKENIZER.get_vocab_size(), **TINY | settings)).eval()
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(0.1 * torch.randn_like(parameter))
    return model


@pytest.mark.parametrize("settings", SETTINGS.values(), ids=SETTINGS.keys())
def test_transformer_lens_computes_tinylms_logits_and_attention(settings, lens):
    model = tiny_model(**settings)
    ids = torch.tensor([IDS])
    logits, cache = lens.transformer_lens_model(model).run_with_cache(ids)
    with torch.no_grad():
        assert (logits - model(ids)).abs().max() < 1e-5
    for n, layer in enumerate(trace(model, IDS)):
        assert (cache[f"blocks.{n}.attn.hook_pattern"][0, 0] - layer.weights).abs().max() < 1e-6


def test_the_scores_rebuilt_from_the_cached_q_and_k_are_those_tinylm_feeds_the_softmax(lens):
    """docs/transformer-lens.md's way to the scores: q k^T / sqrt(d_k), capped, masked, from hook_q and hook_k."""
    model = tiny_model(softcap=2.0)
    _, cache = lens.transformer_lens_model(model).run_with_cache(torch.tensor([IDS]))
    q, k = cache["blocks.0.attn.hook_q"][0, :, 0], cache["blocks.0.attn.hook_k"][0, :, 0]
    scores = 2.0 * torch.tanh(q @ k.T / math.sqrt(q.size(-1)) / 2.0)
    future = torch.ones_like(scores, dtype=torch.bool).triu(1)
    torch.testing.assert_close(scores.masked_fill(future, -math.inf), trace(model, IDS)[0].fed, atol=1e-6, rtol=0)


@pytest.mark.xfail(strict=True, reason="TransformerLens 4.3's native attention hands hook_attn_scores its pattern")
def test_hook_attn_scores_holds_the_scores(lens):
    """When TransformerLens fixes this, this test fails (strict): docs/transformer-lens.md then drops its warning."""
    model = tiny_model()
    _, cache = lens.transformer_lens_model(model).run_with_cache(torch.tensor([IDS]))
    torch.testing.assert_close(cache["blocks.0.attn.hook_attn_scores"][0, 0], trace(model, IDS)[0].fed)


def test_patching_a_querys_pattern_gives_tinylms_counterfactual_logits(lens):
    """A query's row of the pattern replaced by a uniform look through hook_pattern, as the Attention tab's
    counterfactual (d) replaces it through tinylm's own reweigh: the same next-token logits."""
    model, i = tiny_model(n_layer=2), 7
    uniform = (torch.arange(len(IDS)) <= i).float() / (i + 1)

    def look_uniformly(pattern, hook):
        pattern[:, :, i] = uniform
        return pattern

    opened = lens.transformer_lens_model(model)
    patched = opened.run_with_hooks(torch.tensor([IDS]), fwd_hooks=[("blocks.1.attn.hook_pattern", look_uniformly)])
    expected = looked_again(model, torch.tensor([IDS]), 1, [i], uniform[None])[0]
    assert (patched[0, i] - expected).abs().max() < 1e-5
    assert (patched[0, i] - opened(torch.tensor([IDS]))[0, i]).abs().max() > 1e-2  # the patch changed the prediction


@pytest.mark.slow
@pytest.mark.parametrize("job", ["0_*", "1_*"], ids=["masked", "unmasked"])
def test_a_trained_runs_checkpoint_opens_with_its_logits_and_attention(leak_sweep, job, lens):
    trained = load(choose(next(leak_sweep.glob(job))).path)
    ids = trained.tokenizer.encode(TEXT).ids[: trained.model.config.block_size]
    logits, cache = lens.transformer_lens_model(trained.model).run_with_cache(torch.tensor([ids]))
    with torch.no_grad():
        assert (logits[0] - trained.model(torch.tensor([ids]))[0]).abs().max() < 1e-5
    assert (cache["blocks.0.attn.hook_pattern"][0, 0] - trace(trained.model, ids)[0].weights).abs().max() < 1e-6


@pytest.mark.parametrize("settings, line", REFUSED.values(), ids=REFUSED.keys())
def test_a_setting_transformer_lens_cannot_represent_is_refused_in_one_line_naming_it(settings, line, lens):
    with pytest.raises(ConfigError) as refused:
        lens.transformer_lens_model(TinyLM(ModelConfig(vocab_size=5, **TINY | settings)))
    assert str(refused.value).startswith(line) and "\n" not in str(refused.value)
    assert refused.value._render_traceback_() == [str(refused.value)]  # what IPython shows of it: the line alone


def test_every_setting_refused_is_named_in_the_one_line(lens):
    config = ModelConfig(vocab_size=5, **TINY | {"d_k": 8, "mask_value": -1e4, "qk_norm": True})
    assert len(lens.lens_problems(config)) == 3
    with pytest.raises(ConfigError, match=r"^model\.d_k=8 .*; model\.mask_value=.*; model\.qk_norm=True: [^\n]*$"):
        lens.transformer_lens_model(TinyLM(config))


def test_a_fill_in_the_blank_model_reads_a_text_with_blanks_as_tinylm_does(lens):
    """task=fill_blank's model: unmasked, with the blank a token of its own in the input (QK-norm, which the encoder
    preset trains with, is refused above)."""
    from task import task_for
    from trainer.config import TrainConfig

    config = TrainConfig(model=ModelConfig(**TINY, causal=False))
    config.task.name, config.task.blank_share, config.task.hide = "fill_blank", 0.4, True
    task = task_for(config, TOKENIZER)
    torch.manual_seed(0)
    model = TinyLM(ModelConfig(vocab_size=task.tokenizer.get_vocab_size(), **TINY, causal=False)).eval()
    ids = torch.tensor([task.encode("To be, or n_t to _e", "text")])
    assert task.blank in ids
    with torch.no_grad():
        assert (lens.transformer_lens_model(model)(ids) - model(ids)).abs().max() < 1e-5


def greedy(model: TinyLM, ids: list[int], tokens: int) -> list[int]:
    """tinylm's own greedy continuation: the likeliest next token, `tokens` times."""
    with torch.no_grad():
        for _ in range(tokens):
            ids = ids + [int(model(torch.tensor([ids]))[0, -1].argmax())]
    return ids


def test_the_runs_tokenizer_serves_transformer_lenss_text_calls(lens):
    """to_tokens and to_str_tokens read a text as tinylm's tokenizer does (no beginning-of-text token added), a text
    goes into run_with_cache as it is, and generate continues it as tinylm's greedy decoding does."""
    model = tiny_model(n_layer=2)
    opened = lens.transformer_lens_model(model, TOKENIZER)
    assert opened.to_tokens(TEXT)[0].tolist() == IDS
    assert opened.to_str_tokens(TEXT) == list(TEXT)
    logits, _ = opened.run_with_cache(TEXT)
    with torch.no_grad():
        assert (logits - model(torch.tensor([IDS]))).abs().max() < 1e-5
    continued = opened.generate("To be", max_new_tokens=8, do_sample=False, verbose=False)
    assert continued == TOKENIZER.decode(greedy(model, TOKENIZER.encode("To be").ids, 8))
    assert opened.to_string(opened.to_tokens("or not")[0]) == "or not"


@pytest.mark.slow
def test_a_run_opens_in_one_call_from_its_directory_or_its_checkpoint_file(leak_sweep, lens):
    run = next(leak_sweep.glob("1_*"))
    trained = load(choose(run).path)
    ids = trained.tokenizer.encode(TEXT).ids[: trained.model.config.block_size]  # to_tokens cuts a text to it too
    for given in (run, run / LAST, str(run)):
        opened = lens.open_run(given)
        assert opened.to_tokens(TEXT)[0].tolist() == ids
        with torch.no_grad():
            assert (opened(TEXT)[0] - trained.model(torch.tensor([ids]))[0]).abs().max() < 1e-5


@pytest.mark.slow
def test_a_run_with_no_checkpoint_to_read_is_refused_in_one_line(leak_sweep, tmp_path, lens):
    """The documented snippet's AttributeError cases: a run whose checkpoints are both damaged, a folder with none, a
    path that is not there."""
    from test_viewer import damage

    run = tmp_path / "run"
    shutil.copytree(next(leak_sweep.glob("1_*")), run)
    damage(run / BEST)
    damage(run / LAST)
    (tmp_path / "empty").mkdir()
    for given, line in [
        (run, rf"^run={run}: {run / BEST}: damaged \(.*\); {run / LAST}: damaged \(.*\)$"),
        (tmp_path / "empty", rf"^run={tmp_path / 'empty'}: no checkpoint \(best.pt or last.pt\) in it$"),
        (tmp_path / "nowhere", rf"^run={tmp_path / 'nowhere'}: no such run directory or checkpoint file$"),
    ]:
        with pytest.raises(lens.Refused, match=line) as refused:
            lens.open_run(given)
        assert refused.value._render_traceback_() == [str(refused.value)]
