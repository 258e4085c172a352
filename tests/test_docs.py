"""The README and docs as a reader uses them: every command they show is one the project's entry points accept (the
presets exist, the settings are real keys of the right type), every page they link to exists, and they hold no path
of one machine and no word of how the project was made. Nothing trains: Hydra composes each command's overrides."""

import os
import re
import shlex
import sys
from functools import cache
from pathlib import Path

import pytest

from conftest import ROOT

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
PRESET_COMMENTS = sorted((ROOT / "configs" / "experiment").glob("*.yaml"))  # their `#   python train.py ...` lines
HYDRA_APPS = {
    "train.py": "train",
    "attend.py": "attend",
    "sample.py": "sample",
    "bench.py": "bench",
    "export.py": "export",
}
SCRIPTS = (*HYDRA_APPS, "report.py")
TRAIN_FLAGS = {"-m", "--multirun", "--help", "--hydra-help"}  # and --cfg job
PLACEHOLDER = re.compile(r"[A-Z][A-Z_]*")  # N, FILE, RUN: a value the reader fills in
SHELL_BREAKS = {"|", "||", "&&", ";", ">", "<", "&"}
LAUNCHER = re.compile(r"[A-Z_]+=\S*|-\S*|(\S*/)?(python3?|torchrun|srun|time)")  # what may come before a script
MISTAKES = {"troubleshooting.md"}  # its tables' commands are the mistakes tinylm refuses
MACHINE_PATH = re.compile(r"(?<![\w.~-])/(tmp|work|home|root|Users|mnt|private|var/folders)/|\b[A-Z]:\\")
# How the project was made is not the reader's business: its tickets, rounds and working sessions. Another
# project's issue ("huggingface/transformers issue 17121") is a citation; "once a session" is pytest's.
PROCESS_WORDS = re.compile(r"\brounds? \d+|\bround-\d+|\bthis round\b|(?<!once a )\bsessions?\b")
ISSUE = re.compile(r"(\S*)\s*\bissues? #?\d+")  # group 1: the word before, "owner/repo" for a citation


def code_lines(text: str) -> list[str]:
    """Every line of a fenced block (continuations joined) and every inline code span (which may wrap)."""
    lines, prose = [], []
    for index, part in enumerate(re.split(r"^\s*```.*$", text, flags=re.MULTILINE)):
        if index % 2:  # inside a fence
            lines += re.sub(r"\\\n\s*", " ", part).splitlines()
        else:
            prose.append(part)
    lines += [span.replace("\n", " ") for span in re.findall(r"`([^`]+)`", "".join(prose))]
    return [line.replace("\\|", "|") for line in lines]  # a pipe inside a table cell is escaped


def commands(text: str) -> list[tuple[str, list[str]]]:
    """(script, its arguments) for every command of SCRIPTS the text shows, elided ones (`...`) left out."""
    found = []
    for line in code_lines(text):
        lexer = shlex.shlex(line, posix=True, punctuation_chars="|&;<>")
        lexer.whitespace_split, lexer.commenters = True, "#"
        try:
            tokens = list(lexer)
        except ValueError:  # an unclosed quote: prose in a code span, not a command
            continue
        while tokens:
            cut = next((i for i, token in enumerate(tokens) if token in SHELL_BREAKS), len(tokens))
            part, tokens = tokens[:cut], tokens[cut + 1 :]
            at = next((i for i, token in enumerate(part) if token.split("/")[-1] in SCRIPTS), None)
            elided = any("..." in token or "…" in token for token in part)
            launched = at is not None and all(LAUNCHER.fullmatch(token) for token in part[:at])  # not prose
            if launched and not elided and part != [part[at]]:  # a script's bare name is no command
                found.append((part[at].split("/")[-1], part[at + 1 :]))
    return found


def shown_commands() -> list[tuple[str, str, tuple[str, ...]]]:
    shown = []
    for path in DOCS:
        lines = path.read_text().splitlines()
        text = "\n".join(line for line in lines if path.name not in MISTAKES or not line.startswith("|"))
        shown += [(path.name, script, tuple(args)) for script, args in commands(text)]
    for path in PRESET_COMMENTS:
        comments = "\n".join(line.lstrip("# ") for line in path.read_text().splitlines() if line.startswith("#   "))
        shown += [(path.name, script, tuple(args)) for script, args in commands(f"```\n{comments}\n```")]
    return sorted(set(shown))


@cache
def compose(app: str, choices: tuple[str, ...]):
    """The app's configs/APP.yaml composed by Hydra with these config-group choices (`+experiment=leak`,
    `hydra/launcher=parallel`), hydra's own settings included; read-only, as it is shared."""
    import importlib

    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    importlib.import_module(app)  # registers the app's schema, its config's first default
    with initialize_config_dir(config_dir=str(ROOT / "configs"), version_base="1.3"):
        config = compose(app, overrides=list(choices), return_hydra_config=True)
    OmegaConf.set_readonly(config, True)
    return config


def is_choice(key: str) -> bool:
    """Whether `key` names a config group (data, +experiment, hydra/launcher), not a setting."""
    return "/" in key or (ROOT / "configs" / key).is_dir()


