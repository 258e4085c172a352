"""How fast the Attention tab answers, and what it adds to TensorBoard's start. Not a test: a measurement to rerun.

python tests/attention_timing.py panels RUN_DIR     # typing a 64-token text until drawn: one panel, then ten
python tests/attention_timing.py steps RUN_DIR      # the step selector moved until the panel shows that step
python tests/attention_timing.py generate RUN_DIR   # 200 tokens written after the text until shown
python tests/attention_timing.py start LOGDIR       # TensorBoard's start, with the plugin and without it

`panels` copies RUN_DIR (a default-size run) into ten runs of a scratch logdir: ten models to load, as ten runs are;
a panel is drawn whole (the heat map, the loss strips, every query's prediction and counterfactuals), so this is the
issue's "panel within one second of the last keystroke". `steps` and `generate` copy it once, its kept checkpoints
(RUN_DIR/steps/) with it: `steps` needs a run that kept two or more, and moves between checkpoints each already read
once (the first read of a checkpoint file loads it from disk, which the table says apart).
`start` times `python -m tensorboard.main --logdir LOGDIR --port 0` from launch until /data/plugins_listing answers,
alternating with and without the plugin in the same environment: without, the same TensorBoard is started with the
plugin's entry point left out before anything of it is imported.
"""

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from attention_browser import (
    TAB,
    WRITTEN,
    browser_page,
    move_step,
    open_tab,
    plugin_environment,
    tensorboard,
    type_text,
    wait_for_panels,
)

# 64 characters: 64 tokens for the character-level default model, its whole context.
TEXT = "To be, or not to be, that is the question: Whether 'tis nobler i"
LAST = "abcdefghij"  # the last character, a different one in each of the rounds
WAIT_MS = 120_000  # Playwright's 30 s default can pass on a loaded machine: a slow answer is measured, not an error
WITHOUT_PLUGIN = f"""
import sys
from tensorboard import default, main
every = default._iter_entry_points
default._iter_entry_points = lambda group: [e for e in every(group) if e.name != "{TAB}"]
sys.argv[0] = "tensorboard"
main.run_main()
"""


