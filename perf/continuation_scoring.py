"""Shared-prefix verbalizer scoring against one padded batch of (prompt + verbalizer) rows.

negtrain scores a label benchmark by each verbalizer's full continuation with the prompt run once
(negtrain.models.continuation: causal LMs repeat the prompt's KV cache per choice). The
alternative runs every (prompt, choice) pair as its own row: the prompt once per label. Both give
the same log-likelihoods (tested); this measures the time, on the tiny test Llama (or any causal
LM folder given with --model), ScoNe test's prompts and the 3-way verbalizers "yes" / "maybe" /
"no" or the multi-token "not sure" / "not at all" / "yes":

    NEGTRAIN_DATA_DIR=path/to/mirror python perf/continuation_scoring.py --repeats 5

Interleaved repeats, median. Writes perf/results/continuation_scoring.{json,md}.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def causal_lm_folder(model: str | None, tmp: str) -> str:
    """``--model``, or the tiny test Llama saved into ``tmp`` (tests/tiny_models.py, its tokenizer
    trained on the first NEGTRAIN_DATA_DIR folder). perf/generation.py loads its model here too."""
    if model is not None:
        return model
    sys.path.insert(0, str(ROOT / "tests"))
    from tiny_models import save_tiny_llama

    return str(save_tiny_llama(Path(tmp) / "llama", Path(os.environ["NEGTRAIN_DATA_DIR"].split(os.pathsep)[0])))


@torch.inference_mode()
def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", help="a causal LM folder (default: the tiny test Llama)")
    p.add_argument("--rows", type=int, default=256)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--repeats", type=int, default=5)
    args = p.parse_args()
    torch.set_num_threads(1)
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from negtrain.benchmarks.registry import get_benchmark
    from negtrain.config import model_config
    from negtrain.models import continuation
    from negtrain.models.lm_encoding import continuation_ids
    from negtrain.models.prompting import prompt_text

    with tempfile.TemporaryDirectory() as tmp:
        path = causal_lm_folder(args.model, tmp)
        tok = AutoTokenizer.from_pretrained(path)
        model = AutoModelForCausalLM.from_pretrained(path).eval()
        bench = get_benchmark("scone")
        cfg = model_config(name=path, family="causal_lm")
        examples = bench.load("test")[: args.rows]
        prompts = [tok(prompt_text(bench, e, cfg))["input_ids"] for e in examples]
        pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
        results = {}
        for name, words in (("yes/maybe/no", ("yes", "maybe", "no")), ("not sure/not at all/yes", ("not sure", "not at all", "yes"))):
            choices = [continuation_ids(tok, w, causal=True) for w in words]
            batches = []
            for i in range(0, len(prompts), args.batch):
                ids, mask = continuation._pad(prompts[i : i + args.batch], pad, left=True)
                flat = [c for _ in range(len(ids)) for c in choices]
                cont, cont_mask = continuation._pad(flat, pad, left=False)
                batches.append((ids, mask, cont, cont_mask))

            def shared():
                for ids, mask, *_ in batches:
                    continuation.score_batch(model, ids, mask, [choices] * len(ids), encoder_decoder=False, pad_id=pad)

            def full_rows():
                for ids, mask, cont, cont_mask in batches:
                    continuation._causal_full_rows(model, ids, mask, cont, cont_mask, len(choices))

            times: dict[str, list[float]] = {"shared prefix": [], "prompt per label": []}
            for _ in range(args.repeats):
                for label, fn in (("shared prefix", shared), ("prompt per label", full_rows)):
                    start = time.perf_counter()
                    fn()
                    times[label].append(time.perf_counter() - start)
            results[name] = {
                "tokens_per_choice": [len(c) for c in choices],
                **{label: round(len(prompts) / statistics.median(t), 1) for label, t in times.items()},
            }
    load = round(os.getloadavg()[0], 1)
    (HERE / "results").mkdir(exist_ok=True)
    (HERE / "results" / "continuation_scoring.json").write_text(json.dumps({"rows": len(prompts), "load_average": load, "results": results}, indent=1))
    lines = [f"# Verbalizer scoring, examples/s ({len(prompts)} ScoNe test prompts, batches of {args.batch}, 1 thread, load average {load})", "",
             "| verbalizers | tokens each | shared prefix | prompt per label | speed-up |", "|---|---|---:|---:|---:|"]
    for name, r in results.items():
        lines.append(f"| {name} | {r['tokens_per_choice']} | {r['shared prefix']} | {r['prompt per label']} | {r['shared prefix'] / r['prompt per label']:.2f}x |")
    (HERE / "results" / "continuation_scoring.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
