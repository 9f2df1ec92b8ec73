"""Greedy generation speed: negtrain against lm-evaluation-harness ``generate_until`` and a plain
Hugging Face ``generate`` loop, on the same causal LM and the same prompts, in one run.

The prompts are ScoNe test rows put through the ``conditional_q`` strategy with the paper's four
demonstrations (``--shots paper``), the longest prompts of the ScoNe protocol short of Reasoning;
every contender generates greedily up to ``--max-new-tokens`` with the stop string "\\n\\n":

- negtrain: :func:`negtrain.models.generation.respond` (length-sorted batches, left padding, KV cache);
- lm-eval: ``HFLM.generate_until`` (lm-eval >= 0.4.5, the ``crosscheck`` extra) at the same batch size;
- HF loop: ``model.generate`` one prompt at a time (the plain loop a user writes first);
- HF batches: ``model.generate`` on batches in file order (left padding, no sorting).

Every contender's texts are compared with negtrain's (after cutting at the stop string), so
a faster contender that answers differently would show. Interleaved repeats, median; the model is
the tiny test Llama unless ``--model`` names a causal LM folder:

    NEGTRAIN_DATA_DIR=path/to/mirror python perf/generation.py --rows 128 --repeats 3

Writes perf/results/generation-<machine>.{json,md} (``--machine``: e.g. cpu-2core, nvidia-h100).
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
from continuation_scoring import causal_lm_folder  # this folder's scripts import each other

HERE = Path(__file__).resolve().parent
STOP = ("\n\n",)


def cut(text: str) -> str:
    for s in STOP:
        i = text.find(s)
        if i != -1:
            text = text[:i]
    return text


@torch.inference_mode()
def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", help="a causal LM folder (default: the tiny test Llama)")
    p.add_argument("--rows", type=int, default=128)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--max-new-tokens", type=int, default=16)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--machine", default="cpu", help="names the results file: generation-<machine>.md")
    p.add_argument("--skip", default="", help="comma-separated contenders to leave out (e.g. 'HF loop' on a large run)")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from negtrain.benchmarks.registry import get_benchmark
    from negtrain.models.generation import Limits, respond
    from negtrain.prompts.strategies import get_strategy

    device = "cuda" if torch.cuda.is_available() else "cpu"
    with tempfile.TemporaryDirectory() as tmp:
        path = causal_lm_folder(args.model, tmp)
        tok = AutoTokenizer.from_pretrained(path)
        if tok.pad_token_id is None:
            tok.pad_token = tok.eos_token
        tok.padding_side = "left"
        dtype = torch.bfloat16 if device == "cuda" else torch.float32
        model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype).to(device).eval()
        bench = get_benchmark("scone")
        strategy = get_strategy("scone", "conditional_q")
        examples = bench.load("test")[: args.rows]
        prompts = [strategy.paper_prompt(bench.prompt_fields(e), e.subset).text() for e in examples]
        limits = Limits(args.max_new_tokens, STOP)
        gen_kwargs = dict(max_new_tokens=args.max_new_tokens, do_sample=False, num_beams=1, pad_token_id=tok.pad_token_id,
                          eos_token_id=tok.eos_token_id, stop_strings=list(STOP), tokenizer=tok)

        def negtrain_run():
            return [g.text for g in respond(model, tok, prompts, limits, batch_size=args.batch)]

        def hf_loop():
            out = []
            for text in prompts:
                enc = tok(text, return_tensors="pt").to(device)
                gen = model.generate(**enc, **gen_kwargs)
                out.append(cut(tok.decode(gen[0, enc["input_ids"].shape[1]:], skip_special_tokens=True)))
            return out

        def hf_batches():
            out = []
            for i in range(0, len(prompts), args.batch):
                enc = tok(prompts[i : i + args.batch], return_tensors="pt", padding=True).to(device)
                gen = model.generate(**enc, **gen_kwargs)
                out += [cut(t) for t in tok.batch_decode(gen[:, enc["input_ids"].shape[1]:], skip_special_tokens=True)]
            return out

        contenders = {"negtrain": negtrain_run, "HF loop": hf_loop, "HF batches": hf_batches}
        lm_eval_version = None
        try:
            import lm_eval
            from lm_eval.api.instance import Instance
            from lm_eval.models.huggingface import HFLM

            lm_eval_version = lm_eval.__version__
            lm = HFLM(pretrained=model, tokenizer=tok, batch_size=args.batch, max_length=4096)
            requests = [
                Instance(request_type="generate_until", doc={}, idx=i,
                         arguments=(text, {"until": list(STOP), "max_gen_toks": args.max_new_tokens, "do_sample": False}))
                for i, text in enumerate(prompts)
            ]

            def lm_eval_run():
                return [cut(t) for t in lm.generate_until(requests, disable_tqdm=True)]

            contenders["lm-eval generate_until"] = lm_eval_run
        except ImportError:
            print("lm-eval not installed (pip install 'negtrain[crosscheck]'): left out", file=sys.stderr)
        for name in [s.strip() for s in args.skip.split(",") if s.strip()]:
            contenders.pop(name, None)

        texts = {}
        times: dict[str, list[float]] = {name: [] for name in contenders}
        for name, fn in contenders.items():  # warm-up (and the texts compared below)
            texts[name] = fn()
        for _ in range(args.repeats):
            for name, fn in contenders.items():
                if device == "cuda":
                    torch.cuda.synchronize()
                start = time.perf_counter()
                fn()
                if device == "cuda":
                    torch.cuda.synchronize()
                times[name].append(time.perf_counter() - start)
    reference = texts["negtrain"]
    results = {}
    for name, t in times.items():
        rate = len(prompts) / statistics.median(t)
        results[name] = {
            "examples_per_second": round(rate, 2),
            "same_text_as_negtrain": sum(a.strip() == b.strip() for a, b in zip(texts[name], reference)),
        }
    base = results["negtrain"]["examples_per_second"]
    for name, r in results.items():
        r["negtrain_speedup"] = round(base / r["examples_per_second"], 2)
    gpu = torch.cuda.get_device_name(0) if device == "cuda" else None
    load = round(os.getloadavg()[0], 1)
    meta = {"machine": args.machine, "device": gpu or f"cpu, {args.threads} thread(s)", "model": "tiny test Llama" if args.model is None else args.model,
            "rows": len(prompts), "batch": args.batch, "max_new_tokens": args.max_new_tokens, "stop": list(STOP), "repeats": args.repeats,
            "load_average": load, "lm_eval": lm_eval_version, "torch": torch.__version__}
    (HERE / "results").mkdir(exist_ok=True)
    stem = f"generation-{args.machine}"
    (HERE / "results" / f"{stem}.json").write_text(json.dumps({**meta, "results": results}, indent=1) + "\n")
    lines = [
        f"# Greedy generation, examples/s ({meta['device']}; {meta['model']}; {len(prompts)} ScoNe conditional_q few-shot prompts; "
        f"batch {args.batch}; {args.max_new_tokens} new tokens, stop \"\\n\\n\"; median of {args.repeats}; load average {load})",
        "",
        "| contender | examples/s | negtrain's speed-up | same text as negtrain |",
        "|---|---:|---:|---:|",
    ]
    for name, r in results.items():
        lines.append(f"| {name} | {r['examples_per_second']} | {r['negtrain_speedup']}x | {r['same_text_as_negtrain']}/{len(prompts)} |")
    lines += ["", f"lm-eval {lm_eval_version}, torch {torch.__version__}. Command: `python perf/generation.py --machine {args.machine} --rows {args.rows} --batch {args.batch} --repeats {args.repeats}`."]
    (HERE / "results" / f"{stem}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
