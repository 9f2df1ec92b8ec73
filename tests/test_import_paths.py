"""One import path per name: the modules that moved are imported from their new paths only.

The table of docs/extending.md ("Module paths") is read here: every old path is gone (no module,
no alias, no finder answering it), every new path imports, and the two packages that took a
module's name (``negtrain.runs``, ``negtrain.evaluation``) hand out none of its names."""

from __future__ import annotations

import importlib
import importlib.util
import re
import sys

import pytest

from conftest import REPO

ROWS = re.findall(r"^\| `(negtrain[\w.]*)`( \(its names\))? \| `(negtrain[\w.]*)` \|$",
                  (REPO / "docs/extending.md").read_text(encoding="utf-8"), re.M)


def test_the_table_is_read():
    assert len(ROWS) >= 25 and ("negtrain.card", "", "negtrain.evaluation.card") in ROWS


@pytest.mark.parametrize(("old", "names", "new"), ROWS, ids=[r[0] for r in ROWS])
def test_an_old_path_does_not_import_and_the_new_one_does(old, names, new):
    module = importlib.import_module(new)
    if names:  # a package now: none of the module's names through it
        package = importlib.import_module(old)
        public = [n for n in vars(module) if not n.startswith("_") and getattr(vars(module)[n], "__module__", None) == new]
        assert public and not hasattr(package, "__getattr__")
        assert [n for n in public if hasattr(package, n)] == []
    else:
        assert importlib.util.find_spec(old) is None
        with pytest.raises(ModuleNotFoundError):
            importlib.import_module(old)


def test_negtrain_installs_no_import_finder():
    import negtrain

    assert [f for f in sys.meta_path if type(f).__module__.startswith("negtrain")] == []
    assert not hasattr(negtrain, "MOVED")
