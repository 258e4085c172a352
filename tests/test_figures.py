"""The figures report.py draws: what their panels and legends say (no panel for a tag no run logged, no line-style
legend where no switch is swept), the chosen curves against the step (--curves, --mark, --seeds) and the attention
pictures side by side (--patterns)."""

import warnings

import matplotlib.image
import numpy as np
import pytest
from matplotlib.figure import Figure
from omegaconf import OmegaConf
from test_summary import fake_run, run_report, sweep
from tokenizers import Tokenizer
from tokenizers.models import WordLevel
from torch.utils.tensorboard import SummaryWriter

from conftest import compose_config
from summary.against import plot_against
from summary.figures import Mark, add_differences, pattern_at, plot_chosen, plot_curves
from summary.runs import SummaryError, read_runs, swept_keys
from summary.seeds import by_configuration
from summary.styles import encode
from summary.summarize import draw_chosen, draw_patterns

PNG = b"\x89PNG"


@pytest.fixture
def drawn(monkeypatch) -> list[Figure]:
    """The figures saved while the test runs, kept instead of written."""
    figures: list[Figure] = []
    monkeypatch.setattr(Figure, "savefig", lambda figure, *args, **kwargs: figures.append(figure))
    return figures


def titles(figure: Figure) -> list[str]:
    return [axes.get_title() for axes in figure.axes if axes.get_title()]


def legend_labels(figure: Figure) -> list[str]:
    return [text.get_text() for legend in figure.legends for text in legend.get_texts()]


def test_a_sweep_of_one_number_has_no_line_style_legend(tmp_path):
    runs = sweep(tmp_path, {"model.mask_value": [-1e4, float("-inf")]})
    encoding = encode(runs, swept_keys(runs))
    assert [label for label, _ in encoding.legend] == ["model.mask_value", "-inf", "-10000"]
    assert {style.linestyle for style in encoding.styles} == {"-"}


def test_a_key_of_two_words_gives_the_line_style_where_no_switch_is_swept(tmp_path):
    runs = sweep(tmp_path, {"data.distance": [4, 16, 32], "model.mixer": ["attention", "gru"]})
    encoding = encode(runs, swept_keys(runs))
    assert [style.linestyle for style in encoding.styles] == ["-", "--"] * 3  # attention solid, gru dashed
    assert len({repr(style.color) for style in encoding.styles}) == 3  # a colour per distance
    labels = [(label, style and style.linestyle) for label, style in encoding.legend]
    colours = [("data.distance", None), ("4", "-"), ("16", "-"), ("32", "-")]
    assert labels == [*colours, ("model.mixer", None), ("attention", "-"), ("gru", "--")]


def test_a_switch_still_gives_the_style_beside_a_key_of_two_words(tmp_path):
    runs = sweep(tmp_path, {"model.mixer": ["attention", "gru"], "model.scale": [True, False]})
    encoding = encode(runs, swept_keys(runs))
    assert [style.linestyle for style in encoding.styles] == ["-", "--"] * 2
    assert [label for label, _ in encoding.legend] == [
        "model.mixer",
        "attention",
        "gru",
        "model.scale",
        "true",
        "false",
    ]


def test_the_figure_against_a_number_has_a_panel_for_each_tag_some_run_logged_and_no_other(tmp_path, drawn):
    scalars = {"val/loss": [4.0, 3.0], "train/loss": [4.0, 2.9], "val/loss_far": [3.0, 1.0]}
    runs = by_configuration(sweep(tmp_path, {"data.distance": [4, 16, 32], "trainer.seed": [0, 1]}, scalars))
    plot_against(runs, "data.distance", tmp_path / "against.png")
    assert titles(drawn[0]) == ["val/loss", "val/loss_far", "train/loss"]
    assert not any("not logged" in text.get_text() for axes in drawn[0].axes for text in axes.texts)
    assert "true" not in legend_labels(drawn[0])


