"""Summarize runs from their TensorBoard events: summary.csv, summary.md and summary.png, as a sweep writes them.

    python report.py multirun/saturation/2025-01-01_12-00-00          # a sweep: rebuilds the files in it
    python report.py outputs/2025-01-01 multirun/leak --out compare    # several directories: the files go to compare/

Every directory under the given ones that holds an events file is a run.
"""

import argparse
import sys
from pathlib import Path

from summary import summarize


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dirs", nargs="+", type=Path, metavar="DIR", help="a run, a sweep, or any directory of runs")
    parser.add_argument("--out", type=Path, help="where to write the three files (default: the first DIR)")
    args = parser.parse_args()
    try:
        written = summarize(args.dirs, args.out or args.dirs[0])
    except FileNotFoundError as error:
        sys.exit(f"error: {error}")
    print(written[1].read_text())
    print("\n".join(map(str, written)))


if __name__ == "__main__":
    main()
