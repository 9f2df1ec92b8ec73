"""Checking a model folder before anything is scored with it.

``from_pretrained`` is forgiving where a score must not be: a folder without tokenizer files gets
an empty tokenizer that turns every word into ``[UNK]``, and ``ignore_mismatched_sizes`` (which the
NLI family needs for a fresh head) re-initialises *every* weight whose shape disagrees with
``config.json``, the encoder included. Other damage ends in a traceback from deep inside the
loader. So a local folder is checked first, each problem one :class:`ConfigError` naming the file
and what is wrong with it:

- ``config.json``: present, a JSON object with a ``model_type`` the installed transformers knows,
  loadable, with positive sizes (heads dividing the width), of a class the family can load;
- the weights: a weights file present, a safetensors header that reads, and every tensor's shape
  the one ``config.json`` makes (read from the header against the model built on the meta device,
  no weight loaded); only the NLI family's classification head may differ (it is replaced);
- the tokenizer (:func:`load_tokenizer`): loads from the folder, has a vocabulary, and fits the
  model's embedding;
- a LoRA adapter folder (:func:`check_adapter_folder`, :func:`load_adapter`): a JSON config,
  a weights file, and weights that all land on the model's adapter modules.

A Hub id is left to the Hub loader, whose errors already say what is missing.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

from negtrain.config import FAMILY_SECTIONS
from negtrain.core.errors import ConfigError, did_you_mean
from negtrain.models.heads import HEAD_MODULES

#: Weight files from_pretrained reads, in its order of preference.
WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin", "pytorch_model.bin.index.json")
#: Sizes a config may carry; each must be a positive integer where present.
POSITIVE_SIZES = ("vocab_size", "hidden_size", "num_attention_heads", "num_hidden_layers", "intermediate_size",
                  "d_model", "num_heads", "num_layers", "d_ff", "n_embd", "n_head", "n_layer")
#: The files a tokenizer is read from (one suffices): fast, WordPiece, BPE and SentencePiece.
TOKENIZER_FILES = ("tokenizer.json", "vocab.txt", "vocab.json", "merges.txt", "tokenizer.model", "spiece.model",
                   "sentencepiece.bpe.model", "spm.model")
#: Fewer ordinary tokens than this is no language model's vocabulary (a folder without its files).
MIN_VOCABULARY = 32


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return (text.splitlines()[0] if text else type(exc).__name__)[:300]


def _json_object(path: Path, where: str) -> dict:
    """A JSON file that holds an object (a config's settings), or the error that says what it holds."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(f"{where}: {path} is not readable JSON ({_first_line(exc)})") from exc
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: {path} holds a JSON {type(raw).__name__}, not an object of settings")
    return raw


def read_config(folder: Path, where: str):
    """The folder's config, after checking ``config.json`` as the module docstring says."""
    from transformers import AutoConfig
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    path = folder / "config.json"
    if not path.is_file():
        raise ConfigError(f"{where}: {path} is missing; a model folder holds config.json (as save_pretrained writes it)")
    raw = _json_object(path, where)
    model_type = raw.get("model_type")
    if not isinstance(model_type, str) or not model_type:
        raise ConfigError(f"{where}: {path} has no model_type (e.g. \"bert\", \"t5\", \"llama\")")
    if model_type not in CONFIG_MAPPING:
        raise ConfigError(f"{where}: {path}: model_type '{model_type}' is not a model type the installed transformers "
                          f"knows{did_you_mean(model_type, CONFIG_MAPPING.keys())}")
    for name in POSITIVE_SIZES:
        value = raw.get(name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value <= 0):
            raise ConfigError(f"{where}: {path}: {name} is {value!r}; it must be a positive integer")
    heads, width = raw.get("num_attention_heads"), raw.get("hidden_size")
    if isinstance(heads, int) and isinstance(width, int) and width % heads:
        raise ConfigError(f"{where}: {path}: hidden_size {width} is not a multiple of num_attention_heads {heads}")
    try:
        return AutoConfig.from_pretrained(str(folder))
    except Exception as exc:  # noqa: BLE001 - transformers reports a bad setting in many ways
        raise ConfigError(f"{where}: {path} does not load ({type(exc).__name__}: {_first_line(exc)})") from exc


def _auto_class(family: str):
    import transformers

    return getattr(transformers, FAMILY_SECTIONS[family].auto_class)


def check_family(config, family: str, folder: Path, where: str) -> None:
    """The family's auto class must have a class for this config's model type."""
    auto = _auto_class(family)
    if type(config) not in auto._model_mapping:
        fits = [f for f in FAMILY_SECTIONS if type(config) in _auto_class(f)._model_mapping]
        hint = f"; it fits --family/model.family {' or '.join(fits)}" if fits else ""
        raise ConfigError(f"{where}: {folder / 'config.json'}: a '{config.model_type}' model, which family '{family}' "
                          f"cannot load ({FAMILY_SECTIONS[family].auto_class} has no class for it){hint}")


def _weight_shapes(folder: Path, where: str) -> tuple[Path, dict[str, tuple[int, ...]]] | None:
    """(the file, {tensor name: shape}) from the safetensors headers, None for a .bin checkpoint
    (read only by loading it); an error when no weights file is there or a header does not read."""
    found = next((folder / name for name in WEIGHT_FILES if (folder / name).is_file()), None)
    odd = next((folder / name for name in WEIGHT_FILES if found is None and (os.path.lexists(folder / name))), None)
    if odd is not None:  # there, but no file: a symlink to a device, to itself or to nothing, a folder
        try:
            mode = os.stat(odd).st_mode
            what = "a folder" if stat.S_ISDIR(mode) else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "not a regular file"
        except OSError as exc:
            what = f"unreadable ({exc.strerror or exc})"
        raise ConfigError(f"{where}: {odd} is {what}, not a weights file")
    if found is None:
        raise ConfigError(f"{where}: {folder} holds no weights (looked for {', '.join(WEIGHT_FILES)})")
    if not found.name.startswith("model.safetensors"):
        return None
    files = [found]
    if found.name.endswith(".index.json"):
        try:
            weight_map = json.loads(found.read_text(encoding="utf-8"))["weight_map"]
            files = [folder / name for name in sorted(set(weight_map.values()))]
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            raise ConfigError(f"{where}: {found} is not a safetensors index ({_first_line(exc)})") from exc
    from safetensors import safe_open

    shapes: dict[str, tuple[int, ...]] = {}
    for path in files:
        try:
            with safe_open(str(path), framework="pt") as f:
                for key in f.keys():
                    shapes[key] = tuple(f.get_slice(key).get_shape())
        except Exception as exc:  # noqa: BLE001 - safetensors' own error type, and OSError
            raise ConfigError(f"{where}: {path} is truncated or not a safetensors file ({_first_line(exc)})") from exc
    return found, shapes


def check_weights(config, family: str, folder: Path, where: str) -> None:
    """Every stored tensor's shape is the one ``config.json`` makes (see the module docstring)."""
    read = _weight_shapes(folder, where)
    if read is None:
        return
    found, shapes = read
    import torch

    try:
        with torch.device("meta"):
            model = _auto_class(family).from_config(config)
    except Exception as exc:  # noqa: BLE001 - a config transformers accepts but cannot build
        raise ConfigError(f"{where}: {folder / 'config.json'}: cannot build the model it describes "
                          f"({type(exc).__name__}: {_first_line(exc)})") from exc
    own = {name: tuple(t.shape) for name, t in model.state_dict().items()}
    prefix = f"{model.base_model_prefix}."
    wrong = []
    for key, shape in shapes.items():
        name = next((n for n in (key, prefix + key, key.removeprefix(prefix)) if n in own), None)
        if name is None or own[name] == shape:
            continue
        if FAMILY_SECTIONS[family].has_head and name.split(".")[0] in HEAD_MODULES:
            continue  # the classification head is replaced to fit the labels
        wrong.append(f"{key} is {list(shape)} in {found.name}, {list(own[name])} by config.json")
    if wrong:
        raise ConfigError(f"{where}: {folder}: config.json does not describe these weights ({len(wrong)} tensors differ, "
                          f"e.g. {wrong[0]}); was config.json edited or copied from another model?")


def check_model_folder(name: str, family: str, where: str, *, weights: bool = True) -> None:
    """Check a local model folder before it is loaded (see the module docstring); a Hub id passes.
    ``weights`` False: the weights come from elsewhere (a run's checkpoint)."""
    folder = Path(name).expanduser()
    if not folder.exists():
        return  # a Hub id (or a missing folder, which the loader reports with where it looked)
    if not folder.is_dir():
        raise ConfigError(f"{where}: {folder} is a file, not a model folder")
    config = read_config(folder, where)
    check_family(config, family, folder, where)
    if weights:
        check_weights(config, family, folder, where)


def load_lm_tokenizer(path: str, model: str):
    """A language model's tokenizer, as generation and scoring need it: :func:`load_tokenizer`,
    refused without an EOS token (a response could never end), its EOS token padding where it has
    no pad token. The Lightning LM families and the in-process backend both load through it."""
    tokenizer = load_tokenizer(path, "model")
    if tokenizer.eos_token_id is None:
        raise ConfigError(f"model '{model}': the tokenizer has no EOS token")
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def load_tokenizer(name: str, where: str, vocab_size: int | None = None):
    """``AutoTokenizer.from_pretrained(name)``, or one error naming the folder's tokenizer files:
    never the near-empty tokenizer transformers falls back to when they are missing."""
    from transformers import AutoTokenizer

    folder = Path(name).expanduser()
    if folder.is_dir() and not any((folder / f).is_file() for f in TOKENIZER_FILES):
        raise ConfigError(f"{where}: {name} has no tokenizer files (looked for {', '.join(TOKENIZER_FILES)}); save the "
                          "tokenizer into the folder (tokenizer.save_pretrained) or copy them from the base model")
    try:
        tokenizer = AutoTokenizer.from_pretrained(name)
    except Exception as exc:  # noqa: BLE001 - tokenizers, json and sentencepiece each raise their own
        files = sorted(p.name for p in folder.glob("*token*")) + sorted(p.name for p in folder.glob("*vocab*")) if folder.is_dir() else []
        named = f" ({', '.join(files)})" if files else ""
        raise ConfigError(f"{where}: the tokenizer in {name}{named} does not load ({type(exc).__name__}: {_first_line(exc)})") from exc
    special = set(tokenizer.all_special_tokens)
    ordinary = sum(1 for token in tokenizer.get_vocab() if token not in special)
    if ordinary < MIN_VOCABULARY:
        raise ConfigError(
            f"{where}: {name} has no usable tokenizer: {ordinary} ordinary tokens (its tokenizer files, e.g. tokenizer.json or "
            "vocab.txt, are missing or empty); save the tokenizer into the folder (tokenizer.save_pretrained)"
        )
    if vocab_size is not None and len(tokenizer) > vocab_size:
        raise ConfigError(f"{where}: {name}: the tokenizer has {len(tokenizer)} tokens but config.json's vocab_size is "
                          f"{vocab_size}: ids past it have no embedding")
    return tokenizer


ADAPTER_WEIGHTS = ("adapter_model.safetensors", "adapter_model.bin")


def check_adapter_folder(path: str, where: str = "adapter.path") -> None:
    """A LoRA folder: ``adapter_config.json`` a JSON object naming its type, and a weights file."""
    folder = Path(path).expanduser()
    config = folder / "adapter_config.json"
    if not config.is_file():
        raise ConfigError(f"{where}: {path} holds no adapter_config.json (a peft adapter folder)")
    if not isinstance(_json_object(config, where).get("peft_type"), str):
        raise ConfigError(f"{where}: {config} is not a peft adapter config (no peft_type)")
    if not any((folder / name).is_file() for name in ADAPTER_WEIGHTS):
        raise ConfigError(f"{where}: {path} holds no adapter weights (looked for {', '.join(ADAPTER_WEIGHTS)})")


def load_adapter(model, path: str, where: str = "adapter.path"):
    """``PeftModel.from_pretrained`` of a checked folder, then a check that every stored adapter
    weight landed on one of the model's adapter modules (peft loads weights for other modules,
    or of another width, with a warning or a traceback)."""
    from peft import PeftModel, set_peft_model_state_dict
    from peft.utils import load_peft_weights

    check_adapter_folder(path, where)
    try:
        peft_model = PeftModel.from_pretrained(model, path, is_trainable=True)
        result = set_peft_model_state_dict(peft_model, load_peft_weights(path))
    except Exception as exc:  # noqa: BLE001 - peft: no target module found, size mismatch, bad config
        raise ConfigError(f"{where}: the adapter in {path} does not fit the model ({type(exc).__name__}: "
                          f"{_first_line(exc)}); was it trained on another architecture or width?") from exc
    unused = list(result.unexpected_keys)  # type: ignore[attr-defined]  # peft annotates torch's load_state_dict result as a bare namedtuple
    if unused:
        raise ConfigError(f"{where}: {len(unused)} adapter weights in {path} fit no module of the model (e.g. {unused[0]}); "
                          "its target_modules do not match the weights, or it was trained on another architecture")
    return peft_model
