"""The "same numbers" check of a refactor: five jobs run through the public CLI, on two commits,
compared value by value.

    python perf/same_numbers.py run OUTDIR [--models DIR] [--only fit,card,...]
    python perf/same_numbers.py compare BEFORE AFTER

``run`` executes the jobs below, each as ``python -m negtrain ...`` subprocesses (as a user would,
so it works on any commit with the same CLI) with ``NEGTRAIN_CACHE_DIR`` set to a fresh empty
folder, into ``OUTDIR/<job>/``; their logs go to ``OUTDIR/logs/`` and their wall times to
``OUTDIR/timings.json``:

- ``fit``: ``fit --recipe scone_minilm --trainer.max_epochs=1``, then
  ``export`` of its best checkpoint (in fp32 on one thread, :data:`FIT_SETTINGS`);
- ``card``: a report card of a tiny Llama-style model over every benchmark the causal_lm family
  scores (``--benchmarks all``), each cut to ``CARD_LIMITS``;
- ``icl``: the ``scone-icl`` protocol on the same model, on ScoNe test cut to three whole contrast
  sets (the served card's data: the first 16 rows of the whole split are all one condition);
- ``served``: a served card (``--backend openai``) against ``transformers serve`` on 127.0.0.1
  with the same model: ScoNe under a generating strategy (``transformers serve`` returns no prompt
  log-probabilities, so label scoring cannot go through it) and CondaQA (free text), on data cut
  to a few rows, since a served card has no batch limit;
- ``list``: ``evaluate --list``.

The tiny model and the data folders the LM jobs read are built once, into ``--models`` (default
``OUTDIR/../models``), and reused as they are by every later ``run``, so that the runs compared
score the very same weights and rows. They are built by the tests' own helpers
(``tests/tiny_models.py``, ``tests/tinad_fixture.py``), in a subprocess.

``compare`` holds every file of the two outputs to its rule (:data:`RULES`): metrics lines and
card parts as JSON with the timing fields dropped (:func:`drop_timing`), predictions files byte for
byte, the exported model file by file by sha256, ``card.md`` / ``protocol.md`` with their time
columns dropped, ``evaluate --list`` as text. It prints a table, a Markdown section for
``perf/results/same_numbers.md``, and exits 1 on any difference.

Reads NEGTRAIN_DATA_DIR (the benchmarks' mirror) like the package does.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

REPO = Path(__file__).resolve().parent.parent
JOBS = ("fit", "card", "icl", "served", "list")

#: The whole epoch (439 steps, both test sets whole), in fp32 on one torch thread: the recipe's
#: ``precision: auto`` is bf16-mixed on a CPU with native bf16, which on a shared 2-core machine
#: ran at 1.5 examples/s (an hour and a quarter for the epoch) against about 24 in fp32 on one
#: thread; one thread also keeps the run's arithmetic the same however busy the machine is.
FIT_SETTINGS = ["--trainer.torch_threads=1", "--trainer.precision=32-true"]
#: Two batches of eight per benchmark split: every scoring path, in seconds.
CARD_LIMITS = ["--trainer.limit_val_batches=2", "--data.eval_batch_size=8", "--trainer.torch_threads=1",
               "--trainer.precision=32-true"]
#: The served card's data: ScoNe test cut to this many rows per condition file (whole contrast
#: sets), CondaQA test to this many rows.
SERVED_SCONE_ROWS = 3
SERVED_CONDAQA_ROWS = 6


# ---- building the model and data folders, once ---------------------------------------------------

#: Run by the tests' helpers in a subprocess: the tiny Llama (its tokenizer trained on the TINAD
#: fixture and CondaQA dev text from the mirror), and the TINAD and MNLI fixtures (neither dataset
#: is in the mirror: TINAD must not be redistributed, MNLI is too large).
BUILD = """
import sys
from pathlib import Path
sys.path.insert(0, "tests")
from tinad_fixture import easy_rows, write_split
from tiny_models import save_tiny_llama, write_mnli_fixture
mirror, models = Path(sys.argv[1]), Path(sys.argv[2])
save_tiny_llama(models / "llama", mirror)
data = models / "data"
write_split(data, "train", easy_rows(12))
write_split(data, "validation", easy_rows(6, offset=12))
write_split(data, "test", easy_rows(6, offset=18))
write_mnli_fixture(data)
"""


def build_models(models: Path, mirror: Path) -> None:
    """``models/llama``; ``models/data``: the mirror (symlinked) plus the TINAD and MNLI fixtures;
    ``models/served-data``: the same with ScoNe and CondaQA test cut to a few rows. Done once:
    ``models/COMPLETE`` marks a finished build, which later runs reuse untouched."""
    if (models / "COMPLETE").is_file():
        return
    if models.exists() and any(models.iterdir()):
        sys.exit(f"error: {models}: an unfinished build (no COMPLETE); remove it and run again")
    models.mkdir(parents=True, exist_ok=True)
    (models / "data").mkdir()
    for owner in sorted(mirror.iterdir()):
        (models / "data" / owner.name).symlink_to(owner.resolve())
    subprocess.run([sys.executable, "-c", BUILD, str(mirror), str(models)], cwd=REPO, check=True, env=_env(models / "build-cache"))
    shutil.rmtree(models / "build-cache", ignore_errors=True)
    served = models / "served-data"
    served.mkdir()
    for child in sorted((models / "data").iterdir()):
        if child.name not in ("selenashe", "AbhilashaRavichander"):
            (served / child.name).symlink_to(child.resolve())
    scone = mirror / "selenashe/ScoNe/scone_nli"
    for split_dir in sorted(scone.iterdir()):
        for f in sorted(split_dir.glob("*.csv")):
            dest = served / "selenashe/ScoNe/scone_nli" / split_dir.name / f.name
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(b"".join(f.read_bytes().splitlines(keepends=True)[: 1 + SERVED_SCONE_ROWS]))
    condaqa = served / "AbhilashaRavichander/CondaQA/data"
    condaqa.mkdir(parents=True)
    for name in ("condaqa_test.json", "condaqa_dev.json"):
        lines = (mirror / "AbhilashaRavichander/CondaQA/data" / name).read_bytes().splitlines(keepends=True)
        (condaqa / name).write_bytes(b"".join(lines[:SERVED_CONDAQA_ROWS]))
    digests = {str(p.relative_to(models)): _sha256(p) for p in sorted((models / "llama").iterdir())}
    (models / "COMPLETE").write_text(json.dumps(digests, indent=1) + "\n", encoding="utf-8")


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# ---- running the jobs ----------------------------------------------------------------------------


def _env(cache: Path, data: Path | None = None) -> dict[str, str]:
    env = {**os.environ, "NEGTRAIN_CACHE_DIR": str(cache), "HF_HUB_OFFLINE": "1", "NEGTRAIN_OFFLINE": "1", "WANDB_MODE": "offline",
           "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    if data is not None:
        env["NEGTRAIN_DATA_DIR"] = str(data)
    return env


def _negtrain(args: list[str], log: TextIO, env: dict[str, str], stdout: TextIO | None = None) -> None:
    command = [sys.executable, "-m", "negtrain", *args]
    log.write("$ " + " ".join(command) + "\n")
    log.flush()
    done = subprocess.run(command, cwd=REPO, env=env, stdout=stdout or log, stderr=log)
    if done.returncode != 0:
        raise SystemExit(f"error: {' '.join(args[:2])} exited {done.returncode}; see {log.name}")


@dataclass
class Job:
    out: Path  # OUTDIR/<job>
    cache: Path  # a fresh, empty NEGTRAIN_CACHE_DIR
    models: Path
    log: TextIO  # the job's log file


def job_fit(j: Job) -> None:
    env = _env(j.cache)
    _negtrain(["fit", "--recipe", "scone_minilm", "--trainer.max_epochs=1", "--trainer.enable_progress_bar=false", *FIT_SETTINGS,
               "--output-dir", str(j.out / "run")], j.log, env)
    _negtrain(["export", "--run", str(j.out / "run"), "--out", str(j.out / "model")], j.log, env)


def _card(j: Job, data: str, *extra: str) -> None:
    _negtrain(["evaluate", "--model", str(j.models / "llama"), "--family", "causal_lm", "--out", str(j.out / "run"), *extra],
              j.log, _env(j.cache, j.models / data))


def job_card(j: Job) -> None:
    _card(j, "data", "--benchmarks", "all", *CARD_LIMITS)


def job_icl(j: Job) -> None:
    _card(j, "served-data", "--protocol", "scone-icl", "--data.eval_batch_size=8", "--trainer.torch_threads=1",
          "--trainer.precision=32-true")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def job_served(j: Job) -> None:
    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "transformers.cli.transformers", "serve", str(j.models / "llama"), "--host", "127.0.0.1",
         "--port", str(port), "--device", "cpu", "--log-level", "error"],
        stdout=subprocess.DEVNULL, stderr=j.log, env={**_env(j.cache), "OMP_NUM_THREADS": "1"},
    )
    try:
        deadline = time.monotonic() + 180
        while True:
            if server.poll() is not None:
                raise SystemExit(f"error: transformers serve exited {server.returncode}; see {j.log.name}")
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    raise SystemExit("error: transformers serve did not open its port in 180 s") from None
                time.sleep(0.5)
        url = f"http://127.0.0.1:{port}/v1"
        env = _env(j.cache, j.models / "served-data")
        for out, extra in (("scone", ["--benchmarks", "scone", "--strategy", "conditional_q"]),
                           ("condaqa", ["--benchmarks", "condaqa", "--model.max_new_tokens=6"])):
            _negtrain(["evaluate", "--model", str(j.models / "llama"), "--backend", "openai", "--base-url", url, "--out",
                       str(j.out / out), *extra], j.log, env)
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(timeout=30)


def job_list(j: Job) -> None:
    j.out.mkdir()
    with open(j.out / "evaluate-list.txt", "w", encoding="utf-8") as f:
        _negtrain(["evaluate", "--list"], j.log, _env(j.cache), stdout=f)


RUNNERS: dict[str, Callable[[Job], None]] = {"fit": job_fit, "card": job_card, "icl": job_icl, "served": job_served, "list": job_list}


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True).stdout.strip()


def _describe() -> str:
    """The commit run, and the last one that changed the package (what the numbers come from:
    this script's own commits change nothing the jobs compute)."""
    return f"{_git('describe', '--always', '--dirty')}, negtrain/ as of {_git('log', '-1', '--format=%h', '--', 'negtrain')}"


def run(outdir: Path, models: Path, only: list[str]) -> int:
    mirror = Path(os.environ.get("NEGTRAIN_DATA_DIR", ""))
    if not (mirror / "selenashe/ScoNe").is_dir():
        sys.exit("error: NEGTRAIN_DATA_DIR must name the benchmarks' mirror (selenashe/ScoNe not found in it)")
    if outdir.exists() and any(outdir.iterdir()):
        sys.exit(f"error: {outdir}: not empty; every run starts from empty folders (choose a new OUTDIR)")
    started = time.monotonic()
    build_models(models.resolve(), mirror)
    (outdir / "logs").mkdir(parents=True)
    timings: dict[str, float] = {"models (reused when built)": round(time.monotonic() - started, 1)}
    for name in only:
        cache = outdir / "caches" / name
        cache.mkdir(parents=True)  # fresh and empty: nothing from another job or run
        with open(outdir / "logs" / f"{name}.log", "w", encoding="utf-8") as log:
            t0 = time.monotonic()
            RUNNERS[name](Job(outdir / name, cache, models.resolve(), log))
            timings[name] = round(time.monotonic() - t0, 1)
        print(f"{name}: {timings[name]:.1f} s", flush=True)
        (outdir / "timings.json").write_text(json.dumps(timings, indent=1) + "\n", encoding="utf-8")
    (outdir / "commit.txt").write_text(_describe() + "\n", encoding="utf-8")
    return 0


# ---- comparing two outputs -----------------------------------------------------------------------

#: Keys whose values are times or rates, not results: dropped before comparing, at any depth.
TIMING_SUFFIXES = ("_seconds", "per_second")


def drop_timing(value):
    """``value`` (parsed JSON) with every key that holds a time or a rate (``eval_seconds``,
    ``train_seconds``, ``train_examples_per_second``, ...) removed, at any depth. Nothing else
    goes: a served card's ``requests`` counts (sent, answered from the cache, tokens) are the same
    from an empty cache, so they are compared."""
    if isinstance(value, dict):
        return {k: drop_timing(v) for k, v in value.items() if not k.endswith(TIMING_SUFFIXES)}
    if isinstance(value, list):
        return [drop_timing(v) for v in value]
    return value


#: The commit a page names (provenance: ``git 4abb74bec2c6``, maybe ``with uncommitted changes``):
#: different by design between the two runs.
GIT = re.compile(rb"git [0-9a-f]{7,40}( with uncommitted changes)?")


#: The local server's address (a served card's recipe names it): a free port, picked per run.
LOCAL_URL = re.compile(rb"http://127\.0\.0\.1:[0-9]+/")


def normalize(data: bytes, root: Path) -> bytes:
    """A text file's bytes with what differs between two runs by design written as a placeholder:
    the run's own folder (``root``) ``<OUTDIR>``, the commit it names ``git <commit>``, the local
    server's port ``<port>``."""
    data = data.replace(str(root).encode(), b"<OUTDIR>")
    return LOCAL_URL.sub(b"http://127.0.0.1:<port>/", GIT.sub(b"git <commit>", data))


def compare_json_lines(a: bytes, b: bytes) -> str | None:
    """None if the two JSON Lines texts are equal line by line once timing keys are dropped, else
    what differs first."""
    la, lb = a.decode("utf-8").splitlines(), b.decode("utf-8").splitlines()
    if len(la) != len(lb):
        return f"{len(la)} lines vs {len(lb)}"
    for i, (x, y) in enumerate(zip(la, lb, strict=True), 1):
        dx, dy = drop_timing(json.loads(x)), drop_timing(json.loads(y))
        if dx != dy:
            return f"line {i}: {_first_difference(dx, dy)}"
    return None


def _first_difference(a, b, where: str = "") -> str:
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                return f"{where}{k}: only in {'after' if k not in a else 'before'}"
            if a[k] != b[k]:
                return _first_difference(a[k], b[k], f"{where}{k}.")
    return f"{where.rstrip('.') or 'value'}: {str(a)[:80]} vs {str(b)[:80]}"


def compare_json(a: bytes, b: bytes) -> str | None:
    da, db = drop_timing(json.loads(a)), drop_timing(json.loads(b))
    return None if da == db else _first_difference(da, db)


def compare_bytes(a: bytes, b: bytes) -> str | None:
    return None if a == b else f"sha256 {hashlib.sha256(a).hexdigest()[:12]} vs {hashlib.sha256(b).hexdigest()[:12]}"


#: Table columns of card.md / protocol.md that hold times or rates ("seconds", "examples/s").
TIME_COLUMN = re.compile(r"^(seconds|examples/s|.*_seconds|.*per.second)$", re.IGNORECASE)


def drop_time_columns(text: str) -> str:
    """A Markdown page with the columns of its tables whose header names a time or a rate
    (:data:`TIME_COLUMN`) removed; every other line as it is."""
    out: list[str] = []
    drop: set[int] | None = None  # the columns dropped from the table being read; None: not in a table
    for line in text.splitlines():
        if not line.startswith("|"):
            drop = None
            out.append(line)
            continue
        cells = line.strip()[1:-1].split("|")
        if drop is None:  # a table's header row
            drop = {i for i, c in enumerate(cells) if TIME_COLUMN.match(c.strip())}
        out.append("|" + "|".join(c for i, c in enumerate(cells) if i not in drop) + "|")
    return "\n".join(out) + "\n"


def compare_markdown(a: bytes, b: bytes) -> str | None:
    ta, tb = drop_time_columns(a.decode("utf-8")), drop_time_columns(b.decode("utf-8"))
    if ta == tb:
        return None
    for i, (x, y) in enumerate(zip(ta.splitlines(), tb.splitlines(), strict=False), 1):
        if x != y:
            return f"line {i}: {x[:70]!r} vs {y[:70]!r}"
    return "one page is longer"


@dataclass(frozen=True)
class Rule:
    pattern: re.Pattern[str]  # searched in the path relative to the job's folder
    what: str  # the table's words for it
    compare: Callable[[bytes, bytes], str | None] | None  # None: not compared (``what`` says why)
    normalized: bool = False  # compared after :func:`normalize` (paths of the run, the commit)


NOT_COMPARED = "not compared"

#: First match wins. A file no rule matches is reported and fails the comparison: a new kind of
#: file must be given a rule, not skipped unseen.
RULES = [
    Rule(re.compile(r"(^|/)metrics\.jsonl$"), "metrics.jsonl, timing fields aside", compare_json_lines),
    Rule(re.compile(r"(^|/)predictions/"), "predictions, byte for byte", compare_bytes),
    Rule(re.compile(r"^model/provenance\.json$"), f"{NOT_COMPARED}: the export's provenance (machine, versions, commit)", None),
    Rule(re.compile(r"^model/README\.md$"), "exported model card, time columns aside", compare_markdown, True),
    Rule(re.compile(r"^model/"), "exported model, sha256 per file", compare_bytes),
    Rule(re.compile(r"(^|/)parts/[^/]*\.json$"), "card parts, timing fields aside", compare_json),
    Rule(re.compile(r"(^|/)(card|protocol)\.md$"), "card.md / protocol.md, time columns aside", compare_markdown, True),
    Rule(re.compile(r"(^|/)card\.png$"), "card.png, byte for byte", compare_bytes),
    Rule(re.compile(r"(^|/)(recipe\.yaml|command\.txt)$"), "recipe.yaml, command.txt", compare_bytes, True),
    Rule(re.compile(r"(^|/)run/model/"), "the run's tokenizer and config, byte for byte", compare_bytes),
    Rule(re.compile(r"^evaluate-list\.txt$"), "`evaluate --list`", compare_bytes),
    Rule(re.compile(r"(^|/)(provenance\.json|\.negtrain\.lock)$"), f"{NOT_COMPARED}: provenance, the run lock (machine, commit, pid)", None),
    Rule(re.compile(r"(^|/)checkpoints/"), f"{NOT_COMPARED}: checkpoints (the exported model is)", None),
    Rule(re.compile(r"(^|/)responses\.sqlite"), f"{NOT_COMPARED}: the response cache (its answers are in predictions)", None),
]


def rule_for(rel: str) -> Rule | None:
    return next((r for r in RULES if r.pattern.search(rel)), None)


def _files(job_dir: Path) -> dict[str, Path]:
    return {p.relative_to(job_dir).as_posix(): p for p in sorted(job_dir.rglob("*")) if p.is_file()}


@dataclass
class Row:
    job: str
    what: str
    files: int = 0
    differences: list[str] | None = None

    @property
    def compared(self) -> bool:
        return not self.what.startswith(NOT_COMPARED)

    @property
    def verdict(self) -> str:
        if not self.compared:
            return "-"
        return "identical" if not self.differences else f"{len(self.differences)} of {self.files} differ"


def compare_job(job: str, before: Path, after: Path) -> tuple[list[Row], list[str]]:
    """The rows of one job's comparison (one per rule that matched a file), and the files no rule
    covers."""
    fa, fb = _files(before / job), _files(after / job)
    rows: dict[str, Row] = {}
    unruled: list[str] = []
    for rel in sorted(set(fa) | set(fb)):
        rule = rule_for(rel)
        if rule is None:
            unruled.append(f"{job}/{rel}")
            continue
        row = rows.setdefault(rule.what, Row(job, rule.what, 0, []))
        row.files += 1
        if rule.compare is None:
            continue
        if rel not in fa or rel not in fb:
            row.differences.append(f"{rel}: only {'before' if rel in fa else 'after'}")  # type: ignore[union-attr]
            continue
        a, b = fa[rel].read_bytes(), fb[rel].read_bytes()
        if rule.normalized:
            a, b = normalize(a, before.resolve()), normalize(b, after.resolve())
        said = rule.compare(a, b)
        if said:
            row.differences.append(f"{rel}: {said}")  # type: ignore[union-attr]
    return list(rows.values()), unruled


def compare(before: Path, after: Path) -> int:
    rows: list[Row] = []
    unruled: list[str] = []
    for job in JOBS:
        if not (before / job).is_dir() and not (after / job).is_dir():
            continue
        r, u = compare_job(job, before, after)
        rows += r
        unruled += u
    missing = [job for job in JOBS if (before / job).is_dir() != (after / job).is_dir()]
    _print_table(before, after, rows)
    if unruled:
        print("\nfiles no rule covers (give them one in RULES):\n  " + "\n  ".join(unruled))
    if missing:
        print(f"\njobs run on one side only: {', '.join(missing)}")
    _print_markdown(before, after, rows)
    different = any(row.differences for row in rows if row.compared)
    return 1 if different or unruled or missing else 0


def _print_table(before: Path, after: Path, rows: list[Row]) -> None:
    print(f"before: {before} ({_commit(before)})\nafter:  {after} ({_commit(after)})\n")
    print(f"{'job':<8} {'files':>5}  {'result':<16} compared")
    for row in rows:
        print(f"{row.job:<8} {row.files:>5}  {row.verdict:<16} {row.what}")
        for d in (row.differences or [])[:20]:
            print(f"{'':<8} {'':>5}    {d}")


def _commit(out: Path) -> str:
    f = out / "commit.txt"
    return f.read_text(encoding="utf-8").strip() if f.is_file() else "?"


def _timings(out: Path) -> dict[str, float]:
    f = out / "timings.json"
    return json.loads(f.read_text(encoding="utf-8")) if f.is_file() else {}


def _seconds(timings: dict[str, float], job: str) -> str:
    return f"{timings[job]:.0f} s" if job in timings else "?"


def _print_markdown(before: Path, after: Path, rows: list[Row]) -> None:
    tb, ta = _timings(before), _timings(after)
    print("\n---- Markdown for perf/results/same_numbers.md ----\n")
    print(f"`python perf/same_numbers.py run` on `{_commit(before)}` (before) and on `{_commit(after)}` (after), every job "
          "from an empty cache, both with the same model and data folders; then `python perf/same_numbers.py compare`:\n")
    print("| job | compared | files | result |\n|---|---|---|---|")
    for row in rows:
        if row.compared:
            print(f"| {row.job} | {row.what} | {row.files} | {row.verdict} |")
    jobs = list(dict.fromkeys(row.job for row in rows))
    print("\nWall time of each job, before / after: " + "; ".join(f"{j} {_seconds(tb, j)} / {_seconds(ta, j)}" for j in jobs) + ".")
    print("Not compared: " + "; ".join(sorted({row.what.split(": ", 1)[1] for row in rows if not row.compared})) + ".")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="run the five jobs into OUTDIR")
    r.add_argument("outdir", type=Path)
    r.add_argument("--models", type=Path, help="the tiny model and data folders, built once (default: OUTDIR/../models)")
    r.add_argument("--only", default=",".join(JOBS), help=f"a,b,...: some of {', '.join(JOBS)} (default: all)")
    c = sub.add_parser("compare", help="compare two run outputs; exit 1 on any difference")
    c.add_argument("before", type=Path)
    c.add_argument("after", type=Path)
    args = p.parse_args(argv)
    if args.command == "compare":
        for d in (args.before, args.after):
            if not d.is_dir():
                sys.exit(f"error: {d}: not a folder written by `run`")
        return compare(args.before, args.after)
    only = [j for j in args.only.split(",") if j]
    if unknown := [j for j in only if j not in JOBS]:
        sys.exit(f"error: --only: unknown job(s) {', '.join(unknown)}; the jobs: {', '.join(JOBS)}")
    outdir = args.outdir.resolve()
    return run(outdir, args.models or outdir.parent / "models", only)


if __name__ == "__main__":
    sys.exit(main())