def each_value(override) -> list:
    """Every value an override gives its key: a sweep's (a=1,2), typed as Hydra types them."""
    return list(override.sweep_iterator()) if override.is_sweep_override() else [override.value()]


@cache
def settings_only(app: str, choices: tuple[str, ...]):
    """compose()'s config without hydra's node: the app's own settings, for checking a top-level one cheaply."""
    import copy

    from omegaconf import OmegaConf, open_dict, read_write

    config = copy.deepcopy(compose(app, choices))
    with read_write(config), open_dict(config):
        del config["hydra"]
    OmegaConf.set_readonly(config, True)
    return config


def check_hydra_app(app: str, args: tuple[str, ...]) -> None:
    """The command line as Hydra composes it: the config groups chosen (each value of a swept one), then every value
    of every setting, which must exist (unless added with +) and which the schema must take."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    args = list(args)
    if "--cfg" in args:
        at = args.index("--cfg")
        assert args[at + 1 : at + 2] in (["job"], ["hydra"], ["all"]), args
        del args[at : at + 2]
    flags = [arg for arg in args if arg.startswith("-")]
    assert set(flags) <= TRAIN_FLAGS, f"{app}: {flags} is not a flag it takes"
    overrides = OverridesParser.create().parse_overrides([arg for arg in args if arg not in TRAIN_FLAGS])
    choices = [item for item in overrides if is_choice(item.key_or_group)]
    firsts = [f"{item.get_key_element()}={each_value(item)[0]}" for item in choices]
    lines = [tuple(firsts)]  # and each further value of a swept group, the others at their first
    for index, item in enumerate(choices):
        lines += [(*firsts[:index], f"{item.get_key_element()}={value}") for value in each_value(item)[1:]]
    for line in lines:
        compose(HYDRA_APPS[app], line)  # refused where a group has no such option (+experiment=nope)
        for setting in (item for item in overrides if item not in choices):
            check_setting(HYDRA_APPS[app], line, setting)


def check_setting(app: str, choices: tuple[str, ...], setting) -> None:
    """Each value of the setting, merged as Hydra merges an override into the composed config: refused where the
    key does not exist (unless the override adds it) or the schema does not take the value."""
    from omegaconf import OmegaConf

    if setting.is_delete():
        return
    config, key, nothing = compose(app, choices), setting.key_or_group, object()
    exists = OmegaConf.select(config, key, default=nothing) is not nothing
    assert exists or setting.is_add(), f"{app}.py: no such setting: {key}"
    parent, _, leaf = key.rpartition(".")
    node = OmegaConf.select(config, parent) if parent else settings_only(app, choices)
    for value in each_value(setting) if exists else []:  # an added key has no schema to answer to
        if not (isinstance(value, str) and PLACEHOLDER.fullmatch(value)):  # N, FILE: the reader's to fill in
            OmegaConf.merge(node, {leaf: value})


def check_report(args: tuple[str, ...], monkeypatch, capsys) -> None:
    import report

    monkeypatch.setattr(sys, "argv", ["report.py", *args])
    try:
        report.arguments()
    except SystemExit:
        raise AssertionError(f"report.py {' '.join(args)}: {capsys.readouterr().err.strip()}") from None


@pytest.mark.parametrize("page,script,args", shown_commands(), ids=lambda value: str(value)[:60])
def test_every_command_the_docs_show_is_one_the_project_accepts(page, script, args, monkeypatch, capsys):
    if script == "report.py":
        check_report(args, monkeypatch, capsys)
    else:
        check_hydra_app(script, args)


def test_the_docs_show_every_entry_point_and_every_preset():
    shown = [(page, script, args) for page, script, args in shown_commands() if page.endswith(".md")]
    assert {script for _, script, _ in shown} == set(SCRIPTS)
    presets = {arg.partition("=")[2] for _, _, args in shown for arg in args if arg.startswith("+experiment=")}
    assert presets >= {path.stem for path in PRESET_COMMENTS}  # each with its command in a page, not only its file


def test_the_command_reader_sees_what_a_shell_would_run():
    text = "```bash\nOMP_NUM_THREADS=2 .venv/bin/python train.py -m a=1,2  # a comment\n```\n`report.py RUN \\| head`"
    assert commands(text) == [("train.py", ["-m", "a=1,2"]), ("report.py", ["RUN"])]
    assert commands("`python train.py ... hydra.sweep.dir=D`") == []  # elided: not a command to check
    assert commands("stopped while train.py was starting") == []  # prose about a script: no command


def test_a_command_with_a_setting_that_does_not_exist_is_caught(monkeypatch, capsys):
    with pytest.raises(Exception, match="model.dk"):
        check_hydra_app("train.py", ("+experiment=leak", "model.dk=3"))
    with pytest.raises(Exception, match="experiment/nope"):
        check_hydra_app("train.py", ("+experiment=nope",))
    with pytest.raises(Exception, match="abc"):
        check_hydra_app("train.py", ("-m", "model.d_k=64,abc"))  # every value of a sweep, typed by the schema
    with pytest.raises(AssertionError, match="--y"):
        check_report(("multirun/leak", "--y", "3"), monkeypatch, capsys)


@pytest.mark.parametrize("path", DOCS, ids=lambda path: path.name)
def test_the_docs_link_only_to_files_that_exist(path):
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", path.read_text())
    missing = [link for link in links if "://" not in link and not (path.parent / link).exists()]
    assert missing == []


@pytest.mark.parametrize("path", DOCS, ids=lambda path: path.name)
def test_the_docs_hold_no_path_of_one_machine_and_no_word_of_how_they_were_made(path):
    text = path.read_text()
    assert MACHINE_PATH.findall(text) == []
    own_issues = [match.group() for match in ISSUE.finditer(text) if "/" not in match.group(1)]
    assert [match.group() for match in PROCESS_WORDS.finditer(text)] + own_issues == []


# The facts the pages state, held where a test can hold them.
PREMISE_PAGES = [ROOT / "README.md", ROOT / "docs" / "lesson.md", ROOT / "docs" / "experiments.md"]
SOURCES = (".py", ".md", ".yaml", ".js")


def project_files(suffixes: tuple[str, ...]) -> list[Path]:
    """The project's files ending in `suffixes`, the virtual environment, git's folder and node_modules left out
    unwalked (walking them is seconds of the suite)."""
    found = []
    for folder, inside, names in os.walk(ROOT):
        inside[:] = sorted(name for name in inside if name not in {".venv", ".git", "node_modules"})
        found += [Path(folder, name) for name in sorted(names) if Path(name).suffix in suffixes]
    return found


def sentences(text: str) -> list[str]:
    """The text's sentences, a comment's lines (`#`, `//`) joined into one: what a claim is read in."""
    joined = re.sub(r"\n\s*(#|//)?\s*", " ", text)
    return re.split(r"(?<=[.;!?])\s+", joined)


def test_no_sentence_anywhere_credits_mingpt_with_the_minus_1e4_mask():
    """Hugging Face GPT-2's `masked_bias` was the -1e4; minGPT masks with minus infinity."""
    credited = [
        (path.name, sentence[:120])
        for path in project_files(SOURCES)
        if path != Path(__file__)
        for sentence in sentences(path.read_text(errors="replace"))
        if "minGPT" in sentence and re.search(r"[-−]1e4|1e-?4 mask", sentence)
    ]
    assert credited == []


