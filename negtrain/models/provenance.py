"""What produced a number: ``provenance.json`` beside every run's ``recipe.yaml``.

A reviewer reading a result a year later needs more than the recipe: which negtrain (version, git
commit, uncommitted changes), which libraries (torch with its CUDA/cuDNN build, transformers,
Lightning, peft, bitsandbytes, datasets, torchmetrics, wandb, ...), which machine (CPU, native
bf16, GPUs), the precision the Trainer ran in, the exact model (its Hub commit, or a content hash
of a local folder, packaged model or checkpoint), the SHA-256 of every data file each benchmark
read, and the seed. :func:`collect` gathers them; fit, validate/test and report cards write them
(:func:`write`), exports copy them into the model card, and the W&B config carries them.

Cost: hashing is done once per file and cached by size and mtime (:mod:`negtrain.io.digests`), so
a warm start only stats the files; ``collect_seconds`` in the file says what collecting took.

:func:`differences` tells what two runs disagree on (a data file's bytes, a package's major
version); ``report`` and ``compare`` print it. :func:`constraints` turns a run's versions into a
pip constraints file (``negtrain env --constraints RUN``).
"""

from __future__ import annotations

import datetime as dt
import importlib.metadata
import json
import os
import platform
import subprocess
import time
from pathlib import Path
from typing import Any


import negtrain
from negtrain.benchmarks.files import cache_dir, resolve
from negtrain.benchmarks.registry import get_benchmark
from negtrain.config import Recipe
from negtrain.core.errors import NegtrainError
from negtrain.io.atomic import write_text
from negtrain.io.digests import file_sha256, folder_content, folder_sha256
from negtrain.core.secrets import redact
from negtrain.models.gguf import cached_folder, is_gguf, source_record
from negtrain.models.sources import PKG_PREFIX, model_source

FILE_NAME = "provenance.json"
FORMAT = 1
#: Distributions whose versions are recorded (when installed), by their names on the package index.
PACKAGES = (
    "torch", "transformers", "lightning", "pytorch-lightning", "peft", "bitsandbytes", "datasets",
    "torchmetrics", "wandb", "tokenizers", "huggingface_hub", "safetensors", "accelerate", "numpy",
    "pydantic", "PyYAML", "sentencepiece", "matplotlib", "xxhash", "deepspeed",
)


# ---- the environment: negtrain, Python, packages, machine -------------------------------------



def cpu_has_native_bf16() -> bool:
    """Whether this CPU multiplies bf16 in hardware (x86: AVX512-BF16 or AMX; Arm: the BF16 extension).

    Without it, torch emulates bf16 matmuls: measured on a 2-core AVX2-only CPU, about 45 times
    slower than fp32, where a CPU with AVX512-BF16 runs them about 4 times faster than fp32.
    """
    import torch

    probes = [getattr(torch.cpu, name, None) for name in ("_is_avx512_bf16_supported", "_is_amx_tile_supported")]
    if any(probe is not None and probe() for probe in probes):
        return True
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            # Arm lists "bf16" among its Features; x86 spells it avx512_bf16 / amx_bf16 (covered above).
            return any(line.lower().startswith("features") and "bf16" in line.split() for line in f)
    except OSError:
        return False

def _git(root: Path, *args: str) -> str | None:
    try:
        done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def negtrain_source() -> dict[str, Any]:
    """negtrain's version, and its git commit and whether tracked files differ from it when it
    runs from a checkout (an installed wheel has no commit: None)."""
    root = Path(negtrain.__file__).resolve().parent.parent
    info: dict[str, Any] = {"version": negtrain.__version__, "git_commit": None, "git_dirty": None}
    if (root / ".git").exists():
        commit = _git(root, "rev-parse", "HEAD")
        if commit:
            status = _git(root, "status", "--porcelain", "--untracked-files=no")
            info.update(git_commit=commit, git_dirty=None if status is None else bool(status))
    return info


