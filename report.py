"""Summarize runs from their TensorBoard events: summary.csv, summary.md and summary.png, as a sweep writes them.

    python report.py multirun/saturation/2025-01-01_12-00-00          # a sweep: rebuilds the files in it
    python report.py outputs/2025-01-01 multirun/leak --out compare    # several directories: the files go to compare/
    python report.py multirun/lr_sensitivity/2025-01-01_12-00-00 --x optim.lr   # + summary_optim.lr.png

Every directory under the given ones that holds an events file is a run. A damaged events file (what a crash can
leave) gets one warning line: an unreadable one is skipped, a truncated one read up to the cut.
"""

import argparse
import logging
import os
import sys
from pathlib import Path

import yaml
from hydra.errors import OverrideParseException
from tensorboard.compat.tensorflow_stub.errors import OpError

from summary.runs import SummaryError, find_runs
from summary.summarize import summarize
from trainer.cli import one_line_errors, run_with_one_line_errors
from trainer.overrides import PARSER

# What summary/runs.py reads of a run's Hydra record (.hydra/, and .hydra/resume-DATE_TIME/ for each resume).
RECORD = {"config.yaml": dict, "overrides.yaml": list}


X_HELP = (
    "a swept number (optim.lr) to plot the final values against, into summary_KEY.png (default: every swept number "
    "with 3 values or more)"
)


class OneLineParser(argparse.ArgumentParser):
    def error(self, message: str) -> None:
        """A bad argument in one line (argparse's own adds the usage), status 2 as argparse's."""
        print(f"error: {message}; see python report.py --help", file=sys.stderr)
        sys.exit(2)


def arguments() -> argparse.Namespace:
    parser = OneLineParser(description=__doc__.splitlines()[0])
    parser.add_argument("dirs", nargs="+", type=Path, metavar="DIR", help="a run, a sweep, or any directory of runs")
    parser.add_argument("--out", type=Path, help="where to write the files (default: the first DIR)")
    parser.add_argument("--x", metavar="KEY", help=X_HELP)
    return parser.parse_args()


def main() -> None:
    """Through trainer/cli.py, as every entry point: each error is one line naming the file or argument (an events
    file TensorBoard cannot open, OpError, says so itself), and stdout closed early (`| head`) stops nothing."""
    args = arguments()
    logging.basicConfig(format="%(levelname)s: %(message)s", level=logging.WARNING)
    out = args.out or args.dirs[0]
    with one_line_errors(SummaryError, OpError):
        check_out(out)
        runs = find_runs(args.dirs)
        check_names(runs, out)
        for run_dir in runs:
            check_record(run_dir)
        written = write_summary(args.dirs, out, args.x)
        print(written[1].read_text())
        print("\n".join(map(str, written)))


def check_out(out: Path) -> None:
    if out.exists() and not out.is_dir():
        raise SummaryError(f"--out {out}: not a directory; the summary files go into a directory")


def check_names(runs: list[Path], out: Path) -> None:
    """Every run's directory name, and the output's, as text: the summary files and the terminal show them."""
    for path in [*runs, out]:
        try:
            str(path).encode()
        except UnicodeEncodeError:
            name = os.fsencode(path).decode(errors="backslashreplace")
            raise SummaryError(f"{name}: the name is not UTF-8 text; rename it to report on it") from None


def check_record(run_dir: Path) -> None:
    """The Hydra files of the run that the summary reads, each YAML of the kind Hydra writes (a mapping of
    settings, a list of overrides that parse); else SummaryError naming the file, which the readers cannot."""
    hydra_dir = run_dir / ".hydra"
    for directory in [hydra_dir, *sorted(hydra_dir.glob("resume-*"))]:
        for name, kind in RECORD.items():
            path = directory / name
            if not path.is_file():
                continue
            with open(path, "rb") as file:  # a YAML error's mark names the file
                held = yaml.load(file, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
            if held is not None and not isinstance(held, kind):
                what = "mapping of settings" if kind is dict else "list of overrides"
                raise SummaryError(f"{path}: holds {a_kind(held)}, not the {what} Hydra writes there")
            for item in held if kind is list else []:
                try:
                    PARSER.parse_overrides([str(item)])
                except OverrideParseException:
                    raise SummaryError(f"{path}: {item}: an override Hydra cannot parse") from None


def a_kind(value: object) -> str:
    name = {dict: "mapping", list: "list", str: "string", int: "number", float: "number", bool: "boolean"}
    kind = name.get(type(value), type(value).__name__)
    return f"{'an' if kind[0] in 'aeiou' else 'a'} {kind} ({str(value)[:40]})"


def write_summary(dirs: list[Path], out: Path, x: str | None) -> list[Path]:
    """summarize(); a write that fails without a file's name (a full disk as the figure is flushed) names `out`."""
    try:
        return summarize(dirs, out, x)
    except OSError as error:
        if error.filename is None and error.errno:
            raise SummaryError(f"{out}: the summary files cannot be written ({error.strerror})") from None
        raise


if __name__ == "__main__":
    run_with_one_line_errors(main)
