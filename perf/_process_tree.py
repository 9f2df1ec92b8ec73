"""Measuring a command's memory from outside, as ``/usr/bin/time -v`` does, and more finely.

``run_measured(argv, env)`` runs ``/usr/bin/time -v argv`` (the kernel's ``ru_maxrss`` of the
largest process of the tree: what ``/usr/bin/time`` prints as "Maximum resident set size") and, on
a thread, samples every process of the tree from ``/proc`` every ``interval`` seconds: each one's
resident memory split as the kernel counts it (``RssAnon``: heap, tensors, what the run holds;
``RssFile``: mapped files, the token store and libraries, clean and reclaimable), and their sum.
Nothing runs inside the measured process, so the measurement adds nothing to it (a sampling
thread inside the process, as ``perf/scaling.py peak`` used, is itself part of what it measures).

Linux only (``/proc``).
"""

from __future__ import annotations

import os
import re
import subprocess
import threading
import time

FIELDS = ("VmRSS", "RssAnon", "RssFile", "RssShmem")


def _status(pid: int) -> dict[str, float] | None:
    """A process's resident memory (MB) and its name and parent, from /proc/<pid>/status."""
    try:
        with open(f"/proc/{pid}/status") as f:
            text = f.read()
    except OSError:  # gone between the listing and the read
        return None
    out: dict = {}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key in FIELDS:
            out[key] = int(value.split()[0]) / 1024
        elif key == "PPid":
            out["ppid"] = int(value)
        elif key == "Name":
            out["name"] = value.strip()
    if "VmRSS" not in out:
        return None
    try:  # proportional set size: shared pages (a fork's copy-on-write ones) divided among their sharers
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    out["Pss"] = int(line.split()[1]) / 1024
    except OSError:
        pass
    return out


def tree(root: int) -> dict[int, dict]:
    """Every live process descended from ``root`` (``root`` included) with its memory."""
    procs = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (s := _status(int(entry))) is not None:
            procs[int(entry)] = s
    keep, frontier = {}, [root]
    while frontier:
        pid = frontier.pop()
        if pid in procs and pid not in keep:
            keep[pid] = procs[pid]
            frontier += [p for p, s in procs.items() if s.get("ppid") == pid]
    return keep


class TreeSampler:
    """Samples the process tree under ``root`` on a thread until stopped."""

    def __init__(self, root: int, interval: float) -> None:
        self.root = root
        self.interval = interval
        self.samples: list[dict] = []
        self._stop = threading.Event()
        self._start = time.monotonic()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.is_set():
            procs = tree(self.root)
            # The measured command is the first python below /usr/bin/time; the rest are its children.
            main = next((p for p, s in procs.items() if s.get("ppid") == self.root), None)
            own = procs.get(main, {})
            children = [s for p, s in procs.items() if p not in (self.root, main)]
            self.samples.append({
                "t": round(time.monotonic() - self._start, 2),
                "own_rss": own.get("VmRSS", 0.0), "own_anon": own.get("RssAnon", 0.0), "own_file": own.get("RssFile", 0.0),
                "children": len(children), "children_rss": sum(s["VmRSS"] for s in children),
                "children_max_rss": max((s["VmRSS"] for s in children), default=0.0),
                "tree_rss": sum(s["VmRSS"] for s in procs.values()),
                "tree_anon": sum(s.get("RssAnon", 0.0) for s in procs.values()),
                "tree_pss": sum(s.get("Pss", 0.0) for s in procs.values()),
            })
            self._stop.wait(self.interval)

    def stop(self) -> list[dict]:
        self._stop.set()
        self._thread.join()
        return self.samples


def run_measured(argv: list[str], env: dict, log_path, interval: float = 0.2) -> dict:
    """Run ``argv`` under ``/usr/bin/time -v`` (niced a little: the machine may be shared), its
    output to ``log_path``, and measure it."""
    with open(log_path, "w") as log:
        proc = subprocess.Popen(["nice", "-n", "2", "/usr/bin/time", "-v", *argv], stdout=log, stderr=subprocess.STDOUT, env=env)
        # The tree is rooted at `nice`, which execs /usr/bin/time in place (same pid).
        sampler = TreeSampler(proc.pid, interval)
        code = proc.wait()
        samples = sampler.stop()
    text = open(log_path, errors="replace").read()
    found = re.search(r"Maximum resident set size \(kbytes\): (\d+)", text)
    wall = re.search(r"Elapsed \(wall clock\) time.*: (\S+)", text)
    peak = lambda key: round(max((s[key] for s in samples), default=0.0), 1)  # noqa: E731
    return {
        "exit_code": code,
        "time_max_rss_mb": round(int(found.group(1)) / 1024, 1) if found else None,
        "wall": wall.group(1) if wall else None,
        "peak_own_rss_mb": peak("own_rss"), "peak_own_anon_mb": peak("own_anon"),
        "peak_tree_rss_mb": peak("tree_rss"), "peak_tree_anon_mb": peak("tree_anon"), "peak_tree_pss_mb": peak("tree_pss"),
        "peak_children_rss_mb": peak("children_rss"), "max_children": max((s["children"] for s in samples), default=0),
        "samples": samples,
    }