def package_versions() -> dict[str, str]:
    found = {}
    for name in PACKAGES:
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return found


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.lower().startswith(("model name", "hardware", "cpu model")):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine() -> dict[str, Any]:
    import torch

    gpus = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())] if torch.cuda.is_available() else []
    return {
        "cpu": _cpu_model(),
        "cpu_cores": os.cpu_count(),
        "architecture": platform.machine(),
        "os": platform.platform(terse=True),
        "cpu_native_bf16": cpu_has_native_bf16(),
        "gpu_count": len(gpus),
        "gpus": gpus,
        "gpu_native_bf16": bool(gpus) and torch.cuda.is_bf16_supported(),
    }


def environment() -> dict[str, Any]:
    """Everything about this process's software and machine (no run in it): ``negtrain env``."""
    import torch

    cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    return {
        "negtrain": negtrain_source(),
        "python": platform.python_version(),
        "python_implementation": platform.python_implementation(),
        "torch": {"version": torch.__version__, "cuda": torch.version.cuda, "cudnn": cudnn},
        "packages": package_versions(),
        "machine": machine(),
    }


# ---- the run: model, data, precision, seed -----------------------------------------------------


def _hub_commit(name: str, config: Any) -> str | None:
    commit = getattr(config, "_commit_hash", None) if config is not None else None
    if commit:
        return str(commit)
    try:  # the snapshot the local Hugging Face cache holds: .../snapshots/<commit>/config.json
        from huggingface_hub import try_to_load_from_cache

        found = try_to_load_from_cache(name, "config.json")
    except Exception:  # an unusual name, an old huggingface_hub: the commit stays unknown
        return None
    return Path(found).parent.name if isinstance(found, str) else None


def _content(path: Path, cache: Path) -> dict[str, Any]:
    """A file's or folder's content hash. A folder's symlinks to nothing (a pruned Hugging Face
    cache snapshot still loads) are listed as ``dangling_symlinks``; its pipes, sockets and devices
    are not read but listed as ``skipped``, and both are said once."""
    if not path.is_dir():
        return {"content_sha256": file_sha256(path, cache)}
    content = folder_content(path)
    out: dict[str, Any] = {"content_sha256": folder_sha256(path, cache, content)}
    if content.dangling:
        out["dangling_symlinks"] = content.dangling
    if content.skipped:
        out["skipped"] = content.skipped
    left_out = [f"{name} (a dangling symlink)" for name in content.dangling] + content.skipped
    if left_out:
        shown = ", ".join(left_out[:5]) + (f" and {len(left_out) - 5} more" if len(left_out) > 5 else "")
        print(f"warning: {path}: not part of its content hash (only regular files are read): {shown}", flush=True)
    return out


def model_revision(recipe: Recipe, config: Any = None, checkpoint: Path | None = None) -> dict[str, Any]:
    """Which weights: a Hub model's commit, else a content hash of the packaged model or local
    folder; the adapter folder and the checkpoint scored (a card of a run) by content too."""
    cache = cache_dir()
    name = recipe.model.name
    out: dict[str, Any] = {"name": name}
    if name.startswith(PKG_PREFIX):
        package = name[len(PKG_PREFIX):].partition("/")[0]
        try:
            out["package_version"] = importlib.metadata.version(package.replace("_", "-"))
        except importlib.metadata.PackageNotFoundError:
            out["package_version"] = None
        out.update(source="package", **_content(Path(model_source(name)), cache))
    elif Path(name).expanduser().exists():
        out.update(source="local", **_content(Path(name).expanduser(), cache))
    else:
        out.update(source="hub", commit=_hub_commit(name, config))
    if is_gguf(model_source(name)):  # the file is hashed; its quantization and dtype named
        out["gguf"] = {k: v for k, v in (source_record(cached_folder(model_source(name))) or {}).items() if k in ("quantization", "dtype")}
    if recipe.model.init_from:
        out["init_from"] = recipe.model.init_from
    if recipe.adapter.path:
        out["adapter"] = {"path": Path(recipe.adapter.path).name, **_content(Path(recipe.adapter.path), cache)}
    if checkpoint is not None:
        out["checkpoint"] = {"file": Path(checkpoint).name, "sha256": file_sha256(Path(checkpoint), cache)}
    return out


