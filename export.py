"""A run or a sweep as one HTML page that any browser opens, with nothing installed: the lesson's curves and the
Attention tab's panel, its model computed in the page.

python export.py ckpt=multirun/leak/DATE out=leak.html                  # each run at its last step
python export.py ckpt=multirun/leak/DATE out=leak.html steps=all        # every step the runs kept: a step selector
python export.py ckpt=outputs/DATE/TIME out=run.html steps=[100,500] title="Our run" force=true

The page is one file: no server, no network, no file beside it. Open it from disk or put it on any static host (a
course page, GitHub Pages, a learning platform). It holds each run's curves as TensorBoard's Custom Scalars shows them
(read from its events now) and the Attention panel as the tab draws it (static/index.js and style.css, inlined),
answered in the page from the weights of the steps chosen (viewer/page.py's data, static/page.js's forward). A run the
page cannot represent is left out in one line that names it and why ([Page](docs/page.md)).
"""

import python_version  # noqa: F401 (first: an older Python is refused in one line, python_version.py)
import trainer.startup  # noqa: F401 (first of all: a Ctrl-C while torch loads ends in one line, trainer/startup.py)

# isort: split
import os
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import hydra
from hydra.core.config_store import ConfigStore
from omegaconf import DictConfig, ListConfig, OmegaConf

from attend import runs_of
from data.textfiles import not_regular
from trainer.cli import one_line_errors, run_with_one_line_errors
from trainer.config import ConfigError, to_typed
from viewer.page import page_data
from viewer.page_curves import page_curves
from viewer.page_file import ANSWERS, DOCTYPE, block_start, page_html
from viewer.runs import RunCheckpoints, steps_listed


@dataclass
class ExportConfig:
    ckpt: Optional[str] = None  # a run directory, or a directory of runs (a sweep): every run at or below it
    out: Optional[str] = None  # the HTML file to write
    steps: Any = "last"  # last (each run's last kept step), all (every step kept), or a list of steps: [100,500]
    force: bool = False  # replace the page out names; without it a page is never overwritten, with it nothing else is
    title: Optional[str] = None  # the page's heading; default: tinylm and the directory's last two names


ConfigStore.instance().store(name="export_schema", node=ExportConfig)  # the first entry of configs/export.yaml


def check_settings(config: ExportConfig) -> Path:
    """The settings checked before any run is read; returns the page's path."""
    if not config.ckpt:
        raise ConfigError("ckpt: give a run directory or a sweep, e.g. ckpt=multirun/leak/DATE")
    if not config.out:
        raise ConfigError("out: give the HTML file to write, e.g. out=leak.html")
    out = Path(config.out).expanduser()
    if out.is_dir() or config.out.endswith(os.sep):
        raise ConfigError(f"out={config.out}: a directory; give the HTML file to write, e.g. out={out / 'leak.html'}")
    if out.is_symlink():  # replaced, the link would go and its file stay; followed, it could lead anywhere
        raise ConfigError(f"out={config.out}: a symbolic link (to {os.readlink(out)}); give the file itself")
    if out.exists():
        if kind := not_regular(str(out)):
            raise ConfigError(f"out={config.out}: {kind[0]}, not a regular file; give the HTML file to write")
        if not config.force:
            raise ConfigError(
                f"out={config.out}: exists; a page is never overwritten silently: add force=true to replace it"
            )
        if not is_page(out):
            raise ConfigError(
                f"out={config.out}: exists and is not a page export.py wrote; force=true replaces a page, never "
                "another file: give the page a name of its own"
            )
    if not out.parent.is_dir():
        raise ConfigError(f"out={config.out}: no folder {out.parent} to write it in")
    probe = out.with_name(f".{out.name}.{uuid.uuid4().hex}.tmp")
    try:  # before the runs are read: a folder that cannot take the page is said at once
        probe.touch(exist_ok=False)
        probe.unlink()
    except OSError as error:
        raise ConfigError(f"out={config.out}: its folder {out.parent} cannot be written ({error.strerror})") from None
    return out


