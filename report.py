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


class OneLineParser(argparse.ArgumentParser):
    def error(self, message: str) -> None:
        """A bad argument in one line (argparse's own adds the usage), status 2 as argparse's."""
        print(f"error: {message}; see python report.py --help", file=sys.stderr)
        sys.exit(2)


def main() -> None:
    parser = OneLineParser(description=__doc__.splitlines()[0])
    parser.add_argument("dirs", nargs="+", type=Path, metavar="DIR", help="a run, a sweep, or any directory of runs")
    parser.add_argument("--out", type=Path, help="where to write the files (default: the first DIR)")
    parser.add_argument(
        "--x", metavar="KEY", help="a swept number (optim.lr) to plot the final values against, into "
        "summary_KEY.png (default: every swept number with 3 values or more)",
    )  # fmt: skip
    args = parser.parse_args()
    logging.basicConfig(format="%(levelname)s: %(message)s", level=logging.WARNING)
    out = args.out or args.dirs[0]
    try:
        check_out(out)
        check_names(args.dirs, out)
        written = summarize(args.dirs, out, args.x)
        print(written[1].read_text())
        print("\n".join(map(str, written)))
    except SummaryError as error:
        sys.exit(f"error: {error}")
    except OSError as error:  # a path that is missing or not a directory, a full disk, a file that cannot be read
        sys.exit(f"error: {os_error(error, out)}")
    except yaml.YAMLError as error:  # a run's .hydra files; the mark names the file
        sys.exit(f"error: {yaml_error(error)}")
    except OverrideParseException as error:
        sys.exit(f"error: {error.override}: an override in a run's .hydra/overrides.yaml that Hydra cannot parse")
    except OpError as error:  # TensorBoard's reader: an events file it cannot open
        sys.exit(f"error: {error.message}")


def check_out(out: Path) -> None:
    if out.exists() and not out.is_dir():
        raise SummaryError(f"--out {out}: not a directory; the summary files go into a directory")


def check_names(dirs: list[Path], out: Path) -> None:
    """Every run's directory name, and the output's, as text: the summary files and the terminal show them."""
    for path in [*find_runs(dirs), out]:
        try:
            str(path).encode()
        except UnicodeEncodeError:
            name = os.fsencode(path).decode(errors="backslashreplace")
            raise SummaryError(f"{name}: the name is not UTF-8 text; rename it to report on it") from None


def os_error(error: OSError, out: Path) -> str:
    if error.filename is None:  # a write that failed as the figure was flushed: a full disk, a file size limit
        return f"{out}: the summary files cannot be written ({error.strerror})" if error.errno else str(error)
    name = os.fsdecode(error.filename)  # TensorBoard names files in bytes
    return f"{name}: {error.strerror}" if error.strerror else f"{name}: {error}"


def yaml_error(error: yaml.YAMLError) -> str:
    mark = getattr(error, "problem_mark", None)
    problem = getattr(error, "problem", None) or str(error).splitlines()[0]
    return f"{mark.name}: not YAML ({problem}, line {mark.line + 1})" if mark else f"not YAML ({problem})"


if __name__ == "__main__":
    main()
