"""A cue-masking corpus read as a stream (``objective.cue_masking.corpus.streaming: true``), for
corpora larger than memory.

The text stays on disk. Two parts:

- **The index** (:func:`index_corpus`): one pass over the text files, no tokenization. It keeps,
  per physical line, one bit: is it a training sentence (non-empty, with a negation cue unless
  ``keep: all``, and not held out); the byte offset of every ``shuffle_buffer``-th training line
  (where each shuffle window starts); and the first ``held_out`` held-out sentences (the bounded
  eval set). For 10 million lines that is about 1.2 MB of bits. It is cached under the cache
  folder, keyed by the files' paths, sizes, modification times and content digests (below) and
  the settings, so a warm start does not read the text. The cached index holds its key and an
  xxh3 hash of its contents; one that does not match, or cannot be read, is rebuilt.
- **The stream** (:class:`CorpusStream`, an IterableDataset, and :class:`StreamLoader`): every
  epoch, the training lines in file order, shuffled inside consecutive windows of
  ``shuffle_buffer`` lines (a seeded permutation per (seed, epoch, window)), cut into global
  batches of ``batch_size``, tokenized on the fly, batch by batch.

Held out by hash, not by position: a line is held out when a keyed hash of its text falls below
``held_out_rate``. The held-out set is therefore the same whatever the seed, the number of ranks or
workers, and wherever a run resumes, and a duplicate of a held-out line is held out too (no
held-out sentence is ever trained on). The eval set is the first ``held_out`` of them in file
order (a cap, so evaluating stays bounded for any corpus size).

Dealing: global batch ``g`` goes to rank ``g % world``, as step ``g // world`` (the map-style
sampler's rule, :mod:`negtrain.data.sampler`); a rank's batches go round-robin to its dataloader
workers, and the DataLoader hands them back in that same round-robin order, so the batches are the
same for any ``data.num_workers``. Each worker reads the whole stream (cheap: a bit test per line)
but tokenizes only its own batches. When the last step has fewer batches than ranks, a rank left
without one gets a padding batch (a repeat of that step's first batch, marked not real), so every
rank steps the same number of times, as with the map-style sampler.

Content digest: a file's size and modification time do not prove its content (a file rewritten
and its mtime set back keeps both), so each file also has a digest: xxh3 of the whole file up to
64 MiB, above that of 64 blocks of 64 KiB spread evenly over it plus its first and last block (4 MiB
read, whatever the size). It is part of the index's key and of the corpus fingerprint a checkpoint
records, so a resume over a corpus rewritten at the same size and mtime is refused. (A change
confined to bytes between the sampled blocks of a file over 64 MiB is not seen.)

Resume: the loader's position (epoch, batches trained, and from them the training lines consumed
and the byte offset of the window they are in) goes into checkpoints through Lightning's stateful
loader protocol, like :class:`negtrain.data.resumable.ResumableLoader`. A resumed epoch seeks to
that window's byte offset, re-reads and re-shuffles only that window, and continues with the next
batch. Random draws in the batch transform are seeded from (seed, epoch, line positions).

Shuffle caveat: a line moves at most one window away from its place in the file, and lines in
windows far apart are never in one batch. A corpus sorted by topic or source should be shuffled
once on disk (``shuf``) before training.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import stat
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import xxhash
from torch.utils.data import DataLoader, IterableDataset, Sampler, get_worker_info

from negtrain.benchmarks.files import cache_dir
from negtrain.data.sampler import kept_batches
from negtrain.core.errors import DataError
from negtrain.negation.cues import CueDetector

INDEX_VERSION = "2"
#: The hash key that decides which lines are held out. Fixed (not the seed): every seed and every
#: run over the same corpus holds out the same sentences.
HELD_OUT_KEY = b"negtrain/cue-corpus/held-out/v1"
_BOM = b"\xef\xbb\xbf"


def held_out_fraction(text: str) -> float:
    """Where ``text`` falls in [0, 1): held out when below ``held_out_rate``."""
    digest = hashlib.blake2b(text.encode("utf-8"), digest_size=8, key=HELD_OUT_KEY).digest()
    return int.from_bytes(digest, "little") / 2.0**64


@dataclass
class CorpusIndex:
    """What one pass over the corpus learned (see the module docstring)."""

    files: list[str]
    stamps: list[list]  # per file: size, mtime_ns and content digest when indexed
    window: int  # training lines per shuffle window
    n_lines: int  # physical lines
    n_kept: int  # non-empty lines that pass ``keep`` (cue sentences, or all)
    n_train: int
    n_held_out: int  # every held-out line (the eval set keeps at most ``held_out`` of them)
    file_first_line: list[int]  # global physical line number of each file's first line
    train_bits: np.ndarray  # packed (little bit order), one bit per physical line
    windows: np.ndarray  # (k, 3) int64: file, byte offset, global line of window k's first line
    held_out: list[str]

    @property
    def fingerprint(self) -> str:
        """Names this corpus and its indexing, for checkpoints (a changed file is another corpus)."""
        return hashlib.sha256(json.dumps([self.files, self.stamps, self.window, self.n_train]).encode()).hexdigest()[:16]

    def is_train(self, line: int) -> bool:
        return bool((self.train_bits[line >> 3] >> (line & 7)) & 1)


#: Files up to this size are hashed whole; larger ones in SAMPLE_BLOCKS blocks of SAMPLE_SIZE bytes.
WHOLE_DIGEST = 64 << 20
SAMPLE_BLOCKS, SAMPLE_SIZE = 64, 64 << 10


def content_digest(path: Path, size: int) -> str:
    """xxh3 of the file, whole up to WHOLE_DIGEST bytes, else of evenly spread sampled blocks (see
    the module docstring)."""
    h = xxhash.xxh3_64()
    with open(path, "rb") as f:
        if size <= WHOLE_DIGEST:
            while block := f.read(1 << 22):
                h.update(block)
        else:
            step = (size - SAMPLE_SIZE) / (SAMPLE_BLOCKS + 1)
            for k in range(SAMPLE_BLOCKS + 2):  # the first block, 64 spread ones, the last
                f.seek(int(k * step))
                h.update(f.read(SAMPLE_SIZE))
    return h.hexdigest()


def _stamps(files: Sequence[Path]) -> list[list]:
    out = []
    for p in files:
        st = p.stat()
        out.append([st.st_size, st.st_mtime_ns, content_digest(p, st.st_size)])
    return out


def resolve_files(text_files: Sequence[str]) -> list[Path]:
    """The corpus files, each checked to exist (a missing one says where it was looked for)."""
    paths = []
    for name in text_files:
        p = Path(name).expanduser()
        where = p if p.is_absolute() else Path.cwd() / p
        if not p.is_file():
            what = "is a folder, not a text file" if p.is_dir() else _not_a_file(p)
            raise DataError(
                f"objective.cue_masking.corpus.text_files: {name}: {what} (looked for {where.resolve()}; "
                "a relative path is read from the working directory)"
            )
        paths.append(p.resolve())
    return paths


def _not_a_file(p: Path) -> str:
    """Why ``p``, which is not a regular file or folder, cannot be a corpus."""
    try:
        mode = p.stat().st_mode
    except OSError:
        return "not found"
    kinds = [(stat.S_ISFIFO, "a named pipe (FIFO)"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
             (stat.S_ISSOCK, "a socket")]
    kind = next((name for test, name in kinds if test(mode)), "not a regular file")
    # A pipe or device has no size or position to index and seek in: the stream re-reads by offset.
    return f"is {kind}, not a regular text file (a streamed corpus is indexed and re-read by byte offset)"


def _decode(raw: bytes, path: Path, number: int) -> str:
    try:
        return raw.decode("utf-8").strip()
    except UnicodeDecodeError as exc:
        raise DataError(f"{path}:{number}: not UTF-8 ({exc.reason} at byte {exc.start} of the line)") from exc


def _build_index(files: list[Path], detector: CueDetector, keep: str, rate: float, cap: int, window: int) -> CorpusIndex:
    bits = bytearray()
    windows: list[tuple[int, int, int]] = []
    held: list[str] = []
    n_lines = n_kept = n_train = n_held = 0
    first_lines = []
    for f, path in enumerate(files):
        first_lines.append(n_lines)
        offset = 0
        with open(path, "rb") as handle:
            for number, raw in enumerate(handle, start=1):
                start = offset
                offset += len(raw)
                if number == 1 and raw.startswith(_BOM):
                    raw = raw[len(_BOM):]
                text = _decode(raw, path, number)
                line, n_lines = n_lines, n_lines + 1
                if line >> 3 >= len(bits):
                    bits.append(0)
                if not text or (keep == "cue_sentences" and not detector.has_cue(text)):
                    continue
                n_kept += 1
                if rate > 0 and held_out_fraction(text) < rate:
                    n_held += 1
                    if len(held) < cap:
                        held.append(text)
                    continue
                if n_train % window == 0:
                    windows.append((f, start, line))
                n_train += 1
                bits[line >> 3] |= 1 << (line & 7)
    return CorpusIndex(
        files=[str(p) for p in files], stamps=_stamps(files), window=window, n_lines=n_lines, n_kept=n_kept,
        n_train=n_train, n_held_out=n_held, file_first_line=first_lines,
        train_bits=np.frombuffer(bytes(bits), dtype=np.uint8).copy(),
        windows=np.asarray(windows, dtype=np.int64).reshape(-1, 3), held_out=held,
    )


def index_corpus(
    text_files: Sequence[str], detector: CueDetector, *, keep: str, held_out_rate: float, held_out: int, window: int
) -> CorpusIndex:
    """The corpus's index, from the cache when the files and settings are unchanged; see the module docstring."""
    files = resolve_files(text_files)
    stamps = _stamps(files)
    key = hashlib.sha256(
        json.dumps([INDEX_VERSION, [str(p) for p in files], stamps, detector.signature(), keep, held_out_rate, held_out, window]).encode()
    ).hexdigest()[:24]
    folder = cache_dir() / "corpus_stream"
    path = folder / f"{key}.npz"
    if (index := _load_index(path, key)) is not None:
        return index
    index = _build_index(files, detector, keep, held_out_rate, held_out, window)
    if index.stamps != stamps:
        raise DataError(f"the corpus files changed while they were being indexed ({', '.join(index.files)}); run again")
    meta = {k: getattr(index, k) for k in _META}
    with contextlib.suppress(OSError):  # a read-only cache only costs the indexing
        folder.mkdir(parents=True, exist_ok=True)
        part = folder / f".{key}.{os.getpid()}.part.npz"
        np.savez(part, meta=np.array(json.dumps(meta)), train_bits=index.train_bits, windows=index.windows,
                 seal=np.array(_index_seal(key, meta, index.train_bits, index.windows)))
        os.replace(part, path)  # atomic: a concurrent reader sees the whole index or none
    return index


