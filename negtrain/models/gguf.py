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
transformers said. And only a file that fills its architecture: every tensor of the model its header
names (``general.architecture``) must be read from the file (or be tied to one that is); a file whose
tensors are another architecture's would leave them random, and is refused. The folder records the
digest of every file it was written with, checked before each use (:mod:`negtrain.models.gguf_cache`:
a changed or foreign folder is left as it is and the file converted again beside it; partial
conversions of killed runs are removed). :func:`export_gguf` writes the same folder anywhere
(``negtrain gguf-export``).
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
from negtrain.models.gguf_cache import (ABSENT, PARTIAL_MARKER, SOURCE_FILE, candidates, converted_digests, mark_partial, problem,
                                        remove_stale_partials)

SUFFIX = ".gguf"
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
        # With output_loading_info, a (model, what loading found) pair, which the stubs do not know.
        pair: Any = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=dtype, output_loading_info=True)
        loaded, info = pair
    except Exception as exc:  # noqa: BLE001 - an architecture transformers cannot read from GGUF
        raise ConfigError(f"model '{path}': transformers cannot load this GGUF file ({type(exc).__name__}: "
                          f"{' '.join(str(exc).split())[:300]})") from exc
    # What transformers filled with fresh random values because the file has no tensor for it: a
    # model that is not the file's. A tied weight, filled from its twin, is not missing; a buffer
    # (rotary frequencies, position ids) is derived from the config, not read.
    parameters = dict(loaded.named_parameters(remove_duplicate=False))
    missing = sorted(k for k in info.get("missing_keys") or () if k in parameters)
    if missing:
        total = len(parameters)
        raise ConfigError(f"model '{path}': its header names the architecture '{loaded.config.model_type}' "
                          f"({type(loaded).__name__}), but {len(missing)} of that model's {total} tensors are not in the file "
                          f"(e.g. {missing[0]}); they would be random weights, so the file is refused")
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
    removed = remove_stale_partials(target.parent)
    if removed:
        print(f"{target.parent}: removed {len(removed)} partial conversion(s) left by runs that were killed "
              f"({', '.join(removed)})", file=sys.stderr, flush=True)
    tmp = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}."))
    try:
        mark_partial(tmp)  # a kill from here on leaves a folder the next conversion knows it may remove
        fresh.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        record["converted"] = converted_digests(tmp)
        (tmp / SOURCE_FILE).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
        (tmp / PARTIAL_MARKER).unlink()
        os.replace(tmp, target)
    except BaseException as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        if not isinstance(exc, OSError) or problem(target, sha, None) is not None:  # not another process's finished copy
            raise
    return record


def _transformers_version() -> str:
    import transformers

    return transformers.__version__


def loadable_folder(path: str | Path) -> str:
    """The model folder a GGUF file is read from: its dequantized copy in the cache, checked
    against the digests recorded when it was written (:func:`negtrain.models.gguf_cache.problem`),
    or written now (said on stderr, with how long it is kept, and why when a folder there was not
    usable: that one is left as it is, and the file converted into the next free name)."""
    path = Path(path).expanduser().absolute()
    sha = file_sha256(path, cache_dir())
    unusable: list[str] = []
    for folder in candidates(_first_folder(sha)):
        why = problem(folder, sha, cache_dir())
        if why is None:
            return str(folder)
        if why == ABSENT:
            said = (f"; {'; '.join(unusable)}: left as it is, and the file converted again into a fresh folder" if unusable else "")
            print(f"{path.name}: dequantizing this GGUF file into a model folder through transformers' GGUF loader, "
                  f"once; later runs read {folder}{said}", file=sys.stderr, flush=True)
            write_folder(path, folder)
            return str(folder)
        unusable.append(f"{folder} {why}")
    raise ConfigError(f"model '{path}': none of the {len(unusable)} folders it is converted into holds its checked conversion "
                      f"({unusable[0]}; ...); remove the ones you do not need and run again")


def _first_folder(sha: str) -> Path:
    return cache_dir() / "gguf" / f"{sha[:24]}-transformers-{_transformers_version()}"


def cached_folder(path: str | Path) -> Path:
    """Where the file's dequantized folder is kept: the first checked one, else where it would be
    written."""
    sha = file_sha256(Path(path).expanduser().absolute(), cache_dir())
    for folder in candidates(_first_folder(sha)):
        if problem(folder, sha, cache_dir()) in (None, ABSENT):
            return folder
    return _first_folder(sha)


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
    if not source.exists():
        raise ConfigError(f"{path}: no such file (looked for {source.absolute()})")
    if not is_gguf(source):
        raise ConfigError(f"{path}: not a .gguf file")
    if target.exists():
        raise ConfigError(f"{out} exists; name a new folder (nothing is written over)")
    return write_folder(source.absolute(), target.absolute())
