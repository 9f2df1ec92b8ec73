"""``sweep``: write a recipe's W&B sweep configuration, create the sweep when online, print the agent command."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--recipe", required=True, help="a recipe with a sweep: section, by name or path")
    p.add_argument("--out", type=Path, default=None, help="where to write the sweep YAML (default: checkpoints/sweeps/<recipe>.yaml)")
    p.add_argument("--no-create", action="store_true", help="only write the configuration, even when W&B is online")
    p.add_argument("--local", type=int, default=None, metavar="N",
                   help="run N trials here, one after another, without W&B, and write a leaderboard")
    p.add_argument("--seed", type=int, default=None, help="--local: the seed trials are drawn from (default: the recipe's seed)")
    p.add_argument("--output-dir", type=Path, default=None,
                   help="--local: the parent directory of the trials (default: checkpoints/sweeps/<recipe>-local-<timestamp>)")


def run(args: argparse.Namespace, extra: list[str]) -> int:
    import yaml

    from negtrain.config import load_yaml
    from negtrain.core.errors import NegtrainError
    from negtrain.io.atomic import write_text
    from negtrain.core.paths import check_output_dir
    from negtrain.recipes import apply_overrides, load_recipe, parse_overrides
    from negtrain.runs.sweeps import agent_command, sweep_config
    from negtrain.core.wandb_mode import wandb_mode

    if args.local is None and (args.seed is not None or args.output_dir is not None):
        raise NegtrainError("--seed and --output-dir go with --local N (a W&B sweep draws its own trials)")
    if args.local is not None and args.local < 1:
        raise NegtrainError(f"--local {args.local}: give the number of trials, at least 1")
    if args.local is not None:
        from negtrain.runs.sweeps import MAX_LOCAL_TRIALS

        if args.local > MAX_LOCAL_TRIALS:
            raise NegtrainError(f"--local {args.local}: at most {MAX_LOCAL_TRIALS} trials here (for more, use W&B agents on several machines)")
    overrides = parse_overrides(extra)
    loaded = load_recipe(args.recipe, overrides)
    out = args.out or Path("checkpoints") / "sweeps" / f"{loaded.name}.yaml"
    if out.is_dir():
        raise NegtrainError(f"--out {out}: is a directory; name the YAML file to write")
    check_output_dir(out.parent, "--out")  # before the data is read for the metric names
    raw = apply_overrides(load_yaml(loaded.path), overrides)
    config = sweep_config(loaded, args.recipe, extra, raw=raw)  # validates every swept value and the metric
    if args.local is not None:
        from negtrain.runs.local_sweep import run_local_sweep
        from negtrain.training.checks import check_cpu_devices

        try:
            check_cpu_devices(loaded.recipe.trainer)  # every trial would fail on it: say so once, now
        except NegtrainError as exc:
            raise NegtrainError(f"{loaded.path}: {exc}") from exc
        from negtrain.runs.sweeps import SweepMetric
        from negtrain.core.third_party_logs import quiet_training_logs

        quiet_training_logs()
        metric = SweepMetric(config["metric"]["name"], config["metric"]["goal"])
        run_local_sweep(loaded, args.recipe, extra, overrides, metric, args.local, seed=args.seed, parent=args.output_dir)
        return 0
    write_text(out, yaml.safe_dump(config, sort_keys=False))
    print(f"sweep configuration: {out}")
    print(f"  method {config['method']}, metric {config['metric']['name']} ({config['metric']['goal']}), "
          f"parameters: {', '.join(config['parameters'])}")
    mode = wandb_mode()
    if mode == "online" and not args.no_create:
        import wandb

        try:
            sweep_id = wandb.sweep(config, project=config.get("project"), entity=config.get("entity"))
        except Exception as exc:  # network or auth: the configuration is written, say how to go on
            raise NegtrainError(f"creating the W&B sweep failed ({exc}); create it later with: wandb sweep {out}") from exc
        print(f"created sweep {sweep_id}; start an agent (any number, on any machine) with:")
        print(f"  {agent_command(config, sweep_id)}")
        return 0
    reason = "--no-create" if args.no_create else ("WANDB_MODE=disabled" if mode == "disabled" else "W&B is offline (no API key, or WANDB_MODE=offline)")
    print(f"not created ({reason}). Create it where W&B is reachable with:")
    print(f"  wandb sweep {out}")
    print("then start agents with the sweep id it prints:")
    print(f"  {agent_command(config, '<SWEEP_ID>')}")
    return 0
