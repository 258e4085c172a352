"""A token-cache build stopped by a signal, or killed outright, leaves nothing behind for good; a binary file given as
data.path is called one. Through the real command, with real signals."""

import logging
import os
import random
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from test_faults_trainer import small_disk  # noqa: F401 (a fixture)
from torch.utils.tensorboard import SummaryWriter

from conftest import ROOT, SHORT, Forked, cli, wait_for
from data import DataConfig, DataError, Source, TokenizerConfig, load_text, prepare_tokens
from trainer.checkpoint import from_events_writer

WORDS = "to be or not that is the question whether tis nobler in mind suffer slings arrows outrageous fortune".split()


def words_text(path: Path) -> Path:
    """A text of random words, about 100 KB, for a build of its token cache entry (held half-way: HOLD_IN_STAGING)."""
    rng = random.Random(0)
    lines = (" ".join(rng.choices(WORDS, k=10)) for _ in range(2_000))
    path.write_text("\n".join(lines) + "\n")
    return path


# The build holds once its training split is written, until the test stops it: a signal or a kill lands mid-build
# whatever the machine's load.
HOLD_IN_STAGING = """
import data.cache
write_tokens = data.cache.write_tokens
def write_then_hold(path, *args):
    written = write_tokens(path, *args)
    print("staged", path.name, flush=True)
    time.sleep(3600)
    return written
data.cache.write_tokens = write_then_hold
"""


def start_build(text: Path, cache: Path) -> Forked:
    """train.py tokenizing `text` into a fresh cache, held once it has staged its first file (HOLD_IN_STAGING)."""
    return Forked(
        "data=text",
        f"data.path={text}",
        f"data.cache_dir={cache}",
        "tokenizer=bpe",
        "trainer.max_steps=1",
        "trainer.eval_interval=1",
        "trainer.eval_iters=1",
        f"hydra.run.dir={cache.parent / 'run'}",
        patch=HOLD_IN_STAGING,
    )


def staging_dirs(cache: Path) -> list[Path]:
    return sorted(cache.glob(".*.building")) if cache.is_dir() else []


def wait_for_staging(build: Forked, cache: Path) -> Path:
    wait_for(build, "staged train.npy")
    [staging] = staging_dirs(cache)
    return staging