def _hub_snapshot(name: str) -> Path | None:
    """The folder of a Hub model's files in the local Hugging Face cache, when it is there."""
    try:
        from huggingface_hub import try_to_load_from_cache

        found = try_to_load_from_cache(name, "config.json")
    except Exception:  # an unusual name, an old huggingface_hub: no folder known
        return None
    return Path(found).parent if isinstance(found, str) else None


def weights_identity(recipe: Recipe, config: Any = None, checkpoint: Path | None = None) -> dict[str, Any]:
    """What names the weights a model computes with by their content, never by a path: the
    digest of the model folder (or a Hub model's commit and cached snapshot), of the adapter
    folder, of the ``init_from`` checkpoint and of the checkpoint scored. The response cache keys a
    model by it, so new weights saved into the same folder are another model. Every file is
    hashed in full (:mod:`negtrain.io.digests`: once, then cached by size and mtime; provenance
    hashes the same files, so a card pays it once). A Hub model is named by its commit."""
    cache = cache_dir()
    rev = model_revision(recipe, config, checkpoint)
    out: dict[str, Any] = {"source": rev["source"]}
    if rev["source"] == "hub":
        # A Hub commit names its files' content; without one, the cached snapshot is hashed.
        out.update(name=rev["name"], commit=rev.get("commit"))
        snapshot = _hub_snapshot(rev["name"]) if not rev.get("commit") else None
        if snapshot is not None:
            out["content_sha256"] = folder_sha256(snapshot, cache)
    else:
        out["content_sha256"] = rev["content_sha256"]
    if "gguf" in rev:
        out["quantization"] = rev["gguf"].get("quantization")
    if "adapter" in rev:
        out["adapter_sha256"] = rev["adapter"]["content_sha256"]
    if recipe.model.init_from:
        # Imported here: reading a checkpoint imports Lightning, which a served card never needs
        # (its model has no init_from), and this module is on a served card's path.
        from negtrain.models.init_from import resolve_init

        out["init_from_sha256"] = file_sha256(resolve_init(recipe.model.init_from).checkpoint, cache)
    if "checkpoint" in rev:
        out["checkpoint_sha256"] = rev["checkpoint"]["sha256"]
    return out


def _evaluated(entries) -> list:
    return [] if entries is None or isinstance(entries, str) else list(entries)


def _splits_read(recipe: Recipe) -> list[tuple[str, str, str]]:
    """(role, benchmark, split) for every benchmark split the recipe reads, in recipe order."""
    seen: dict[tuple[str, str, str], None] = {}
    for s in recipe.data.train:
        seen[("train", s.benchmark, s.split)] = None
    for role, entries in (("eval", recipe.data.eval), ("test", recipe.data.test)):
        for e in _evaluated(entries):
            seen[(role, e.benchmark, e.split)] = None
            if e.shots:
                shots = e.shots_split or get_benchmark(e.benchmark).default_shots_split(e.split)
                seen[("shots", e.benchmark, shots)] = None
    return list(seen)


def _text_files(node: Any) -> list[str]:
    """Every ``text_files`` entry of the objective section (corpora, retention text)."""
    if isinstance(node, dict):
        found = []
        for key, value in node.items():
            found += [str(v) for v in value] if key == "text_files" and isinstance(value, list) else _text_files(value)
        return found
    if isinstance(node, list):
        return [f for item in node for f in _text_files(item)]
    return []


def data_files(recipe: Recipe) -> list[dict[str, Any]]:
    """Per benchmark split read: each of its files by upstream name, with size and SHA-256."""
    cache = cache_dir()
    read: list[dict[str, Any]] = []
    for role, bench_name, split in _splits_read(recipe):
        bench = get_benchmark(bench_name)
        files = []
        for f in bench.files(split):
            path = resolve(f)
            files.append({"file": Path(f.relpath).as_posix(), "bytes": path.stat().st_size, "sha256": file_sha256(path, cache)})
        read.append({"role": role, "benchmark": bench_name, "split": split, "files": files})
    if recipe.objective is not None:
        texts = _text_files(recipe.objective.model_dump(mode="json"))
        files = [{"file": Path(t).name, "bytes": Path(t).stat().st_size, "sha256": file_sha256(Path(t), cache)} for t in texts]
        if files:
            read.append({"role": "objective", "benchmark": None, "split": None, "files": files})
    return read


