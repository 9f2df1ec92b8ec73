"""Cases an earlier fuzzing run found that must be one clean error line (exit 2), not a traceback
or a silent acceptance."""

from __future__ import annotations

import pytest

from negtrain.cli import main


def _error(capsys, argv) -> str:
    capsys.readouterr()
    assert main(argv) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    return lines[0]


@pytest.mark.parametrize("key,says", [("[a, b]", "a list as a key; keys are names"), ("{a: 1}", "a dict as a key; keys are names")])
def test_a_collection_as_a_mapping_key(tmp_path, capsys, key, says):
    recipe = tmp_path / "r.yaml"
    recipe.write_text(f"description: x\n? {key}\n: 1\nmodel: {{name: m}}\n")
    assert says in _error(capsys, ["fit", "--recipe", str(recipe)])


@pytest.mark.parametrize("override,says", [
    ("--seed=true", "seed: Value error, expected a whole number, not a yes/no"),
    ("--trainer.max_epochs=false", "trainer.max_epochs: Value error, expected a whole number, not a yes/no"),
    ("--model.max_length=1000000000000", "model.max_length: Input should be less than or equal to 16777216"),
])
def test_a_yes_no_for_a_number_and_an_endless_max_length(tmp_path, capsys, override, says):
    assert says in _error(capsys, ["fit", "--recipe", "scone_minilm", override, "--output-dir", str(tmp_path / "run")])
    assert not (tmp_path / "run").exists()


def test_a_sweep_over_a_yes_no_seed(tmp_path, capsys):
    from negtrain.recipes import recipes_dir

    import yaml

    raw = yaml.safe_load((recipes_dir() / "scone_minilm.yaml").read_text())
    raw["sweep"] = {"method": "grid", "parameters": {"seed": {"values": [1, True]}}}
    recipe = tmp_path / "sweep.yaml"
    recipe.write_text(yaml.safe_dump(raw, sort_keys=False))
    line = _error(capsys, ["sweep", "--recipe", str(recipe), "--local", "2", "--output-dir", str(tmp_path / "s")])
    assert "sweep.parameters.seed = True would fail every trial" in line and "not a yes/no" in line


def test_flash_attention_without_its_package(tmp_path, capsys):
    import importlib.util

    if importlib.util.find_spec("flash_attn") is not None:
        pytest.skip("flash-attn is installed here")
    line = _error(capsys, ["validate", "--recipe", "scone_minilm", "--model.attn_implementation=flash_attention_2",
                           "--output-dir", str(tmp_path / "run")])
    assert "model.attn_implementation 'flash_attention_2' needs the flash-attn package, which is not installed" in line
