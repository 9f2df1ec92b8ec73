"""The size of a `negtrain view` site and its time to first paint in headless Chromium.

    python perf/view_site.py CARD [CARD ...]            # the site of real cards
    python perf/view_site.py A B --screenshots docs/images   # the docs' screenshots (A vs B of A and B)
    python perf/view_site.py --condaqa-lm OUT           # first write a CondaQA test card (7,240
                                                        # questions) with an LM's prompt and response
                                                        # on every line, made-up answers, then measure it

Prints, per site: its bytes (all, and the largest data file), and in Chromium (the system's,
driven by Playwright) the overview's first contentful paint and, per eval set page, the time from
opening it to its first page of contrast groups on screen (its data file loaded and parsed).
The numbers in docs/viewer.md come from this script.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import time
from pathlib import Path

from negtrain.benchmarks.registry import get_benchmark
from negtrain.cli import main
from negtrain.evaluation.predictions import score_file
from negtrain.view.site import site_bytes


def condaqa_lm_card(out: Path) -> Path:
    """A card-format folder of CondaQA test with an LM's fields on every line (made-up answers:
    the viewer's cost depends on the text it carries, not on the answers)."""
    rng = random.Random(0)
    examples = get_benchmark("condaqa").load("test")
    (out / "predictions").mkdir(parents=True, exist_ok=True)
    path = out / "predictions" / "condaqa-test-validate.jsonl"
    with path.open("w", encoding="utf-8") as f:
        for e in examples:
            answer = e.label if rng.random() < 0.6 else rng.choice(["YES", "NO", "DON'T KNOW"])
            prompt = f"{e.inputs[0]}\nQ: {e.inputs[1]}\nA:"
            f.write(json.dumps({"id": e.id, "prediction": answer, "label": e.label, "prompt": prompt,
                                "response": f" {answer.capitalize()}.\nQ:", "unparsed": False}) + "\n")
    scored = score_file("condaqa", "test", path, bootstrap=200).as_json()
    record = {"epoch": 0, "stage": "validate", "benchmark": "condaqa", "split": "test", "metrics": scored["metrics"],
              "lower_is_better": [], "uncertainty": scored["uncertainty"], "bootstrap": scored["bootstrap"]}
    (out / "metrics.jsonl").write_text(json.dumps(record) + "\n", encoding="utf-8")
    return out


def measure(site: Path) -> None:
    from playwright.sync_api import sync_playwright

    files = sorted((site / "data").glob("*.js"), key=lambda p: p.stat().st_size)
    print(f"{site}: {site_bytes(site) / 1e6:.2f} MB in {sum(1 for p in site.rglob('*') if p.is_file())} files; "
          f"largest data file {files[-1].name} {files[-1].stat().st_size / 1e6:.2f} MB")
    index = json.loads((site / "data" / "index.js").read_text(encoding="utf-8").split("=", 1)[1].rstrip().removesuffix(";"))
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=shutil.which("chromium"), args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1200, "height": 900})
        page.goto((site / "index.html").as_uri())
        page.wait_for_selector("table.overview")
        fcp = page.evaluate("performance.getEntriesByName('first-contentful-paint')[0].startTime")
        print(f"  overview: first contentful paint {fcp:.0f} ms")
        for src in index["sources"]:
            for s in src["sets"]:
                page = browser.new_page(viewport={"width": 1200, "height": 900})
                start = time.perf_counter()
                page.goto((site / "index.html").as_uri() + f"#set/{s['key']}")
                page.wait_for_selector("#groups .group")
                shown = (time.perf_counter() - start) * 1000
                fcp = page.evaluate("performance.getEntriesByName('first-contentful-paint')[0].startTime")
                size = (site / "data" / f"{s['key']}.js").stat().st_size / 1e6
                print(f"  {src['label']} {s['name']} ({size:.2f} MB): first paint {fcp:.0f} ms, first groups on screen {shown:.0f} ms")
        browser.close()


def screenshots(site: Path, folder: Path) -> None:
    """The docs' pictures: the overview, the first eval set with "inconsistent only", and the first
    A vs B page, each cut to 1000x620 and reduced to 64 colours (small files)."""
    from PIL import Image
    from playwright.sync_api import sync_playwright

    folder.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=shutil.which("chromium"), args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1000, "height": 620})
        shots = [("view-overview.png", "#overview", "table.overview", None),
                 ("view-contrast-sets.png", "#set/s0e0", "#groups .group", "#f-inconsistent"),
                 ("view-a-vs-b.png", "#ab/0/0", "#ab-groups", None)]
        for name, route, ready, check in shots:
            page.goto((site / "index.html").as_uri() + route)
            page.wait_for_selector(ready)
            if check:
                page.check(check)
            page.screenshot(path=str(folder / name))
            Image.open(folder / name).convert("RGB").quantize(64).save(folder / name, optimize=True)
            print(f"  {folder / name}: {(folder / name).stat().st_size / 1e3:.0f} kB")
        browser.close()


def run() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("cards", type=Path, nargs="*")
    parser.add_argument("--condaqa-lm", type=Path, metavar="OUT")
    parser.add_argument("--screenshots", type=Path, metavar="DIR", help="the docs' screenshots of the site of all CARDs together")
    args = parser.parse_args()
    if args.screenshots:
        site = args.cards[0] / "view-docs"
        assert main(["view", *map(str, args.cards), "--out", str(site)]) == 0
        screenshots(site, args.screenshots)
        return
    cards = list(args.cards) + ([condaqa_lm_card(args.condaqa_lm)] if args.condaqa_lm else [])
    for card in cards:
        site = card / "view"
        start = time.perf_counter()
        assert main(["view", str(card), "--out", str(site)]) == 0
        print(f"  negtrain view: {time.perf_counter() - start:.1f} s")
        measure(site)


if __name__ == "__main__":
    run()