@pytest.mark.parametrize("path", PREMISE_PAGES, ids=lambda path: path.name)
def test_the_premise_of_the_square_root_says_mean_0_and_cites_vaswani_footnote_4(path):
    text = path.read_text()
    premises = [sentence for sentence in sentences(text) if "variance 1" in sentence or "unit-variance" in sentence]
    assert premises and all("mean 0" in sentence for sentence in premises), premises
    assert re.search(r"Vaswani et al\. 2017.{0,80}footnote 4", text.replace("\n", " "))


def test_the_readme_says_what_the_recurrence_table_says_at_d_60():
    readme = ROOT.joinpath("README.md").read_text().replace("\n  ", " ")
    [row] = [
        line for line in ROOT.joinpath("docs", "experiments.md").read_text().splitlines() if line.startswith("| 60 |")
    ]
    attention = row.split("|")[3].split("(")[0].strip()  # "2.427 ± 0.897"
    assert attention in readme and "nothing from d = 16 on, where attention still reads it" not in readme


def test_a_share_of_weight_on_future_keys_is_given_with_the_machine_whose_figure_shows_another():
    """lesson.md's "up to 14%" is the table's runs'; finite_mask.png is another machine's, which peaks near 2%."""
    for path in (ROOT / "docs" / "lesson.md", ROOT / "docs" / "class-answers.md"):
        for paragraph in path.read_text().split("\n\n"):
            if "up to 14%" in paragraph:
                assert "up to 2%" in paragraph and "machine" in paragraph, paragraph


def test_tensorboard_md_lists_every_custom_scalars_chart():
    from trainer.tags import LAYOUT

    page = ROOT.joinpath("docs", "tensorboard.md").read_text()
    missing = [title for section in LAYOUT.values() for title in section if title not in page]
    assert missing == []


def test_the_glossary_starts_with_the_words_a_student_meets_first():
    first = ["Token", "One-hot", "Softmax", "Query, key, value", "LayerNorm", "MLP", "TensorBoard", "Custom Scalars"]
    terms = re.findall(r"^\*\*([^*]+?)\.?\*\*", ROOT.joinpath("docs", "glossary.md").read_text(), flags=re.MULTILINE)
    assert [term.rstrip(".") for term in terms[: len(first)]] == first
    assert terms.index("AMX, AVX-512") > terms.index("val/loss, val/loss_causal")


def test_every_count_the_class_page_asks_for_has_its_answer():
    answers = ROOT.joinpath("docs", "class-answers.md").read_text()
    assert "count the rows it calls one-hot" in ROOT.joinpath("docs", "class.md").read_text()
    assert "the rows the tab calls one-hot" in answers and "## In the notebook" in answers
