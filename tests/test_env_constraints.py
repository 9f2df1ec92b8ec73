"""``env --constraints`` checks a run's provenance.json before it writes a line (issue 36, cases 10
and 16): an object of package name to a PEP 440 version string. A null version (it wrote
``torch==None``), a version holding a line break (it wrote an extra pip option line), a JSON list
and bytes that are not UTF-8 each cost one ``error:`` line, exit 2, and no file."""

from __future__ import annotations

import json

import pytest

from negtrain.cli import main

GOOD = {
    "format": 1,
    "negtrain": {"version": "0.1.0", "git_commit": "0123456789abcdef0123456789abcdef01234567", "git_dirty": False},
    "torch": {"version": "2.13.0+cu128", "cuda": "12.8", "cudnn": 91002},
    "packages": {"torch": "2.13.0+cu128", "transformers": "5.24.0", "lightning": "2.6.6", "PyYAML": "6.0.2", "peft": "0.21.2"},
}


def _run_with(tmp_path, provenance) -> object:
    run = tmp_path / "run"
    run.mkdir(exist_ok=True)
    data = provenance if isinstance(provenance, bytes) else json.dumps(provenance).encode()
    (run / "provenance.json").write_bytes(data)
    return run


def _refused(capsys, run, out) -> str:
    capsys.readouterr()
    code = main(["env", "--constraints", str(run), "--out", str(out)])
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert code == 2, captured
    assert len(lines) == 1 and lines[0].startswith("error: "), captured.err
    assert "Traceback" not in captured.err
    return lines[0]


def test_a_valid_record_gives_one_pin_per_package_and_comments(tmp_path, capsys):
    run = _run_with(tmp_path, GOOD)
    out = tmp_path / "c.txt"
    assert main(["env", "--constraints", str(run), "--out", str(out)]) == 0
    lines = out.read_text().splitlines()
    pins = [line for line in lines if not line.startswith("#")]
    assert pins == ["lightning==2.6.6", "peft==0.21.2", "PyYAML==6.0.2", "torch==2.13.0+cu128", "transformers==5.24.0"]
    assert "# negtrain 0.1.0 from git commit 0123456789abcdef0123456789abcdef01234567" in lines
    assert "# torch was built for CUDA 12.8: install it from the matching index first" in lines


@pytest.mark.parametrize(("change", "says"), [
    ({"packages": {**GOOD["packages"], "torch": None}}, "packages.torch: null is not a version string"),
    ({"packages": {**GOOD["packages"], "peft": "0.21.2\n--index-url http://evil.example/simple"}}, "packages.peft"),
    ({"packages": {**GOOD["packages"], "peft": "0.21.2\n"}}, "holds whitespace or a line break"),
    ({"packages": {**GOOD["packages"], "peft": "latest"}}, "packages.peft: \"latest\" is not a PEP 440 version"),
    ({"packages": {**GOOD["packages"], "peft": 0.21}}, "packages.peft: 0.21 is not a version string"),
    ({"packages": {**GOOD["packages"], "--index-url http://evil.example/simple\npeft": "1.0"}}, "is not a package name"),
    ({"packages": ["torch==2.13.0"]}, "'packages' should be an object of package name to version"),
    ({"packages": None}, "'packages' should be an object"),
    ({"negtrain": {**GOOD["negtrain"], "git_commit": "0123abc\n--index-url http://evil.example/simple"}}, "negtrain.git_commit"),
    ({"torch": {**GOOD["torch"], "cuda": "12.8\n--extra-index-url http://evil.example"}}, "torch.cuda"),
])
def test_a_value_that_is_not_a_version_is_refused_before_a_line_is_written(tmp_path, capsys, change, says):
    run = _run_with(tmp_path, {**GOOD, **change})
    out = tmp_path / "c.txt"
    line = _refused(capsys, run, out)
    assert says in line and "provenance.json" in line, line
    assert not out.exists()
    assert "\n" not in line


@pytest.mark.parametrize(("data", "says"), [
    (b'["torch", "2.13.0"]\n', "a JSON list, not an object"),
    (b'{"packages": {"torch": "2.13.0\xff"}}\n', "not a readable provenance file"),
    (b"\xff\xfe{}", "not a readable provenance file"),
    (b'{"packages": ', "not a readable provenance file"),
])
def test_a_file_that_is_not_a_json_object_in_utf8_is_one_error(tmp_path, capsys, data, says):
    run = _run_with(tmp_path, data)
    out = tmp_path / "c.txt"
    out.write_text("kept\n")  # an earlier file at --out is left as it was
    line = _refused(capsys, run, out)
    assert says in line and "provenance.json" in line, line
    assert out.read_text() == "kept\n"
