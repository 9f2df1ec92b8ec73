"""Small TINAD fixtures in the schema of the Hub dataset ``HiTZ/This-is-not-a-dataset``.

The real data must not be redistributed, so every sentence here is written for the tests.
"""

from __future__ import annotations

import json
from pathlib import Path

DATASET_DIR = Path("HiTZ") / "This-is-not-a-dataset"


def row(test_id: int, pattern_id: int, cell: str, label: bool, sentence: str, neg=("verbal", "analytic", "clausal")) -> dict:
    distractor = cell.startswith("distractor")
    affirmation = cell.endswith("affirmation")
    return {
        "pattern_id": pattern_id,
        "pattern": {1: "Synonymy1", 2: "Antonymy1", 3: "Synonymy2", 4: "Antonymy2"}.get(pattern_id, "Hypernymy"),
        "test_id": test_id,
        "negation_type": "affirmation" if affirmation else neg[0],
        "semantic_type": "none" if affirmation else neg[1],
        "syntactic_scope": "none" if affirmation else neg[2],
        "isDistractor": distractor,
        "sentence": sentence,
        "label": label,
    }


def write_split(data_dir: Path, split: str, rows: list[dict]) -> Path:
    path = data_dir / DATASET_DIR / f"{split}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


ANIMALS = ["dog", "cat", "horse", "cow", "sheep", "goat", "duck", "hen", "pig", "fox", "wolf", "bear"]
THINGS = ["rock", "chair", "spoon", "table", "brick", "cloud", "shoe", "coin", "lamp", "rope", "door", "cup"]


def easy_rows(n_tests: int = 12, offset: int = 0) -> list[dict]:
    """Four sentences per test_id, one per cell, with the reference labels of pattern 1.

    "X is an animal" is true for animals and false for things, so the label follows from the words.
    """
    rows = []
    for t in range(n_tests):
        animal, thing = ANIMALS[(t + offset) % len(ANIMALS)], THINGS[(t + offset) % len(THINGS)]
        tid = t + offset
        rows += [
            row(tid, 1, "input_affirmation", True, f"A {animal} is an animal."),
            row(tid, 1, "input_negation", False, f"A {animal} is never an animal."),
            row(tid, 1, "distractor_affirmation", False, f"A {thing} is an animal."),
            row(tid, 1, "distractor_negation", True, f"A {thing} is never an animal."),
        ]
    return rows