_META = ("files", "stamps", "window", "n_lines", "n_kept", "n_train", "n_held_out", "file_first_line", "held_out")


def _index_seal(key: str, meta: dict, bits: np.ndarray, windows: np.ndarray) -> str:
    h = xxhash.xxh3_128(key.encode())
    h.update(json.dumps(meta, sort_keys=True).encode())
    h.update(bits.tobytes())
    h.update(np.ascontiguousarray(windows, dtype=np.int64).tobytes())
    return h.hexdigest()


def _load_index(path: Path, key: str) -> CorpusIndex | None:
    """The cached index at ``path`` if it is whole and the one written for ``key``; None (rebuilt)
    for a missing, damaged or foreign file."""
    try:
        with np.load(path, allow_pickle=False) as z:
            meta = json.loads(str(z["meta"]))
            bits, windows, seal = z["train_bits"], z["windows"], str(z["seal"])
        if set(meta) != set(_META) or seal != _index_seal(key, meta, bits, windows):
            return None
        if bits.dtype != np.uint8 or windows.dtype != np.int64 or windows.ndim != 2 or windows.shape[1] != 3:
            return None
        if len(bits) != -(-meta["n_lines"] // 8) or len(windows) != -(-meta["n_train"] // meta["window"]):
            return None
        return CorpusIndex(**meta, train_bits=bits, windows=windows)
    except Exception:  # missing, not an archive, a key or field absent: rebuilt, never trusted
        return None


def check_not_empty(index: CorpusIndex, keep: str, held_out_rate: float) -> None:
    """A corpus with nothing to train on is an error that says what the lines were."""
    if index.n_train:
        return
    names = ", ".join(index.files)
    kept = "with a negation cue" if keep == "cue_sentences" else "non-empty"
    raise DataError(
        f"the streamed cue-masking corpus ({names}) has no training sentences: {index.n_lines} lines, "
        f"{index.n_kept} {kept}, {index.n_held_out} of those held out (held_out_rate={held_out_rate}). "
        "Check the files, or set objective.cue_masking.corpus.keep: all"
    )


class _EpochHook(Sampler):
    """The loader's ``sampler``: where Lightning calls ``set_epoch`` at each epoch's start (an
    IterableDataset has no sampler of its own), and the endless index stream the DataLoader draws
    (one ``None`` per batch) for a dataset that makes its own batches."""

    def __init__(self, stream: CorpusStream) -> None:
        self.stream = stream

    def set_epoch(self, epoch: int) -> None:
        self.stream.epoch = epoch

    def __iter__(self) -> Iterator[None]:
        while True:
            yield None


class CorpusStream(IterableDataset):
    """One rank's training batches of a streamed corpus; see the module docstring."""

    def __init__(
        self,
        index: CorpusIndex,
        tokenizer: Any,
        detector: CueDetector,
        max_length: int,
        seed: int,
        pad_id: int,
        transform: Callable[[dict[str, torch.Tensor], int], dict[str, torch.Tensor]] | None = None,
        *,
        batch_size: int = 32,
        world: int = 1,
        rank: int = 0,
        limit: int | float | None = None,
    ) -> None:
        self.index = index
        self.tokenizer = tokenizer
        self.detector = detector
        self.max_length = max_length
        self.seed = seed
        self.pad_id = pad_id
        self.transform = transform
        self.batch_size = batch_size
        self.world = world
        self.rank = rank
        self.limit = limit
        self.epoch = 0
        self.start_step = 0  # this rank's batches of ``epoch`` to skip (a resumed epoch)

    def for_rank(self, batch_size: int, world: int, rank: int, limit: int | float | None) -> CorpusStream:
        """A copy for one rank's loader."""
        return CorpusStream(
            self.index, self.tokenizer, self.detector, self.max_length, self.seed, self.pad_id, self.transform,
            batch_size=batch_size, world=world, rank=rank, limit=limit,
        )

    # ---- sizes ------------------------------------------------------------------------------
    def global_batches(self) -> int:
        """Batches of one epoch on a single device, after ``limit`` (Lightning's limit_train_batches)."""
        return kept_batches(-(-self.index.n_train // self.batch_size), self.limit)

    def __len__(self) -> int:
        return -(-self.global_batches() // self.world)

    # ---- reading ----------------------------------------------------------------------------
    def _lines_from(self, window: int) -> Iterator[bytes]:
        """The raw training lines in file order, from the first line of shuffle window ``window``."""
        index = self.index
        if window >= len(index.windows):
            return
        first_file, offset, line = (int(v) for v in index.windows[window])
        for f in range(first_file, len(index.files)):
            with open(index.files[f], "rb") as handle:
                if f == first_file:
                    handle.seek(offset)
                else:
                    line = index.file_first_line[f]
                for raw in handle:
                    if index.is_train(line):
                        yield raw
                    line += 1

    def shuffled(self, epoch: int, start: int = 0) -> Iterator[tuple[int, bytes]]:
        """(position, raw line) of the epoch's training order, from position ``start`` on: each
        window of ``index.window`` lines in a seeded permutation of (seed, epoch, window)."""
        size = self.index.window
        window = start // size
        lines = self._lines_from(window)
        while True:
            block = [raw for _, raw in zip(range(size), lines, strict=False)]
            if not block:
                return
            order = np.random.default_rng([self.seed, epoch, window]).permutation(len(block))
            base = window * size
            for k in range(max(0, start - base), len(block)):
                yield base + k, block[order[k]]
            window += 1

    def __iter__(self) -> Iterator[dict[str, torch.Tensor]]:
        info = get_worker_info()
        workers, worker = (info.num_workers, info.id) if info is not None else (1, 0)
        epoch, start_step = self.epoch, self.start_step
        bs, world = self.batch_size, self.world
        total = self.global_batches()
        steps = -(-total // world)
        g = start_step * world  # the next global batch
        step_first: tuple[int, list[bytes]] | None = None  # the current step's first batch (padding source)
        lines: list[bytes] = []
        first_position = g * bs
        stream = self.shuffled(epoch, g * bs)
        while g < total:
            lines.clear()
            for position, raw in stream:
                if not lines:
                    first_position = position
                lines.append(raw)
                if len(lines) == bs:
                    break
            if not lines:
                break
            step = g // world
            if g % world == 0:
                step_first = (first_position, list(lines))
            if g % world == self.rank and (step - start_step) % workers == worker:
                yield self._batch(lines, first_position, epoch, real=True)
            g += 1
        # The last step's missing batches: a padding repeat of that step's first batch.
        last = steps - 1
        if steps > start_step and last * world + self.rank >= total and (last - start_step) % workers == worker and step_first:
            yield self._batch(step_first[1], step_first[0], epoch, real=False)

    def _batch(self, raw: list[bytes], first: int, epoch: int, real: bool) -> dict[str, torch.Tensor]:
        texts = [r.decode("utf-8").strip().lstrip("\ufeff") for r in raw]
        ids, flags = self.detector.tokenize(self.tokenizer, texts, truncation=True, max_length=self.max_length)
        width = max(len(row) for row in ids)
        input_ids = torch.full((len(ids), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(ids), width), dtype=torch.long)
        cue = torch.zeros((len(ids), width), dtype=torch.bool)
        for r, (row, fl) in enumerate(zip(ids, flags, strict=False)):
            input_ids[r, : len(row)] = torch.tensor(row, dtype=torch.long)
            mask[r, : len(row)] = 1
            cue[r, : len(row)] = torch.tensor(fl, dtype=torch.bool)
        batch = {
            "input_ids": input_ids,
            "attention_mask": mask,
            "cue_flags": cue,
            # The lines' positions in the epoch's order: unique in the epoch, the same after a resume.
            "index": torch.arange(first, first + len(ids), dtype=torch.long),
            "real": torch.full((len(ids),), real, dtype=torch.bool),
        }
        return self.transform(batch, epoch) if self.transform is not None else batch


class StreamLoader(DataLoader):
    """The training loader of a :class:`CorpusStream`, whose position goes into checkpoints.

    Its length is known (from the index), so Lightning's fetcher asks for a batch only when it
    trains on it, and the count here is exactly the batches trained at a checkpoint (as in
    :class:`negtrain.data.resumable.ResumableLoader`).
    """

    def __init__(self, stream: CorpusStream, num_workers: int = 0) -> None:
        super().__init__(
            stream, batch_size=None, num_workers=num_workers,
            # Not persistent: each epoch's workers get the stream with that epoch and start point.
            persistent_workers=False,
            generator=torch.Generator().manual_seed(stream.seed),
        )
        # The DataLoader refuses a sampler for an IterableDataset; this one only carries the epoch
        # Lightning sets (see _EpochHook) and draws nothing.
        object.__setattr__(self, "sampler", _EpochHook(stream))
        self.stream = stream
        self.batches_done = 0
        self._resume_at = 0

    def __iter__(self) -> Iterator[dict[str, torch.Tensor]]:  # type: ignore[override]  # batches from a generator, not a worker iterator
        # A generator: nothing (no worker) starts before the first batch is asked for, which is
        # after Lightning set the epoch and after a resumed position was loaded.
        stream = self.stream
        stream.start_step, self._resume_at = self._resume_at, 0
        self.batches_done = stream.start_step
        try:
            for batch in super().__iter__():
                self.batches_done += 1  # before handing it out: at the batch's checkpoint it is done
                yield batch
        finally:
            stream.start_step = 0

    def state_dict(self) -> dict[str, Any]:
        """Epoch, batches trained, and where that is in the corpus: training lines consumed and
        the file and byte offset of the shuffle window a resume re-reads."""
        stream = self.stream
        consumed = min(self.batches_done * stream.world * stream.batch_size, stream.index.n_train)
        window = min(consumed // stream.index.window, max(len(stream.index.windows) - 1, 0))
        file, offset = (int(v) for v in stream.index.windows[window][:2]) if len(stream.index.windows) else (0, 0)
        return {
            "seed": stream.seed, "epoch": stream.epoch, "batches_done": self.batches_done,
            "lines_consumed": consumed, "file": file, "byte_offset": offset, "corpus": stream.index.fingerprint,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        stream = self.stream
        if state.get("seed") != stream.seed:
            raise ValueError(f"the checkpoint's corpus order was drawn with seed {state.get('seed')}, not {stream.seed}")
        if state.get("corpus") != stream.index.fingerprint:
            raise DataError(
                f"the corpus files changed since the checkpoint was written ({', '.join(stream.index.files)}); "
                "a resumed run must read the same corpus to continue where it stopped"
            )
        done = int(state["batches_done"])
        if not 0 <= done <= len(stream):
            raise ValueError(f"the checkpoint is {done} batches into an epoch of {len(stream)} batches")
        stream.epoch = int(state["epoch"])
        self.batches_done = self._resume_at = done
