"""Summarize runs from their TensorBoard events: summary.csv, summary.md and summary.png, as a sweep writes them.

    python report.py multirun/saturation/2025-01-01_12-00-00          # a sweep: rebuilds the files in it
    python report.py outputs/2025-01-01 multirun/leak --out compare    # several directories: the files go to compare/
    python report.py multirun/lr_sensitivity/2025-01-01_12-00-00 --x optim.lr   # + summary_optim.lr.png

Or, instead of the summary, one figure of the runs, into --figure FILE (else curves.png or patterns.png in --out):

    python report.py multirun/finite_mask/DATE --curves attn/train_allowed_min,val/loss_causal-val/loss \\
        --mark attn/train_allowed_min=-1e4:mask --seeds lines --figure mask.png   # tags by step; A-B: a difference
    python report.py RUN_A RUN_B --patterns 500 --figure patterns.png   # their attention pictures at step 500

Or each run's last.pt scored on the same tokens whatever its task, printed as a table (summary/after_prefix.py):

    python report.py multirun/masks --after-prefix 0.5   # the tokens after the first half of each window

Every directory under the given ones that holds an events file is a run. A damaged events file (what a crash can
leave) gets one warning line: an unreadable one is skipped, a truncated one read up to the cut.
"""

import python_version  # noqa: F401 (first: an older Python is refused in one line, python_version.py)
import trainer.startup  # noqa: F401 (first of all: a Ctrl-C while torch loads ends in one line, trainer/startup.py)

# isort: split
import argparse
import logging
import math
import os
import sys
from pathlib import Path

import yaml
from hydra.errors import OverrideParseException
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException
from tensorboard.compat.tensorflow_stub.errors import OpError

from summary.after_prefix import after_prefix_table
from summary.figures import Mark
from summary.runs import SummaryError, find_runs
from summary.summarize import draw_chosen, draw_patterns, summarize
from trainer.cli import one_line_errors, run_with_one_line_errors
from trainer.config import TrainConfig, structured, typed_problem
from trainer.overrides import PARSER

# What summary/runs.py reads of a run's Hydra record (.hydra/, and .hydra/resume-DATE_TIME/ for each resume).
RECORD = {"config.yaml": dict, "overrides.yaml": list}
FLOAT32_MAX = 3.4028234663852886e38  # the largest value a curve logged as float32 holds


X_HELP = (
    "a swept number (optim.lr) to plot the final values against, into summary_KEY.png (default: every swept number "
    "with 3 values or more)"
)
CURVES_HELP = (
    "instead of the summary: these tags against the step, a panel each (A-B: tag A less tag B where both were "
    "logged, val/loss_causal-val/loss), into --figure FILE or curves.png in --out"
)
MARK_HELP = "with --curves: a reference line across TAG's panel at VALUE, labelled LABEL (default: VALUE); repeatable"
SEEDS_HELP = "with --curves: a configuration of seeds as its mean in its min-max band (default), or a line per seed"
PATTERNS_HELP = (
    "instead of the summary: each run's attention picture (attn/pattern) at STEP, side by side, into --figure FILE "
    "or patterns.png in --out"
)