def is_page(path: Path) -> bool:
    """Whether `path` holds a page export.py wrote (its block of the runs' data, viewer/page_file.py's ANSWERS), read
    in blocks: the only file force=true replaces, so that a slip of the name never costs a checkpoint or a log."""
    marker, kept = block_start(ANSWERS).encode(), b""
    with open(path, "rb") as file:
        if not file.read(len(DOCTYPE)).lower() == DOCTYPE.encode():
            return False
        while block := file.read(1 << 20):
            if marker in kept + block:
                return True
            kept = block[-len(marker) :]
    return False


def steps_wanted(steps: Any) -> str | list[int]:
    """steps= as "last", "all" or a list of steps (one step alone is a list of one)."""
    if steps in ("last", "all"):
        return steps
    if type(steps) is int and steps >= 0:
        return [steps]
    if isinstance(steps, list | ListConfig) and steps and all(type(s) is int and s >= 0 for s in steps):
        return sorted(set(steps))
    raise ConfigError(f"steps={steps}: give last, all, or a list of the steps the runs kept, e.g. steps=[100,500]")


def chosen_steps(run: RunCheckpoints, steps: str | list[int]) -> list[int | None]:
    """The steps of `run` the page holds (None: its default checkpoint, for a run whose steps cannot be listed); a
    listed step it did not keep is a ConfigError naming the steps it kept."""
    kept = [kept.step for kept in run.steps]
    if not kept or not run.checkpoint:
        return [None]  # viewer/page.py says why it cannot be read, or reads it as the tab does
    if steps == "last":
        return kept[-1:]
    if steps == "all":
        return kept
    if missing := [step for step in steps if step not in kept]:
        listed = ",".join(str(step) for step in steps)
        raise ConfigError(
            f"steps=[{listed}]: {run.name} kept no checkpoint at step {missing[0]} (kept: {steps_listed(run)})"
        )
    return steps


def write_page(out: Path, text: str) -> None:
    """The page written whole or not at all: into a temporary file beside it, renamed over it once complete. A write
    that fails (a full disk) names the page, not the temporary file, which is gone."""
    temporary = out.with_name(f".{out.name}.{uuid.uuid4().hex}.tmp")
    try:
        with open(temporary, "w", encoding="utf-8") as file:
            file.write(text)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, out)
    except OSError as error:
        raise OSError(error.errno, error.strerror, str(out)) from None
    finally:
        temporary.unlink(missing_ok=True)


def megabytes(size: int) -> str:
    return f"{size / 1e6:.1f} MB" if size >= 100_000 else f"{size / 1e3:.0f} kB"


@hydra.main(version_base="1.3", config_path=str(Path(__file__).parent / "configs"), config_name="export")
def main(cfg: DictConfig) -> None:
    with one_line_errors():
        config = to_typed(ExportConfig, OmegaConf.to_container(cfg))
        out, wanted = check_settings(config), steps_wanted(config.steps)
        runs = runs_of(config.ckpt)
        answers = page_data([(run, chosen_steps(run, wanted)) for run in runs])
        left_out = [f"{refused['run']}: {refused['reason']}" for refused in answers["left_out"]]
        listed = answers["runs"]["runs"]
        if not listed:
            raise ConfigError(f"ckpt={config.ckpt}: no run the page can hold; {'; '.join(left_out)}")
        for line in left_out:
            print(f"left out {line}")
        held = "; ".join(
            f"{run['label'] or run['name']} at step{'s' * (len(run['steps']) > 1)} "
            + ", ".join(str(kept["step"]) for kept in run["steps"])
            for run in listed
        )
        source = "/".join(Path(config.ckpt).expanduser().resolve().parts[-2:])  # multirun/leak/DATE: leak/DATE
        title = config.title or f"tinylm: {source}"
        note = f"Exported by tinylm's export.py from {source}: {held}." + "".join(
            f" Left out {line}." for line in left_out
        )
        curves = page_curves(runs, [run["name"] for run in listed])
        write_page(out, page_html(title, note, answers, curves))
        print(f"wrote {out} ({megabytes(out.stat().st_size)}): {held}")


if __name__ == "__main__":
    run_with_one_line_errors(main)
