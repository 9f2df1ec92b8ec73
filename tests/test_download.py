"""The download path, for real, against a local HTTP server laid out like raw.githubusercontent.com
(`<owner>/<repo>/<revision>/<path>`), serving the mirror's files."""

from __future__ import annotations

import functools
import http.server
import threading

import pytest

from negtrain.benchmarks.registry import get_benchmark
from negtrain.data.files import RemoteFile, resolve
from negtrain.errors import DataError


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
