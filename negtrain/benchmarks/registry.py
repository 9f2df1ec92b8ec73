"""The one explicit table of benchmarks. Add a benchmark by adding its class here; a benchmark kept
outside the package (a plugin's, or a test's) is one call, :func:`register_benchmark`."""

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
from negtrain.core.errors import ConfigError, unknown_name
from negtrain.core.plugins import PluginTable

#: Benchmark name -> its class. Read when used, never copied at import: a plugin's
#: :func:`register_benchmark` may add a row (its first read loads the installed plugins).
BENCHMARKS: PluginTable[str, type[Benchmark]] = PluginTable("benchmark", {
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
})


def get_benchmark(name: str) -> Benchmark:
    try:
        return BENCHMARKS[name]()
    except KeyError:
        raise unknown_name("benchmark", name, BENCHMARKS) from None


def benchmark_names() -> tuple[str, ...]:
    """Every benchmark a recipe, a card or ``evaluate`` can name, as the table has them now."""
    return tuple(BENCHMARKS)


def register_benchmark(benchmark: type[Benchmark]) -> str:
    """Add a benchmark to the table, at run time, and return its name.

    ``benchmark`` is a :class:`Benchmark` subclass whose ``name`` is the table's key (a word of
    letters, digits, ``_`` and ``-``: set names are ``<benchmark>/<split>``). From then on recipes,
    ``evaluate --benchmark/--benchmarks``, the scoring matrix and ``evaluate --list`` take it like a
    shipped benchmark. Called explicitly (a plugin's function, a test); nothing registers on import.
    :func:`unregister_benchmark` takes it out again.
    """
    if not (isinstance(benchmark, type) and issubclass(benchmark, Benchmark)):
        raise ConfigError(f"register_benchmark: expected a Benchmark subclass, got {benchmark!r}")
    name = getattr(benchmark, "name", None)
    if not isinstance(name, str) or not name or not name.replace("-", "_").isidentifier():
        raise ConfigError(f"register_benchmark: {benchmark.__name__}.name must be a word (letters, digits, _ and -; "
                          f"set names are <benchmark>/<split>), got {name!r}")
    if name in BENCHMARKS:
        held = "ships with negtrain" if name in BENCHMARKS.shipped else f"was added by {BENCHMARKS.origin(name) or 'a register_benchmark call'}"
        raise ConfigError(f"register_benchmark: the table already has a benchmark '{name}' ({held})")
    missing = [a for a in ("splits", "labels", "citation") if not hasattr(benchmark, a)]
    if missing or getattr(benchmark, "__abstractmethods__", None):
        lacks = missing + sorted(getattr(benchmark, "__abstractmethods__", ()))
        raise ConfigError(f"register_benchmark: {benchmark.__name__} does not define {', '.join(lacks)}")
    BENCHMARKS[name] = benchmark
    return name


def unregister_benchmark(name: str) -> None:
    """Take a benchmark added by :func:`register_benchmark` out of the table (the shipped ones stay)."""
    if name in BENCHMARKS.shipped:
        raise ConfigError(f"unregister_benchmark: '{name}' ships with negtrain and stays in the table")
    if name not in BENCHMARKS:
        raise ConfigError(f"unregister_benchmark: no benchmark '{name}' was registered")
    del BENCHMARKS[name]
