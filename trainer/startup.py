"""A stop while an entry point starts: a Ctrl-C or SIGTERM while its modules load (torch takes seconds) ends the
process in one line, with the shell's 128 + the signal, instead of a traceback from inside an import.

An entry point imports this module before any other (train.py: `import trainer.startup` above `# isort: split`);
the import takes effect only there, in the script being run: imported from anywhere else (a test, a library) it
changes nothing. Until trainer/stopping.py's signals_stop_at_once takes the signals over, once the imports are
done, a stop exits at once (os._exit): nothing has been written yet, and an exception raised inside an import can
leave a module half initialised, which fails much later ("ImportError: initialization failed"). A signal ignored
(nohup, a background job) stays ignored. Only the standard library is imported here.
"""

import os
import signal
import sys
import threading

SIGNALS = (signal.SIGINT, signal.SIGTERM)
IMPORT_MACHINERY = ("<frozen importlib._bootstrap>", "<frozen importlib._bootstrap_external>")


def stop_while_starting(number: int, frame) -> None:
    """Ends the process at once, in one line: no file is open for writing before the entry point's work begins."""
    name = signal.Signals(number).name
    os.write(2, f"stopped by {name} while {script()} was starting or ending, when nothing is written\n".encode())
    os._exit(128 + number)


def script() -> str:
    return os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "tinylm"


def importer_is_main() -> bool:
    """Whether the module importing this one is the script being run (`__main__`), not a test or a library."""
    frame = sys._getframe(1)
    while frame is not None and (frame.f_code.co_filename in IMPORT_MACHINERY or frame.f_globals is globals()):
        frame = frame.f_back
    return frame is not None and frame.f_globals.get("__name__") == "__main__"


def install() -> None:
    for number in SIGNALS:
        if signal.getsignal(number) in (signal.SIG_DFL, signal.default_int_handler):
            signal.signal(number, stop_while_starting)


if importer_is_main() and threading.current_thread() is threading.main_thread():
    install()
