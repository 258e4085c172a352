import json
import subprocess
import sys

import numpy as np
import pytest
import torch

import data.sources
import data.textfiles
import data.tokenizer
from conftest import ROOT
from data import (
    DataConfig,
    DataError,
    Source,
    TokenizerConfig,
    TokenizerKind,
    check_fits,
    encode,
    load_text,
    prepare_tokens,
    train_tokenizer,
)
from data.shakespeare import play_to_text, plays_dir, shakespeare_text
from data.sources import open_corpus
from model import ModelConfig
from task import Task, task_for
from trainer.config import TrainConfig

CHAR = TokenizerConfig(kind=TokenizerKind.char)
BPE = TokenizerConfig(kind=TokenizerKind.bpe, vocab_size=512)


@pytest.fixture(scope="module")
def corpus() -> str:
    return shakespeare_text()


def test_play_markdown_becomes_plain_text():
    markdown = (
        "# Hamlet\n\n## ACT I\n\n### SCENE I. Elsinore.\n\n_FRANCISCO at his post. Enter to him\nBERNARDO_\n\n"
        "**BERNARDO**  \nWho's there?\n\n**FRANCISCO**  \n_\\[Aside]_  \nNay, answer me:  \nstand, and unfold"
        " yourself.\n\n_Exit_\n\n**Ghost**  \n\\--Swear!\n\n**HORATIO**  \n_\\[Within]_\n"
    )
    assert play_to_text(markdown) == (
        "BERNARDO:\nWho's there?\n\nFRANCISCO:\nNay, answer me:\nstand, and unfold yourself.\n\nGHOST:\n--Swear!"
    )  # HORATIO said nothing but a direction


def test_speech_after_a_direction_in_the_same_paragraph_is_kept():
    markdown = (
        "_\\[To SILVIUS]_  \nI will help you, if I can:\n\n"
        "_\\[To FABIAN]_  \n**FABIAN**  \n_\\[Reads]_  \n'By the Lord, madam,\n\n"
        "_Burthen _\\[dispersedly, within_\n\n*Enter King Edward, Derby,\nand Artois.*\n\n[To ROBIN]_  \nHold, sirrah."
    )
    assert play_to_text(markdown) == "I will help you, if I can:\n\nFABIAN:\n'By the Lord, madam,\n\nHold, sirrah."


def test_embedded_corpus_is_plain_text_of_every_play(corpus):
    assert len(list(plays_dir().glob("*/*.md"))) == 38
    assert corpus.startswith("THESEUS:\nNow, fair Hippolyta")  # comedies/a-midsummer-night-s-dream.md
    assert corpus.endswith("\nLet our drums strike.\n")  # tragedies/timon-of-athens.md
    assert "To be, or not to be" in corpus and "HAMLET:\n" in corpus and "PROSPERO:\n" in corpus
    assert not set("#*_\\[]") & set(corpus)
    assert "  " not in corpus.replace("\n", "")  # Markdown's two-space line breaks are gone


@pytest.mark.parametrize("config", [CHAR, BPE], ids=["char", "bpe"])
def test_tokenizer_round_trips_the_corpus(corpus, config):
    cut = int(len(corpus) * 0.9)
    tokenizer = train_tokenizer(config, corpus[:cut])
    assert tokenizer.decode(encode(tokenizer, corpus).tolist()) == corpus


def test_bpe_round_trips_text_it_never_saw(corpus):
    tokenizer = train_tokenizer(BPE, corpus[:200_000])
    text = "Ünïcode — 日本語\ttabs  and\r\nCRLF\n"
    assert tokenizer.decode(encode(tokenizer, text).tolist()) == text
    assert tokenizer.get_vocab_size() == 512


def test_char_ids_are_the_ones_tokenizers_gives():
    tokenizer = train_tokenizer(CHAR, "abc\n\r \U0001f600é")
    text = "cab\n\n\r\rzé\U0001f600\U0001f601 x\u2028"  # unseen characters among them
    assert encode(tokenizer, text).tolist() == tokenizer.encode(text).ids


def test_bpe_encodes_in_pieces_as_it_would_the_whole_text(corpus, monkeypatch):
    tokenizer = train_tokenizer(BPE, corpus[:200_000])
    monkeypatch.setattr(data.tokenizer, "PIECE_CHARS", 64)
    monkeypatch.setattr(data.tokenizer, "CUT_SEARCH", 32)
    text = corpus[:20_000] + "  \t\u3000double  spaces,\ttabs\u00a0and\n\n\nbreaks \n"
    assert encode(tokenizer, text).tolist() == tokenizer.encode(text).ids
    no_place_to_cut = "x" * 150 + " " * 150 + "y"
    assert tokenizer.decode(encode(tokenizer, no_place_to_cut).tolist()) == no_place_to_cut