def collect(recipe: Recipe, precision: str, model_config: Any = None, checkpoint: Path | None = None, *,
            dtype: str | None = None, selection: dict[str, Any] | None = None) -> dict[str, Any]:
    """A run's provenance: :func:`environment` plus the model, data, precision and seed; ``dtype``: what
    the model computed in (``precision`` 32-true runs it in its weights' dtype); ``selection``: the kept epoch's rule."""
    start = time.perf_counter()
    t = recipe.trainer
    record = {
        "format": FORMAT,
        "created": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        **environment(),
        "precision": precision,
        **({"dtype": dtype} if dtype else {}), **({"selection": selection} if selection else {}),
        "devices": {"accelerator": t.accelerator, "devices": t.devices, "strategy": t.strategy, "num_nodes": t.num_nodes},
        "seed": recipe.seed,
        "model": model_revision(recipe, model_config, checkpoint),
        "data": data_files(recipe),
    }
    server = recipe.evaluation.server
    if server is not None and server.extra_body:  # what a served card sent besides the prompt
        record["extra_body"] = {"sent": server.extra_body, "allowed": list(server.extra_body_allow)}
    record["collect_seconds"] = round(time.perf_counter() - start, 4)
    return record


def write(run_dir: Path, record: dict[str, Any]) -> Path:
    path = Path(run_dir) / FILE_NAME
    # A token can sit inside a model or data path; values only are masked (keys are ours).
    write_text(path, json.dumps(redact(record, by_key=False), indent=1) + "\n")
    return path


def write_resumed(run_dir: Path, record: dict[str, Any]) -> list[str]:
    """Add a resumed session's software and machine to the run's provenance (the model, data and
    seed are the run's own); returns how it differs from the start (:func:`differences`)."""
    old = read(run_dir)
    if old is None:
        write(run_dir, record)
        return []
    found = differences(old, record)
    session = {k: record.get(k) for k in ("created", "negtrain", "python", "torch", "packages", "machine", "precision", "dtype", "collect_seconds")}
    old.setdefault("resumed", []).append({**session, "differences": found})
    write(run_dir, old)
    return found


def read(run_or_file: Path) -> dict[str, Any] | None:
    """A run's (or card's, or export's) provenance; None where it has none (an older run)."""
    path = Path(run_or_file)
    if path.is_dir():
        path = path / FILE_NAME
    if not path.is_file():
        return None
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:  # ValueError: invalid JSON, or bytes that are not UTF-8
        raise NegtrainError(f"{path}: not a readable provenance file ({exc})") from exc
    if not isinstance(record, dict):
        raise NegtrainError(f"{path}: not a provenance file (a JSON {_json_type(record)}, not an object)")
    return record


def _json_type(value: Any) -> str:
    return {list: "list", str: "string", bool: "boolean", int: "number", float: "number", type(None): "null"}.get(type(value), type(value).__name__)


# ---- reading two runs side by side -------------------------------------------------------------


def major(version: str) -> str:
    """The part of a version that may break things: the first number, or the first two for a 0.x
    release (where a minor release may break, as semantic versioning allows)."""
    parts = version.split("+")[0].split(".")
    return ".".join(parts[:2]) if parts[0] == "0" and len(parts) > 1 else parts[0]


def _versions(record: dict[str, Any]) -> dict[str, str]:
    versions = dict(record.get("packages") or {})
    versions["python"] = str(record.get("python", ""))
    return {k: v for k, v in versions.items() if v}


def _hashes(record: dict[str, Any]) -> dict[str, str]:
    return {f["file"]: f["sha256"] for entry in record.get("data") or [] for f in entry.get("files", [])}


