"""End-to-end CPU time of a report card against lm-evaluation-harness, on the same tiny Llama
(``negtrain tiny-model``: random weights, a real tokenizer) and the same prompts, in one run.

Four workloads, each run as a user runs it, one process per contender, timed from process start to
its files written (CPU time: user + system of the process and its children, from ``wait4``):

- ``scone zero-shot``: ``evaluate --benchmarks scone`` (verbalizer log-likelihoods, two per row);
- ``scone few-shot``: ``--strategy conditional_q --shots paper`` (the paper's four demonstrations);
- ``condaqa fewshot/1``: the ``condaqa-fewshot`` protocol's variant (``fewshot_test_1``, strategy ``answer``,
  its nine shots; greedy generation);
- ``neqa``: ``evaluate --benchmarks neqa`` (each choice's log-likelihood).

negtrain runs ``python -m negtrain evaluate`` (its default backend, ``hf``: the model loaded in the
process, no Lightning). lm-eval runs ``python -m lm_eval --model hf`` on a local task per workload
whose documents are negtrain's own requests, recorded once beforehand through a backend that only
records (:func:`record`, untimed): the same contexts and continuations (``multiple_choice``, target
delimiter empty, the continuations carrying their space) or the same prompts, stop strings and token
limit (``generate_until``). So both score the very same texts; each row's answer is compared
(the argmax choice, or the generated text) and the table says how many agree.

Both contenders: fp32, ``--threads`` torch threads (``OMP_NUM_THREADS`` and negtrain's
``--trainer.torch_threads``), ``--batch`` prompts a forward pass, a fresh output folder and response
cache. lm-eval's ``datasets`` cache of the task files is built by an untimed one-row run first, so
its timed runs read the prepared files, as a user's second run would. Rows: the first
``--scone-rows`` of each ScoNe condition file, ``--condaqa-rows`` of CondaQA's fewshot_test_1 and
``--neqa-rows`` of NeQA, cut into a temporary data folder (both contenders read the same rows).

Needs lm-eval in the interpreter given as ``--python`` (the ``crosscheck`` extra:
``pip install -e ".[crosscheck]"``), which runs both contenders. Offline:

    NEGTRAIN_DATA_DIR=path/to/mirror python perf/end_to_end_vs_lm_eval.py --machine cpu-2core

Writes perf/results/end_to_end_vs_lm_eval-<machine>[-<tag>].{json,md}.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

#: name -> negtrain's flags for it (besides --model, --backend, --out and the shared settings).
WORKLOADS = {
    "scone zero-shot": ["--benchmarks", "scone"],
    "scone few-shot": ["--benchmarks", "scone", "--strategy", "conditional_q", "--shots", "paper"],
    # The protocol condaqa-fewshot's variant fewshot/1, alone.
    "condaqa fewshot/1": ["--benchmarks", "condaqa",
                          '--data.eval=[{"benchmark": "condaqa", "split": "fewshot_test_1", "strategy": "answer", "shots": 9}]'],
    "neqa": ["--benchmarks", "neqa"],
}


def slug(name: str) -> str:
    return name.replace(" ", "_").replace("/", "").replace("-", "_")


# ---- the data and the model --------------------------------------------------------------------

def cut_data(mirror: Path, dest: Path, scone_rows: int, condaqa_rows: int, neqa_rows: int) -> Path:
    """The rows both contenders read: ScoNe's test files, CondaQA's fewshot_test_1 and NeQA cut
    to their first rows (a header kept); every other file of the mirror linked, not copied."""
    cuts = {f"selenashe/ScoNe/scone_nli/test/{f.name}": 1 + scone_rows for f in (mirror / "selenashe/ScoNe/scone_nli/test").glob("*.csv")}
    cuts["AbhilashaRavichander/CondaQA/data/few-shot/test_splits/conda_fewshot_test_1.json"] = condaqa_rows
    cuts["yuhui-zh15/NeQA/data_pipeline/neqa.jsonl"] = neqa_rows
    # The folders holding a cut file are made here; everything else in them is a link.
    folders = {Path(c).parents[i] for c in cuts for i in range(len(Path(c).parents) - 1)}

    def fill(rel: Path) -> None:
        (dest / rel).mkdir(parents=True, exist_ok=True)
        for child in (mirror / rel).iterdir():
            sub = rel / child.name
            if str(sub) in cuts:
                lines = child.read_text(encoding="utf-8").splitlines(keepends=True)
                (dest / sub).write_text("".join(lines[: cuts[str(sub)]]), encoding="utf-8")
            elif sub in folders:
                fill(sub)
            else:
                (dest / sub).symlink_to(child.resolve())

    fill(Path("."))
    return dest


# ---- recording negtrain's requests (untimed) ---------------------------------------------------

def record(model: str, out: Path, flags: list[str], requests_file: Path) -> None:
    """Run the card through a backend that records every request and answers a placeholder, and
    write the requests (in order) as JSON lines. Called in a subprocess (``record`` command)."""
    from negtrain.cli import main
    from negtrain.config import register_backend
    from negtrain.engine.requests import Answer, Generation

    seen: list[dict] = []

    class Recorder:
        name = "record"

        def answer(self, requests, counts, allow_missing=False):
            for r in requests:
                if isinstance(r, Generation):
                    seen.append({"kind": "generation", "prompt": r.prompt, "max_tokens": r.max_tokens,
                                 "stop": list(r.stop), "example": r.example})
                else:
                    seen.append({"kind": "loglikelihood", "context": r.context, "continuation": r.continuation,
                                 "example": r.example})
            counts.requests += len(requests)
            return [Answer(text="") if isinstance(r, Generation) else Answer(logprob=0.0, n_tokens=1, is_greedy=False)
                    for r in requests]

        def offers_prompt_logprobs(self):
            return True, ""

        def stop(self):
            pass

    register_backend("record", lambda context: Recorder())
    code = main(["evaluate", "--model", model, "--backend", "record", "--out", str(out), "--no-log-samples", *flags])
    if code != 0:
        raise SystemExit(f"recording the requests failed ({code})")
    requests_file.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in seen), encoding="utf-8")


def lm_eval_task(requests_file: Path, task_dir: Path, task: str) -> str:
    """lm-eval's local task of the recorded requests: ``multiple_choice`` documents (one per row:
    its context and its continuations) or ``generate_until`` ones (prompt, stop strings, limit)."""
    import yaml

    requests = [json.loads(line) for line in requests_file.read_text(encoding="utf-8").splitlines()]
    docs: list[dict] = []
    if requests[0]["kind"] == "loglikelihood":
        for r in requests:
            row = r["example"].rsplit(" label ", 1)[0].rsplit(" choice ", 1)[0]
            if docs and docs[-1]["row"] == row:
                assert docs[-1]["context"] == r["context"]
                docs[-1]["choices"].append(r["continuation"])
            else:
                docs.append({"row": row, "context": r["context"], "choices": [r["continuation"]], "gold": 0})
        spec = {"output_type": "multiple_choice", "doc_to_text": "context", "doc_to_choice": "choices",
                "doc_to_target": "gold", "target_delimiter": "",
                "metric_list": [{"metric": "acc", "aggregation": "mean", "higher_is_better": True}]}
    else:
        limits = {(r["max_tokens"], tuple(r["stop"])) for r in requests}
        assert len(limits) == 1, limits
        (max_tokens, stop), = limits
        docs = [{"row": r["example"], "prompt": r["prompt"], "target": ""} for r in requests]
        spec = {"output_type": "generate_until", "doc_to_text": "prompt", "doc_to_target": "target",
                "generation_kwargs": {"until": list(stop), "max_gen_toks": max_tokens, "do_sample": False},
                "metric_list": [{"metric": "exact_match", "aggregation": "mean", "higher_is_better": True}]}
    rows = task_dir / f"{task}.jsonl"
    rows.write_text("".join(json.dumps(d, ensure_ascii=False) + "\n" for d in docs), encoding="utf-8")
    spec = {"task": task, "dataset_path": "json", "dataset_kwargs": {"data_files": {"test": str(rows)}},
            "test_split": "test", **spec}
    (task_dir / f"{task}.yaml").write_text(yaml.safe_dump(spec, sort_keys=False, allow_unicode=True), encoding="utf-8")
    return task


# ---- timing ------------------------------------------------------------------------------------

def timed(command: list[str], env: dict, log: Path) -> dict:
    """Run ``command``; its CPU seconds (user + system, its children included) and wall seconds."""
    start = time.perf_counter()
    with log.open("w") as out:
        proc = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(command[:4])}... failed ({proc.returncode}); see {log}")
    return {"cpu_s": round(usage.ru_utime + usage.ru_stime, 2), "wall_s": round(wall, 2)}


def negtrain_answers(out: Path) -> list:
    """Per row, in order: the argmax choice (log-likelihood workloads) or the generated text."""
    rows = []
    for f in sorted((out / "predictions").glob("*.jsonl")):
        for line in f.read_text(encoding="utf-8").splitlines():
            p = json.loads(line)
            r = p.get("response")
            if isinstance(r, dict):  # label -> score
                rows.append(max(range(len(r)), key=lambda i: list(r.values())[i]))
            elif "loglikelihoods" in p:
                ll = p["loglikelihoods"]
                rows.append(max(range(len(ll)), key=lambda i: ll[i]))
            else:
                rows.append(r)
    return rows


def lm_eval_answers(out: Path) -> list:
    samples = sorted(out.rglob("samples_*.jsonl"))
    rows = [json.loads(line) for f in samples for line in f.read_text(encoding="utf-8").splitlines()]
    rows.sort(key=lambda s: s["doc_id"])
    answers = []
    for s in rows:
        resp = s["filtered_resps"]
        if isinstance(resp[0], list | tuple):  # loglikelihoods: [[ll, is_greedy], ...]
            lls = [float(x[0]) for x in resp]
            answers.append(max(range(len(lls)), key=lambda i: lls[i]))
        else:
            answers.append(resp[0])
    return answers


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command")
    rec = sub.add_parser("record", help="(internal) record negtrain's requests of one workload")
    rec.add_argument("model")
    rec.add_argument("out", type=Path)
    rec.add_argument("requests", type=Path)
    rec.add_argument("flags", nargs=argparse.REMAINDER)
    p.add_argument("--python", default=sys.executable, help="the interpreter of both contenders (with lm-eval installed)")
    p.add_argument("--scone-rows", type=int, default=32, help="rows per ScoNe condition file (6 files)")
    p.add_argument("--condaqa-rows", type=int, default=32)
    p.add_argument("--neqa-rows", type=int, default=200)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--repeats", type=int, default=1, help="timed runs per contender and workload (interleaved); the minimum is reported")
    p.add_argument("--only", default="", help="comma-separated workloads (default: all four)")
    p.add_argument("--machine", default="cpu", help="names the results file and says what ran it")
    p.add_argument("--note", default="", help="a line for the results (e.g. what else loaded the machine)")
    p.add_argument("--tag", default="", help="added to the results file's name, to keep runs of other sizes apart")
    args = p.parse_args()
    if args.command == "record":
        record(args.model, args.out, [f for f in args.flags if f != "--"], args.requests)
        return 0

    mirror = Path(os.environ["NEGTRAIN_DATA_DIR"])
    workloads = {k: v for k, v in WORKLOADS.items() if not args.only or k in args.only.split(",")}
    tmp = Path(tempfile.mkdtemp(prefix="e2e-lm-eval-"))
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
           "NEGTRAIN_DATA_DIR": str(cut_data(mirror, tmp / "data", args.scone_rows, args.condaqa_rows, args.neqa_rows)),
           "NEGTRAIN_CACHE_DIR": str(tmp / "negtrain-cache"), "HF_DATASETS_CACHE": str(tmp / "datasets-cache"),
           "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "NEGTRAIN_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "OMP_NUM_THREADS": str(args.threads), "MKL_NUM_THREADS": str(args.threads), "TOKENIZERS_PARALLELISM": "false"}
    subprocess.run([args.python, "-m", "negtrain", "tiny-model", str(tmp / "llama")], env=env, check=True, capture_output=True)
    model = str(tmp / "llama")
    shared = ["--data.eval_batch_size", str(args.batch), f"--trainer.torch_threads={args.threads}"]
    tasks = tmp / "tasks"
    tasks.mkdir()
    logs = tmp / "logs"
    logs.mkdir()
    prepared = {}
    for name, flags in workloads.items():
        requests = tmp / f"{slug(name)}.requests.jsonl"
        subprocess.run([args.python, __file__, "record", model, str(tmp / "record" / slug(name)), str(requests), "--", *flags, *shared],
                       env=env, check=True, capture_output=True)
        task = lm_eval_task(requests, tasks, f"e2e_{slug(name)}")
        prepared[name] = task
        lm_eval_command = [args.python, "-m", "lm_eval", "--model", "hf", "--model_args", f"pretrained={model},dtype=float32",
                           "--tasks", task, "--include_path", str(tasks), "--batch_size", str(args.batch), "--device", "cpu"]
        # Untimed: lm-eval's datasets cache of the task file, as a second run finds it.
        subprocess.run([*lm_eval_command, "--limit", "1"], env=env, check=True, capture_output=True)
    load_before = os.getloadavg()
    runs: dict[str, dict[str, list[dict]]] = {name: {"negtrain": [], "lm-eval": []} for name in workloads}
    agree: dict[str, tuple[int, int]] = {}
    for repeat in range(args.repeats):
        for name, flags in workloads.items():
            task = prepared[name]
            ours = tmp / "out" / f"negtrain-{slug(name)}-{repeat}"
            theirs = tmp / "out" / f"lm-eval-{slug(name)}-{repeat}"
            runs[name]["negtrain"].append(timed(
                [args.python, "-m", "negtrain", "evaluate", "--model", model, "--backend", "hf", "--out", str(ours), *flags, *shared],
                env, logs / f"negtrain-{slug(name)}-{repeat}.log"))
            runs[name]["lm-eval"].append(timed(
                [args.python, "-m", "lm_eval", "--model", "hf", "--model_args", f"pretrained={model},dtype=float32", "--tasks", task,
                 "--include_path", str(tasks), "--batch_size", str(args.batch), "--device", "cpu", "--output_path", str(theirs),
                 "--log_samples"], env, logs / f"lm-eval-{slug(name)}-{repeat}.log"))
            a, b = negtrain_answers(ours), lm_eval_answers(theirs)
            agree[name] = (sum(x == y for x, y in zip(a, b, strict=False)), max(len(a), len(b)))
            print(json.dumps({"workload": name, "repeat": repeat, **{k: v[-1] for k, v in runs[name].items()},
                              "same_answers": agree[name]}), flush=True)
    load_after = os.getloadavg()
    versions = subprocess.run([args.python, "-c", "import json, torch, transformers, lm_eval; print(json.dumps("
                               "{'torch': torch.__version__, 'transformers': transformers.__version__, 'lm_eval': lm_eval.__version__}))"],
                              env=env, capture_output=True, text=True, check=True)
    report = {"machine": args.machine, "cpus": os.cpu_count(), "processor": platform.processor() or platform.machine(),
              "load_average_before": [round(x, 1) for x in load_before], "load_average_after": [round(x, 1) for x in load_after],
              "note": args.note, "threads": args.threads, "batch": args.batch, "repeats": args.repeats,
              "rows": {"scone_per_condition": args.scone_rows, "condaqa": args.condaqa_rows, "neqa": args.neqa_rows},
              "versions": json.loads(versions.stdout), "workloads": {}}
    for name in workloads:
        best = {who: min(r, key=lambda x: x["cpu_s"]) for who, r in runs[name].items()}
        report["workloads"][name] = {**best, "cpu_ratio": round(best["lm-eval"]["cpu_s"] / best["negtrain"]["cpu_s"], 2),
                                     "wall_ratio": round(best["lm-eval"]["wall_s"] / best["negtrain"]["wall_s"], 2),
                                     # Wall over CPU time of negtrain's own process: near 1 on an idle
                                     # machine with one thread, unless it waits on something (I/O, locks).
                                     "negtrain_wall_over_cpu": round(best["negtrain"]["wall_s"] / best["negtrain"]["cpu_s"], 2),
                                     "same_answers": agree[name], "all_runs": runs[name]}
    results = HERE / "results"
    results.mkdir(exist_ok=True)
    stem = f"end_to_end_vs_lm_eval-{args.machine}" + (f"-{args.tag}" if args.tag else "")
    (results / f"{stem}.json").write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    v = report["versions"]
    md = [f"# Report card end to end against lm-evaluation-harness {v['lm_eval']} ({args.machine})", "",
          f"CPU seconds from process start to files written (user + system, children included), the tiny Llama of "
          f"`negtrain tiny-model`, fp32, "
          f"{args.threads} torch thread(s), batch {args.batch}, minimum of {args.repeats} run(s) per contender; negtrain "
          f"`evaluate --backend hf` (the default), lm-eval `--model hf` on negtrain's own requests. Load average "
          f"{report['load_average_before'][0]} before, {report['load_average_after'][0]} after, on {report['cpus']} CPUs.", "",
          "| workload | rows | negtrain CPU s | lm-eval CPU s | lm-eval ÷ negtrain (CPU) | negtrain wall s | lm-eval wall s | lm-eval ÷ negtrain (wall) | negtrain wall ÷ CPU | same answers |",
          "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for name, w in report["workloads"].items():
        same, rows = w["same_answers"]
        md.append(f"| {name} | {rows} | {w['negtrain']['cpu_s']} | {w['lm-eval']['cpu_s']} | {w['cpu_ratio']}× | "
                  f"{w['negtrain']['wall_s']} | {w['lm-eval']['wall_s']} | {w['wall_ratio']}× | {w['negtrain_wall_over_cpu']} | {same}/{rows} |")
    md += ["", f"torch {v['torch']}, transformers {v['transformers']}. " + (args.note or ""), "",
           f"Command: `python perf/end_to_end_vs_lm_eval.py --machine {args.machine} --scone-rows {args.scone_rows} "
           f"--condaqa-rows {args.condaqa_rows} --neqa-rows {args.neqa_rows} --threads {args.threads} --batch {args.batch} "
           f"--repeats {args.repeats}" + (f" --tag {args.tag}" if args.tag else "") + "`"]
    (results / f"{stem}.md").write_text("\n".join(md) + "\n", encoding="utf-8")
    print("\n".join(md))
    shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
