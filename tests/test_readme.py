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
    check = ci.index("ruff check --select F negtrain tests --extend-exclude tests/fixtures")
    assert check < ci.index(test_command) < ci.index(slow_command)
    assert '"ruff' in (REPO / "pyproject.toml").read_text()  # the dev extra installs it
