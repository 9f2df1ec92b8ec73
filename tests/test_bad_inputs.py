"""Inputs that used to escape as a traceback, a hang or silence: each is now one ``error:`` line on
stderr and exit code 2, found before any model is loaded.

One table, run through the real command line: most cases call ``negtrain.cli.main`` in this
process (fast); the ones that used to hang, or could exhaust memory if the check regressed, run
``python -m negtrain`` as a subprocess with a timeout. Every case asserts the exit code, exactly
one stderr line starting with ``error:``, and the words that name the problem.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

from negtrain.cli import main
from test_malformed import BASE_RECIPE, jsonl, valid_files

REPO = Path(__file__).resolve().parent.parent
#: A subprocess case that takes longer than this is a hang.
TIMEOUT = 90


def condaqa_rows() -> list[dict]:
    """Two complete question groups in CondaQA's schema (PassageEditID 0-3 per group)."""
    rows = []
    for group in range(2):
        for edit in range(4):
            rows.append({
                "SampleID": group * 4 + edit, "PassageID": 100 + group, "QuestionID": f"q{group}", "PassageEditID": edit,
                "sentence1": f"passage {group} version {edit} is not short", "sentence2": f"is passage {group} short?",
                "label": ("YES", "NO", "DON'T KNOW", "NO")[edit],
            })
    return rows


def _condaqa_with(i: int, **fields) -> str:
    rows = condaqa_rows()
    rows[i].update(fields)
    return jsonl(rows)


SCONE_TEST = "data/selenashe/ScoNe/scone_nli/test"


def _scone_minus_last_row(condition: str) -> str:
    lines = valid_files()[f"selenashe/ScoNe/scone_nli/test/{condition}.csv"].splitlines()
    return "\n".join(lines[:-1]) + "\n"