AFTER_PREFIX_HELP = (
    "instead of the summary: each run's last.pt scored on the tokens after a prefix of SHARE of each window (those "
    "task=prefix_lm scores) of the same validation windows, printed as a table"
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
    figures = parser.add_mutually_exclusive_group()
    figures.add_argument("--curves", metavar="TAG,TAG,A-B", type=specs, help=CURVES_HELP)
    figures.add_argument("--patterns", metavar="STEP", type=int, help=PATTERNS_HELP)
    figures.add_argument("--after-prefix", metavar="SHARE", type=share, help=AFTER_PREFIX_HELP)
    parser.add_argument("--mark", metavar="TAG=VALUE[:LABEL]", action="append", type=mark, default=[], help=MARK_HELP)
    parser.add_argument("--seeds", choices=["band", "lines"], help=SEEDS_HELP)
    parser.add_argument("--layer", type=int, help="with --patterns: the layer whose pictures (default 0)")
    parser.add_argument("--figure", metavar="FILE", type=Path, help="with --curves or --patterns: the PNG to write")
    args = parser.parse_args()
    figure = args.curves is not None or args.patterns is not None
    misplaced = [
        ("--x", args.x is not None and (figure or args.after_prefix), "the summary, not with --curves or --patterns"),
        (
            "--out",
            args.out is not None and args.after_prefix is not None,
            "the summary, --curves or --patterns (--after-prefix prints its table)",
        ),
        ("--mark", args.mark and args.curves is None, "--curves"),
        ("--seeds", args.seeds is not None and args.curves is None, "--curves"),
        ("--layer", args.layer is not None and args.patterns is None, "--patterns"),
        ("--figure", args.figure is not None and not figure, "--curves or --patterns"),
    ]
    for option, wrong, belongs in misplaced:
        if wrong:
            parser.error(f"{option} goes with {belongs}")
    if args.figure is not None and args.figure.suffix.lower() != ".png":
        parser.error(f"--figure {args.figure}: name a .png file")
    if args.figure is not None and args.figure.is_symlink():  # replaced, the link would go; followed, its file
        parser.error(f"--figure {args.figure}: a symbolic link (to {os.readlink(args.figure)}); give the file itself")
    unknown = [tag for tag, _ in args.mark if tag not in (args.curves or [])]
    if unknown:
        parser.error(f"--mark {unknown[0]}: not one of the --curves")
    return args


def specs(text: str) -> list[str]:
    """--curves' tags: comma-separated, none empty."""
    found = [spec.strip() for spec in text.split(",")]
    if not all(found):
        raise argparse.ArgumentTypeError(f"{text!r}: an empty tag; give tags separated by commas")
    return found


def share(text: str) -> float:
    """--after-prefix's SHARE: a number above 0 and below 1."""
    try:
        number = float(text)
    except ValueError:
        number = None
    if number is None or not 0 < number < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: the share of each window in the prefix, above 0 and below 1")
    return number


def mark(text: str) -> tuple[str, Mark]:
    """--mark TAG=VALUE[:LABEL] as (TAG, its Mark)."""
    tag, equals, rest = text.partition("=")
    value, _, label = rest.partition(":")
    try:
        number = float(value)
    except ValueError:
        number = None
    if not equals or not tag or number is None:
        raise argparse.ArgumentTypeError(f"{text!r}: not TAG=VALUE[:LABEL] (attn/train_allowed_min=-1e4:the mask)")
    if not (math.isfinite(number) and abs(number) <= FLOAT32_MAX):
        raise argparse.ArgumentTypeError(
            f"{text!r}: {value} is not a number a curve can reach: TensorBoard logs float32, finite and at most "
            "3.4e38 in size"
        )
    return tag, Mark(number, label or value)


def main() -> None:
    """Through trainer/cli.py, as every entry point: each error is one line naming the file or argument (an events
    file TensorBoard cannot open, OpError, says so itself), and stdout closed early (`| head`) stops nothing."""
    args = arguments()
    logging.basicConfig(format="%(levelname)s: %(message)s", level=logging.WARNING)
    out = args.out or args.dirs[0]
    with one_line_errors(SummaryError, OpError):
        if args.out:  # else the summary goes into the first DIR, which find_runs checks
            check_out(out)
        runs = find_runs(args.dirs)
        check_names(runs, out)
        for run_dir in runs:
            check_record(run_dir)
        if args.after_prefix is not None:
            print(after_prefix_table(args.dirs, args.after_prefix), end="")
            return
        if args.curves is not None or args.patterns is not None:
            print(write_figure(args, out))
            return
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
            what = "mapping of settings" if kind is dict else "list of overrides"
            if not isinstance(held, kind):
                raise SummaryError(f"{path}: holds {a_kind(held)}, not the {what} Hydra writes there")
            if kind is dict:
                check_types(path, held)
            for item in held if kind is list else []:
                try:
                    PARSER.parse_overrides([str(item)])
                except OverrideParseException:
                    raise SummaryError(f"{path}: {item}: an override Hydra cannot parse") from None


def check_types(path: Path, settings: dict) -> None:
    """Each setting of the run's config of the type tinylm's schema gives it; a key the schema lacks is let through
    (a run of an older tinylm)."""
    schema = OmegaConf.merge(structured(TrainConfig))  # a copy, which the keys of older runs may be added to
    unlock(schema)
    try:
        OmegaConf.merge(schema, settings)
    except OmegaConfBaseException as error:
        raise SummaryError(f"{path}: {typed_problem(error)}") from None


def unlock(node: DictConfig) -> None:
    """Keys may be added to `node` and to every group below it (each typed group is locked on its own)."""
    OmegaConf.set_struct(node, False)
    for key in node:
        if isinstance(group := node._get_node(key), DictConfig):
            unlock(group)


def a_kind(value: object) -> str:
    name = {dict: "mapping", list: "list", str: "string", int: "number", float: "number", bool: "boolean"}
    if value is None:
        return "nothing"
    kind = name.get(type(value), type(value).__name__)
    return f"{'an' if kind[0] in 'aeiou' else 'a'} {kind} ({str(value)[:40]})"


def write_figure(args: argparse.Namespace, out: Path) -> Path:
    """The one figure asked for, into --figure or its default name in `out`; a write that fails without a file's
    name names the figure's."""
    path = args.figure or out / ("curves.png" if args.curves is not None else "patterns.png")
    try:
        if args.curves is None:
            return draw_patterns(args.dirs, args.patterns, args.layer or 0, path)
        marks: dict[str, list[Mark]] = {}
        for tag, found in args.mark:
            marks.setdefault(tag, []).append(found)
        return draw_chosen(args.dirs, args.curves, path, marks, per_seed=args.seeds == "lines")
    except OSError as error:
        if error.filename is None and error.errno:
            raise SummaryError(f"{path}: the figure cannot be written ({error.strerror})") from None
        raise


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
