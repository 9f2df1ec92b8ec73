"""Evaluation throughput on ScoNe test, and how often bf16 predictions agree with fp32.

Runs negtrain's own evaluation path (the NLI module's `predict` over the eval DataLoader, with
length-sorted batches) in fp32 and bf16 autocast, with and without `model.first_token_only`, and
a plain loop (tokenize per batch, pad, full fp32 forward) whose predictions are the reference every
other path must agree with. Contenders are interleaved over repeats:

    NEGTRAIN_DATA_DIR=path/to/mirror python perf/eval_throughput.py --repeats 3

Writes perf/results/eval_throughput.{json,md}.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent


def build_scone_eval(batch_size: int | None):
    from negtrain.recipes import load_recipe
    from negtrain.training.build import build
    from negtrain.training.run import quiet_third_party_logs

    quiet_third_party_logs()
    recipe = load_recipe(
        "scone_minilm",
        {"data.eval": [{"benchmark": "scone", "split": "test"}], "selection.metric": None}
        | ({"data.eval_batch_size": batch_size} if batch_size else {}),
    ).recipe
    return build(recipe, stage="validate")


@torch.inference_mode()
def negtrain_predict(built, bf16: bool, first_token_only: bool = True) -> tuple[torch.Tensor, float]:
    module = built.module.eval()
    module.config.first_token_only = first_token_only
    loader = built.data.val_dataloader()[0]
    preds = torch.empty(len(built.data.eval_sets[0].examples), dtype=torch.long)
    start = time.perf_counter()
    for batch in loader:
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            preds[batch["index"]] = module.predict(batch, module.eval_sets[0])
    return preds, time.perf_counter() - start


@torch.inference_mode()
def plain_predict(built, batch_size: int) -> tuple[torch.Tensor, float]:
    """The reference: the model's ordinary fp32 forward. Its predictions are what the others must agree with."""
    model, tok = built.module.model.eval(), built.tokenizer
    examples = built.data.eval_sets[0].examples
    preds = []
    start = time.perf_counter()
    for i in range(0, len(examples), batch_size):
        chunk = examples[i : i + batch_size]
        enc = tok([e.inputs[0] for e in chunk], [e.inputs[1] for e in chunk], padding=True, truncation=True, max_length=128, return_tensors="pt")
        preds.append(model(**enc).logits.argmax(-1))
    seconds = time.perf_counter() - start
    return built.module.eval_sets[0].label_map[torch.cat(preds)], seconds


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--batch-size", type=int, default=None, help="default: the recipe's data.eval_batch_size")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--checkpoint", type=Path, default=None, help="a scone_minilm run's checkpoint, so agreement is measured on a trained model")
    p.add_argument("--out", type=Path, default=HERE / "results")
    args = p.parse_args()

    built = build_scone_eval(args.batch_size)
    args.batch_size = built.data.config.eval_batch_size
    if args.checkpoint is not None:
        from negtrain.training.build import reload_weights

        reload_weights(built.module, str(args.checkpoint))
    n = len(built.data.eval_sets[0].examples)
    contenders = {
        "plain_fp32": lambda: plain_predict(built, args.batch_size),
        "negtrain_fp32": lambda: negtrain_predict(built, bf16=False),
        "negtrain_bf16_full_last_layer": lambda: negtrain_predict(built, bf16=True, first_token_only=False),
        "negtrain_bf16": lambda: negtrain_predict(built, bf16=True),
    }
    times = {k: [] for k in contenders}
    agreement = {k: [] for k in contenders}
    for _ in range(args.repeats):
        reference = None
        for name, run in contenders.items():
            preds, seconds = run()
            reference = preds if reference is None else reference
            times[name].append(seconds)
            agreement[name].append(float((preds == reference).float().mean()))
    summary = {
        k: {"median_examples_per_second": statistics.median(n / t for t in v), "agreement_with_plain_fp32": min(agreement[k])}
        for k, v in times.items()
    }
    report = {"checkpoint": args.checkpoint.name if args.checkpoint else None, "examples": n, "batch_size": args.batch_size, "contenders": summary}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "eval_throughput.json").write_text(json.dumps(report, indent=2) + "\n")
    lines = [f"Evaluation on ScoNe test ({n} examples), MiniLM-L6, batch {args.batch_size}, median of {args.repeats}.", "",
             "| path | examples/s | predictions agreeing with plain_fp32 |", "|---|---:|---:|"]
    lines += [f"| {k} | {v['median_examples_per_second']:.0f} | {v['agreement_with_plain_fp32']:.4f} |" for k, v in summary.items()]
    (args.out / "eval_throughput.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