def _scone_cut_mid_row(condition: str) -> str:
    text = valid_files()[f"selenashe/ScoNe/scone_nli/test/{condition}.csv"]
    last = text.rstrip("\n").rsplit("\n", 1)[1]
    return text.rstrip("\n")[: -(len(last) // 2)]  # half of the last row, no final line break


def _scone_long_field(chars: int) -> str:
    lines = valid_files()["selenashe/ScoNe/scone_nli/test/one_scoped.csv"].splitlines()
    cells = lines[3].split(",")
    cells[1] = '"' + "a very long premise, " * (chars // 21) + '"'
    lines[3] = ",".join(cells)
    return "\n".join(lines) + "\n"


def _alias_bomb() -> str:
    """Nine aliases of nine aliases, nine levels deep, in a free-form field (a sweep's values):
    387 million values once expanded, from a file of 1 KB."""
    lines = ["description: alias bomb", "model: {name: m}", "data: {eval: [{benchmark: monli, split: test}]}",
             "sweep:", "  method: grid", "  parameters:", "    model.learning_rate:", "      values:",
             "        - &l0 [x, x, x, x, x, x, x, x, x]"]
    lines += [f"        - &l{i} [{', '.join([f'*l{i - 1}'] * 9)}]" for i in range(1, 9)]
    return "\n".join(lines) + "\n"


def _recipe_with(**changes) -> dict:
    r = json.loads(json.dumps(BASE_RECIPE))
    for dotted, value in changes.items():
        node = r
        *parents, last = dotted.split(".")
        for p in parents:
            node = node[int(p)] if isinstance(node, list) else node[p]
        node[last] = value
    return r


@dataclass
class Case:
    name: str
    argv: list[str]  # {recipe} {tmp} {preds} {run} are replaced
    expect: list[str]  # substrings of the one error line
    files: dict[str, object] = field(default_factory=dict)  # relative to {tmp}: text, or a recipe mapping
    subprocess: bool = False
    env: dict[str, str] = field(default_factory=dict)


FIT = ["fit", "--recipe", "{recipe}", "--output-dir", "{tmp}/run"]
SCONE_EVAL = ["evaluate", "--benchmark", "scone", "--split", "test", "--predictions", "{preds}"]
CONDAQA_EVAL = ["evaluate", "--benchmark", "condaqa", "--split", "dev", "--predictions", "{preds}"]
MONLI_EVAL = ["evaluate", "--benchmark", "monli", "--split", "test", "--predictions", "{preds}"]
GOOD_PRED = '{"id": "monli/test/0", "prediction": "entailment"}\n'

CASES = [
    # ---- used to end in a traceback ----
    Case("output-dir-is-a-file", ["fit", "--recipe", "{recipe}", "--output-dir", "{tmp}/afile"], ["--output-dir", "afile", "not a directory"], files={"afile": "x"}),
    Case("output-dir-below-a-file", ["fit", "--recipe", "{recipe}", "--output-dir", "{tmp}/afile/run"], ["--output-dir", "afile", "is a file"], files={"afile": "x"}),
    Case("output-dir-unwritable", ["fit", "--recipe", "{recipe}", "--output-dir", "/proc/negtrain-run/x"], ["--output-dir /proc/negtrain-run/x", "cannot write"]),
    Case("devices-minus-one", [*FIT, "--trainer.devices=-1"], ["trainer.devices", "1 or more", "'auto'"]),
    Case("devices-word", [*FIT, "--trainer.devices=abc"], ["trainer.devices", "'abc'"]),
    Case("accelerator-tpu", [*FIT, "--trainer.accelerator=tpu"], ["trainer.accelerator 'tpu'", "not available"]),
    Case("accelerator-typo", [*FIT, "--trainer.accelerator=cpux"], ["unknown trainer.accelerator 'cpux'", "did you mean 'cpu'"]),
    Case("qlora-narrow-model", [*FIT, "--adapter.type=qlora"], ["adapter.type 'qlora'", "multiples of 64", "(32 x 32)"]),
    Case("weight-inf", FIT, ["data.train.0.weight", "finite"], files={"recipe.yaml": _recipe_with(**{"data.train.0.weight": float("inf")})}),
    Case("weight-huge", [*FIT, "--data.train=[{benchmark: monli, split: train, weight: 1e300}]"], ["weight", "1000000"]),
    Case("temperature-tiny", [*FIT, "--data.mix.sampling=temperature", "--data.mix.temperature=1e-300"], ["data.mix.temperature", "0.01"]),
    Case("epoch-largest-huge", [*FIT, "--data.train=[{benchmark: monli, split: train, weight: 1e6}, {benchmark: scone, split: test, weight: 1e-300}]",
                                "--data.mix.epoch=largest"], ["data.mix.epoch 'largest'", "more than 100,000,000"]),
    Case("epoch-huge", [*FIT, "--data.mix.epoch=10000000000000"], ["mix.epoch", "100,000,000"], subprocess=True),
    Case("threads-huge", [*FIT, "--trainer.torch_threads=1000000000"], ["trainer.torch_threads", "1024"], subprocess=True),
    Case("yaml-20000-deep", FIT, ["recipe.yaml", "nested more than 100 levels"],
         files={"recipe.yaml": "description: deep\nmodel: {name: m}\nsweep: " + "[" * 20000 + "]" * 20000 + "\n"}, subprocess=True),
    Case("scone-field-over-the-bound", [*SCONE_EVAL], ["one_scoped.csv:4", "longer than 10,485,760"],
         files={f"{SCONE_TEST}/one_scoped.csv": _scone_long_field(10 * 1024 * 1024 + 100)}),
    Case("condaqa-edit-float", CONDAQA_EVAL, ["condaqa_dev.json:2:", "PassageEditID", "float 1.0"],
         files={"data/AbhilashaRavichander/CondaQA/data/condaqa_dev.json": _condaqa_with(1, PassageEditID=1.0)}),
    # ---- used to hang ----
    Case("yaml-alias-bomb", FIT, ["recipe.yaml", "expands to more than 100,000 values"], files={"recipe.yaml": _alias_bomb()}, subprocess=True),
    Case("override-alias-bomb", [*FIT, "--sweep.parameters=" + "{a: &a [x,x,x,x,x,x,x,x,x,x], " + ", ".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join([f'*{chr(97 + i)}'] * 10)}]" for i in range(6)) + "}"],
         ["--sweep.parameters", "expands to more than"]),
    Case("num-nodes-2-without-launcher", [*FIT, "--trainer.num_nodes=2"], ["trainer.num_nodes 2", "wait forever", "torchrun"], subprocess=True),
    Case("predictions-dev-zero", ["evaluate", "--benchmark", "monli", "--split", "test", "--predictions", "/dev/zero"],
         ["/dev/zero", "character device"], subprocess=True),
    Case("recipe-dev-zero", ["fit", "--recipe", "/dev/zero"], ["--recipe /dev/zero", "not a regular file"]),
    Case("predictions-endless-line", MONLI_EVAL, ["predictions.jsonl:2", "longer than 1,048,576 bytes"],
         files={"predictions.jsonl": GOOD_PRED + "x" * (2 * 1024 * 1024) + "\n"}),
    # ---- used to be accepted silently ----
    Case("learning-rate-1e999", [*FIT, "--model.learning_rate=1e999"], ["model.learning_rate", "finite"]),
    Case("learning-rate-nan", [*FIT, "--model.learning_rate=.nan"], ["model.learning_rate", "finite"]),
    Case("scone-condition-file-short", SCONE_EVAL, ["two_scoped.csv", "11 rows", "scone/test/11", "two_scoped member"],
         files={f"{SCONE_TEST}/two_scoped.csv": _scone_minus_last_row("two_scoped")}),
    Case("scone-condition-file-cut-mid-row", SCONE_EVAL, ["two_scoped.csv:13", "cut short"],
         files={f"{SCONE_TEST}/two_scoped.csv": _scone_cut_mid_row("two_scoped")}),
    Case("prediction-with-two-ids", MONLI_EVAL, ["predictions.jsonl:1", "'id' appears twice"],
         files={"predictions.jsonl": '{"id": "monli/test/0", "prediction": "entailment", "id": "monli/test/1"}\n'}),
    Case("prediction-nested-too-deep", MONLI_EVAL, ["predictions.jsonl:1", "nested too deeply"],
         files={"predictions.jsonl": "[" * 100_000 + "]" * 100_000 + "\n"}),
    Case("override-given-twice", [*FIT, "--model.learning_rate=1e-3", "--model.learning_rate", "2e-3"], ["--model.learning_rate", "given twice"]),
    Case("condaqa-edit-true", CONDAQA_EVAL, ["condaqa_dev.json:3:", "PassageEditID", "bool True"],
         files={"data/AbhilashaRavichander/CondaQA/data/condaqa_dev.json": _condaqa_with(2, PassageEditID=True)}),
    Case("condaqa-numeric-label", CONDAQA_EVAL, ["condaqa_dev.json:4:", "'label'", "int 1"],
         files={"data/AbhilashaRavichander/CondaQA/data/condaqa_dev.json": _condaqa_with(3, label=1)}),
    Case("condaqa-numeric-passage", CONDAQA_EVAL, ["condaqa_dev.json:1:", "'sentence1'", "float 2.5"],
         files={"data/AbhilashaRavichander/CondaQA/data/condaqa_dev.json": _condaqa_with(0, sentence1=2.5)}),
    Case("export-out-below-a-file", ["export", "--run", "{run}", "--out", "{tmp}/afile/export"], ["--out", "afile", "is a file"], files={"afile": "x"}),
    Case("export-out-unwritable", ["export", "--run", "{run}", "--out", "/proc/negtrain-export"], ["--out /proc/negtrain-export", "cannot write"]),
    Case("sweep-out-is-a-directory", ["sweep", "--recipe", "scone_minilm", "--out", "{tmp}"], ["--out", "is a directory"]),
    Case("sweep-out-unwritable", ["sweep", "--recipe", "scone_minilm", "--out", "/proc/negtrain-sweep/s.yaml"], ["--out /proc/negtrain-sweep", "cannot write"]),
    Case("export-all-nan", ["export", "--run", "{run}", "--out", "{tmp}/export", "--checkpoint", "last"],
         ["last.ckpt", "NaN or infinite", "diverged"]),
    # ---- used to print two lines ----
    Case("newline-in-recipe-name", ["fit", "--recipe", "no\nsuch"], ["unknown recipe 'no\\nsuch'"]),
    Case("newline-in-benchmark-name", [*FIT, "--data.eval=[{benchmark: \"mo\\nnli\", split: test}]"], ["'mo\\nnli'"]),
    # ---- a key without its section gets a suggestion ----
    Case("suggestion-without-section", [*FIT, "--lerning_rate", "3e-5"], ["unknown key 'lerning_rate'", "did you mean 'model.learning_rate'"]),
]


# ---- the world the cases run in ----------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    """A 32-wide BERT: too narrow for bitsandbytes' CPU 4-bit packing, quick for everything else."""
    from crash_fit import tiny_model

    return tiny_model(tmp_path_factory.mktemp("tiny") / "model")


@pytest.fixture(scope="module")
def nan_run(tmp_path_factory, tiny) -> Path:
    """A run directory as `fit` writes it, whose last checkpoint is all NaN (a diverged run)."""
    import torch
    from transformers import AutoConfig, AutoTokenizer

    from negtrain.config import to_dict, validate_recipe

    run = tmp_path_factory.mktemp("nan") / "run"
    (run / "checkpoints").mkdir(parents=True)
    recipe = validate_recipe(_recipe_with(**{"model.name": str(tiny)}), "test")
    (run / "recipe.yaml").write_text("# recipe: nan\n" + yaml.safe_dump(to_dict(recipe), sort_keys=False))
    AutoConfig.from_pretrained(tiny).save_pretrained(run / "model")
    AutoTokenizer.from_pretrained(tiny).save_pretrained(run / "model")
    from transformers import BertForSequenceClassification

    state = BertForSequenceClassification.from_pretrained(tiny).state_dict()
    nan = {f"model.{k}": torch.full_like(v, float("nan")) if v.is_floating_point() else v for k, v in state.items()}
    torch.save({"epoch": 0, "state_dict": nan}, run / "checkpoints" / "last.ckpt")
    line = {"epoch": 0, "stage": "fit", "benchmark": "monli", "split": "test", "metrics": {"accuracy": 0.5, "n": 12.0}}
    (run / "metrics.jsonl").write_text(json.dumps(line) + "\n")
    return run


def _materialise(case: Case, tmp: Path, tiny: Path, run: Path) -> list[str]:
    files = {f"data/{rel}": text for rel, text in valid_files().items()}
    files["data/AbhilashaRavichander/CondaQA/data/condaqa_dev.json"] = jsonl(condaqa_rows())
    files["recipe.yaml"] = BASE_RECIPE
    files["predictions.jsonl"] = GOOD_PRED
    files.update(case.files)
    for rel, content in files.items():
        path = tmp / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, dict):
            content = yaml.safe_dump(json.loads(json.dumps(content).replace('"TINY"', json.dumps(str(tiny)))), sort_keys=False)
        path.write_text(content, encoding="utf-8")
    subst = {"{recipe}": str(tmp / "recipe.yaml"), "{tmp}": str(tmp), "{preds}": str(tmp / "predictions.jsonl"), "{run}": str(run)}
    argv = []
    for arg in case.argv:
        for key, value in subst.items():
            arg = arg.replace(key, value)
        argv.append(arg)
    return argv


