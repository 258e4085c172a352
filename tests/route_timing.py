"""How fast the Attention tab's routes answer, on a real `tensorboard --logdir`. Not a test: a measurement to rerun
on a quiet machine (the issue's targets are for 2 cores).

python tests/route_timing.py RUN_DIR     # a default-size run (block_size 64) that kept some steps (RUN/steps/)

It copies RUN_DIR into a scratch logdir, starts TensorBoard on it and times, as medians over several rounds:
- a panel: POST ./attention for a 64-token text (everything the panel draws: weights, strips, top fives at the
  temperature, counterfactuals), each round a text differing in its last character, as typing makes it; target 1 s;
- the step selector: ./attention at each kept step in turn, each file read for the first time (load included),
  then again (the model kept); target 0.5 s;
- ./generate of 200 tokens; target 2 s.
"""

import argparse
import json
import shutil
import statistics
import tempfile
import time
import urllib.request
from pathlib import Path

from attention_browser import tensorboard  # beside this file: a script's own directory is on sys.path

TEXT = "To be, or not to be, that is the question: Whether 'tis nobler i"  # 64 characters: 64 tokens, char-level
LAST = "abcdefghij"


def post(url: str, body: dict) -> float:
    """Seconds until the whole answer is read."""
    request = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    start = time.perf_counter()
    with urllib.request.urlopen(request, timeout=120) as response:
        answer = json.load(response)
    assert "error" not in answer, answer
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path)
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="route-timing-"))
    shutil.copytree(args.run_dir, scratch / "logdir" / "run")
    with tensorboard(scratch / "logdir", scratch / "tensorboard.log") as address:
        url = address + "data/plugin/tinylm_attention/"
        with urllib.request.urlopen(url + "runs", timeout=120) as response:
            [run] = json.load(response)["runs"]
        post(url + "attention", {"run": "run", "text": TEXT})  # the first request imports torch: not timed
        panel = [post(url + "attention", {"run": "run", "text": TEXT[:-1] + last}) for last in LAST]
        steps = [kept["step"] for kept in run["steps"]]
        first = [post(url + "attention", {"run": "run", "text": TEXT, "step": step}) for step in steps]
        again = [post(url + "attention", {"run": "run", "text": TEXT, "step": step}) for step in steps]
        written = [
            post(url + "generate", {"run": "run", "text": TEXT, "tokens": 200, "seed": seed}) for seed in range(5)
        ]
    print(f"panel, 64 tokens:             median {statistics.median(panel):.3f} s, max {max(panel):.3f} s (target 1 s)")
    print(
        f"step selector, file read:     median {statistics.median(first):.3f} s over {len(steps)} steps (target 0.5 s)"
    )
    print(f"step selector, model kept:    median {statistics.median(again):.3f} s")
    print(f"200 generated tokens:         median {statistics.median(written):.3f} s (target 2 s)")
    shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
