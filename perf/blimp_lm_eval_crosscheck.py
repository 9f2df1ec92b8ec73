"""Cross-check: negtrain's blimp-npi per-file accuracy against lm-evaluation-harness's blimp_<file>.

Same rows, same model, both scorers: the seven mirrored NPI-licensing files (all 7,000 pairs, or the
first ``--rows`` of each), and tiny causal LMs built from a config with random weights (the tests'
tiny models), saved to a temporary directory:

- the tiny Llama, whose tokenizer adds BOS itself;
- the same weights with a GPT-2-style tokenizer that adds nothing and whose BOS is its EOS, so
  lm-eval's empty context is a token negtrain has to give (``engine/empty_context.py``).

negtrain runs ``negtrain evaluate --benchmarks blimp-npi`` (a report card, the hf backend);
lm-evaluation-harness runs its own ``blimp_<file>`` task configuration, read from the installed
package (``lm_eval/tasks/blimp/_template_yaml``), pointed at the local file instead of the Hub data
set. Compared: each file's accuracy (negtrain ``accuracy/<file>``, lm-eval ``acc``) and every
sentence's log-likelihood.

Needs the optional extra ``crosscheck`` (lm-eval). Offline:

    NEGTRAIN_DATA_DIR=path/to/data python perf/blimp_lm_eval_crosscheck.py

Writes perf/results/blimp_lm_eval_crosscheck.{json,md}. Exit code 1 if any accuracy differs.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def write_tasks(folder: Path, files: dict[str, Path]) -> dict[str, str]:
    """uid -> the name of a local copy of lm-eval's own blimp_<uid> task, reading ``files[uid]``."""
    import lm_eval
    import yaml

    template = yaml.safe_load((Path(lm_eval.__file__).parent / "tasks" / "blimp" / "_template_yaml").read_text(encoding="utf-8"))
    names = {}
    for uid, path in files.items():
        spec = {**template, "task": f"local_blimp_{uid}", "dataset_path": "json",
                "dataset_kwargs": {"data_files": {"train": str(path)}}}
        spec.pop("dataset_name", None)
        (folder / f"local_blimp_{uid}.yaml").write_text(yaml.safe_dump(spec, sort_keys=False), encoding="utf-8")
        names[uid] = spec["task"]
    return names


def ours(model_dir: Path, out: Path) -> dict:
    from negtrain.cli import main

    start = time.perf_counter()
    code = main(["evaluate", "--model", str(model_dir), "--family", "causal_lm", "--benchmarks", "blimp-npi", "--out", str(out),
                 "--trainer.precision=32-true", "--evaluation.bootstrap=0"])
    if code != 0:
        raise SystemExit(f"negtrain evaluate failed ({code})")
    seconds = time.perf_counter() - start
    (record,) = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines() if '"blimp-npi"' in x]
    (predictions,) = (out / "predictions").glob("blimp-npi-all*.jsonl")
    lls = {r["id"]: r["loglikelihoods"] for r in map(json.loads, predictions.read_text().splitlines())}
    return {"metrics": record["metrics"], "lls": lls, "seconds": seconds}


