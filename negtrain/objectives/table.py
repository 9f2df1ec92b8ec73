"""The one explicit table of masked-LM objectives: the recipe's ``objective:`` section names one.

Each row is an :class:`negtrain.objectives.base.Objective`, built from its settings section of
:class:`negtrain.config.ObjectiveConfig` (the field with the same name). Adding an objective: its
module here (loss, batch transform, evaluator), its settings class and field in ``config/objective.py``,
and one row below.
"""

from __future__ import annotations

from negtrain.config import ObjectiveConfig
from negtrain.objectives.base import Objective
from negtrain.objectives.cue_masking import CueMasking
from negtrain.objectives.unlikelihood import Unlikelihood

OBJECTIVES: dict[str, type[Objective]] = {
    "unlikelihood": Unlikelihood,
    "cue_masking": CueMasking,
}


def objective_for(cfg: ObjectiveConfig) -> Objective:
    """The recipe's objective, built from its settings (the config allows only names above)."""
    return OBJECTIVES[cfg.name](cfg.settings)
