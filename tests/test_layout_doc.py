"""docs/layout.md names files and symbols; each must still exist where the page says it lives."""

import re

import pytest

from conftest import ROOT

ROWS = [line for line in (ROOT / "docs" / "layout.md").read_text().splitlines() if line.startswith("| `")]


def cells(row: str) -> tuple[list[str], str]:
    """The row's homes (`bench.py` + `benchmark/`: two) and what it says they hold."""
    _, home, holds = row.split("|", 2)
    return re.findall(r"`([^`]+)`", home), holds


@pytest.mark.parametrize("row", ROWS, ids=[" ".join(cells(row)[0]) for row in ROWS])
def test_every_file_and_symbol_the_layout_page_names_exists_where_it_says(row):
    homes, holds = cells(row)
    paths = [ROOT / home for home in homes]
    assert all(path.exists() for path in paths), homes
    folders = [path if path.is_dir() else path.parent for path in paths] + [ROOT]
    for name in re.findall(r"`(\w[\w/.-]*\.(?:py|yaml))`", holds):  # attention.py, summary/runs.py, train.yaml
        assert any((folder / name).exists() for folder in folders), name
    sources = [path for path in paths if path.suffix == ".py"] + [
        source for path in paths if path.is_dir() for source in sorted(path.rglob("*.py"))
    ]
    code = "\n".join(source.read_text() for source in sources)
    for name in re.findall(r"`([A-Za-z_]\w*)(?:\(\))?`", holds):  # `Schedule`, `build_model`, `train()`
        assert re.search(rf"\b{name}\b", code), f"{name}: not in {homes}"
