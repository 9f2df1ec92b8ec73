"""How long the command line takes to answer when it has no real work to do.

Each command runs in a fresh interpreter (``python -m negtrain ...``), 5 times; the median wall
time and CPU time are recorded. These answers must come without importing torch, Lightning or
transformers (ARCHITECTURE.md, "Imports"); the limit is 1.5 s wall on a 2-core machine.

    NEGTRAIN_DATA_DIR=path/to/mirror python perf/cli_latency.py

Writes perf/results/cli_latency.{json,md}.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
LIMIT_SECONDS = 1.5
#: Where the sweep command's YAML goes (a temporary file, not the checkout).
SWEEP_OUT = str(Path(tempfile.gettempdir()) / "negtrain-cli-latency-sweep.yaml")

#: (what a user tried, the arguments, the exit code it must give)
COMMANDS: list[tuple[str, list[str], int]] = [
    ("help", ["--help"], 0),
    ("list recipes", ["recipes"], 0),
    ("list benchmarks", ["evaluate", "--list"], 0),
    ("unknown recipe", ["fit", "--recipe", "scone_minilmm"], 2),
    ("mistyped key", ["fit", "--recipe", "scone_minilm", "--model.lerning_rate=3e-5"], 2),
    ("impossible value", ["fit", "--recipe", "scone_minilm", "--trainer.max_epochs=0"], 2),
    ("unknown benchmark", ["validate", "--recipe", "scone_minilm", "--data.eval=[{benchmark: sconee, split: test}]"], 2),
    # export and push refuse a wrong --run before torch loads (once they took 17 s)
    ("export, no such run", ["export", "--run", "no/such/run", "--out", "no/such/out"], 2),
    ("push, no such run", ["push", "--run", "no/such/run", "--repo-id", "me/model"], 2),
    # sweep writes its YAML from the recipe's data and the model's config.json (once it took 23 s)
    ("sweep writes its configuration", ["sweep", "--recipe", "scone_minilm", "--no-create", "--out", SWEEP_OUT], 0),
]


def run_once(args: list[str], expected: int) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the child) for one ``python -m negtrain`` call."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "negtrain", *args], cwd=REPO, capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != expected:
        raise SystemExit(f"negtrain {' '.join(args)}: exit {proc.returncode}, expected {expected}\n{proc.stderr[-2000:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--out", type=Path, default=HERE / "results")
    args = p.parse_args()
    env_note = f"{platform.machine()}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the start"
    rows = []
    for what, argv, expected in COMMANDS:
        runs = [run_once(argv, expected) for _ in range(args.repeats)]
        wall = statistics.median(w for w, _ in runs)
        cpu = statistics.median(c for _, c in runs)
        shown = [a.replace(tempfile.gettempdir(), "<tmp>") for a in argv]  # the result names no path of this machine
        rows.append({"command": what, "args": shown, "median_wall_seconds": round(wall, 3), "median_cpu_seconds": round(cpu, 3),
                     "runs": args.repeats, "under_limit": wall < LIMIT_SECONDS})
        print(rows[-1], flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    result = {"limit_seconds": LIMIT_SECONDS, "machine": env_note, "python": platform.python_version(), "commands": rows}
    (args.out / "cli_latency.json").write_text(json.dumps(result, indent=2) + "\n")
    lines = [
        f"Command-line answers without real work: median of {args.repeats} fresh runs each; limit {LIMIT_SECONDS} s wall.",
        f"Machine: {env_note}.",
        "",
        "| command | arguments | median wall s | median CPU s | under limit |",
        "|---|---|---:|---:|---|",
    ]
    lines += [f"| {r['command']} | `negtrain {' '.join(r['args'])}` | {r['median_wall_seconds']:.2f} | {r['median_cpu_seconds']:.2f} | "
              f"{'yes' if r['under_limit'] else 'NO'} |" for r in rows]
    (args.out / "cli_latency.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
