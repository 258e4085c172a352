"""python_version.py: every entry point refuses a Python older than 3.11 in one line, before it imports anything,
whether the old Python is faked in this one or is a real one found on this machine."""

import ast
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT

ENTRY_POINTS = sorted(path.name for path in ROOT.glob("*.py") if path.name != "python_version.py")
FAKED = "import runpy, sys; sys.version_info = (3, 10, 12, 'final', 0); sys.argv = [{0!r}]; runpy.run_path({0!r})"
OLDER = ("python3.8", "python3.9", "python3.10")  # they read the entry points' syntax and reach the check


def test_a_python_older_than_3_11_is_refused_in_one_line_and_3_11_is_not():
    from python_version import refusal

    assert refusal((3, 10, 12), "/usr/bin/python3") == (
        "error: Python 3.10.12 (/usr/bin/python3): tinylm needs Python 3.11 or newer; "
        "the README's Install notes say how to get it"
    )
    assert refusal((3, 11, 0), "python") is None and refusal(sys.version_info) is None


@pytest.mark.parametrize("script", ENTRY_POINTS)
def test_every_entry_point_imports_the_check_before_anything_else(script):
    body = ast.parse((ROOT / script).read_text()).body
    first = next(statement for statement in body if isinstance(statement, (ast.Import, ast.ImportFrom)))
    assert isinstance(first, ast.Import) and [alias.name for alias in first.names] == ["python_version"]


@pytest.mark.parametrize("script", ENTRY_POINTS)
def test_every_entry_point_run_by_an_older_python_says_so_in_one_line(script):
    ran = subprocess.run([sys.executable, "-c", FAKED.format(script)], cwd=ROOT, capture_output=True, text=True)
    assert (ran.returncode, ran.stdout) == (1, "")
    assert ran.stderr.startswith("error: Python 3.10.12 (") and ran.stderr.count("\n") == 1


def test_a_real_older_python_gets_the_same_line():
    found = []
    for name in OLDER:
        if shutil.which(name) and subprocess.run([name, "--version"], capture_output=True).returncode == 0:
            found.append(name)
    if not found:
        pytest.skip(f"none of {', '.join(OLDER)} runs on this machine")
    for name in found:
        ran = subprocess.run([name, "train.py"], cwd=ROOT, capture_output=True, text=True)
        assert ran.returncode == 1 and ran.stderr.count("\n") == 1, (name, ran.stderr)
        assert "tinylm needs Python 3.11 or newer" in ran.stderr
