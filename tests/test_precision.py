"""trainer.precision 'auto': bf16 autocast only where the hardware computes bf16."""

from __future__ import annotations

import platform
from pathlib import Path

import pytest

from negtrain.recipes import load_recipe
from negtrain.training.checks import resolve_precision
from negtrain.models.provenance import cpu_has_native_bf16


def test_auto_takes_bf16_only_where_it_is_native():
    assert resolve_precision("auto", True, "this CPU") == ("bf16-mixed", "trainer.precision auto: bf16-mixed (this CPU computes bf16 natively)")
    precision, note = resolve_precision("auto", False, "this CPU")
    assert precision == "32-true" and "no native bf16" in note


def test_an_explicit_bf16_is_kept_but_warned_about_where_it_is_emulated():
    precision, note = resolve_precision("bf16-mixed", False, "this CPU")
    assert precision == "bf16-mixed" and note.startswith("warning: trainer.precision bf16-mixed")
    assert resolve_precision("bf16-mixed", True, "this CPU") == ("bf16-mixed", None)
    assert resolve_precision("32-true", False, "this CPU") == ("32-true", None)


@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64") or not Path("/proc/cpuinfo").is_file(), reason="reads x86 Linux CPU flags")
def test_native_bf16_detection_agrees_with_the_kernels_cpu_flags():
    flags = set()
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("flags"):
            flags = set(line.split(":", 1)[1].split())
            break
    assert cpu_has_native_bf16() == bool(flags & {"avx512_bf16", "amx_bf16"})


def test_the_cpu_recipes_ask_for_auto():
    # The offline recipes run on whatever CPU the user has: fixed bf16 would be emulated on most.
    for name in ("scone_minilm", "cuemask_minilm", "mnli_negation_mix_minilm"):
        assert load_recipe(name).recipe.trainer.precision == "auto", name
