"""Where a run writes: Hydra's run directory (configs/train.yaml's hydra.run.dir) through two resolvers.

A fresh run gets outputs/DATE/TIME with microseconds, so runs started in the same second never share one.
A resumed run writes on into its own directory. Under torchrun every rank must agree on the directory,
and only rank 0 writes Hydra's files there.
"""

import os
from datetime import datetime
from pathlib import Path
from typing import Optional

from omegaconf import OmegaConf

from trainer.checkpoint import run_dir_of


def run_dir(resume: Optional[str], fresh: str) -> str:
    if resume:
        return str(run_dir_of(resume))
    run_id = os.environ.get("TORCHELASTIC_RUN_ID", "none")  # torchrun's rendezvous id, shared by all ranks
    if run_id != "none":  # a clock reading would differ between ranks; the rendezvous id does not
        return str(Path(fresh).parent / f"torchrun-{run_id[:8]}")
    return fresh


def hydra_subdir(resume: Optional[str]) -> Optional[str]:
    """Where Hydra writes the composed config: nowhere for ranks other than 0; for a resume, beside the first's."""
    if os.environ.get("RANK", "0") != "0":
        return None
    return f".hydra/resume-{datetime.now():%Y-%m-%d_%H-%M-%S-%f}" if resume else ".hydra"


def register_resolvers() -> None:
    OmegaConf.register_new_resolver("run_dir", run_dir)
    OmegaConf.register_new_resolver("hydra_subdir", hydra_subdir)
