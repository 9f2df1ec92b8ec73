"""An installed wheel carries the recipes: built from this checkout, installed into a fresh virtual
environment, and run from outside the clone, it lists and loads every recipe.

The wheel is built from a copy of the sources (so the checkout gets no build/ folder) without
build isolation, and installed with --no-deps: the test needs no network. The new environment
reaches the already-installed dependencies through a .pth line naming this interpreter's
site-packages; that line adds the folder only, so the editable install of negtrain there (a
finder registered by its own .pth file) is not loaded, and `import negtrain` can only find the
wheel.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path

import pytest

from conftest import REPO


def _run(args: list[str], cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    done = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"{' '.join(args)} failed:\n{done.stdout}\n{done.stderr}"
    return done


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    src = tmp_path_factory.mktemp("src")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, src / name)
    for name in ("negtrain", "recipes"):
        shutil.copytree(REPO / name, src / name, ignore=shutil.ignore_patterns("__pycache__"))
    out = tmp_path_factory.mktemp("dist")
    _run([sys.executable, "-m", "pip", "wheel", str(src), "--no-deps", "--no-build-isolation", "--no-index", "-q", "-w", str(out)], src)
    (built,) = out.glob("negtrain-*.whl")
    return built


@pytest.fixture(scope="module")
def installed(wheel, tmp_path_factory) -> tuple[Path, dict[str, str]]:
    """(python of a fresh venv holding the wheel, an environment that does not point at the clone)."""
    root = tmp_path_factory.mktemp("venv")
    venv.create(root, with_pip=False)
    python = root / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    site = Path(_run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], root).stdout.strip())
    _run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "-q", "--target", str(site), str(wheel)], root)
    (site / "_negtrain_test_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "NEGTRAIN_RECIPES_DIR")}
    return python, env


def test_the_wheel_holds_every_package_and_recipe(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    packages = {str(p.parent.relative_to(REPO)) for p in (REPO / "negtrain").rglob("__init__.py")}
    missing = sorted(p for p in packages if f"{p}/__init__.py" not in names)
    assert not missing, f"packages missing from the wheel (list them in pyproject.toml): {missing}"
    recipes = sorted(p.name for p in (REPO / "recipes").glob("*.yaml"))
    assert recipes and sorted(n.rpartition("/")[2] for n in names if n.startswith("negtrain/recipe_files/")) == recipes
    assert "negtrain/resources/negation_cues.txt" in names


def test_an_installed_wheel_lists_and_loads_every_recipe(installed, tmp_path):
    python, env = installed
    where = _run([str(python), "-c", "import negtrain; print(negtrain.__file__)"], tmp_path, env).stdout.strip()
    assert str(REPO) not in where and "site-packages" in where  # the wheel, not the clone

    # One line per recipe (name and purpose), then its indented "needs:" lines.
    listed = [line for line in _run([str(python), "-m", "negtrain", "recipes"], tmp_path, env).stdout.splitlines() if not line[:1].isspace()]
    expected = sorted(p.stem for p in (REPO / "recipes").glob("*.yaml"))
    assert [line.split()[0] for line in listed] == expected
    assert all(len(line.split()) > 1 for line in listed), "every recipe has a purpose line"

    script = (
        "import json; from negtrain.recipes import available_recipes, load_recipe\n"
        "print(json.dumps({n: [str(p), load_recipe(n).recipe.model.family] for n, p in available_recipes().items()}))"
    )
    loaded = json.loads(_run([str(python), "-c", script], tmp_path, env).stdout)
    assert sorted(loaded) == expected
    assert all("recipe_files" in path and str(REPO) not in path for path, _ in loaded.values())
    assert {family for _, family in loaded.values()} >= {"nli", "mlm"}
