import numpy as np
import pytest
import torch

from data import (
    DataConfig,
    DataError,
    Source,
    TokenizerConfig,
    TokenizerKind,
    check_fits,
    encode,
    get_batch,
    load_text,
    prepare_tokens,
    train_tokenizer,
)
from data.shakespeare import play_to_text, plays_dir, shakespeare_text

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


def test_text_file_is_read_exactly_through_datasets(tmp_path):
    text = "first line\n\nthird line, no newline at the end"
    assert load_text(text_config(write(tmp_path / "a.txt", text), tmp_path)) == text


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


def test_hub_source_offline_fails_at_once_naming_what_to_use_instead(tmp_path):
    config = DataConfig(source=Source.hub, name="karpathy/tiny_shakespeare", cache_dir=str(tmp_path))
    with pytest.raises(
        DataError, match=r"data.name=karpathy/tiny_shakespeare: the hub cannot be reached .* data=text data.path="
    ):
        load_text(config)


def test_hub_source_without_network_fails_at_once(tmp_path, monkeypatch):
    import data.sources

    def no_dns(*args, **kwargs):
        raise OSError("Name or service not known")

    monkeypatch.setattr(data.sources.hub_constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(data.sources.socket, "getaddrinfo", no_dns)
    config = DataConfig(source=Source.hub, name="karpathy/tiny_shakespeare", cache_dir=str(tmp_path))
    with pytest.raises(DataError, match=r"hub cannot be reached .* data=text data.path=FILE.* HF_HUB_OFFLINE=1"):
        load_text(config)


def test_batches_are_next_token_windows_from_a_seeded_generator():
    tokens = np.arange(1000, dtype=np.uint16)
    x, y = get_batch(tokens, 8, 16, torch.Generator().manual_seed(3), torch.device("cpu"))
    assert x.shape == y.shape == (8, 16) and x.dtype == torch.long
    assert torch.equal(y[:, :-1], x[:, 1:]) and torch.equal(y[:, 0], x[:, 0] + 1)
    x2, _ = get_batch(tokens, 8, 16, torch.Generator().manual_seed(3), torch.device("cpu"))
    assert torch.equal(x, x2)


def test_a_split_shorter_than_one_window_is_refused_naming_the_setting():
    splits = {"train": np.arange(1000, dtype=np.uint16), "val": np.arange(64, dtype=np.uint16)}
    check_fits(splits, 63)
    with pytest.raises(DataError, match=r"^model.block_size=64: the val split has only 64 tokens"):
        check_fits(splits, 64)


def test_batches_reach_the_last_token_and_never_past_it():
    tokens = np.arange(20, dtype=np.uint16)
    _, y = get_batch(tokens, 2000, 16, torch.Generator().manual_seed(0), torch.device("cpu"))
    assert y.max().item() == 19