def differences(a: dict[str, Any] | None, b: dict[str, Any] | None) -> list[str]:
    """What makes two runs' numbers not comparable as like for like: a data file read by both
    with different bytes, a package in a different major version. One line each."""
    if a is None or b is None:
        missing = "A" if a is None else "B"
        return [] if a is None and b is None else [f"{missing} records no provenance ({FILE_NAME}): data files and versions not compared"]
    lines = []
    ha, hb = _hashes(a), _hashes(b)
    for name in sorted(set(ha) & set(hb)):
        if ha[name] != hb[name]:
            lines.append(f"data file {name} differs: sha256 {ha[name][:12]}… in A, {hb[name][:12]}… in B")
    va, vb = _versions(a), _versions(b)
    for name in sorted(set(va) & set(vb)):
        if major(va[name]) != major(vb[name]):
            lines.append(f"{name} major version differs: {va[name]} in A, {vb[name]} in B")
    return lines


def markdown(record: dict[str, Any] | None, file_table: bool = True) -> list[str]:
    """A "Provenance" section for a report card or a model card (the full record is the JSON file).
    ``file_table``: every data file's bytes and sha256 as a table; off, their count and where they are."""
    if not record:
        return []
    origin = record.get("negtrain") or {}
    code = f"negtrain {origin.get('version')}"
    if origin.get("git_commit"):
        code += f", git {origin['git_commit'][:12]}" + (" with uncommitted changes" if origin.get("git_dirty") else "")
    t = record.get("torch") or {}
    build = f"CUDA {t['cuda']}, cuDNN {t.get('cudnn')}" if t.get("cuda") else "CPU build"
    packages = record.get("packages") or {}
    shown = ", ".join(f"{n} {packages[n]}" for n in ("transformers", "lightning", "peft", "bitsandbytes", "datasets", "torchmetrics", "wandb") if n in packages)
    m = record.get("machine") or {}
    gpus = f"{m.get('gpu_count')} × {m['gpus'][0]}" if m.get("gpus") else "no GPU"
    bf16 = "native bf16" if m.get("cpu_native_bf16") else "no native bf16"
    model = record.get("model") or {}
    revision = model.get("commit") or model.get("content_sha256") or "unknown"
    what = "Hub commit" if model.get("source") == "hub" else "content sha256"
    lines = [
        "## Provenance",
        "",
        f"- code: {code}; Python {record.get('python')}; torch {t.get('version')} ({build}); {shown}",
        f"- machine: {m.get('cpu')} ({m.get('cpu_cores')} cores, {bf16}), {gpus}; precision `{record.get('precision')}`"
        + (f", computed in {record['dtype']}" if record.get("dtype") else "") + f"; seed {record.get('seed')}",
        f"- model: `{model.get('name')}`, {what} `{revision}`"
        + (f"; checkpoint `{model['checkpoint']['file']}` sha256 `{model['checkpoint']['sha256']}`" if model.get("checkpoint") else ""),
    ]
    if (sel := record.get("selection") or {}).get("on_test_split"):
        lines.append(f"- selection: **made on the test split**, the epoch picked by `{sel.get('metric')}` (selection.allow_test_split)")
    for pair in record.get("trained_on_test") or []:
        lines.append(f"- training: **trained on test rows**, `{pair.get('train')}` shares rows with `{pair.get('reported')}`, "
                     "which the run reports (data.allow_test_rows)")
    files = {f["file"]: f for entry in record.get("data") or [] for f in entry.get("files", [])}
    if file_table:
        lines += ["", "| data file | bytes | sha256 |", "|---|---:|---|"]
        lines += [f"| `{f['file']}` | {f['bytes']} | `{f['sha256']}` |" for f in files.values()]
    else:
        lines.append(f"- data: {len(files)} file{'' if len(files) == 1 else 's'}, the bytes and sha256 of each in `{FILE_NAME}`")
    lines += ["", f"Everything, including every package version: `{FILE_NAME}`.", ""]
    return lines