def test_the_curves_of_runs_without_attention_leave_the_entropy_panel_out(tmp_path, drawn):
    runs = sweep(tmp_path, {"model.mixer": ["gru", "lstm"]})
    plot_curves(runs, tmp_path / "summary.png")
    assert titles(drawn[0]) == ["val/loss"]
    assert legend_labels(drawn[0]) == ["model.mixer", "gru", "lstm"]


def test_a_run_named_after_many_overrides_is_named_whole_in_the_legend_and_leaves_the_panels_their_room(
    tmp_path, monkeypatch
):
    overrides = [f"trainer.setting_{n}={n}" for n in range(12)]  # a job of a sweep with nothing swept
    fake_run(tmp_path / f"0_{','.join(overrides)}", {"val/loss": [4.0, 3.0], "attn/entropy": [2.0, 1.0]}, overrides)
    saved: list[Figure] = []
    save = Figure.savefig
    monkeypatch.setattr(Figure, "savefig", lambda figure, *args, **kwargs: [saved.append(figure), save(figure, *args)])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "constrained_layout not applied because axes sizes collapsed to zero"
        plot_curves(read_runs([tmp_path]), tmp_path / "summary.png")
    [label] = legend_labels(saved[0])
    assert label.replace("\n", "") == f"0_{','.join(overrides)}" and max(map(len, label.splitlines())) <= 45
    assert all(axes.get_position().width > 0.2 for axes in saved[0].axes)  # laid out, not collapsed
    renderer = saved[0]._get_renderer()
    title, [legend] = saved[0].get_suptitle(), saved[0].legends
    assert title and not saved[0]._suptitle.get_window_extent(renderer).overlaps(legend.get_window_extent(renderer))


def mask_sweep(tmp_path):
    """Two masks over two seeds: allowed scores from -3 to -1e5 (decades, all below 0), and two losses."""
    for job, (mask, seed) in enumerate((mask, seed) for mask in (-1e4, float("-inf")) for seed in (0, 1)):
        leak = 0.01 * (mask > -1e5) * (seed + 1)
        scalars = {
            "attn/train_allowed_min": [-3.0, -2e3, -1e5 * (seed + 1)],
            "val/loss": [4.0, 3.0 - leak, 2.5 - leak],
            "val/loss_causal": [4.0, 3.0, 2.5],
        }
        overrides = [f"model.mask_value={mask}", f"trainer.seed={seed}"]
        fake_run(tmp_path / f"{job}_{','.join(overrides)}", scalars, overrides)
    return read_runs([tmp_path])


def test_a_difference_of_two_tags_is_drawn_at_the_steps_both_were_logged(tmp_path):
    runs = mask_sweep(tmp_path)
    add_differences(runs, ["val/loss", "val/loss_causal-val/loss"])
    gained = runs[1].curves["val/loss_causal-val/loss"]
    assert [step for step, _ in gained] == [0, 10, 20]
    assert [value for _, value in gained] == pytest.approx([0, 0.02, 0.02])
    assert runs[3].curves["val/loss_causal-val/loss"] == [(0, 0.0), (10, 0.0), (20, 0.0)]
    with pytest.raises(SummaryError, match="^cannot draw val/loss-attn/nothing: no run logged it, nor is it A-B"):
        add_differences(runs, ["val/loss-attn/nothing"])


def test_chosen_curves_get_a_panel_each_a_symlog_axis_over_decades_and_their_marks(tmp_path, drawn):
    runs = mask_sweep(tmp_path)
    specs = ["attn/train_allowed_min", "val/loss_causal-val/loss"]
    add_differences(runs, specs)
    marks = {"attn/train_allowed_min": [Mark(-1e4, "the mask")]}
    plot_chosen(by_configuration(runs), specs, tmp_path / "curves.png", marks)
    scores, gained = drawn[0].axes[:2]
    assert [scores.get_title(), gained.get_title()] == ["attn/train_allowed_min", "val/loss_causal − val/loss"]
    assert (scores.get_yscale(), gained.get_yscale()) == ("symlog", "linear")
    assert scores.get_ylim()[1] < 0  # no decades of positive scores that no run has
    assert [text.get_text() for text in scores.texts] == ["the mask"]
    assert legend_labels(drawn[0]) == ["model.mask_value", "-inf", "-10000"]
    assert scores.collections  # the min-max bands


