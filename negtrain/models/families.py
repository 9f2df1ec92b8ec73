"""The one explicit table of model families: ``model.family`` in a recipe names a builder here.

A builder takes the validated recipe and its loaded benchmark data and returns the family's
LightningModule and DataModule (:class:`negtrain.models.contract.Built`).
"""

from __future__ import annotations

from collections.abc import Callable

from negtrain.errors import unknown_name
from negtrain.models.lm import build_causal_lm, build_seq2seq
from negtrain.models.mlm import build_mlm
from negtrain.models.nli import build_nli

FAMILIES: dict[str, Callable] = {
    "nli": build_nli,
    "seq2seq": build_seq2seq,
    "causal_lm": build_causal_lm,
    "mlm": build_mlm,
}


def get_family(name: str) -> Callable:
    try:
        return FAMILIES[name]
    except KeyError:
        raise unknown_name("model family", name, FAMILIES) from None