def harness(model_dir: Path, task_dir: Path, tasks: dict[str, str]) -> dict:
    import lm_eval
    from lm_eval.tasks import TaskManager

    start = time.perf_counter()
    out = lm_eval.simple_evaluate(
        model="hf", model_args=f"pretrained={model_dir},dtype=float32", tasks=list(tasks.values()),
        task_manager=TaskManager(include_path=str(task_dir)), batch_size=32, device="cpu", log_samples=True,
    )
    seconds = time.perf_counter() - start
    acc, lls = {}, {}
    for uid, task in tasks.items():
        acc[uid] = out["results"][task]["acc,none"]
        for s in out["samples"][task]:
            lls[f"blimp-npi/{uid}/{int(s['doc']['pairID'])}"] = [float(r[0]) for r in s["filtered_resps"]]
    return {"acc": acc, "lls": lls, "seconds": seconds}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=1000, help="the first ROWS pairs of each file (1000: all)")
    args = p.parse_args()
    sys.path.insert(0, str(ROOT / "tests"))
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    mirror = Path(os.environ["NEGTRAIN_DATA_DIR"])
    from tiny_models import save_tiny_gpt2_style, save_tiny_llama

    import lm_eval
    from transformers import __version__ as tf_version

    from negtrain.benchmarks.blimp import FILES, REPO

    report: dict = {"rows_per_file": args.rows, "lm_eval_version": lm_eval.__version__, "transformers": tf_version, "checks": []}
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        data = tmp / "data"
        files = {}
        for uid in FILES:
            lines = (mirror / REPO / "data" / f"{uid}.jsonl").read_text(encoding="utf-8").splitlines()[: args.rows]
            files[uid] = data / REPO / "data" / f"{uid}.jsonl"
            files[uid].parent.mkdir(parents=True, exist_ok=True)
            files[uid].write_text("\n".join(lines) + "\n", encoding="utf-8")
        os.environ["NEGTRAIN_DATA_DIR"] = str(data)
        os.environ["NEGTRAIN_OFFLINE"] = "1"
        os.environ["NEGTRAIN_CACHE_DIR"] = str(tmp / "cache")
        task_dir = tmp / "tasks"
        task_dir.mkdir()
        tasks = write_tasks(task_dir, files)
        llama = save_tiny_llama(tmp / "llama", None)
        models = {"tiny Llama (tokenizer adds BOS)": llama,
                  "tiny Llama, GPT-2-style tokenizer (BOS = EOS, added by no one)": save_tiny_gpt2_style(llama, tmp / "gpt2_style")}
        for i, (label, model_dir) in enumerate(models.items()):
            a, b = ours(model_dir, tmp / f"card{i}"), harness(model_dir, task_dir, tasks)
            assert set(a["lls"]) == set(b["lls"]), "the two scorers scored different pairs"
            max_diff = max(abs(x - y) for k in a["lls"] for x, y in zip(a["lls"][k], b["lls"][k], strict=True))
            per_file = {uid: {"negtrain": a["metrics"][f"accuracy/{uid}"], "lm_eval": b["acc"][uid]} for uid in FILES}
            check = {
                "model": label, "pairs": len(a["lls"]), "per_file": per_file,
                "negtrain_phenomenon_mean": a["metrics"]["accuracy"],
                "lm_eval_mean_of_files": sum(b["acc"].values()) / len(FILES),
                "max_abs_loglik_diff": max_diff,
                "choices_differ": sum((x[0] >= x[1]) != (y[0] >= y[1]) for k in a["lls"] for x, y in [(a["lls"][k], b["lls"][k])]),
                "seconds": {"negtrain": round(a["seconds"], 1), "lm_eval": round(b["seconds"], 1)},
                "equal": all(abs(v["negtrain"] - v["lm_eval"]) < 1e-9 for v in per_file.values()),
            }
            report["checks"].append(check)
            print(json.dumps(check), flush=True)
    results = HERE / "results"
    results.mkdir(exist_ok=True)
    (results / "blimp_lm_eval_crosscheck.json").write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    md = [f"# BLiMP NPI licensing: negtrain vs lm-evaluation-harness {report['lm_eval_version']} "
          f"({args.rows} pairs per file, random-weight tiny causal LMs, CPU, float32)", "",
          "negtrain `evaluate --benchmarks blimp-npi` (accuracy/<file>) against lm-eval's own `blimp_<file>` task "
          "configuration pointed at the same local files (acc).", ""]
    for c in report["checks"]:
        md += [f"## {c['model']}", "", "| file | negtrain accuracy | lm-eval acc |", "|---|---:|---:|"]
        md += [f"| {uid} | {v['negtrain']:.4f} | {v['lm_eval']:.4f} |" for uid, v in c["per_file"].items()]
        md += ["", f"Phenomenon (mean of files): negtrain {c['negtrain_phenomenon_mean']:.4f}, lm-eval's accuracies averaged "
               f"{c['lm_eval_mean_of_files']:.4f}. Pairs: {c['pairs']}; largest difference of a sentence's log-likelihood: "
               f"{c['max_abs_loglik_diff']:.2e}; pairs whose choice differs: {c['choices_differ']}; equal: {c['equal']}. "
               f"Wall time: negtrain {c['seconds']['negtrain']} s, lm-eval {c['seconds']['lm_eval']} s.", ""]
    (results / "blimp_lm_eval_crosscheck.md").write_text("\n".join(md), encoding="utf-8")
    return 0 if all(c["equal"] for c in report["checks"]) else 1


if __name__ == "__main__":
    raise SystemExit(main())
