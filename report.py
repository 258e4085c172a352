"""Summarize runs from their TensorBoard events: summary.csv, summary.md and summary.png, as a sweep writes them.

    python report.py multirun/saturation/2025-01-01_12-00-00          # a sweep: rebuilds the files in it
    python report.py outputs/2025-01-01 multirun/leak --out compare    # several directories: the files go to compare/
    python report.py multirun/lr_sensitivity/2025-01-01_12-00-00 --x optim.lr   # + summary_optim.lr.png

Every directory under the given ones that holds an events file is a run. A damaged events file (what a crash can
leave) gets one warning line: an unreadable one is skipped, a truncated one read up to the cut.
"""

import argparse
import logging
import sys
from pathlib import Path

from summary.summarize import summarize
from summary.runs import SummaryError


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dirs", nargs="+", type=Path, metavar="DIR", help="a run, a sweep, or any directory of runs")
    parser.add_argument("--out", type=Path, help="where to write the files (default: the first DIR)")
    parser.add_argument(
        "--x", metavar="KEY", help="a swept number (optim.lr) to plot the final values against, into "
        "summary_KEY.png (default: every swept number with 3 values or more)",
    )  # fmt: skip
    args = parser.parse_args()
    logging.basicConfig(format="%(levelname)s: %(message)s", level=logging.WARNING)
    try:
        written = summarize(args.dirs, args.out or args.dirs[0], args.x)
    except (FileNotFoundError, SummaryError) as error:
        sys.exit(f"error: {error}")
    print(written[1].read_text())
    print("\n".join(map(str, written)))


if __name__ == "__main__":
    main()