@pytest.mark.parametrize("received", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_while_the_token_cache_is_built_leaves_nothing_and_ends_in_one_line(tmp_path, received):
    cache = tmp_path / "cache"
    build = start_build(words_text(tmp_path / "words.txt"), cache)
    wait_for_staging(build, cache)
    build.send_signal(received)
    _, stderr = build.communicate(timeout=60)
    assert list(cache.iterdir()) == [], stderr  # no staging directory, no entry
    assert build.returncode == 128 + received, stderr
    assert stderr.splitlines()[-1].startswith(f"stopped by {received.name} outside the training loop"), stderr
    assert "Traceback" not in stderr


def test_a_build_killed_outright_leaves_staging_that_the_next_build_removes(tmp_path, caplog):
    cache = tmp_path / "cache"
    build = start_build(words_text(tmp_path / "words.txt"), cache)
    staging = wait_for_staging(build, cache)

    def build_another(name: str) -> None:
        (tmp_path / name).write_text(f"{name}: a short text of its own, so that its entry is built\n" * 50)
        with caplog.at_level(logging.INFO, logger="data.cache"):
            prepare_tokens(DataConfig(source=Source.text, path=str(tmp_path / name), cache_dir=str(cache)),
                           TokenizerConfig())  # fmt: skip

    build_another("while.txt")  # while the killed build is still alive: its staging is its own
    assert "left by a build that was killed" not in caplog.text
    build.kill()
    build.communicate(timeout=60)
    assert staging.is_dir()  # nothing runs after SIGKILL
    build_another("after.txt")
    assert not staging.exists()
    assert f"token cache: removed {staging}, left by a build that was killed" in caplog.text


PNG = bytes.fromhex("89504e470d0a1a0a0000000d49484452000000010000000108020000009077")  # a PNG's first 32 bytes


def test_a_png_given_as_text_is_called_a_png_image_not_text(tmp_path):
    (tmp_path / "cat.png").write_bytes(PNG)
    result = cli(
        "train.py",
        "data=text",
        f"data.path={tmp_path}/cat.png",
        f"data.cache_dir={tmp_path}/cache",
        f"hydra.run.dir={tmp_path}/run",
    )
    path = tmp_path / "cat.png"
    assert (result.returncode, result.stderr) == (
        1,
        f"error: data.path={path}: {path} is a PNG image, not text; give a text file (UTF-8)\n",
    )


CONTROL_BYTES = bytes(range(1, 9)) * 4 + b"\xfftext"  # no NUL, no magic number, and not UTF-8


@pytest.mark.parametrize(
    "content, problem",
    [(b"PK\x03\x04" + bytes(40), "is a zip archive (as are .docx, .xlsx, .jar and torch's .pt files), not text"),
     (b"\x1f\x8b\x08\x00" + bytes(20), "is gzip-compressed, not text"),
     (b"%PDF-1.7\n\xe2\xe3\xcf\xd3\n", "is a PDF document, not text"),
     (b"valid UTF-8, then a NUL:\x00 and more", "is binary data (a NUL byte at offset 24), not text"),
     (CONTROL_BYTES, f"is binary data ({len(CONTROL_BYTES) - 5} of its first {len(CONTROL_BYTES)} bytes are control "
                     "characters), not text"),
     ("café\n".encode("utf-16"), "is not UTF-8 text (byte 0xff at offset 0); convert it first, e.g. iconv -f utf-16"),
     ("café\n".encode("latin-1"), "is not UTF-8 text (byte 0xe9 at offset 3); convert it first, e.g. iconv -f latin1")],
    ids=["zip", "gzip", "pdf", "nul", "control", "utf-16", "latin1"],
)  # fmt: skip
def test_the_bytes_of_a_file_that_is_not_utf8_say_what_it_is(tmp_path, content, problem):
    path = tmp_path / "data.bin"
    path.write_bytes(content)
    with pytest.raises(DataError) as refused:
        load_text(DataConfig(source=Source.text, path=str(path)))
    assert str(refused.value).startswith(f"data.path={path}: {path} {problem}")


NOT_REGULAR = (
    "not a regular file; tinylm reads the text more than once (a hash of its bytes finds its token cache entry, then "
    "it is tokenized), and {why}: save the text to a file and give that"
)
PIPE, DEVICE = "a pipe gives its text once", "a device may never end or give other bytes each time"


FIFO = "mkfifo p; cat notes.txt > p & python train.py data.path=p; status=$?; cat p > /dev/null; exit $status"


@pytest.mark.parametrize(
    "shell, kind, why",
    [
        pytest.param("python train.py data.path=<(cat notes.txt)", "a pipe", PIPE, id="process-substitution"),
        pytest.param(FIFO, "a pipe", PIPE, id="fifo"),
        pytest.param("cat notes.txt | python train.py data.path=/dev/stdin", "a pipe", PIPE, id="stdin"),
        pytest.param("python train.py data.path=/dev/zero", "a device", DEVICE, id="dev-zero"),
    ],
)
def test_a_pipe_or_a_device_as_data_path_is_refused_as_not_a_regular_file_never_as_empty(tmp_path, shell, kind, why):
    (tmp_path / "notes.txt").write_text("to be, or not to be, that is the question\n" * 500)  # 21 KB of text
    settings = f"data=text data.cache_dir={tmp_path}/cache hydra.run.dir={tmp_path}/run"
    command = shell.replace("python train.py", f"{sys.executable} {ROOT}/train.py {settings}")
    result = subprocess.run(["bash", "-c", command], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    [line] = result.stderr.splitlines()
    path = line.split("=", 1)[1].split(":", 1)[0]  # what the shell made of it: /dev/fd/63, p, /dev/stdin
    assert (result.returncode, line) == (1, f"error: data.path={path}: {path} is {kind}, {NOT_REGULAR.format(why=why)}")
    assert not (tmp_path / "cache").exists()  # nothing read, nothing built: a device that never ends is not opened
    assert not list((tmp_path / "run").glob("*.pt"))


def test_stdin_redirected_from_a_file_is_that_file_and_reads_as_text(tmp_path):
    (tmp_path / "notes.txt").write_text("to be, or not to be\n")
    kept = os.dup(0)
    try:
        with open(tmp_path / "notes.txt") as stdin:
            os.dup2(stdin.fileno(), 0)  # `< notes.txt`, as a shell redirects a new process's stdin, in this one
        text = load_text(DataConfig(Source.text, "/dev/stdin"))
    finally:
        os.dup2(kept, 0)
        os.close(kept)
    assert text == "to be, or not to be\n"


@pytest.mark.slow
def test_a_token_cache_on_a_full_disk_is_named_and_a_full_disk_under_the_events_is_the_events(
    small_disk,  # noqa: F811 (test_faults_trainer's fixture)
    tmp_path,
):
    cache = small_disk / "cache"
    cache.mkdir()
    (small_disk / "filler").write_bytes(b"\0" * shutil.disk_usage(small_disk).free)
    result = cli("train.py", *SHORT, f"data.cache_dir={cache}", f"hydra.run.dir={tmp_path / 'run'}")
    assert result.returncode == 1, result.stderr
    [line] = result.stderr.strip().splitlines()
    assert re.fullmatch(
        rf"error: {re.escape(str(cache))}/\.\w+\.\w+\.building/train\.npy: No space left on device", line
    )
    assert list(cache.iterdir()) == [], "the unfinished entry is removed"
    with pytest.raises(OSError) as failed:  # the same disk under TensorBoard's events: named as theirs
        writer = SummaryWriter(small_disk / "events")
        for step in range(100_000):  # until the writer thread's failure comes back
            writer.add_text("sample", "x" * 10_000, step)
            writer.flush()
    assert failed.value.filename is None and from_events_writer(failed.value)
