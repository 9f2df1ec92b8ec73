"""Does the cost per training example stay flat as the training set grows?

For 1k, 4k and 16k examples (ScoNe train, repeated with fresh ids), measures in a fresh
subprocess each: data preparation time per 1k examples (tokenize, flat storage, targets, sampler
epoch), training throughput over a fixed number of steps, and resident memory after preparation.

    NEGTRAIN_DATA_DIR=path/to/mirror python perf/scaling.py

Writes perf/results/scaling.{json,md}.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent


def measure(n: int, steps: int) -> dict:
    from _contenders import timed_fit

    from negtrain.benchmarks.registry import get_benchmark
    from negtrain.data.encoded import EncodedSplit
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


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--one":
        print(json.dumps(measure(int(sys.argv[2]), int(sys.argv[3]))))
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
