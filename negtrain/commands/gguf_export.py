"""``gguf-export FILE.gguf OUT``: a GGUF file as a model folder that any ``from_pretrained`` reads
(to train from, or to serve with ``transformers serve``): dequantized through transformers' GGUF
loader into a fresh model of the same configuration, with the file's tokenizer and chat template
(:func:`negtrain.models.gguf.export_gguf`). ``evaluate --model FILE.gguf`` needs no export."""

from __future__ import annotations

import argparse
from pathlib import Path

from negtrain.core.errors import NegtrainError


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", metavar="FILE", help="the .gguf file, or pkg:<package>/<file>.gguf")
    p.add_argument("out", type=Path, metavar="OUT", help="the folder to write (must not exist)")


def run(args: argparse.Namespace, extra: list[str]) -> int:
    if extra:
        raise NegtrainError(f"unexpected arguments: {' '.join(extra)}")
    from negtrain.core.paths import check_output_dir
    from negtrain.models.gguf import export_gguf
    from negtrain.models.sources import model_source

    check_output_dir(args.out, "OUT")
    record = export_gguf(model_source(args.file), args.out)
    print(f"{args.out}: {record['file']} ({record['quantization']}), dequantized to {record['dtype']}; "
          f"evaluate or train it with --model {args.out}")
    return 0
