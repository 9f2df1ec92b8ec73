"""Old module paths keep importing after a module moves (negtrain/__init__.py): the old path
is the very module at the new one, its submodules too, with a DeprecationWarning on the importing
line; and every entry of the table points at a module that exists, from a path that names none."""

from __future__ import annotations

import importlib
import importlib.util
import sys
import warnings

import pytest

from conftest import REPO
import negtrain
from negtrain import MOVED, MovedFinder, new_path, package_getattr


@pytest.fixture
def entries(monkeypatch):
    """Old paths made up for the test (real modules stand in as the moved ones), forgotten after."""
    monkeypatch.setitem(MOVED, "negtrain.old_labels", "negtrain.core.labels")
    monkeypatch.setitem(MOVED, "negtrain.old_io", "negtrain.io")
    yield
    for name in [n for n in sys.modules if n.startswith(("negtrain.old_labels", "negtrain.old_io"))]:
        del sys.modules[name]
    for name in ("old_labels", "old_io"):
        if hasattr(sys.modules["negtrain"], name):
            delattr(sys.modules["negtrain"], name)


def test_importing_negtrain_installs_the_finder_once():
    assert sum(isinstance(f, MovedFinder) for f in sys.meta_path) == 1
    negtrain.install()
    assert sum(isinstance(f, MovedFinder) for f in sys.meta_path) == 1


def test_an_old_path_is_the_module_at_the_new_one(entries):
    import negtrain.core.labels

    with pytest.warns(DeprecationWarning, match="negtrain.old_labels moved to negtrain.core.labels") as caught:
        import negtrain.old_labels
    assert negtrain.old_labels is negtrain.core.labels
    assert caught[0].filename == __file__  # the warning points at the importing line
    from negtrain.old_labels import coarsen  # a name imported through the old path

    assert coarsen is negtrain.core.labels.coarsen
    assert importlib.import_module("negtrain.old_labels") is negtrain.core.labels


def test_a_moved_package_carries_its_submodules(entries):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        old = importlib.import_module("negtrain.old_io.atomic")
    # Not a second copy loaded from the package's folder under the old name (which would also
    # replace the package's attribute `atomic`).
    assert old.__name__ == "negtrain.io.atomic"
    assert old is importlib.import_module("negtrain.io.atomic") is sys.modules["negtrain.io"].atomic
    assert new_path("negtrain.old_io.atomic") == "negtrain.io.atomic"


def test_names_not_in_the_table_are_left_alone(entries):
    assert new_path("negtrain.core.labels") is None and new_path("negtrain.old_labelsx") is None
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("negtrain.not_a_module_anywhere")


def test_an_entry_whose_target_is_missing_imports_nothing(monkeypatch):
    monkeypatch.setitem(MOVED, "negtrain.old_gone", "negtrain.gone_too")
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("negtrain.old_gone")


@pytest.mark.parametrize("old, new", sorted(MOVED.items()))
def test_every_entry_points_from_no_file_to_a_module(old, new):
    as_path = REPO.joinpath(*old.split("."))
    assert not as_path.with_suffix(".py").exists() and not as_path.is_dir(), f"{old} is a real module: it shadows the entry"
    assert importlib.util.find_spec(new) is not None, f"{old} -> {new}: no module {new}"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        assert importlib.import_module(old) is importlib.import_module(new)


def test_a_package_that_took_a_module_path_lends_the_module_its_names():
    import negtrain.core.labels

    lookup = package_getattr("negtrain.io", "negtrain.core.labels")  # as if labels.py had become io/
    with pytest.warns(DeprecationWarning, match="negtrain.io.coarsen moved to negtrain.core.labels.coarsen"):
        assert lookup("coarsen") is negtrain.core.labels.coarsen
    for missing in ("atomic", "no_such_name", "__path__"):  # a submodule is the import system's
        with pytest.raises(AttributeError):
            lookup(missing)