def test_tokenizers_learn_the_same_from_pieces_as_from_the_whole_text(corpus, monkeypatch):
    text = corpus[:100_000]
    monkeypatch.setattr(data.tokenizer, "PIECE_CHARS", len(text))
    whole = [train_tokenizer(config, text).to_str() for config in (CHAR, BPE)]
    monkeypatch.setattr(data.tokenizer, "PIECE_CHARS", 1000)
    monkeypatch.setattr(data.tokenizer, "CHARS_PER_PART", 500)
    chunks = [text[i : i + 777] for i in range(0, len(text), 777)]
    assert [train_tokenizer(config, chunks).to_str() for config in (CHAR, BPE)] == whole


def test_char_tokenizer_has_one_token_per_character_and_marks_unseen_ones():
    tokenizer = train_tokenizer(CHAR, "abc\n ")
    assert tokenizer.get_vocab_size() == 6  # five characters and [UNK]
    ids = encode(tokenizer, "ab\nz")
    assert len(ids) == 4 and ids[-1] == tokenizer.token_to_id("[UNK]")
    assert tokenizer.decode(ids.tolist()) == "ab\n"  # and it never shows up in generated text


def write(path, text):
    path.write_text(text, encoding="utf-8")
    return path


def text_config(path, cache_dir, **settings) -> DataConfig:
    return DataConfig(source=Source.text, path=str(path), cache_dir=str(cache_dir), **settings)


def test_text_file_is_read_exactly(tmp_path):
    text = "first line\n\nthird line, no newline at the end"
    assert load_text(text_config(write(tmp_path / "a.txt", text), tmp_path)) == text


def test_text_is_read_in_blocks_that_may_cut_a_character_or_a_line_break(tmp_path, monkeypatch):
    monkeypatch.setattr(data.textfiles, "READ_BLOCK_BYTES", 3)
    path = tmp_path / "a.txt"
    path.write_bytes("ab\r\ncé\r\rx\r".encode())  # "\r\n" cut after "\r"; "é" cut in two; a lone "\r" at the end
    assert load_text(text_config(path, tmp_path)) == "ab\ncé\n\nx\n"


@pytest.mark.parametrize("raw, byte, offset", [(b"abc\xc3\xa9d\xe9!", "0xe9", 6), (b"ab\xc3", "0xc3", 2)])
def test_a_byte_that_is_not_utf8_is_named_with_its_offset_in_the_file(tmp_path, monkeypatch, raw, byte, offset):
    monkeypatch.setattr(data.textfiles, "READ_BLOCK_BYTES", 4)
    (tmp_path / "a.bin").write_bytes(raw)
    with pytest.raises(DataError, match=rf"a.bin is not UTF-8 text \(byte {byte} at offset {offset}\)"):
        load_text(text_config(tmp_path / "a.bin", tmp_path))


def test_a_file_holding_only_whitespace_is_refused_by_name(tmp_path):
    write(tmp_path / "a.txt", "some text\n")
    write(tmp_path / "b.txt", " \n\t\r\n")
    with pytest.raises(DataError, match=rf"^data.path={tmp_path}/\*.txt: {tmp_path}/b.txt holds only whitespace$"):
        load_text(text_config(tmp_path / "*.txt", tmp_path))


def test_text_files_of_a_glob_are_joined_on_line_breaks_with_unix_line_endings(tmp_path):
    write(tmp_path / "a.txt", "first file\r\nno newline at the end")
    write(tmp_path / "b.txt", "second file\n")
    assert load_text(text_config(tmp_path / "*.txt", tmp_path)) == "first file\nno newline at the end\nsecond file\n"


def test_split_is_contiguous_with_validation_at_the_end(tmp_path):
    text = "".join(f"line {i}\n" for i in range(1000))
    data = prepare_tokens(text_config(write(tmp_path / "a.txt", text), tmp_path / "cache"), CHAR)
    cut = int(len(text) * 0.9)
    assert data.tokenizer.decode(data.train.tolist()) == text[:cut]
    assert data.tokenizer.decode(data.val.tolist()) == text[cut:]


