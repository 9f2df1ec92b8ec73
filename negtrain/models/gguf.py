"""A GGUF file (llama.cpp's format: weights, usually quantized, with the tokenizer and chat template
in one file) as a model: dequantized once into a model folder that every loader reads.

transformers reads a GGUF file (``from_pretrained(folder, gguf_file=name)``, through the ``gguf``
package) but dequantizes all of it on every load, and refuses ``save_pretrained`` of the model it
loaded. So the file is loaded once through that support, its dequantized weights are put into a
fresh model of the same configuration, and that model is saved with the tokenizer and chat template
read from the same file, into ``<cache>/gguf/<digest>/`` (the cache of
:func:`negtrain.benchmarks.files.cache_dir`, keyed by the file's SHA-256 and the transformers
version that converted it). Later loads read that folder, in seconds. The weights keep the
checkpoint's own float type: the type of the file's unquantized tensors (F32 for the usual
quantizations, F16 or BF16 where the file has those), never a lower one.

The folder also holds ``gguf_source.json``: the file's name, SHA-256 and quantization (the file
type llama.cpp wrote, e.g. ``Q4_1``), which provenance, the response cache's key and the card read.
Only a file the loader can read is converted: another architecture is one error naming what
transformers said. :func:`export_gguf` writes the same folder anywhere (``negtrain gguf-export``).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from negtrain.benchmarks.files import cache_dir
from negtrain.core.errors import ConfigError
from negtrain.io.digests import file_sha256

SUFFIX = ".gguf"
#: What the converted folder records about the file it came from.
SOURCE_FILE = "gguf_source.json"
#: GGUF tensor types that are plain floats, as torch dtype names; every other type is quantized.
FLOAT_TYPES = {"F32": "float32", "BF16": "bfloat16", "F16": "float16"}


def is_gguf(path: str | Path) -> bool:
    return str(path).lower().endswith(SUFFIX) and Path(path).expanduser().is_file()


def _metadata(path: Path) -> dict[str, Any]:
    """The file's quantization and float type, read from its header and tensor table."""
    try:
        from gguf import GGUFReader
        from gguf.constants import LlamaFileType
    except ImportError as exc:
        raise ConfigError(f"model '{path}': a GGUF file needs the gguf package: pip install 'negtrain[gguf]'") from exc
    try:
        reader = GGUFReader(str(path))
    except Exception as exc:  # noqa: BLE001 - a truncated or foreign file fails in many ways
        raise ConfigError(f"model '{path}': not a readable GGUF file ({type(exc).__name__}: {str(exc)[:200]})") from exc
    types = [t.tensor_type.name for t in reader.tensors]
    field = reader.fields.get("general.file_type")
    quantization = None
    if field is not None and field.data:
        try:
            quantization = LlamaFileType(int(field.parts[field.data[0]][0])).name.removeprefix("MOSTLY_")
        except ValueError:
            quantization = None
    quantized = [t for t in types if t not in FLOAT_TYPES]
    if quantization is None:  # no file type written: the most common quantized tensor type
        quantization = max(set(quantized), key=quantized.count) if quantized else "none"
    floats = [FLOAT_TYPES[t] for t in FLOAT_TYPES if t in types]
    return {"quantization": quantization, "dtype": floats[0] if floats else "float32",
            "tensors": {t: types.count(t) for t in sorted(set(types))}}


def write_folder(path: Path, target: Path) -> dict[str, Any]:
    """Load ``path`` through transformers' GGUF support and save it, dequantized, into ``target``
    (which must not exist): a fresh model of the same config with the loaded weights, the tokenizer
    and chat template of the file, and ``gguf_source.json``. Returns what that file records."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    meta = _metadata(path)
    sha = file_sha256(path, cache_dir())
    folder, name = str(path.parent), path.name
    dtype = getattr(torch, meta["dtype"])
    try:
        tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
        loaded = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=dtype)
    except Exception as exc:  # noqa: BLE001 - an architecture transformers cannot read from GGUF
        raise ConfigError(f"model '{path}': transformers cannot load this GGUF file ({type(exc).__name__}: "
                          f"{' '.join(str(exc).split())[:300]})") from exc
    config = loaded.config
    for attribute in ("quantization_config", "_pre_quantization_dtype"):
        if hasattr(config, attribute):
            delattr(config, attribute)
    config.dtype = dtype
    with torch.device("meta"):
        fresh = AutoModelForCausalLM.from_config(config, dtype=dtype)
    fresh.load_state_dict(loaded.state_dict(), assign=True)
    fresh.tie_weights()
    record = {"file": path.name, "sha256": sha, **meta, "transformers": _transformers_version()}
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}."))
    try:
        fresh.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        (tmp / SOURCE_FILE).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
        os.replace(tmp, target)
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)
        if not (target / SOURCE_FILE).is_file():  # not another process's finished copy
            raise
    return record


def _transformers_version() -> str:
    import transformers

    return transformers.__version__


def loadable_folder(path: str | Path) -> str:
    """The model folder a GGUF file is read from: its dequantized copy in the cache, written on
    first use (said on stderr, with how long it is kept)."""
    path = Path(path).expanduser().absolute()
    target = cached_folder(path)
    if not (target / SOURCE_FILE).is_file():
        print(f"{path.name}: dequantizing this GGUF file into a model folder through transformers' GGUF loader, "
              f"once; later runs read {target}", file=sys.stderr, flush=True)
        write_folder(path, target)
    return str(target)


def cached_folder(path: str | Path) -> Path:
    """Where the file's dequantized folder is kept (written or not)."""
    sha = file_sha256(Path(path).expanduser().absolute(), cache_dir())
    return cache_dir() / "gguf" / f"{sha[:24]}-transformers-{_transformers_version()}"


def source_record(folder: str | Path) -> dict[str, Any] | None:
    """What ``gguf_source.json`` of a converted folder says (None for any other folder)."""
    try:
        raw = json.loads((Path(folder) / SOURCE_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return raw if isinstance(raw, dict) else None


def export_gguf(path: str | Path, out: str | Path) -> dict[str, Any]:
    """``negtrain gguf-export FILE.gguf OUT``: the dequantized folder written to ``out``."""
    source, target = Path(path).expanduser(), Path(out).expanduser()
    if not is_gguf(source):
        raise ConfigError(f"{path}: not a .gguf file")
    if target.exists():
        raise ConfigError(f"{out} exists; name a new folder (nothing is written over)")
    return write_folder(source.absolute(), target.absolute())
