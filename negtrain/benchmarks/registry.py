"""The one explicit table of benchmarks. Add a benchmark by adding its class here."""

from __future__ import annotations

from negtrain.benchmarks.base import Benchmark
from negtrain.benchmarks.blimp import BlimpNpi
from negtrain.benchmarks.mnli import Mnli
from negtrain.benchmarks.condaqa import Condaqa
from negtrain.benchmarks.monli import Monli
from negtrain.benchmarks.negated_lama import NegatedLama, NegatedLamaHighRanked, NegatedLamaLowRanked
from negtrain.benchmarks.negated_probes import NegatedProbes
from negtrain.benchmarks.neqa import Neqa, NeqaLettered
from negtrain.benchmarks.nubench import Nubench
from negtrain.benchmarks.nevir import Nevir
from negtrain.benchmarks.nannli import NanNli
from negtrain.benchmarks.negnli import NegnliMnli, NegnliRte, NegnliSnli
from negtrain.benchmarks.scone import Scone
from negtrain.benchmarks.scone_nlg import SconeNlg
from negtrain.benchmarks.tinad import Tinad
from negtrain.core.errors import unknown_name

BENCHMARKS: dict[str, type[Benchmark]] = {
    "scone": Scone,
    "scone_nlg": SconeNlg,
    "monli": Monli,
    "mnli": Mnli,
    "negnli-rte": NegnliRte,
    "negnli-snli": NegnliSnli,
    "negnli-mnli": NegnliMnli,
    "nannli": NanNli,
    "condaqa": Condaqa,
    "tinad": Tinad,
    "negated_probes": NegatedProbes,
    "negated_lama": NegatedLama,
    "negated_lama-high_ranked": NegatedLamaHighRanked,
    "negated_lama-low_ranked": NegatedLamaLowRanked,
    "neqa": Neqa,
    "neqa-lettered": NeqaLettered,
    "blimp-npi": BlimpNpi,
    "nubench": Nubench,
    "nevir": Nevir,
}


def get_benchmark(name: str) -> Benchmark:
    try:
        return BENCHMARKS[name]()
    except KeyError:
        raise unknown_name("benchmark", name, BENCHMARKS) from None
