"""TINAD's Figure 2 (García-Ferrero et al. 2023, §6): the overall accuracy on each of the dataset's
eleven patterns, one row per model. The paper's figure has one row per Vicuna-13B fine-tuned on
one pattern; here a row is whatever was scored: a card's or a protocol's TINAD splits, or several
runs side by side (``report --run A --run B ...``: the paper's eleven).

Each row's values are its record's ``accuracy/pattern/<NN>`` (every sentence of the pattern,
affirmative and negated, with and without a distractor: the paper's "overall accuracy"); a
pattern the scored split lacks is empty (undefined, not 0). Drawn as a table in markdown and as
a heat map (``figure2.png``), one cell per row and pattern, its value written in it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

#: The patterns of the paper's Table 2, #01 to #11, by their names in the authors' scorer.
PATTERNS = ("Synonymy1", "Antonymy1", "Synonymy2", "Antonymy2", "Hypernymy", "Part", "Substance", "Member", "Agent",
            "Instrument", "Result")
#: Where the file lives beside card.md, protocol.md or a report's summary.md.
FILE = "figure2.png"


def pattern_accuracy(metrics: Mapping[str, float | None]) -> dict[int, float | None]:
    """A record's accuracy per pattern number (``accuracy/pattern/<NN>``); None where undefined."""
    out: dict[int, float | None] = {}
    for p in range(1, len(PATTERNS) + 1):
        value = metrics.get(f"accuracy/pattern/{p:02d}")
        out[p] = None if value is None or (isinstance(value, float) and math.isnan(value)) else float(value)
    return out


def has_patterns(metrics: Mapping[str, float | None]) -> bool:
    return any(v is not None for v in pattern_accuracy(metrics).values())


def figure2_table(rows: Sequence[tuple[str, Mapping[str, float | None]]], scale: float = 1.0, decimals: int = 4) -> list[str]:
    """Figure 2 as a markdown table: one row per (label, metrics), one column per pattern."""
    header = "| scored | " + " | ".join(f"#{p:02d} {name}" for p, name in enumerate(PATTERNS, start=1)) + " |"
    lines = [header, "|---|" + "---|" * len(PATTERNS)]
    for label, metrics in rows:
        cells = [("-" if v is None else f"{v * scale:.{decimals}f}") for v in pattern_accuracy(metrics).values()]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return lines


def figure2_legend(units: str, file: str | None = FILE) -> str:
    return (f"Each pattern's overall accuracy (`accuracy/pattern/<NN>`: every sentence of the pattern, affirmative and "
            f"negated, with and without a distractor), in {units}; `-`: the pattern is not in what was scored."
            + (f" Drawn in `{file}`." if file else ""))


def tinad_rows(records: Iterable[tuple[str, str, Mapping[str, float | None]]]) -> list[tuple[str, Mapping[str, float | None]]]:
    """Figure 2's rows among (label, benchmark, metrics): TINAD's, with an accuracy per pattern."""
    return [(label, metrics) for label, benchmark, metrics in records if benchmark == "tinad" and has_patterns(metrics)]


def runs_rows(runs: Sequence[Any]) -> list[tuple[str, Mapping[str, float | None]]]:
    """Figure 2's rows of run directories side by side (:class:`negtrain.runs.reading.RunDir`):
    each run's TINAD eval sets at its final epoch."""
    return tinad_rows((f"{r.name}: {name}", name.split("/")[0], m) for r in runs if r.epochs for name, m in r.epochs[-1].evals.items())


def figure2_section(rows: Sequence[tuple[str, Mapping[str, float | None]]], units: str, file: str | None = FILE) -> list[str]:
    """A card's or a report's section of Figure 2 (nothing without a row), in fractions."""
    if not rows:
        return []
    return ["", "## TINAD Figure 2: accuracy per pattern", "", *figure2_table(rows), "", figure2_legend(units, file)]


def draw_figure2(rows: Sequence[tuple[str, Mapping[str, float | None]]], folder: Path, title: str) -> None:
    """``figure2.png`` in ``folder`` from the rows; without a row, no file (nor a stale one)."""
    if rows:
        plot_figure2(rows, folder / FILE, title)
    else:
        (folder / FILE).unlink(missing_ok=True)


def plot_figure2(rows: Sequence[tuple[str, Mapping[str, float | None]]], path: Path, title: str) -> list[str]:
    """The heat map of Figure 2 (rows: the labels; columns: the patterns; a grey cell: undefined).
    The PNG's ``negtrain:rows`` text chunk names the rows drawn, which are returned."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    values = np.array([[np.nan if v is None else v for v in pattern_accuracy(m).values()] for _, m in rows], dtype=float)
    values = values.reshape(len(rows), len(PATTERNS))
    fig, ax = plt.subplots(figsize=(9, 1.6 + 0.45 * max(len(rows), 1)))
    cmap = matplotlib.colormaps["viridis"].with_extremes(bad="0.85")
    image = ax.imshow(np.ma.masked_invalid(values), vmin=0, vmax=1, cmap=cmap, aspect="auto")
    for i in range(values.shape[0]):
        for j in range(values.shape[1]):
            if not np.isnan(values[i, j]):
                ax.text(j, i, f"{values[i, j]:.2f}", ha="center", va="center", fontsize=7,
                        color="black" if values[i, j] > 0.6 else "white")
    ax.set_xticks(range(len(PATTERNS)), [f"#{p:02d}\n{name}" for p, name in enumerate(PATTERNS, start=1)], fontsize=7)
    ax.set_yticks(range(len(rows)), [label for label, _ in rows], fontsize=7)
    ax.set_xlabel("pattern scored (TINAD Figure 2: overall accuracy; grey: not in what was scored)")
    ax.set_title(title, fontsize=9)
    fig.colorbar(image, ax=ax, fraction=0.03, pad=0.02)
    fig.tight_layout()
    labels = [label for label, _ in rows]
    fig.savefig(path, dpi=110, metadata={"negtrain:rows": "|".join(labels)})
    plt.close(fig)
    return labels
