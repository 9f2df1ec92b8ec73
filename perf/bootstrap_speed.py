"""Cost of the cluster bootstrap: every metric's stderr and ci95 on a whole benchmark split.

Times ``negtrain.metrics.uncertainty.estimate`` (the call each evaluation makes per benchmark:
unit table, resample counts, one matrix product, every metric recomputed per resample) on
synthetic right/wrong outcomes over the real examples of each split, in this process, as the
median of several repeats after one warm-up call:

    NEGTRAIN_DATA_DIR=path/to/mirror python perf/bootstrap_speed.py --resamples 1000 --repeats 7

Writes perf/results/bootstrap_speed.{json,md}. The target is under 1 s for CondaQA test
(7,240 rows) with 1,000 resamples.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
SPLITS = (("condaqa", "test"), ("scone", "test"), ("nannli", "test"), ("negnli-snli", "all"), ("monli", "test"))


def outcomes(bench, examples, rng: np.random.Generator) -> np.ndarray:
    """About 70% right: the gold label id (or 1 for generative benchmarks) else another id."""
    right = rng.random(len(examples)) < 0.7
    if bench.generative:
        return right.astype(np.int64)
    gold = np.array([bench.labels.index(e.label) for e in examples])
    return np.where(right, gold, (gold + 1) % len(bench.labels))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--resamples", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()

    from negtrain.benchmarks.registry import get_benchmark
    from negtrain.metrics.uncertainty import estimate

    rows = []
    for name, split in SPLITS:
        bench = get_benchmark(name)
        examples = bench.load(split)
        metric = bench.metric(examples)
        preds = outcomes(bench, examples, np.random.default_rng(0))
        estimate(metric, preds, args.resamples, 0, bench.is_count)  # warm-up
        times = []
        for _ in range(args.repeats):
            start = time.perf_counter()
            result = estimate(metric, preds, args.resamples, 0, bench.is_count)
            times.append(time.perf_counter() - start)
        rows.append({
            "benchmark": name, "split": split, "examples": len(examples), "unit": result.unit,
            "units": result.units, "metrics": len(result.metrics), "resamples": args.resamples,
            "median_seconds": round(statistics.median(times), 4), "max_seconds": round(max(times), 4),
        })
        print(rows[-1], flush=True)

    machine = {"machine": platform.machine(), "cpus": os.cpu_count(), "python": platform.python_version(),
               "numpy": np.__version__, "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
               # the machine is shared: the 1-minute load average when the measurement ended
               "load_average": round(os.getloadavg()[0], 1)}
    out = HERE / "results"
    out.mkdir(exist_ok=True)
    (out / "bootstrap_speed.json").write_text(json.dumps({"machine": machine, "results": rows}, indent=2) + "\n")
    lines = [
        f"Bootstrap cost per benchmark split ({args.resamples} resamples, median of {args.repeats}; "
        f"{machine['machine']}, {machine['cpus']} CPUs, numpy {machine['numpy']}, load average {machine['load_average']})",
        "",
        "| benchmark/split | examples | unit | units | metrics | median s | max s |",
        "|---|---:|---|---:|---:|---:|---:|",
    ]
    lines += [f"| {r['benchmark']}/{r['split']} | {r['examples']} | {r['unit']} | {r['units']} | {r['metrics']} | "
              f"{r['median_seconds']:.4f} | {r['max_seconds']:.4f} |" for r in rows]
    (out / "bootstrap_speed.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