def test_cache_is_reused_and_rebuilt_when_text_or_tokenizer_change(tmp_path):
    path = write(tmp_path / "a.txt", "to be or not to be\n" * 200)
    config = text_config(path, tmp_path / "cache")
    first = prepare_tokens(config, CHAR)
    again = prepare_tokens(config, CHAR)
    assert first.built and not again.built and again.path == first.path
    assert np.array_equal(first.train, again.train)
    assert first.path.parent == tmp_path / "cache"

    other_tokenizer = prepare_tokens(config, BPE)
    assert other_tokenizer.built and other_tokenizer.path != first.path

    write(path, "that is the question\n" * 200)
    changed_text = prepare_tokens(config, CHAR)
    assert changed_text.built and changed_text.path != first.path
    assert changed_text.tokenizer.decode(changed_text.val.tolist()) in "that is the question\n" * 200
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == sorted(
        p.path.name for p in (first, other_tokenizer, changed_text)
    )  # no temporary directories left behind


def test_hub_rows_are_read_in_chunks_one_row_to_a_line(tmp_path, monkeypatch):
    rows = tmp_path / "rows"
    rows.mkdir()
    (rows / "rows.jsonl").write_text(
        "".join(json.dumps({"text": text}) + "\n" for text in ["one", "two\nlines", "three"])
    )
    monkeypatch.setattr(data.sources, "HUB_ROWS_PER_CHUNK", 2)
    config = DataConfig(source=Source.hub, name=str(rows), cache_dir=str(tmp_path))
    assert list(open_corpus(config).read()) == ["one\ntwo\nlines", "\nthree"]


def test_only_the_hub_source_imports_datasets(tmp_path):
    write(tmp_path / "a.txt", "to be or not to be\n" * 100)
    program = (
        "import sys; from data import *; "
        f"prepare_tokens(DataConfig(source=Source.text, path='{tmp_path}/a.txt', cache_dir='{tmp_path}'), "
        "TokenizerConfig()); print('datasets' in sys.modules)"
    )
    result = subprocess.run([sys.executable, "-c", program], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.stdout.strip() == "False", result.stderr


def test_hub_source_offline_fails_at_once_naming_what_to_use_instead(tmp_path):
    config = DataConfig(source=Source.hub, name="karpathy/tiny_shakespeare", cache_dir=str(tmp_path))
    with pytest.raises(
        DataError, match=r"data.name=karpathy/tiny_shakespeare: the hub cannot be reached .* data=text data.path="
    ):
        load_text(config)


def test_hub_source_without_network_fails_at_once(tmp_path, monkeypatch):
    def no_dns(*args, **kwargs):
        raise OSError("Name or service not known")

    monkeypatch.setattr(data.sources.hub_constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(data.sources.socket, "getaddrinfo", no_dns)
    config = DataConfig(source=Source.hub, name="karpathy/tiny_shakespeare", cache_dir=str(tmp_path))
    with pytest.raises(DataError, match=r"hub cannot be reached .* data=text data.path=FILE.* HF_HUB_OFFLINE=1"):
        load_text(config)


def next_token(block_size: int) -> Task:
    return task_for(TrainConfig(model=ModelConfig(block_size=block_size)), None)


def test_batches_are_next_token_windows_from_a_seeded_generator():
    tokens = np.arange(1000, dtype=np.uint16)
    x, y = next_token(16).draw(tokens, 8, torch.Generator().manual_seed(3), torch.device("cpu"))
    assert x.shape == y.shape == (8, 16) and x.dtype == torch.long
    assert torch.equal(y[:, :-1], x[:, 1:]) and torch.equal(y[:, 0], x[:, 0] + 1)
    x2, _ = next_token(16).draw(tokens, 8, torch.Generator().manual_seed(3), torch.device("cpu"))
    assert torch.equal(x, x2)


def test_a_split_shorter_than_one_window_is_refused_naming_the_setting():
    splits = {"train": np.arange(1000, dtype=np.uint16), "val": np.arange(64, dtype=np.uint16)}
    check_fits(splits, 63)
    with pytest.raises(DataError, match=r"^model.block_size=64: the val split has only 64 tokens"):
        check_fits(splits, 64)


def test_batches_reach_the_last_token_and_never_past_it():
    tokens = np.arange(20, dtype=np.uint16)
    _, y = next_token(16).draw(tokens, 2000, torch.Generator().manual_seed(0), torch.device("cpu"))
    assert y.max().item() == 19
