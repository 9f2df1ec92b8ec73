"""Training throughput: negtrain `fit` against a plain PyTorch loop and the HF Trainer.

Same model (the packaged MiniLM-L6), same data (ScoNe train), same batch size, same number of
optimizer steps. Contenders run interleaved (A B C A B C ...) in fresh subprocesses so machine
drift affects them alike; the report gives median examples/s, peak memory and the ratios.

    NEGTRAIN_DATA_DIR=path/to/mirror python perf/train_throughput.py --steps 60 --repeats 3

Writes perf/results/train_throughput.{json,md}.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
CONTENDERS = ("plain", "hf_trainer", "negtrain")


def run_one(name: str, steps: int, batch: int) -> dict:
    env = dict(os.environ, TOKENIZERS_PARALLELISM="false", NEGTRAIN_NO_TOKEN_CACHE="1")
    proc = subprocess.run(
        [sys.executable, str(HERE / "_contenders.py"), name, str(steps), str(batch)],
        capture_output=True, text=True, env=env, check=False,
    )
    if proc.returncode != 0:
        raise SystemExit(f"{name} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def machine() -> str:
    # Whether bf16 is native decides what `precision: auto` runs, so it belongs in every result.
    from negtrain.models.provenance import cpu_has_native_bf16

    bf16 = "native bf16" if cpu_has_native_bf16() else "no native bf16 (precision auto: fp32)"
    return f"{platform.machine()}, {os.cpu_count()} cores, {bf16}, {platform.python_implementation()} {platform.python_version()}"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--contenders", nargs="+", default=list(CONTENDERS))
    p.add_argument("--out", type=Path, default=HERE / "results")
    args = p.parse_args()

    runs: dict[str, list[dict]] = {c: [] for c in args.contenders}
    for r in range(args.repeats):
        for c in args.contenders:
            result = run_one(c, args.steps, args.batch_size)
            runs[c].append(result)
            print(f"repeat {r} {c:<11} {result['examples'] / result['seconds']:7.1f} ex/s", flush=True)

    summary = {
        c: {
            "median_examples_per_second": statistics.median(x["examples"] / x["seconds"] for x in rs),
            "peak_rss_mb": max(x["peak_rss_mb"] for x in rs),
            "runs": rs,
        }
        for c, rs in runs.items()
    }
    ratios = {}
    if "negtrain" in summary:
        for other in summary:
            if other != "negtrain":
                ratios[f"negtrain/{other}"] = summary["negtrain"]["median_examples_per_second"] / summary[other]["median_examples_per_second"]
    report = {"machine": machine(), "steps": args.steps, "batch_size": args.batch_size, "repeats": args.repeats, "contenders": summary, "ratios": ratios}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "train_throughput.json").write_text(json.dumps(report, indent=2) + "\n")
    lines = [
        f"Training throughput on {report['machine']}: MiniLM-L6, ScoNe train, batch {args.batch_size}, "
        f"{args.steps} optimizer steps, median of {args.repeats} interleaved runs.",
        "",
        "| contender | examples/s | peak RSS (MB) |",
        "|---|---:|---:|",
    ]
    lines += [f"| {c} | {s['median_examples_per_second']:.1f} | {s['peak_rss_mb']:.0f} |" for c, s in summary.items()]
    lines += [""] + [f"- {k}: **{v:.2f}×**" for k, v in ratios.items()]
    (args.out / "train_throughput.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
