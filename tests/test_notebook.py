"""notebooks/lesson.ipynb: kept without outputs, its cells its paired script's; executed end to end in a kernel of its
own at its quickest size (nbclient), its last cell reading the leak's losses back from the runs' events in the lesson's
order; in the same kernel, a bad setting and a second sweep into the first's directory refused in one line each, and a
kernel interrupt stopping a run with its checkpoint, as Ctrl-C does."""

import ast
import importlib.util
import os
import signal
import threading
import time
from pathlib import Path

import pytest
from test_faults_trainer import HOLD_AFTER_EVALUATION

from conftest import ROOT

NOTEBOOK_EXTRA = ("nbclient", "jupytext", "ipykernel", "anywidget")

# CI installs the extra (.ci/run): there a missing one fails these tests. The modules themselves are imported by the
# tests that use them: nbclient and jupytext take seconds, which every worker would pay while it collects the suite.
if not os.environ.get("CI") and any(importlib.util.find_spec(module) is None for module in NOTEBOOK_EXTRA):
    pytest.skip('needs the notebook extra: pip install -e ".[notebook]"', allow_module_level=True)

LESSON = ROOT / "notebooks" / "lesson.ipynb"
CELL_SECONDS = 600  # a cell's limit: the runs of the quickest size take seconds, on a busy machine minutes


@pytest.fixture(scope="module")
def lesson(tmp_path_factory):
    """The lesson executed cell by cell in a kernel started for it, at its quickest size (TINYLM_NOTEBOOK_SIZE=test),
    in a directory of its own; then the client, whose kernel the tests below go on in, and that directory."""
    import nbformat
    from nbclient import NotebookClient

    where = tmp_path_factory.mktemp("lesson")
    notebook = nbformat.read(LESSON, as_version=4)
    client = NotebookClient(notebook, timeout=CELL_SECONDS, resources={"metadata": {"path": str(where)}})
    environment = dict(os.environ, TINYLM_NOTEBOOK_SIZE="test")
    try:
        with client.setup_kernel(env=environment):
            for index, cell in enumerate(notebook.cells):
                client.execute_cell(cell, index)
            yield client, where
    finally:
        stop_tensorboards_in(where)


def stop_tensorboards_in(where: Path) -> None:
    """The TensorBoard that the notebook's %tensorboard started (it outlives the kernel), found by its directory."""
    from tensorboard import manager

    for info in manager.get_all():
        try:
            if Path(f"/proc/{info.pid}/cwd").resolve() == where.resolve():
                os.kill(info.pid, signal.SIGTERM)
        except OSError:  # ended already
            pass


def test_the_notebook_is_kept_without_outputs_and_holds_its_paired_scripts_cells():
    import jupytext
    import nbformat

    kept = nbformat.read(LESSON, as_version=4)
    script = jupytext.read(LESSON.with_suffix(".py"))
    assert [(cell.cell_type, cell.source) for cell in kept.cells] == [
        (cell.cell_type, cell.source) for cell in script.cells
    ]
    code = [cell for cell in kept.cells if cell.cell_type == "code"]
    assert all(cell.outputs == [] and cell.execution_count is None for cell in code)


@pytest.mark.slow
def test_the_lesson_runs_end_to_end_and_its_last_cell_reads_the_leak_back_in_the_lessons_order(lesson):
    client, _ = lesson
    cells = [cell for cell in client.nb.cells if cell.cell_type == "code"]
    assert all(output.output_type != "error" for cell in cells for output in cell.outputs)
    assert cells[0].outputs[0].text.startswith("size test: configs/notebook/test.yaml")
    tensorboard = next(cell for cell in cells if "%tensorboard" in cell.source)
    assert any("text/html" in output.get("data", {}) for output in tensorboard.outputs), tensorboard.outputs
    losses = ast.literal_eval(cells[-1].outputs[0].data["text/plain"])
    masked, unmasked = losses["masked"], losses["unmasked"]
    # Without the mask the model reads the token it predicts; the same model with the mask put back is the worst.
    assert unmasked["val/loss"] < masked["val/loss"] < unmasked["val/loss_causal"]


