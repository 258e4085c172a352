"""report.py on bad arguments and on what a user's disk holds or lacks: one line, a non-zero status, no traceback."""

import os
import resource
import shutil
import signal
import subprocess
from pathlib import Path

import pytest
from torch.utils.tensorboard import SummaryWriter

from conftest import Forked, cli


def a_run(run_dir: Path) -> Path:
    writer = SummaryWriter(run_dir)
    for step, loss in enumerate([3.0, 2.5, 2.0]):
        writer.add_scalar("val/loss", loss, step * 10)
    writer.close()
    return run_dir


def report(*args: str) -> subprocess.CompletedProcess:
    return cli("report.py", *map(str, args))


def one_line(result: subprocess.CompletedProcess, status: int = 1) -> str:
    assert result.returncode == status, result.stderr
    [line] = result.stderr.splitlines()
    return line


def bad_yaml(run_dir: Path) -> str:
    (run_dir / ".hydra").mkdir()
    (run_dir / ".hydra" / "config.yaml").write_text("trainer: {max_steps: 20\n")
    return f"error: {run_dir}/.hydra/config.yaml: not YAML ("


def events_directory(run_dir: Path) -> str:
    (run_dir / "events.out.tfevents.2.host.2.0").mkdir()
    return f"error: {run_dir}/events.out.tfevents.2.host.2.0: Is a directory"


def bad_override(run_dir: Path) -> str:
    (run_dir / ".hydra").mkdir()
    (run_dir / ".hydra" / "overrides.yaml").write_text("- model.d_k=(((\n")
    return f"error: {run_dir}/.hydra/overrides.yaml: model.d_k=(((: an override Hydra cannot parse"


def not_a_mapping(run_dir: Path) -> str:
    (run_dir / ".hydra").mkdir()
    (run_dir / ".hydra" / "config.yaml").write_text("5\n")  # YAML, but not what Hydra writes there
    return f"error: {run_dir}/.hydra/config.yaml: holds a number (5), not the mapping of settings Hydra writes there"


def nothing(run_dir: Path) -> str:
    (run_dir / ".hydra").mkdir()
    (run_dir / ".hydra" / "config.yaml").write_text("")
    return f"error: {run_dir}/.hydra/config.yaml: holds nothing, not the mapping of settings Hydra writes there"


def a_wrong_type(run_dir: Path) -> str:
    (run_dir / ".hydra").mkdir()
    (run_dir / ".hydra" / "config.yaml").write_text("trainer: {max_steps: abc}\n")
    return (
        f"error: {run_dir}/.hydra/config.yaml: trainer.max_steps: Value 'abc' of type 'str' could not be converted to "
        "Integer"
    )


def not_a_list(run_dir: Path) -> str:
    (run_dir / ".hydra" / "resume-2025-01-01_12-00-00").mkdir(parents=True)
    (run_dir / ".hydra" / "resume-2025-01-01_12-00-00" / "overrides.yaml").write_text("model.d_k: 16\n")
    return (
        f"error: {run_dir}/.hydra/resume-2025-01-01_12-00-00/overrides.yaml: holds a mapping ({{'model.d_k': 16}}), "
        "not the list of overrides Hydra writes there"
    )


@pytest.mark.parametrize(
    "damage", [bad_yaml, events_directory, bad_override, not_a_mapping, nothing, a_wrong_type, not_a_list]
)
def test_a_run_file_that_cannot_be_read_is_one_line_naming_it(tmp_path, damage):
    expected = damage(a_run(tmp_path / "run"))
    assert one_line(report(tmp_path)).startswith(expected)
    assert [path.name for path in tmp_path.iterdir()] == ["run"]  # no summary file, whole or cut short


@pytest.mark.parametrize(
    "settings",
    ["trainer: {max_steps: 60}", "model: {a_key_of_an_older_tinylm: 3}", "model: {block_size: -4}"],
    ids=["no model or task", "a key this tinylm lacks", "a value no run trains with"],
)
def test_a_record_of_fewer_or_other_settings_is_summed_up_without_its_mask(short_run_dir, tmp_path, settings):
    run = shutil.copytree(short_run_dir, tmp_path / "run")  # trained in a test process: no Hydra record of its own
    (run / ".hydra").mkdir()
    (run / ".hydra" / "config.yaml").write_text(settings + "\n")
    result = report(run, "--out", tmp_path / "out")
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    assert (tmp_path / "out" / "summary.png").is_file()


