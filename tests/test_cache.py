"""The token cache checks itself: a damaged or partial entry is built again, with one warning, and never used; its key
follows the text's bytes; and building it takes memory that does not grow with the text or its lines."""

import logging
import os
import subprocess
import sys

import numpy as np
import pytest
from numpy.lib import format as npy

import data.cache
from conftest import ROOT
from data import DataConfig, DataError, Source, TokenizerConfig, prepare_tokens
from data.shakespeare import shakespeare_text
from data.textfiles import file_digest, text_chunks

TEXT = "".join(f"line {i}: to be, or not to be, that is the question\n" for i in range(2000))


def header_bytes(path) -> int:
    with open(path, "rb") as file:
        npy.read_magic(file)
        npy.read_array_header_1_0(file)
        return file.tell()


def zero_the_ids(entry):
    path = entry / "train.npy"
    start = header_bytes(path)
    with open(path, "r+b") as file:
        file.seek(start)
        file.write(bytes(path.stat().st_size - start))


def random_ids(entry):
    path = entry / "train.npy"
    ids = np.load(path)
    vocab_size = len(set(TEXT)) + 1
    np.save(path, np.random.default_rng(0).integers(0, vocab_size, len(ids)).astype(ids.dtype))


def truncate(entry):
    os.truncate(entry / "train.npy", (entry / "train.npy").stat().st_size // 2)


def junk_tokenizer(entry):
    path = entry / "tokenizer.json"
    path.write_bytes(path.read_bytes()[::-1])  # as long as before, and not JSON


DAMAGE = {
    "zeroed ids": (zero_the_ids, "train.npy does not match its checksum"),
    "random ids": (random_ids, "train.npy does not match its checksum"),
    "truncated": (truncate, "train.npy holds"),
    "missing file": (lambda entry: (entry / "val.npy").unlink(), "val.npy is missing"),
    "junk tokenizer": (junk_tokenizer, "tokenizer.json does not match its checksum"),
    "missing manifest": (lambda entry: (entry / "manifest.json").unlink(), "manifest.json is missing"),
    "junk manifest": (lambda entry: (entry / "manifest.json").write_text("[]"), "manifest.json is not a manifest"),
}


@pytest.fixture
def text_config(tmp_path) -> DataConfig:
    (tmp_path / "text.txt").write_text(TEXT)
    return DataConfig(source=Source.text, path=str(tmp_path / "text.txt"), cache_dir=str(tmp_path / "cache"))


@pytest.mark.parametrize("damage, problem", DAMAGE.values(), ids=DAMAGE.keys())
def test_damaged_entry_is_built_again_with_one_warning(text_config, damage, problem, caplog):
    built = prepare_tokens(text_config, TokenizerConfig())
    entry, clean = built.path, (np.array(built.train), np.array(built.val), built.tokenizer.to_str())
    del built  # its memory maps: the damage may shorten the files under them
    damage(entry)
    with caplog.at_level(logging.WARNING):
        rebuilt = prepare_tokens(text_config, TokenizerConfig())
    assert len(caplog.records) == 1
    message = caplog.records[0].getMessage()
    assert message.startswith(f"token cache entry {entry}: {problem}") and "\n" not in message
    assert rebuilt.built and rebuilt.path == entry
    assert np.array_equal(rebuilt.train, clean[0]) and np.array_equal(rebuilt.val, clean[1])
    assert rebuilt.tokenizer.to_str() == clean[2]
    assert [path.name for path in entry.parent.iterdir()] == [entry.name]  # nothing set aside is left behind


def test_key_follows_the_bytes_not_the_modification_time(text_config):
    path = text_config.path
    first = prepare_tokens(text_config, TokenizerConfig())
    stat = os.stat(path)
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    assert not prepare_tokens(text_config, TokenizerConfig()).built  # touched, not changed

    with open(path, "r+") as file:  # the same size and modification time, one character changed
        file.write("L")
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    edited = prepare_tokens(text_config, TokenizerConfig())
    assert edited.built and edited.path != first.path
    assert edited.tokenizer.decode(edited.train[:6].tolist()) == "Line 0"


def test_a_file_that_changes_while_it_is_read_is_refused(tmp_path):
    path = str(tmp_path / "a.txt")
    (tmp_path / "a.txt").write_text("before\n")
    stale = file_digest(path)
    (tmp_path / "a.txt").write_text("after!\n")
    with pytest.raises(DataError, match=rf"^data.path=a.txt: {path} changed while it was being read; run again$"):
        list(text_chunks("a.txt", [path], [stale]))


PEAK_MEMORY = """
import sys
from data import DataConfig, Source, TokenizerConfig, TokenizerKind, prepare_tokens

def peak_bytes():
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmHWM:"))

imported = peak_bytes()
config = DataConfig(source=Source.text, path=sys.argv[1], cache_dir=sys.argv[2])
data = prepare_tokens(config, TokenizerConfig(kind=TokenizerKind(sys.argv[3]), vocab_size=512))
print(peak_bytes() - imported, len(data.train) + len(data.val), data.built)
"""


@pytest.mark.parametrize("kind, chars", [("char", 20_000_000), pytest.param("bpe", 8_000_000, marks=pytest.mark.slow)])
def test_memory_to_build_the_cache_does_not_grow_with_a_line(tmp_path, kind, chars):
    # The plays as one line: 20 million characters of them, 8 million for BPE (whose training takes the time).
    (tmp_path / "line.txt").write_text((shakespeare_text().replace("\n", " ") * 5)[:chars])
    command = [sys.executable, "-c", PEAK_MEMORY, str(tmp_path / "line.txt"), str(tmp_path / "cache"), kind]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)
    growth, tokens, built = result.stdout.split()
    assert built == "True" and (kind == "bpe" or int(tokens) == chars), result.stderr
    # Measured: char 5 MB, bpe 63 MB (its trainer's word counts, a batch of encodings, worker threads), for 5 MB of
    # text as for 50 MB (bpe 60 MB for 8 MB as for 20 MB); the old cache took 6.9 GB for an 18.5 MB line.
    assert int(growth) < chars + {"char": 0, "bpe": 64 << 20}[kind]


def test_an_entry_damaged_as_soon_as_it_is_built_is_an_error(text_config, monkeypatch, caplog):
    monkeypatch.setattr(data.cache, "write_manifest", lambda directory, names, facts: None)  # as if it were deleted
    with pytest.raises(DataError, match=r"^data.cache_dir: .* was damaged as soon as it was built; does another"):
        prepare_tokens(text_config, TokenizerConfig())
    assert "manifest.json is missing" in caplog.text