def run_cell(client, source: str):
    """`source` run as one more cell of the lesson, in its kernel; the cell with its outputs, an error allowed."""
    import nbformat

    cell = nbformat.v4.new_code_cell(source, metadata={"tags": ["raises-exception"]})
    client.nb.cells.append(cell)
    client.execute_cell(cell, len(client.nb.cells) - 1)
    return cell


def error_lines(cell) -> list[str]:
    [error] = [output for output in cell.outputs if output.output_type == "error"]
    return error.traceback


@pytest.mark.slow
def test_a_bad_setting_and_a_second_sweep_into_the_firsts_directory_end_the_cell_in_one_line(lesson):
    client, where = lesson
    assert error_lines(run_cell(client, 'lab.train("model.d_kk=3")')) == [
        "error: model.d_kk: Key 'd_kk' not in 'ModelConfig'"
    ]
    [leak] = (where / "multirun" / "leak").iterdir()
    again = run_cell(client, f'lab.train("+experiment=leak", *size.overrides, "hydra.sweep.dir={leak}")')
    [line] = error_lines(again)
    assert line.startswith(f"error: hydra.sweep.dir={leak}: ")
    assert sorted(path.name for path in leak.iterdir() if path.is_dir()) == [
        "0_model.causal=True",
        "1_model.causal=False",
    ]


def interrupt_once_saved(client, directory: Path, checkpoint: str = "last.pt") -> None:
    """The kernel interrupt of JupyterLab's ■ (jupyter_client's: SIGINT to the kernel's process group), once the run
    has written `checkpoint` (a pattern) in `directory`."""
    deadline = time.monotonic() + CELL_SECONDS
    while not any(directory.glob(checkpoint)) and time.monotonic() < deadline:
        time.sleep(0.1)
    os.killpg(os.getpgid(client.km.provisioner.process.pid), signal.SIGINT)


@pytest.mark.slow
def test_a_kernel_interrupt_stops_a_run_with_its_checkpoint_and_says_how_to_resume_it(lesson, tmp_path):
    from nbclient.exceptions import CellExecutionError

    from trainer.checkpoint import glance

    client, _ = lesson
    run_dir = tmp_path / "stopped"
    interrupter = threading.Thread(target=interrupt_once_saved, args=(client, run_dir))
    interrupter.start()
    try:
        cell = run_cell(client, f'lab.train(*size.overrides, "trainer.max_steps=100000", "hydra.run.dir={run_dir}")')
    except CellExecutionError as error:  # the interrupt came outside the cell's run
        pytest.fail(str(error))
    finally:
        interrupter.join()
    [stopped] = [output.text for output in cell.outputs if output.get("name") == "stderr"]
    step = glance(run_dir / "last.pt")["step"]
    assert stopped == (
        f"stopped by SIGINT after step {step}; {run_dir / 'last.pt'} holds it. "
        f"Resume with: python train.py trainer.resume={run_dir}\n"
    )
    assert error_lines(cell) == ["the run stopped (exit status 130), as the line above says"]


def test_the_notebook_tells_students_to_type_the_blank_the_task_reads_and_names_the_one_it_draws():
    import re

    from task.fill_blank import BLANK_LABEL, MARKER

    text = LESSON.with_suffix(".py").read_text()
    assert re.findall(r"type `(.+?)` for a blank \(the panel draws it as (.)\)", text) == [(MARKER, BLANK_LABEL)]


def test_overrides_passed_as_a_list_or_a_tuple_are_refused_in_one_line_that_says_how_to_pass_them():
    import lab

    for given in (["trainer.max_steps=1"], ("trainer.max_steps=1", "model.d_k=16")):
        with pytest.raises(lab.RunFailed) as refused:
            lab.train("model.d_k=16", given)
        line = str(refused.value)
        assert line.startswith(f"lab.train takes each override as a string of its own, not a {type(given).__name__} (")
        assert "lab.train(*overrides)" in line and refused.value._render_traceback_() == [line]


def test_an_interrupt_before_a_run_starts_ends_the_cell_in_one_line(monkeypatch):
    import lab

    def interrupted(overrides):  # where Hydra composes the settings, the run's first 0.1 s
        raise KeyboardInterrupt

    monkeypatch.setattr(lab, "where", interrupted)
    with pytest.raises(lab.RunFailed, match=r"^interrupted before the run started; run the cell again$"):
        lab.train("+experiment=leak")


