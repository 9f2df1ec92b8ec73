"""torchmetrics' ``Metric`` and ``dim_zero_cat``, without the rest of torchmetrics.

``import torchmetrics`` runs the package's ``__init__``, which imports every metric family it
ships: audio (through ``scipy.signal``), image, text (BERTScore), detection, retrieval. The
metrics here use two names of it, the ``Metric`` base (state, DDP gathering) and
``dim_zero_cat``; on an evaluation that imports nothing else of torchmetrics, that ``__init__``
was a third of the fixed cost of a report card.

So the two modules that define them (``torchmetrics.metric``, ``torchmetrics.utilities``) are
imported under a bare stand-in for the package (the real package's spec, its ``__init__`` not
run, plus the ``_logger`` its ``utilities.prints`` reads), which is taken out of ``sys.modules``
again at once. A later ``import torchmetrics`` (Lightning's, when a command trains) then runs the
real ``__init__``, which finds those modules already imported: ``torchmetrics.Metric`` is the
very class imported here, so ``isinstance`` checks and Lightning's logging of metrics hold.
Where torchmetrics was already imported, its own names are used.
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from torchmetrics import Metric
    from torchmetrics.utilities import dim_zero_cat
else:

    def _import_core():
        if "torchmetrics" not in sys.modules:
            spec = importlib.util.find_spec("torchmetrics")
            if spec is None:
                raise ModuleNotFoundError("No module named 'torchmetrics'", name="torchmetrics")
            stand_in = importlib.util.module_from_spec(spec)  # the package, its __init__ not run
            stand_in._logger = logging.getLogger("torchmetrics")  # what torchmetrics.utilities.prints reads
            sys.modules["torchmetrics"] = stand_in
            try:
                # utilities first, as the package's __init__ does: its checks import torchmetrics.metric
                utilities = importlib.import_module("torchmetrics.utilities")
                metric = importlib.import_module("torchmetrics.metric")
            except ImportError:
                # A torchmetrics whose modules need more of the package than the stand-in holds:
                # drop what was half imported and take the whole package (slower, never wrong).
                for name in [m for m in sys.modules if m == "torchmetrics" or m.startswith("torchmetrics.")]:
                    del sys.modules[name]
                utilities = metric = None
            finally:
                if sys.modules.get("torchmetrics") is stand_in:
                    del sys.modules["torchmetrics"]
            if utilities is not None and metric is not None:
                return metric.Metric, utilities.dim_zero_cat
        from torchmetrics import Metric
        from torchmetrics.utilities import dim_zero_cat

        return Metric, dim_zero_cat

    Metric, dim_zero_cat = _import_core()

__all__ = ["Metric", "dim_zero_cat"]
