"""The download path, for real, against a local HTTP server laid out like raw.githubusercontent.com
(`<owner>/<repo>/<revision>/<path>`), serving the mirror's files."""

from __future__ import annotations

import functools
import http.server
import threading

import pytest

from negtrain.benchmarks.registry import get_benchmark
from negtrain.benchmarks.files import RemoteFile, resolve
from negtrain.core.errors import DataError


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture
def server(tmp_path, data_dir, monkeypatch):
    root = tmp_path / "raw"
    (root / "selenashe" / "ScoNe").mkdir(parents=True)
    (root / "selenashe" / "ScoNe" / "main").symlink_to(data_dir / "selenashe" / "ScoNe")
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(root)))
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setenv("NEGTRAIN_DOWNLOAD_URL", f"http://127.0.0.1:{httpd.server_address[1]}/")
    monkeypatch.delenv("NEGTRAIN_DATA_DIR")
    monkeypatch.delenv("NEGTRAIN_OFFLINE")
    monkeypatch.setenv("NEGTRAIN_CACHE_DIR", str(tmp_path / "cache"))
    yield httpd
    httpd.shutdown()


def test_a_benchmark_downloads_into_the_cache_and_reads_the_same(server, tmp_path, data_dir, monkeypatch):
    downloaded = get_benchmark("scone").load("test")
    cached = sorted((tmp_path / "cache" / "selenashe" / "ScoNe" / "scone_nli" / "test").iterdir())
    assert [p.name for p in cached] == sorted(p.name for p in (data_dir / "selenashe/ScoNe/scone_nli/test").iterdir())
    assert not list((tmp_path / "cache").rglob("*.part"))
    # Byte for byte the authors' files, so the examples equal the mirror's.
    for path in cached:
        assert path.read_bytes() == (data_dir / "selenashe/ScoNe/scone_nli/test" / path.name).read_bytes()
    server.shutdown()  # from now on only the cache can answer
    monkeypatch.setenv("NEGTRAIN_OFFLINE", "1")
    assert get_benchmark("scone").load("test") == downloaded
    monkeypatch.setenv("NEGTRAIN_DATA_DIR", str(data_dir))
    assert get_benchmark("scone").load("test") == downloaded


def test_a_missing_upstream_file_names_the_url_and_the_places_looked(server, tmp_path):
    missing = RemoteFile("selenashe/ScoNe", "scone_nli/test/no_such_condition.csv")
    with pytest.raises(DataError) as err:
        resolve(missing)
    message = str(err.value)
    assert f"http://127.0.0.1:{server.server_address[1]}/selenashe/ScoNe/main/scone_nli/test/no_such_condition.csv" in message
    assert "404" in message and str(tmp_path / "cache") in message
    assert not (tmp_path / "cache" / missing.relpath).exists()
    assert not list((tmp_path / "cache").rglob("*.part"))


# ---- Hub datasets (MNLI, TINAD): fetched with `datasets`, written as JSON lines -------------------
# The Hub cannot be reached here, so `load_dataset` alone is replaced: it returns a real
# `datasets.Dataset` in the Hub dataset's schema (features included), and everything after it runs.


def _mnli_rows():
    return {
        "promptID": [31193, 101457, 134793],
        "pairID": ["31193n", "101457e", "134793c"],
        "premise": ["Conceptually cream skimming has two basic dimensions.", "You don't have to stay there.", "Not a word was said."],
        "hypothesis": ["Product and geography are what make cream skimming work.", "You can leave.", "Somebody spoke."],
        "genre": ["government", "telephone", "fiction"],
        "label": [1, 0, 2],
    }


def _hub(monkeypatch, tmp_path, datasets_by_id):
    """Serve ``datasets_by_id[(id, split)]`` from ``load_dataset``, recording every call."""
    import datasets

    calls = []

    def load_dataset(path, name=None, split=None, **kwargs):
        calls.append((path, name, split))
        if (path, split) not in datasets_by_id:
            raise ValueError(f'Unknown split "{split}". Should be one of [\'train\'].')
        return datasets_by_id[(path, split)]

    monkeypatch.setattr(datasets, "load_dataset", load_dataset)
    # The Hub is the boundary stubbed here, so the reachability probe in front of it says "reachable".
    import negtrain.benchmarks.files as files

    monkeypatch.setattr(files, "check_hub_dataset", lambda: None)
    monkeypatch.delenv("NEGTRAIN_OFFLINE", raising=False)
    monkeypatch.setenv("NEGTRAIN_DATA_DIR", str(tmp_path / "empty-mirror"))
    monkeypatch.setenv("NEGTRAIN_CACHE_DIR", str(tmp_path / "cache"))
    return calls


def test_mnli_is_fetched_from_the_hub_once_and_read_with_its_labels(monkeypatch, tmp_path):
    from datasets import ClassLabel, Dataset, Features, Value

    features = Features({
        "promptID": Value("int32"), "pairID": Value("string"), "premise": Value("string"), "hypothesis": Value("string"),
        "genre": Value("string"), "label": ClassLabel(names=["entailment", "neutral", "contradiction"]),
    })
    split = Dataset.from_dict(_mnli_rows(), features=features)
    calls = _hub(monkeypatch, tmp_path, {("nyu-mll/multi_nli", "validation_matched"): split})

    examples = get_benchmark("mnli").load("validation_matched")
    assert calls == [("nyu-mll/multi_nli", None, "validation_matched")]
    assert [e.label for e in examples] == ["neutral", "entailment", "contradiction"]
    assert [e.id for e in examples] == ["mnli/validation_matched/31193n", "mnli/validation_matched/101457e", "mnli/validation_matched/134793c"]
    assert examples[1].inputs == ("You don't have to stay there.", "You can leave.")
    assert (tmp_path / "cache" / "nyu-mll" / "multi_nli" / "validation_matched.jsonl").is_file()
    # The second load reads the cache: no further Hub call.
    assert [e.id for e in get_benchmark("mnli").load("validation_matched")] == [e.id for e in examples]
    assert len(calls) == 1


def test_tinad_is_fetched_from_the_hub(monkeypatch, tmp_path):
    from datasets import Dataset
    from tinad_fixture import easy_rows

    rows = easy_rows(2)
    split = Dataset.from_dict({k: [r[k] for r in rows] for k in rows[0]})
    calls = _hub(monkeypatch, tmp_path, {("HiTZ/This-is-not-a-dataset", "test"): split})
    examples = get_benchmark("tinad").load("test")
    assert calls == [("HiTZ/This-is-not-a-dataset", None, "test")]
    assert [e.inputs[0] for e in examples] == [r["sentence"] for r in rows]
    assert [e.label for e in examples] == ["True" if r["label"] else "False" for r in rows]


def test_a_failed_hub_fetch_is_a_clear_error_and_leaves_no_file(monkeypatch, tmp_path):
    _hub(monkeypatch, tmp_path, {})  # every split is unknown
    with pytest.raises(DataError) as err:
        get_benchmark("mnli").load("train")
    msg = str(err.value)
    assert "Hub dataset nyu-mll/multi_nli (split train)" in msg and "Unknown split" in msg
    assert str(tmp_path / "cache" / "nyu-mll" / "multi_nli" / "train.jsonl") in msg
    leftovers = [p for p in (tmp_path / "cache").rglob("*") if p.is_file()] if (tmp_path / "cache").exists() else []
    assert leftovers == []
