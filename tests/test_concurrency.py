"""Runs side by side: jobs of a parallel sweep, or two runs started at once, share the token cache and never
share a run directory."""

import numpy as np
import pytest

from conftest import SHORT, Forked
from data import DataConfig, Source, TokenizerConfig, prepare_tokens

pytestmark = pytest.mark.slow

BUILD = """
import sys
from data import DataConfig, Source, prepare_tokens, TokenizerConfig
data = prepare_tokens(DataConfig(source=Source.text, path=sys.argv[2], cache_dir=sys.argv[1]), TokenizerConfig())
print(data.built, data.path)
"""


@pytest.mark.parametrize("damaged", [False, True], ids=["no entry yet", "a damaged entry"])
def test_processes_building_the_same_cache_entry_at_once_all_get_it_whole(tmp_path, damaged):
    text = tmp_path / "text.txt"
    text.write_text("".join(f"line {i}: to be, or not to be\n" for i in range(20_000)))
    cache = tmp_path / "cache"
    if damaged:  # each process finds it damaged, and moves it aside or sees another do so
        config = DataConfig(source=Source.text, path=str(text), cache_dir=str(cache))
        (prepare_tokens(config, TokenizerConfig()).path / "val.npy").write_bytes(b"junk")
    builders = [Forked(str(cache), str(text), patch=BUILD, main=None) for _ in range(3)]  # python -c BUILD ...
    outputs, warnings = zip(*(builder.communicate(timeout=300) for builder in builders))
    assert all(builder.returncode == 0 for builder in builders), warnings
    assert all(len(warning.splitlines()) <= int(damaged) for warning in warnings), warnings  # one line, if any
    outputs = [output.split() for output in outputs]
    assert len({path for _, path in outputs}) == 1  # one entry, however many built it
    assert [p.name for p in cache.iterdir()] == [outputs[0][1].rsplit("/", 1)[1]]  # no staging directories left
    data = prepare_tokens(DataConfig(source=Source.text, path=str(text), cache_dir=str(cache)), TokenizerConfig())
    assert not data.built and data.tokenizer.decode(np.concatenate([data.train, data.val]).tolist()) == text.read_text()


def test_runs_started_in_the_same_second_get_their_own_directories(tmp_path, cache_dir):
    settings = [*SHORT, "trainer.max_steps=2", "trainer.eval_interval=1", f"data.cache_dir={cache_dir}"]
    runs = [Forked(*settings, cwd=tmp_path, stdout=False) for _ in range(2)]
    assert all(run.wait(timeout=120) == 0 for run in runs), [run.stderr.read() for run in runs]
    run_dirs = sorted(tmp_path.glob("outputs/*/*"))
    assert len(run_dirs) == 2
    assert all(len(list(run_dir.glob("events.out.tfevents.*"))) == 1 for run_dir in run_dirs)
