"""The README's two opening commands are the ones a fresh machine (and CI) runs."""

from __future__ import annotations

import re

from conftest import REPO


def _readme_commands() -> list[str]:
    block = re.search(r"```bash\n(.*?)```", (REPO / "README.md").read_text(), re.S)
    assert block, "the README opens with a bash block"
    return [line for line in block.group(1).splitlines() if line.strip()]


def test_the_readme_opens_with_an_install_and_a_test_command():
    install, tests = _readme_commands()[:2]
    assert install.startswith("pip install torch==2.13.0 && pip install -e")
    assert "python -m negtrain fit --recipe" in install
    assert "python -m pytest" in tests


def test_the_install_command_names_what_exists_and_runs_offline():
    """The first command works on a fresh machine with no network: the extra it installs exists
    and brings the recipe's model, the torch it pins is inside the project's range, and the recipe
    it trains validates and needs nothing from the Hub."""
    import tomllib

    from packaging.requirements import Requirement

    from negtrain.recipes import load_recipe

    install = _readme_commands()[0]
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    extras = re.search(r'pip install -e "\.\[([\w,]+)\]"', install).group(1).split(",")
    assert set(extras) <= set(project["optional-dependencies"]), extras
    pinned = re.search(r"pip install torch==([\w.+]+)", install).group(1)
    torch_range = next(Requirement(r) for r in project["dependencies"] if Requirement(r).name == "torch")
    assert torch_range.specifier.contains(pinned), f"torch=={pinned} is outside {torch_range}"
    recipe = load_recipe(re.search(r"fit --recipe (\S+)", install).group(1)).recipe
    package = recipe.model.name.removeprefix("pkg:").split("/")[0]
    assert recipe.model.name.startswith("pkg:"), "the first command's recipe must load its model offline"
    brought = {Requirement(r).name.replace("-", "_") for e in extras for r in project["optional-dependencies"][e]}
    assert package in brought, f"{package} is not installed by the extras {extras}"
    data_dir = re.search(r"NEGTRAIN_DATA_DIR=(\S+)", install).group(1)
    assert data_dir == "../shared/data" and data_dir in _readme_commands()[1]


def test_ci_runs_the_readme_test_command_verbatim():
    test_command = _readme_commands()[1]
    ci = (REPO / ".ci" / "run").read_text().splitlines()
    assert test_command in ci, f"{test_command!r} is not a line of .ci/run"
    # Nothing in CI may turn the relative data directory into an absolute one beforehand.
    assert not any(line.startswith("export NEGTRAIN_DATA_DIR") for line in ci)


def test_ci_checks_names_first_and_runs_the_slow_tests_after_the_default_suite():
    """An undefined name fails CI before any test (it once broke every masked-LM evaluation, on a
    path only a slow test reached), and the slow tests run too, after the README's command."""
    ci = (REPO / ".ci" / "run").read_text().splitlines()
    test_command = _readme_commands()[1]
    slow_command = "NEGTRAIN_DATA_DIR=../shared/data python -m pytest -q -m slow"
    assert slow_command in ci and any(line.startswith(slow_command) for line in (REPO / "README.md").read_text().splitlines())
    check = ci.index("ruff check negtrain tests")
    assert check < ci.index(test_command) < ci.index(slow_command)
    assert '"ruff' in (REPO / "pyproject.toml").read_text()  # the dev extra installs it
    assert '"F", "B", "E9"' in (REPO / "pyproject.toml").read_text()  # the rules it runs
    assert ci.index("mypy") < ci.index(test_command)
    assert any(line.startswith("NO_MKDOCS_2_WARNING=1 mkdocs build --strict") for line in ci)