def test_chosen_curves_per_seed_draw_a_line_per_seed_and_name_the_seeds_markers(tmp_path, drawn):
    runs = mask_sweep(tmp_path)
    plot_chosen(by_configuration(runs), ["val/loss"], tmp_path / "curves.png", per_seed=True)
    [axes] = [axes for axes in drawn[0].axes if axes.get_title()]
    assert len(axes.lines) == 4 and not axes.collections
    assert {line.get_marker() for line in axes.lines} == {"o", "s"}
    assert legend_labels(drawn[0])[-3:] == ["trainer.seed", "0", "1"]


def test_report_draws_chosen_curves_into_the_figure_named(tmp_path):
    mask_sweep(tmp_path / "sweep")
    figure = tmp_path / "docs" / "mask.png"
    curves = ["--curves", "attn/train_allowed_min,val/loss_causal-val/loss", "--seeds", "lines"]
    mark = ["--mark", "attn/train_allowed_min=-1e4:the mask"]
    result = run_report(str(tmp_path / "sweep"), *curves, *mark, "--figure", str(figure))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(figure) and figure.read_bytes().startswith(PNG)
    assert not (tmp_path / "sweep" / "summary.csv").exists()  # the figure alone


@pytest.mark.parametrize(
    "args, message",
    [
        (["--mark", "val/loss=1"], "--mark goes with --curves"),
        (["--curves", "val/loss", "--x", "optim.lr"], "--x goes with the summary, not with --curves or --patterns"),
        (["--figure", "a.png"], "--figure goes with --curves or --patterns"),
        (["--curves", "val/loss", "--figure", "a.pdf"], "--figure a.pdf: name a .png file"),
        (["--curves", "val/loss", "--mark", "train/loss=1"], "--mark train/loss: not one of the --curves"),
        (["--curves", "val/loss", "--mark", "val/loss=low"], "argument --mark: 'val/loss=low': not TAG=VALUE[:LABEL]"),
        (["--layer", "1"], "--layer goes with --patterns"),
    ],
)
def test_report_refuses_options_that_do_not_go_together_in_one_line(tmp_path, args, message):
    fake_run(tmp_path, {"val/loss": [4.0]})
    result = run_report(str(tmp_path), *args)
    assert result.returncode == 2
    [line] = result.stderr.splitlines()
    assert line.startswith(f"error: {message}") and line.endswith("; see python report.py --help")


def test_report_names_a_tag_no_run_logged_in_one_line(tmp_path):
    fake_run(tmp_path, {"val/loss": [4.0], "train/loss": [4.1]})
    result = run_report(str(tmp_path), "--curves", "attn/entropy")
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        "error: cannot draw attn/entropy: no run logged it, nor is it A-B of two tags they logged; they logged "
        "train/loss, val/loss"
    ]


def pattern_run(run_dir, shade: float) -> None:
    """A run whose attn/pattern images at steps 0 and 10 are 40 x 30 squares of one grey."""
    writer = SummaryWriter(run_dir)
    for step in (0, 10):
        writer.add_image("attn/pattern", np.full((3, 40, 30), shade, dtype=np.float32), step)
    writer.add_scalar("val/loss", 4.0, 10)
    writer.close()