def time_panels(run_dir: Path) -> None:
    scratch = Path(tempfile.mkdtemp(prefix="attention-timing-"))
    for number in range(10):
        shutil.copytree(run_dir, scratch / f"{number}_copy", ignore=shutil.ignore_patterns("events.*"))
    try:
        with tensorboard(scratch, scratch / "tensorboard.log") as url, browser_page() as page:
            page.set_default_timeout(WAIT_MS)
            frame = open_tab(page, url)
            wait_for_panels(frame)  # the first answers import torch and load the models: not what a person waits on
            for count in (1, 10):
                boxes = frame.locator(".run input")
                for index in range(10):
                    boxes.nth(index).set_checked(index < count)
                wait_for_panels(frame)
                took = []
                for round_ in range(5):
                    text = TEXT[:-1] + LAST[len(LAST) // 2 * (count > 1) + round_]  # a new text each time
                    started = time.perf_counter()
                    frame.locator("#text").fill(text)  # the last keystroke
                    wait_for_panels(frame)
                    took.append(time.perf_counter() - started)
                print(f"{count} panel(s), 64 tokens: {statistics.median(took):.3f} s median of 5 "
                      f"({', '.join(f'{t:.3f}' for t in took)}), typing pause of 0.12 s included")  # fmt: skip
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def one_panel(run_dir: Path) -> Path:
    """A scratch logdir holding a copy of RUN_DIR (its kept checkpoints too) as the run 0_copy."""
    scratch = Path(tempfile.mkdtemp(prefix="attention-timing-"))
    shutil.copytree(run_dir, scratch / "0_copy", ignore=shutil.ignore_patterns("events.*"))
    return scratch


def time_steps(run_dir: Path) -> None:
    scratch = one_panel(run_dir)
    try:
        with tensorboard(scratch, scratch / "tensorboard.log") as url, browser_page() as page:
            page.set_default_timeout(WAIT_MS)
            frame = open_tab(page, url)
            type_text(frame, TEXT)
            count = int(frame.locator("input.step").get_attribute("max")) + 1
            assert count >= 2, f"{run_dir} kept {count} checkpoint: train it with trainer.keep_checkpoints of 2 or more"
            first = []
            for index in range(count):  # each checkpoint read once: the first read loads it from disk
                started = time.perf_counter()
                move_step(frame, "0_copy", index)
                first.append(time.perf_counter() - started)
            print(f"first read of each of {count} checkpoints: {statistics.median(first):.3f} s median")
            took, index = [], count - 1
            for round_ in range(6):
                index = (index + 1 + round_ % (count - 1)) % count  # another step each time
                started = time.perf_counter()
                move_step(frame, "0_copy", index)
                took.append(time.perf_counter() - started)
            print(f"step selector moved, 64 tokens: {statistics.median(took):.3f} s median of 6 "
                  f"({', '.join(f'{t:.3f}' for t in took)}), pause of 0.12 s included")  # fmt: skip
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def time_generate(run_dir: Path) -> None:
    scratch = one_panel(run_dir)
    try:
        with tensorboard(scratch, scratch / "tensorboard.log") as url, browser_page() as page:
            page.set_default_timeout(WAIT_MS)
            frame = open_tab(page, url)
            type_text(frame, TEXT)
            frame.locator("#tokens").fill("200")
            took = []
            for seed in range(6):
                frame.locator("#seed").fill(str(seed))
                started = time.perf_counter()
                frame.locator("#generate").click()
                frame.wait_for_function(WRITTEN, polling="raf")
                took.append(time.perf_counter() - started)
                assert not frame.locator(".generation p.error").count(), frame.locator(".generation").inner_text()
            print(f"200 tokens written: {statistics.median(took[1:]):.3f} s median of the last 5 "
                  f"({', '.join(f'{t:.3f}' for t in took)}; the first reads the model)")  # fmt: skip
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def start_time(logdir: Path, with_plugin: bool, scratch: Path) -> float:
    command = ["-m", "tensorboard.main"] if with_plugin else ["-c", WITHOUT_PLUGIN]
    log_path = scratch / "start.log"
    started = time.perf_counter()
    with log_path.open("w") as log:
        server = subprocess.Popen([sys.executable, *command, "--logdir", str(logdir), "--port", "0"], stdout=log,
                                  stderr=log, env=plugin_environment(scratch / "plugin"))  # fmt: skip
    try:
        while True:
            text = log_path.read_text()
            if "http://localhost:" in text:
                port = text.split("http://localhost:")[1].split("/")[0]
                try:
                    listing = urllib.request.urlopen(f"http://localhost:{port}/data/plugins_listing", timeout=30).read()
                    break
                except OSError:
                    pass
            assert server.poll() is None, text
            time.sleep(0.01)
        took = time.perf_counter() - started
        assert (TAB.encode() in listing) == with_plugin
        return took
    finally:
        server.terminate()
        server.wait(timeout=30)


def time_start(logdir: Path) -> None:
    scratch = Path(tempfile.mkdtemp(prefix="tensorboard-start-"))
    times = {True: [], False: []}
    for _ in range(7):
        for with_plugin in (False, True):
            times[with_plugin].append(start_time(logdir, with_plugin, scratch))
    shutil.rmtree(scratch, ignore_errors=True)
    without, with_ = statistics.median(times[False]), statistics.median(times[True])
    for name, values in (("without the plugin", times[False]), ("with the plugin", times[True])):
        print(f"{name}: {statistics.median(values):.3f} s median of 7 ({', '.join(f'{t:.2f}' for t in values)})")
    print(f"with / without: {with_ / without:.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=["panels", "steps", "generate", "start"])
    parser.add_argument("path", type=Path)
    args = parser.parse_args()
    measure = {"panels": time_panels, "steps": time_steps, "generate": time_generate, "start": time_start}
    measure[args.what](args.path.resolve())


if __name__ == "__main__":
    main()
