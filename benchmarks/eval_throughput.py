"""Evaluation throughput on ScoNe test, and how often bf16 predictions agree with fp32.

Runs negtrain's own evaluation path (the NLI module's `predict` over the eval DataLoader, with
length bucketing) in fp32 and bf16 autocast, and a plain loop (tokenize per batch, pad, forward)
for comparison, interleaved over repeats:

    NEGTRAIN_DATA_DIR=path/to/mirror python benchmarks/eval_throughput.py --repeats 3

Writes benchmarks/results/eval_throughput.{json,md}.
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
def negtrain_predict(built, bf16: bool) -> tuple[torch.Tensor, float]:
    module = built.module.eval()
    loader = built.data.val_dataloader()[0]
    preds = torch.empty(len(built.data.eval_sets[0].examples), dtype=torch.long)
    start = time.perf_counter()
    for batch in loader:
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            preds[batch["index"]] = module.predict(batch, 0)
    return preds, time.perf_counter() - start


@torch.inference_mode()
def plain_predict(built, batch_size: int) -> float:
    model, tok = built.module.model.eval(), built.tokenizer
    examples = built.data.eval_sets[0].examples
    start = time.perf_counter()
    for i in range(0, len(examples), batch_size):
        chunk = examples[i : i + batch_size]
        enc = tok([e.inputs[0] for e in chunk], [e.inputs[1] for e in chunk], padding=True, truncation=True, max_length=128, return_tensors="pt")
        model(**enc).logits.argmax(-1)
    return time.perf_counter() - start


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
    times = {"plain_fp32": [], "negtrain_fp32": [], "negtrain_bf16": []}
    agreement = []
    for _ in range(args.repeats):
        times["plain_fp32"].append(plain_predict(built, args.batch_size))
        p32, t32 = negtrain_predict(built, bf16=False)
        p16, t16 = negtrain_predict(built, bf16=True)
        times["negtrain_fp32"].append(t32)
        times["negtrain_bf16"].append(t16)
        agreement.append(float((p32 == p16).float().mean()))
    summary = {k: {"median_examples_per_second": statistics.median(n / t for t in v)} for k, v in times.items()}
    report = {"checkpoint": args.checkpoint.name if args.checkpoint else None, "examples": n, "batch_size": args.batch_size, "contenders": summary, "bf16_fp32_agreement": min(agreement)}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "eval_throughput.json").write_text(json.dumps(report, indent=2) + "\n")
    lines = [f"Evaluation on ScoNe test ({n} examples), MiniLM-L6, batch {args.batch_size}, median of {args.repeats}.", "",
             "| path | examples/s |", "|---|---:|"]
    lines += [f"| {k} | {v['median_examples_per_second']:.0f} |" for k, v in summary.items()]
    lines += ["", f"bf16 vs fp32 prediction agreement: {report['bf16_fp32_agreement']:.4f}"]
    (args.out / "eval_throughput.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
