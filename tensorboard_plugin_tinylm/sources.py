"""Where tinylm's code is, for the TensorBoard process: the one place the repository is put on sys.path.

tinylm's own packages (model/, data/, trainer/, summary/, viewer/) are not installed: their generic names would
clash with other packages in a shared environment. Installed editable (the README's `pip install -e ".[dev]"`), this
package is its file in the repository, so the repository root is the directory above it. The plugin calls
use_sources() once, when TensorBoard makes it (AttentionPlugin.__init__), in the TensorBoard process only; from then
on its requests import tinylm's code as train.py does. Putting the root on sys.path imports nothing itself.
"""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MARKER = ROOT / "model" / "attention.py"  # a file only tinylm's repository has there
PACKAGES = ("model", "data", "trainer", "summary", "viewer")


class SourcesMissing(Exception):
    """The plugin was installed without the repository beside it; the message says what to do."""


def use_sources() -> None:
    """Make tinylm's packages importable, from the repository this plugin sits in."""
    if not MARKER.is_file():
        raise SourcesMissing(
            f"tinylm's sources are not beside this plugin ({ROOT} has no model/attention.py): install it from the "
            f'repository with pip install -e ".[dev]", as the README says'
        )
    for name in PACKAGES:  # one loaded already from elsewhere would hide tinylm's
        origin = getattr(sys.modules.get(name), "__file__", None) or str(ROOT)
        if not Path(origin).resolve().is_relative_to(ROOT):
            raise SourcesMissing(f"another package named {name!r} ({origin}) is loaded in this TensorBoard process")
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