#: What a multi-node launcher sets; scrubbed so the machine's own environment cannot launch one.
LAUNCHER_VARIABLES = ("MASTER_ADDR", "MASTER_PORT", "NODE_RANK", "WORLD_SIZE", "RANK", "LOCAL_RANK", "SLURM_NTASKS",
                      "SLURM_JOB_NAME", "TORCHELASTIC_RUN_ID", "KUBERNETES_PORT", "LSB_JOBID", "JSM_NAMESPACE_RANK",
                      "OMPI_COMM_WORLD_SIZE")


def _env(case: Case, tmp: Path) -> dict[str, str]:
    return {"NEGTRAIN_DATA_DIR": str(tmp / "data"), "NEGTRAIN_OFFLINE": "1", "HF_HUB_OFFLINE": "1", **case.env}


@pytest.fixture(scope="module")
def launched(tmp_path_factory, tiny, nan_run) -> dict[str, tuple[subprocess.Popen, Path]]:
    """The subprocess cases, all started at once (each spends seconds importing torch)."""
    started = {}
    for case in CASES:
        if case.subprocess:
            tmp = tmp_path_factory.mktemp(case.name)
            argv = _materialise(case, tmp, tiny, nan_run)
            (tmp / "work").mkdir()
            env = {k: v for k, v in os.environ.items() if k not in LAUNCHER_VARIABLES}
            env.update(_env(case, tmp), PYTHONPATH=str(REPO), OMP_NUM_THREADS="1")
            proc = subprocess.Popen([sys.executable, "-m", "negtrain", *argv], cwd=tmp / "work", env=env,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            started[case.name] = (proc, tmp)
    yield started
    for proc, _ in started.values():
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_bad_input_is_one_error_line(case, request, tmp_path, tiny, nan_run, monkeypatch, capsys):
    for name in LAUNCHER_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    if case.subprocess:
        proc, tmp_path = request.getfixturevalue("launched")[case.name]
        work = tmp_path / "work"
        try:
            _, err = proc.communicate(timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            proc.kill()
            pytest.fail(f"{case.name}: still running after {TIMEOUT} s (a hang)")
        code = proc.returncode
    else:
        argv = _materialise(case, tmp_path, tiny, nan_run)
        work = tmp_path / "work"
        work.mkdir()
        for key, value in _env(case, tmp_path).items():
            monkeypatch.setenv(key, value)
        monkeypatch.chdir(work)
        if case.name == "qlora-narrow-model":
            # The check applies where bitsandbytes repacks 4-bit weights for its CPU kernel
            # (AVX512-BF16); this runs it on any CPU.
            from negtrain.training import checks

            monkeypatch.setattr(checks, "_bnb_packs_for_cpu", lambda: True)
        code = main(argv)
        err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert code == 2, f"exit {code}; stderr: {err[-3000:]}"
    assert len(lines) == 1 and lines[0].startswith("error: "), err[-3000:]
    for needle in case.expect:
        assert needle in lines[0], f"expected {needle!r} in: {lines[0]}"
    assert "Traceback" not in err
    # Found before any work: no run directory, no export.
    assert not (tmp_path / "run").exists() and not (tmp_path / "export").exists()
    assert list(work.iterdir()) == []


# ---- what the checks let through ---------------------------------------------------------------


def test_a_field_over_csvs_default_limit_is_read_whole(tmp_path, monkeypatch):
    """Python's csv stops at 131,072 characters; negtrain reads fields up to 10 MiB correctly."""
    from negtrain.benchmarks.registry import get_benchmark

    for rel, text in valid_files().items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    (tmp_path / "selenashe/ScoNe/scone_nli/test/one_scoped.csv").write_text(_scone_long_field(200_000))
    monkeypatch.setenv("NEGTRAIN_DATA_DIR", str(tmp_path))
    import csv

    before = csv.field_size_limit()
    examples = get_benchmark("scone").load("test")
    long = next(e for e in examples if e.id == "scone/test/one_scoped/2")
    assert long.inputs[0] == "a very long premise, " * (200_000 // 21)
    assert len(examples) == 6 * 12
    assert csv.field_size_limit() == before  # the process-wide limit is restored


def test_multi_node_is_allowed_under_a_launcher():
    from negtrain.core.errors import ConfigError
    from negtrain.training.checks import check_num_nodes, multi_node_launcher

    assert multi_node_launcher({}) is None
    with pytest.raises(ConfigError, match="wait forever"):
        check_num_nodes(2, {})
    check_num_nodes(1, {})  # one node needs nothing
    launched = {
        "torchrun": {"TORCHELASTIC_RUN_ID": "1", "MASTER_ADDR": "n0", "RANK": "1", "WORLD_SIZE": "2"},
        "SLURM (srun)": {"SLURM_NTASKS": "2", "SLURM_JOB_NAME": "train"},
        "manual (one command per node)": {"MASTER_ADDR": "n0", "MASTER_PORT": "29500", "NODE_RANK": "1", "WORLD_SIZE": "2"},
    }
    for launcher, environ in launched.items():
        assert multi_node_launcher(environ) == launcher
        assert f"trainer.num_nodes 2 ({launcher})" in check_num_nodes(2, environ)
    note = check_num_nodes(3, launched["manual (one command per node)"])
    assert "node 1 waits at n0:29500 until all 3 nodes have joined" in note


def test_recipe_yaml_limits_keep_ordinary_anchors():
    from negtrain.config import parse_yaml

    assert parse_yaml("a: &x {b: 1}\nc: *x\nd: [*x, *x]\n") == {"a": {"b": 1}, "c": {"b": 1}, "d": [{"b": 1}, {"b": 1}]}
    assert parse_yaml("[" * 90 + "]" * 90) is not None  # deep, but within the limit
    with pytest.raises(yaml.YAMLError, match="contains it"):
        parse_yaml("a: &a [1, *a]\n")


def test_mixing_shares_survive_the_smallest_temperature():
    from negtrain.config import MixConfig
    from negtrain.data.mixing import shares

    p = shares([10**6, 10**7], [1.0, 1.0], MixConfig(sampling="temperature", temperature=0.01))
    assert p.tolist() == pytest.approx([1e-100, 1.0], rel=1e-9)
    p = shares([100, 1000], [1.0, 2.0], MixConfig(sampling="temperature", temperature=2.0))
    assert p.tolist() == pytest.approx([10 / (10 + 2 * 1000**0.5), 2 * 1000**0.5 / (10 + 2 * 1000**0.5)])


def test_one_line_escapes_control_characters():
    from negtrain.cli import one_line

    assert one_line("bad 'a\nb'\r\t\x1b[31m é") == "bad 'a\\nb'\\r\\t\\x1b[31m é"


def test_sweep_trials_get_each_override_once():
    """Overrides given to `negtrain sweep` reach every trial, but a key the sweep varies or sets
    itself is passed once (a trial would reject it twice): the agent's value wins."""
    from negtrain.recipes import load_recipe, override_pairs, parse_overrides
    from negtrain.runs.sweeps import sweep_config

    loaded = load_recipe("scone_minilm")
    swept = next(iter(loaded.recipe.sweep.parameters))
    assert "trainer.limit_val_batches" not in loaded.recipe.sweep.parameters
    fixed = [f"--{swept}=1", "--trainer.limit_val_batches", "1", "--logger.backend=none"]
    command = sweep_config(loaded, "scone_minilm", fixed)["command"]
    args = command[command.index("scone_minilm") + 1 : command.index("${args}")]
    keys = [k for k, _ in override_pairs(args)]
    assert len(keys) == len(set(keys)) and swept not in keys
    assert parse_overrides(args)["trainer.limit_val_batches"] == 1 and parse_overrides(args)["logger.backend"] == "wandb"


@pytest.mark.slow
def test_a_real_two_node_launch_still_runs(tmp_path, tiny):
    """`trainer.num_nodes: 2` with a launcher's variables set: two "nodes" on this machine (one
    process each, as Lightning's manual multi-node launch) train together and finish."""
    argv = _materialise(Case("two-nodes", FIT, []), tmp_path, tiny, tmp_path)
    env = {k: v for k, v in os.environ.items() if k not in LAUNCHER_VARIABLES}
    env.update(_env(Case("two-nodes", [], []), tmp_path), PYTHONPATH=str(REPO), OMP_NUM_THREADS="1",
               MASTER_ADDR="127.0.0.1", MASTER_PORT=str(29400 + os.getpid() % 500), WORLD_SIZE="2")
    procs = []
    for rank in (0, 1):
        out = ["--output-dir", str(tmp_path / f"node{rank}")]
        cmd = [sys.executable, "-m", "negtrain", *argv[:3], *out, "--trainer.num_nodes=2", "--trainer.strategy=ddp"]
        procs.append(subprocess.Popen(cmd, cwd=tmp_path, env=dict(env, NODE_RANK=str(rank)), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    outputs = [p.communicate(timeout=600)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outputs
    assert "MEMBER: 2/2" in outputs[1]
    assert "node 1 waits at 127.0.0.1:" in outputs[1] and "node 0 waits at 127.0.0.1:" in outputs[0]
    assert (tmp_path / "node0" / "metrics.jsonl").is_file()
