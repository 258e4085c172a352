"""data=copy: a text made on the fly where the next token of a repeated block is the one data.distance back."""

import numpy as np
import pytest
import torch

from data import DataConfig, Source, TokenizerConfig, TokenizerKind, data_problems, prepare_tokens
from data.synthetic import COPY_CHARS, copy_text, far_targets, period


@pytest.mark.parametrize("distance", [1, 4, 60])
def test_each_line_is_a_random_block_of_letters_then_the_same_block(distance):
    text = copy_text(distance, 50 * period(distance))
    lines = text.split("\n")[:-1]
    assert len(lines) == 50 and all(len(line) == 2 * distance for line in lines)
    assert all(line[:distance] == line[distance:] and line.isalpha() and line.islower() for line in lines)
    assert len(set(lines)) > 20  # blocks drawn at random (of 26 possible ones at distance 1), not one again and again


def test_the_same_distance_always_gives_the_same_text_and_another_a_different_one():
    assert copy_text(16) == copy_text(16) and len(copy_text(16)) == COPY_CHARS
    assert copy_text(16, 1000) != copy_text(17, 1000)


def test_in_the_cached_validation_split_every_far_target_is_the_token_distance_back(tmp_path):
    distance, block_size = 7, 32
    data = prepare_tokens(DataConfig(source=Source.copy, distance=distance, cache_dir=str(tmp_path)), TokenizerConfig())
    assert data.tokenizer.get_vocab_size() == 28  # 26 letters, the line break, [UNK]
    val = np.asarray(data.val)
    starts = torch.arange(0, len(val) - block_size - 1, 997)
    far = far_targets(len(data.train) + starts, block_size, distance)  # the val split starts at token len(train)
    assert far.float().mean() > 0.3
    for start, row in zip(starts.tolist(), far):
        for p in np.flatnonzero(row.numpy()):
            assert val[start + p + 1] == val[start + p + 1 - distance]


@pytest.mark.parametrize(
    "settings, tokenizer, problem",
    [
        ({"distance": 0}, TokenizerKind.char, "data.distance=0: must be positive"),
        ({"distance": 65}, TokenizerKind.char, "data.distance=65: must be at most model.block_size=64"),
        ({"distance": 16}, TokenizerKind.bpe, "tokenizer=bpe: data=copy is single letters"),
    ],
)
def test_each_copy_setting_that_cannot_work_gets_one_line_naming_it(settings, tokenizer, problem):
    problems = data_problems(DataConfig(source=Source.copy, **settings), TokenizerConfig(kind=tokenizer), 64)
    assert len(problems) == 1 and problems[0].startswith(problem)
    assert data_problems(DataConfig(source=Source.copy, distance=64), TokenizerConfig(), 64) == []
    assert data_problems(DataConfig(distance=999), TokenizerConfig(kind=TokenizerKind.bpe), 64) == []  # not copy
