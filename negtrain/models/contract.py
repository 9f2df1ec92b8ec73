"""What a model family's builder receives and returns: the contract between training and models.

:func:`negtrain.training.build.build` reads a recipe's benchmark data (:class:`Loaded`), hands it
to the family's builder (named in its row of :data:`negtrain.config.FAMILY_SECTIONS`, imported by negtrain.models.families), and gets back the
LightningModule and DataModule (:class:`Built`). These types live here, on the models floor, so
that builders never import from ``training`` (see ARCHITECTURE.md).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from negtrain.benchmarks.base import Benchmark, Example
from negtrain.data.sources import TrainSource

if TYPE_CHECKING:  # annotations only: reading a recipe's data (sweep) imports no Lightning
    from negtrain.data.module import NegtrainData
    from negtrain.models.base import NegtrainModule


@dataclass
class Selection:
    """The checkpoint-selection metric and its direction, from the metric's declaration."""

    monitor: str
    higher_is_better: bool
    #: The metric is on a split holding test rows (only with ``selection.allow_test_split: true``):
    #: every record of the run says the epoch was picked on test.
    on_test: bool = False
    #: Why its split holds test rows (negtrain.benchmarks.test_rows), where ``on_test``.
    why: str | None = None

    @property
    def mode(self) -> str:
        return "max" if self.higher_is_better else "min"


@dataclass
class Loaded:
    """Benchmark data a recipe asks for, read and validated, before any model is loaded."""

    train: list[tuple[Benchmark, str, TrainSource]]
    eval: list[tuple[Benchmark, str, list[Example]]]
    #: The recipe entries they came from (prompt, verbalizer, shots), in the same order.
    train_specs: list[Any] = field(default_factory=list)
    eval_specs: list[Any] = field(default_factory=list)


@dataclass
class Built:
    module: NegtrainModule
    data: NegtrainData
    tokenizer: Any
    selection: Selection | None = None
    #: The head's modules that the starting weights did not provide (randomly initialised):
    #: scoring the starting model then measures chance, which ``validate`` says.
    fresh_head: list[str] = field(default_factory=list)
    #: What was built: the resolved recipe and the benchmarks left out (a ``negtrain.evaluation.plan.EvalPlan``,
    #: set by ``training.build``, which sits above this floor).
    plan: Any = None