def test_report_puts_the_attention_pictures_of_runs_side_by_side_pixel_for_pixel(tmp_path):
    pattern_run(tmp_path / "a", 0.2)
    pattern_run(tmp_path / "b", 0.8)
    draw_patterns([tmp_path / "a", tmp_path / "b"], 10, 0, tmp_path / "patterns.png")
    sheet = matplotlib.image.imread(tmp_path / "patterns.png")
    assert sheet.shape[:2] == (40, 60)
    assert sheet[:, :30, 0].mean() == pytest.approx(0.2, abs=0.01)
    assert sheet[:, 30:, 0].mean() == pytest.approx(0.8, abs=0.01)
    with pytest.raises(SummaryError, match=r"a: no attn/pattern/1 image at step 10; its steps with one: none$"):
        draw_patterns([tmp_path / "a"], 10, 1, tmp_path / "patterns.png")
    with pytest.raises(SummaryError, match=r"a: no attn/pattern image at step 5; its steps with one: 0, 10$"):
        draw_patterns([tmp_path / "a"], 5, 0, tmp_path / "patterns.png")


def test_five_pictures_make_two_rows_of_four_the_rest_white(tmp_path):
    for index in range(5):
        pattern_run(tmp_path / f"run{index}", 0.1 * index)
    draw_patterns([tmp_path], 0, 0, tmp_path / "patterns.png")
    sheet = matplotlib.image.imread(tmp_path / "patterns.png")
    assert sheet.shape[:2] == (80, 120)
    assert sheet[40:, 30:, :3].min() == 1  # white beside the fifth
    assert sheet[40:, :30, 0].mean() == pytest.approx(0.4, abs=0.01)


def test_report_writes_the_pictures_where_asked(tmp_path):
    pattern_run(tmp_path / "a", 0.5)
    result = run_report(str(tmp_path / "a"), "--patterns", "0")
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "a" / "patterns.png").read_bytes().startswith(PNG)


def test_draw_chosen_groups_the_seeds(tmp_path, drawn):
    mask_sweep(tmp_path)
    draw_chosen([tmp_path], ["val/loss"], tmp_path / "out" / "curves.png")
    assert "lines: the mean over 2 seeds" in drawn[0].get_suptitle()


def pictures_in(figure: Figure) -> list[np.ndarray]:
    return [np.asarray(image.get_array()) for axes in figure.axes for image in axes.get_images()]


def run_with_settings(run_dir, *overrides: str) -> None:
    """A fake run with what a run Hydra started keeps of its settings: .hydra/config.yaml and its tokenizer."""
    fake_run(run_dir, {"val/loss": [4.0, 3.0], "attn/entropy": [2.0, 1.0]}, list(overrides))
    OmegaConf.save(compose_config(*overrides), run_dir / ".hydra" / "config.yaml")
    Tokenizer(WordLevel({"a": 0, "[UNK]": 1}, unk_token="[UNK]")).save(str(run_dir / "tokenizer.json"))


def test_the_summary_draws_each_mask_the_runs_trained_with_once_below_the_curves(tmp_path, drawn):
    prefix = ["task=prefix_lm", "task.prefix_share=0.5", "model.block_size=8"]
    run_with_settings(tmp_path / "0_optim.lr=0.001", *prefix, "optim.lr=0.001")
    run_with_settings(tmp_path / "1_optim.lr=0.01", *prefix, "optim.lr=0.01")  # the same mask: drawn once
    run_with_settings(tmp_path / "2_model.mixer=gru", "model.mixer=gru", "model.block_size=8")  # no mask to draw
    plot_curves(read_runs([tmp_path]), tmp_path / "summary.png")
    [picture] = pictures_in(drawn[0])
    assert picture.shape == (440, 400, 4)  # the attn/mask picture, as the Images tab shows it
    assert titles(drawn[0]) == ["val/loss", "attn/entropy: mean over queries"]


@pytest.mark.slow
def test_the_masks_below_the_curves_are_pixel_for_pixel_those_the_runs_logged(leak_sweep, tmp_path, drawn):
    runs = read_runs([leak_sweep])
    draw_chosen([leak_sweep], ["val/loss"], tmp_path / "curves.png")
    logged = [pattern_at(run.path, "attn/mask", 0) for run in runs]  # model.causal=True, then False
    shown = pictures_in(drawn[0])
    assert len(shown) == 2 and all(np.array_equal(rgba[..., :3], rgb) for rgba, rgb in zip(shown, logged))
