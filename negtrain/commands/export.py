"""``export`` and ``push``: a run's checkpoint as a from_pretrained folder, and its upload to the Hub."""

from __future__ import annotations

import argparse
from pathlib import Path

from negtrain.core.errors import NegtrainError


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--run", type=Path, required=True, help="a run directory written by `negtrain fit`")
    p.add_argument("--checkpoint", choices=("best", "last"), default="best", help="which checkpoint (default: best)")
    p.add_argument("--merge-adapter", action="store_true", help="LoRA runs: merge the adapter into the base weights instead of exporting the adapter alone")
    p.add_argument("--license", default=None, help="the model card's license (a Hub license id such as apache-2.0); default: the base model's, else 'other'")


def add_export_arguments(p: argparse.ArgumentParser) -> None:
    _common(p)
    p.add_argument("--out", type=Path, required=True, help="the folder to write (must not exist, unless --overwrite)")
    p.add_argument("--overwrite", action="store_true", help="replace --out if it exists")


def add_push_arguments(p: argparse.ArgumentParser) -> None:
    _common(p)
    p.add_argument("--repo-id", required=True, help="the Hub model repository, OWNER/NAME (created if needed)")
    p.add_argument("--private", action="store_true", help="create the repository as private")
    p.add_argument("--revision", default=None, help="branch to upload to (created if needed; default: main)")


def _no_extra(extra: list[str]) -> None:
    if extra:
        raise NegtrainError(f"unexpected arguments: {' '.join(extra)}")


def run_export(args: argparse.Namespace, extra: list[str]) -> int:
    from negtrain.core.third_party_logs import quiet_model_logs
    from negtrain.release.export import export, preflight

    _no_extra(extra)
    preflight(args.run, args.out, args.checkpoint, args.overwrite)  # every refusal, before torch loads
    quiet_model_logs()
    done = export(args.run, args.out, checkpoint=args.checkpoint, merge_adapter=args.merge_adapter, overwrite=args.overwrite, license=args.license)
    kind = "adapter" if done.adapter else "merged model" if done.merged else "model"
    print(f"exported {kind} from {done.checkpoint.name} (epoch {done.epoch}) to {done.path}")
    return 0


def run_push(args: argparse.Namespace, extra: list[str]) -> int:
    from negtrain.core.third_party_logs import quiet_model_logs
    from negtrain.release.push import preflight, push

    _no_extra(extra)
    api = preflight(args.run, args.repo_id, args.checkpoint)  # every refusal, before torch loads
    quiet_model_logs()
    url = push(args.run, args.repo_id, private=args.private, revision=args.revision,
               checkpoint=args.checkpoint, merge_adapter=args.merge_adapter, license=args.license, api=api)
    print(f"pushed to {url}")
    return 0
