"""The Hydra callback of hydra/launcher=parallel: jobs that train side by side keep the terminal readable.

Hydra's joblib launcher runs each job in a loky worker process, and joblib gives each worker cpu_count // n_jobs
threads (OMP_NUM_THREADS, unless the user's environment sets it), so jobs x threads never exceed the cores. The
workers share the terminal: their progress bars are off (TQDM_DISABLE, set by the launcher config), each of
their log lines starts with the job's number and leaves in one write, so that no other job's line lands inside it.
"""

import io
import logging
import os
import sys
from typing import Any

from hydra.core.hydra_config import HydraConfig
from hydra.experimental.callback import Callback
from omegaconf import DictConfig

log = logging.getLogger(__name__)


class JobsSideBySide(Callback):
    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        """One line before the jobs start: how many run at once, and with how many threads each."""
        from joblib import cpu_count  # the cores this process may use, as joblib counts them for its workers

        cores = cpu_count()
        jobs = config.hydra.launcher.n_jobs
        at_once = cores if jobs == -1 else min(jobs, cores) if jobs > 0 else max(cores + 1 + jobs, 1)
        threads = os.environ.get("OMP_NUM_THREADS", max(cores // at_once, 1))
        log.info("%s jobs side by side, %s thread(s) each, on %d cores", at_once, threads, cores)

    def on_job_start(self, config: DictConfig, **kwargs: Any) -> None:
        """In the worker, with the job's logging set up: its terminal lines say which job wrote them."""
        tag = f"[job {HydraConfig.get().job.num}]"
        for handler in logging.getLogger().handlers:
            if isinstance(handler, logging.StreamHandler) and not isinstance(handler, logging.FileHandler):
                handler.setFormatter(logging.Formatter(f"{tag}{handler.formatter._fmt}"))
        one_write_per_line(sys.stdout, sys.stderr)

    def on_job_end(self, config: DictConfig, **kwargs: Any) -> None:
        for stream in (sys.stdout, sys.stderr):  # what the job printed without a flush, before the next job's lines
            stream.flush()


def one_write_per_line(*streams: object) -> None:
    """loky's workers write straight through (python -u): tqdm.write, through which train.py's log lines go
    (logging_redirect_tqdm), writes a line and its line break apart, and another job's line could land between the
    two. Buffered, a log record leaves in one write, when its handler flushes."""
    for stream in streams:
        if isinstance(stream, io.TextIOWrapper):
            stream.reconfigure(write_through=False)
