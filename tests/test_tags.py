"""The Custom Scalars layout a run writes (trainer/tags.py): a preset's sweep opens on its own charts."""

from conftest import ROOT
from trainer.tags import LAYOUT, PRESET_TAGS, layout


def test_a_leak_sweep_opens_on_its_own_charts_titled_without_another_presets_name():
    sections = layout(["+experiment=leak", "model.causal=false"])
    name, first = next(iter(sections.items()))
    assert name == "leak"
    assert [chart[1][0] for chart in first.values()] == ["^val/loss$", "^attn/entropy$", "^attn/future_mass$"]
    assert not [title for title in first if title.partition(": ")[0] in ("saturation", "leak", "finite mask")]


def test_every_chart_is_written_once_whatever_the_preset():
    every = sorted(str(chart) for section in LAYOUT.values() for chart in section.values())
    for preset in PRESET_TAGS:
        sections = layout([f"+experiment={preset}"])
        assert sorted(str(chart) for section in sections.values() for chart in section.values()) == every, preset


def test_every_preset_names_charts_that_exist_and_a_run_outside_one_writes_the_plain_layout():
    assert sorted(PRESET_TAGS) == sorted(path.stem for path in (ROOT / "configs" / "experiment").glob("*.yaml"))
    for preset, tags in PRESET_TAGS.items():
        assert len(next(iter(layout([f"+experiment={preset}"]).values()))) == len(tags), preset
    assert layout([]) == layout(["model.d_k=64"]) == layout(["+experiment=mine"]) == LAYOUT
