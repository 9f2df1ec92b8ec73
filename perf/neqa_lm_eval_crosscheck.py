"""Cross-check: negtrain's NeQA accuracy / accuracy_norm against lm-evaluation-harness's acc / acc_norm.

Same rows, same model, both scorers: a local copy of the first ``--rows`` NeQA questions and tiny
causal (Llama-style) and seq2seq (T5-style) models built from a config with random weights
(the tests' tiny models), saved to a temporary directory. lm-evaluation-harness runs a local task
for each NeQA format with its own multiple_choice machinery (the ``inverse_scaling_neqa`` task's
settings, pointed at the local rows instead of the Hub data set):

- ``neqa``: context = question, choices = the choice texts, ``target_delimiter: " "``;
- ``neqa-lettered``: the lettered prompt, choices " A"/" B", ``target_delimiter: ""``
  (as lm-eval's ``_inverse_scaling_mc_yaml``).

Needs the optional extra ``crosscheck`` (``pip install -e ".[crosscheck]"``: lm-eval). Offline:

    NEGTRAIN_DATA_DIR=../shared/data python perf/neqa_lm_eval_crosscheck.py --rows 200

Writes perf/results/neqa_lm_eval_crosscheck.{json,md}. Exit code 1 if any number differs.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

TASKS = {
    "neqa": {
        "doc_to_text": "{{question}}",
        "doc_to_choice": "{{choices}}",
        "target_delimiter": " ",
    },
    "neqa-lettered": {
        "doc_to_text": "The following are multiple choice questions (with answers) about common sense.\n\n"
        "Question: {{question}}\nA. {{choices[0]}}\nB. {{choices[1]}}\nAnswer:",
        "doc_to_choice": "{{[' A', ' B']}}",
        "target_delimiter": "",
    },
}


def write_task(folder: Path, name: str, rows_file: Path) -> str:
    import yaml

    task = f"crosscheck_{name.replace('-', '_')}"
    spec = {
        "task": task,
        "dataset_path": "json",
        "dataset_kwargs": {"data_files": {"test": str(rows_file)}},
        "test_split": "test",
        "output_type": "multiple_choice",
        "doc_to_target": "answer",
        "metric_list": [{"metric": "acc", "aggregation": "mean", "higher_is_better": True},
                        {"metric": "acc_norm", "aggregation": "mean", "higher_is_better": True}],
        **TASKS[name],
    }
    (folder / f"{task}.yaml").write_text(yaml.safe_dump(spec, sort_keys=False), encoding="utf-8")
    return task


def ours(model_dir: Path, bench_name: str, causal: bool) -> dict:
    import torch
    from transformers import AutoModelForCausalLM, AutoModelForSeq2SeqLM, AutoTokenizer

    from negtrain.benchmarks.registry import get_benchmark
    from negtrain.config import model_config
    from negtrain.metrics.multiple_choice import choose
    from negtrain.models.continuation import continuation_logprobs
    from negtrain.models.lm_encoding import choice_inputs

    bench = get_benchmark(bench_name)
    examples = bench.load("test")
    tok = AutoTokenizer.from_pretrained(model_dir)
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token
    model = (AutoModelForCausalLM if causal else AutoModelForSeq2SeqLM).from_pretrained(model_dir).eval()
    cfg = model_config(name=str(model_dir), family="causal_lm" if causal else "seq2seq", max_length=512)
    ctx, conts, chars = choice_inputs(tok, bench, examples, cfg, causal)
    metric = bench.metric(examples)
    lls = []
    for start in range(0, len(examples), 16):
        rows = list(range(start, min(start + 16, len(examples))))
        scores = continuation_logprobs(model, [ctx[i] for i in rows], [conts[i] for i in rows], encoder_decoder=not causal, pad_id=tok.pad_token_id)
        metric.update(torch.tensor(rows), choose(scores.logprob, chars[rows]))
        lls.extend(scores.logprob.tolist())
    values = {k: float(v) for k, v in metric.compute().items()}
    return {"accuracy": values["accuracy"], "accuracy_norm": values["accuracy_norm"], "lls": lls}


def harness(model_dir: Path, task_dir: Path, task: str, causal: bool) -> dict:
    import lm_eval
    from lm_eval.tasks import TaskManager

    out = lm_eval.simple_evaluate(
        model="hf",
        model_args=f"pretrained={model_dir},dtype=float32,backend={'causal' if causal else 'seq2seq'}",
        tasks=[task], task_manager=TaskManager(include_path=str(task_dir)), batch_size=16, device="cpu",
        log_samples=True,
    )
    res = out["results"][task]
    samples = sorted(out["samples"][task], key=lambda s: s["doc_id"])
    lls = [[float(r[0]) for r in s["filtered_resps"]] for s in samples]
    return {"accuracy": res["acc,none"], "accuracy_norm": res["acc_norm,none"], "lls": lls}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=200)
    args = p.parse_args()
    sys.path.insert(0, str(ROOT / "tests"))
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    mirror = Path(os.environ["NEGTRAIN_DATA_DIR"])
    from tiny_models import save_tiny_llama, save_tiny_t5

    import lm_eval
    from transformers import __version__ as tf_version

    report = {"rows": args.rows, "lm_eval_version": lm_eval.__version__, "transformers": tf_version, "checks": []}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        lines = (mirror / "yuhui-zh15/NeQA/data_pipeline/neqa.jsonl").read_text(encoding="utf-8").splitlines()[: args.rows]
        data = tmp / "data"
        (data / "yuhui-zh15/NeQA/data_pipeline").mkdir(parents=True)
        rows_file = data / "yuhui-zh15/NeQA/data_pipeline/neqa.jsonl"
        rows_file.write_text("\n".join(lines) + "\n", encoding="utf-8")
        os.environ["NEGTRAIN_DATA_DIR"] = str(data)
        os.environ["NEGTRAIN_OFFLINE"] = "1"
        tasks = tmp / "tasks"
        tasks.mkdir()
        models = {"causal_lm (tiny Llama)": (save_tiny_llama(tmp / "llama", None), True),
                  "seq2seq (tiny T5)": (save_tiny_t5(tmp / "t5", None), False)}
        for label, (model_dir, causal) in models.items():
            for bench_name in TASKS:
                task = write_task(tasks, bench_name, rows_file)
                a, b = ours(model_dir, bench_name, causal), harness(model_dir, tasks, task, causal)
                max_diff = max(abs(x - y) for ra, rb in zip(a["lls"], b["lls"]) for x, y in zip(ra, rb))
                check = {
                    "model": label, "benchmark": bench_name,
                    "negtrain": {"accuracy": a["accuracy"], "accuracy_norm": a["accuracy_norm"]},
                    "lm_eval": {"acc": b["accuracy"], "acc_norm": b["accuracy_norm"]},
                    "max_abs_loglik_diff": max_diff,
                    "equal": a["accuracy"] == b["accuracy"] and a["accuracy_norm"] == b["accuracy_norm"],
                }
                report["checks"].append(check)
                print(json.dumps(check), flush=True)
    results = HERE / "results"
    results.mkdir(exist_ok=True)
    (results / "neqa_lm_eval_crosscheck.json").write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    md = [f"# NeQA: negtrain vs lm-evaluation-harness {report['lm_eval_version']} (first {args.rows} rows, random-weight tiny models)", "",
          "| model | benchmark | negtrain accuracy | lm-eval acc | negtrain accuracy_norm | lm-eval acc_norm | max abs log-lik diff | equal |",
          "|---|---|---:|---:|---:|---:|---:|---|"]
    for c in report["checks"]:
        md.append(f"| {c['model']} | {c['benchmark']} | {c['negtrain']['accuracy']:.4f} | {c['lm_eval']['acc']:.4f} | "
                  f"{c['negtrain']['accuracy_norm']:.4f} | {c['lm_eval']['acc_norm']:.4f} | {c['max_abs_loglik_diff']:.2e} | {c['equal']} |")
    (results / "neqa_lm_eval_crosscheck.md").write_text("\n".join(md) + "\n", encoding="utf-8")
    return 0 if all(c["equal"] for c in report["checks"]) else 1


if __name__ == "__main__":
    raise SystemExit(main())