def test_an_out_that_is_a_file_is_refused_naming_out(tmp_path):
    a_run(tmp_path / "run")
    (tmp_path / "notes.txt").write_text("not a directory")
    line = one_line(report(tmp_path, "--out", tmp_path / "notes.txt"))
    assert line == f"error: --out {tmp_path}/notes.txt: not a directory; the summary files go into a directory"


def test_a_file_given_as_the_directory_of_runs_is_named_as_what_it_is(tmp_path):
    (tmp_path / "notes.txt").write_text("not a run")
    for out in ([], ["--out", tmp_path / "out"]):
        line = one_line(report(tmp_path / "notes.txt", *out))
        assert line == f"error: {tmp_path}/notes.txt: a file, not a directory; give the directory of a run or a sweep"
    assert [path.name for path in tmp_path.iterdir()] == ["notes.txt"]


def test_a_run_directory_whose_name_is_not_utf8_is_named_with_its_bytes(tmp_path):
    os.rename(a_run(tmp_path / "cafe"), os.fsencode(tmp_path) + b"/caf\xe9")  # a Latin-1 name
    line = one_line(report(tmp_path))
    assert line == f"error: {tmp_path}/caf\\xe9: the name is not UTF-8 text; rename it to report on it"


def test_a_bad_argument_is_one_line_with_argparses_status(tmp_path):
    line = one_line(report(tmp_path, "--y", "3"), status=2)
    assert line == "error: unrecognized arguments: --y 3; see python report.py --help"


@pytest.mark.parametrize("value", ["nan", "inf", "-1e308", "1e400"])
def test_a_mark_no_curve_can_reach_is_one_line(tmp_path, value):
    line = one_line(report(a_run(tmp_path / "run"), "--curves", "val/loss", "--mark", f"val/loss={value}"), status=2)
    assert line == (
        f"error: argument --mark: 'val/loss={value}': {value} is not a number a curve can reach: TensorBoard logs "
        "float32, finite and at most 3.4e38 in size; see python report.py --help"
    )
    assert [path.name for path in tmp_path.iterdir()] == ["run"]


def small_file_limit() -> None:
    """Files of at most 2 kB, as a disk that is full after them: a write beyond fails (EFBIG) instead of a
    signal ending the process."""
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (2000, 2000))


def test_a_figure_named_by_a_link_is_refused_and_the_file_it_leads_to_kept(tmp_path):
    a_run(tmp_path / "run")
    (tmp_path / "last.pt").write_bytes(b"a checkpoint")
    (tmp_path / "curves.png").symlink_to(tmp_path / "last.pt")
    line = one_line(report(tmp_path / "run", "--curves", "val/loss", "--figure", tmp_path / "curves.png"), status=2)
    assert line == (
        f"error: --figure {tmp_path}/curves.png: a symbolic link (to {tmp_path}/last.pt); give the file itself; see "
        "python report.py --help"
    )
    assert (tmp_path / "last.pt").read_bytes() == b"a checkpoint"


def test_summary_files_that_cannot_be_written_are_one_line_naming_out_and_the_last_summary_is_kept_whole(tmp_path):
    a_run(tmp_path / "run")
    assert report(tmp_path / "run", "--out", tmp_path / "out").returncode == 0  # the summary of an earlier report
    earlier = {path.name: path.read_bytes() for path in (tmp_path / "out").iterdir()}
    # A process of its own: the limit holds for the whole process.
    limited = "from test_faults_report import small_file_limit; small_file_limit()"
    report_py = Forked(
        str(tmp_path / "run"), "--out", str(tmp_path / "out"), main="report", patch=limited, stdout=False
    )
    _, stderr = report_py.communicate(timeout=60)
    line = one_line(subprocess.CompletedProcess(["report.py"], report_py.returncode, "", stderr))
    assert line == f"error: {tmp_path}/out: the summary files cannot be written (File too large)"
    assert {path.name: path.read_bytes() for path in (tmp_path / "out").iterdir()} == earlier  # no mix, no .tmp