def test_an_interrupt_while_lab_loads_its_modules_waits_for_them_then_ends_in_one_line():
    import lab

    # SIGINT handled and not blocked, as in a kernel, whatever this worker inherited or an earlier test's library left
    # (lab leaves an ignored signal ignored, and a blocked one would come after the block).
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    blocked = signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    try:
        loaded = False
        with pytest.raises(lab.RunFailed, match=r"^import lab: interrupted while it loaded its modules, which it fin"):
            with lab.interrupts_wait("import lab"):
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(0.1)  # the signal's handler runs here, in the main thread, and raises nothing
                loaded = True
        assert loaded and signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
        signal.signal(signal.SIGINT, previous)
    body = ast.parse((ROOT / "lab.py").read_text()).body
    [guarded] = [node for node in body if isinstance(node, ast.With)]
    imported = {alias.name.split(".")[0] for node in guarded.body for alias in node.names if node.names}
    modules = {node.module.split(".")[0] for node in guarded.body if isinstance(node, ast.ImportFrom)}
    assert {"torch", "hydra", "train", "trainer"} <= imported | modules  # the imports that take seconds


@pytest.mark.slow
def test_an_interrupted_sweep_says_how_to_finish_it_and_the_cells_that_read_it_say_it_is_unfinished(lesson, tmp_path):
    """The leak sweep stopped in its first job: the cell says how to finish it in the notebook's own call, a cell that
    reads it refuses it in one line, and the call it gave finishes it. The first job holds after its evaluation of
    step 40 until the interrupt has come (HOLD_AFTER_EVALUATION, run in the kernel), so the stop comes mid-job."""
    client, _ = lesson
    sweep = tmp_path / "leak"
    run_cell(client, HOLD_AFTER_EVALUATION.format(step=40))
    interrupter = threading.Thread(target=interrupt_once_saved, args=(client, sweep, "0_*/last.pt"))
    interrupter.start()
    try:
        cell = run_cell(client, f'stopped = lab.train("+experiment=leak", *size.overrides, "hydra.sweep.dir={sweep}")')
    finally:
        interrupter.join()
    finish = f'lab.train("+experiment=leak", "+notebook=test", "hydra.sweep.dir={sweep}", "trainer.resume=auto")'
    stderr = "".join(output.text for output in cell.outputs if output.get("name") == "stderr")
    assert stderr.endswith(f"the sweep stopped before its end; finish it with {finish}\n")
    assert all(output.output_type != "error" for output in cell.outputs)
    unfinished = f"{sweep}: the sweep is unfinished; finish it with {finish}"
    assert error_lines(run_cell(client, 'lab.summary(stopped, "val/loss")')) == [unfinished]
    assert error_lines(run_cell(client, "AttentionPanel(lab.finished(stopped))")) == [unfinished]
    finished = run_cell(client, finish)
    assert all(output.output_type != "error" for output in finished.outputs), finished.outputs
    shown = run_cell(client, 'display(*lab.summary(stopped, "val/loss", "val/loss_causal"))')
    [table] = [output.data["text/markdown"] for output in shown.outputs if "text/markdown" in output.get("data", {})]
    assert table.splitlines()[:2] == ["| run | val/loss | val/loss_causal |", "|---|---|---|"]
    assert [line.split(" | ")[0] for line in table.splitlines()[2:]] == ["| model.causal=True", "| model.causal=False"]


@pytest.mark.slow
def test_transformer_lens_refuses_in_one_line_in_a_kernel(lesson):
    """A run TransformerLens cannot represent (the encoder's, trained with QK-norm) and a path with no run."""
    client, _ = lesson
    run_cell(client, "from viewer.lens import open_run")
    assert error_lines(run_cell(client, 'open_run(next(encoder.glob("*b_both_sides*")))')) == [
        "model.qk_norm=True: TransformerLens's native attention has no norm of q and k"
    ]
    assert error_lines(run_cell(client, 'open_run("nowhere")')) == [
        "run=nowhere: no such run directory or checkpoint file"
    ]
