"""Reading what an offline W&B run wrote to disk, without the W&B server.

A ``run-*.wandb`` file is a LevelDB-style log (W&B's "datastore"): a 7-byte file header
(":W&B", magic 0xBEE1, version 0), then 32 KiB blocks of chunks, each with a 7-byte header
(crc32, length, type: 1 full, 2 first, 3 middle, 4 last) holding serialized ``Record`` protobufs.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

from wandb.proto import wandb_internal_pb2 as pb

BLOCK = 32768
HEADER = 7


def records(path: Path) -> list[pb.Record]:
    data = path.read_bytes()
    ident, magic, version = struct.unpack("<4sHB", data[:HEADER])
    assert ident == b":W&B" and magic == 0xBEE1, f"{path} is not a W&B datastore file"
    out, pending, pos = [], b"", HEADER
    while pos + HEADER <= len(data):
        left = BLOCK - pos % BLOCK
        if left < HEADER:  # block trailer padding
            pos += left
            continue
        _crc, length, kind = struct.unpack("<IHB", data[pos : pos + HEADER])
        if length == 0 and kind == 0:
            pos += left  # zero padding up to the next block
            continue
        chunk = data[pos + HEADER : pos + HEADER + length]
        pos += HEADER + length
        if kind == 1:
            pending = chunk
        elif kind == 2:
            pending = chunk
            continue
        elif kind == 3:
            pending += chunk
            continue
        elif kind == 4:
            pending += chunk
        record = pb.Record()
        record.ParseFromString(pending)
        out.append(record)
        pending = b""
    return out


def _key(item) -> str:
    return item.key or "/".join(item.nested_key)


def summarize(run_dir: Path) -> dict:
    """Config, history rows, summary and run fields of the one offline run under ``run_dir/wandb``."""
    files = sorted((run_dir / "wandb").glob("offline-run-*/run-*.wandb"))
    assert len(files) == 1, f"expected one offline W&B run, found {files}"
    config: dict = {}
    history: list[dict] = []
    summary: dict = {}
    run: dict = {}
    for r in records(files[0]):
        kind = r.WhichOneof("record_type")
        if kind == "run":
            run = {"name": r.run.display_name, "project": r.run.project, "tags": list(r.run.tags)}
            for item in r.run.config.update:
                config[_key(item)] = json.loads(item.value_json)
        elif kind == "config":
            for item in r.config.update:
                config[_key(item)] = json.loads(item.value_json)
        elif kind == "history":
            history.append({_key(i): json.loads(i.value_json) for i in r.history.item})
        elif kind == "summary":
            for item in r.summary.update:
                summary[_key(item)] = json.loads(item.value_json)
    return {"config": config, "history": history, "summary": summary, "run": run}
