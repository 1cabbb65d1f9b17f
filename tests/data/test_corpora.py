import gzip
import hashlib
import http.server
import threading

import pytest

from nmt_cli.data import corpora
from nmt_cli.runtime.errors import DataError
from tests.conftest import MIRROR


def test_registry_hashes_match_the_mirror():
    corpus = corpora.get_corpus("multi30k")
    for name, expected in corpus.sha256.items():
        path = MIRROR / "multi30k" / name
        if not path.exists():
            pytest.skip("mirror not available")
        assert corpora.sha256_of(path) == expected, name


def test_tok_reference_hashes_are_of_the_mirror_text():
    corpus = corpora.get_corpus("multi30k")
    assert len(corpus.tok_references) == 12  # val and three tests, three languages
    for name, expected in corpus.tok_references.items():
        path = MIRROR / "multi30k" / "tok" / f"{name}.gz"
        if not path.exists():
            pytest.skip("mirror not available")
        assert hashlib.sha256(gzip.open(path).read()).hexdigest() == expected, name


def test_tok_reference_from_gzip_or_plain_mirror(tmp_path, monkeypatch):
    path = corpora.fetch_tok_reference("multi30k", "test_2016_flickr", "fr")
    assert path == corpora.cache_dir() / "multi30k" / "tok" / "test_2016_flickr.lc.norm.tok.fr"
    text = path.read_text(encoding="utf-8")
    assert text.count("\n") == 1000 and "l&apos; herbe" in text  # decompressed, Moses-escaped
    # A mirror holding the upstream (uncompressed) file works too; a tampered one is refused.
    plain = tmp_path / "mirror" / "multi30k" / "tok"
    plain.mkdir(parents=True)
    (plain / "val.lc.norm.tok.fr").write_text(
        gzip.open(
            MIRROR / "multi30k" / "tok" / "val.lc.norm.tok.fr.gz", "rt", encoding="utf-8"
        ).read(),
        encoding="utf-8",
    )
    (plain / "val.lc.norm.tok.de").write_text("tampered\n", encoding="utf-8")
    monkeypatch.setenv("NMT_DATA_MIRROR", str(tmp_path / "mirror"))
    assert (
        corpora.fetch_tok_reference("multi30k", "val", "fr").read_text(encoding="utf-8").count("\n")
        == 1014
    )
    with pytest.raises(DataError, match="sha256 mismatch"):
        corpora.fetch_tok_reference("multi30k", "val", "de")
    with pytest.raises(DataError, match="not found in NMT_DATA_MIRROR"):
        corpora.fetch_tok_reference("multi30k", "test_2017_flickr", "de")
    with pytest.raises(DataError, match="no tokenized reference 'train.lc.norm.tok.fr'"):
        corpora.fetch_tok_reference("multi30k", "train", "fr")


def test_fetch_from_mirror_caches_and_verifies(tmp_path, monkeypatch):
    path = corpora.fetch("multi30k", "val.en.gz")
    assert path.parent == corpora.cache_dir() / "multi30k"
    assert gzip.open(path, "rt").readline().strip()
    # A verified file is not copied again, even when the mirror goes away.
    monkeypatch.setenv("NMT_DATA_MIRROR", str(tmp_path / "empty"))
    assert corpora.fetch("multi30k", "val.en.gz") == path


def test_missing_file_in_mirror_is_one_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("NMT_DATA_MIRROR", str(tmp_path))
    with pytest.raises(DataError, match=r"val\.fr\.gz: not found in NMT_DATA_MIRROR"):
        corpora.fetch("multi30k", "val.fr.gz")


def test_hash_mismatch_in_mirror_leaves_nothing_behind(tmp_path, monkeypatch):
    mirror = tmp_path / "mirror" / "multi30k"
    mirror.mkdir(parents=True)
    (mirror / "val.en.gz").write_bytes(b"not the real file")
    monkeypatch.setenv("NMT_DATA_MIRROR", str(tmp_path / "mirror"))
    with pytest.raises(DataError, match="sha256 mismatch"):
        corpora.fetch("multi30k", "val.en.gz")
    cache = corpora.cache_dir() / "multi30k"
    assert not any(cache.iterdir()), list(cache.iterdir())


def test_unknown_corpus_and_file():
    with pytest.raises(DataError, match="unknown corpus 'wmt99'"):
        corpora.get_corpus("wmt99")
    with pytest.raises(DataError, match="no file 'train.xx.gz'"):
        corpora.fetch("multi30k", "train.xx.gz")


class _Handler(http.server.BaseHTTPRequestHandler):
    payload = b""
    cut_after: int | None = None

    def do_GET(self):  # noqa: N802 (http.server API)
        self.send_response(200)
        self.send_header("Content-Length", str(len(self.payload)))
        self.end_headers()
        if self.cut_after is None:
            self.wfile.write(self.payload)
        else:  # promise the whole file, send part of it, drop the connection
            self.wfile.write(self.payload[: self.cut_after])
            self.wfile.flush()
            self.connection.shutdown(2)

    def log_message(self, *args):
        pass


@pytest.fixture
def http_server():
    servers = []

    def start(payload: bytes, cut_after: int | None = None) -> str:
        handler = type("H", (_Handler,), {"payload": payload, "cut_after": cut_after})
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}/file.gz"

    yield start
    for s in servers:
        s.shutdown()


def test_download_from_local_http_server(tmp_path, http_server):
    payload = b"hello corpus\n" * 1000
    url = http_server(payload)
    path = corpora.download(url, tmp_path, "f.gz", hashlib.sha256(payload).hexdigest(), timeout=5)
    assert path.read_bytes() == payload


def test_download_cut_halfway_leaves_nothing(tmp_path, http_server):
    payload = b"x" * 200_000
    url = http_server(payload, cut_after=50_000)
    with pytest.raises(DataError, match="download failed|sha256 mismatch"):
        corpora.download(url, tmp_path, "f.gz", hashlib.sha256(payload).hexdigest(), timeout=5)
    assert list(tmp_path.iterdir()) == []


def test_download_with_wrong_hash_is_refused(tmp_path, http_server):
    url = http_server(b"tampered")
    with pytest.raises(DataError, match="sha256 mismatch"):
        corpora.download(url, tmp_path, "f.gz", "0" * 64, timeout=5)
    assert list(tmp_path.iterdir()) == []


def test_unreachable_server_suggests_the_mirror(tmp_path):
    with pytest.raises(DataError, match="NMT_DATA_MIRROR"):
        corpora.download("http://127.0.0.1:9/nothing.gz", tmp_path, "f.gz", "0" * 64, timeout=2)


def test_read_lines_replaces_invalid_utf8_and_reads_gzip(tmp_path):
    p = tmp_path / "f.txt"
    p.write_bytes(b"ok\n\xff\xfebad\r\nlast")
    assert corpora.read_lines(p) == ["ok", "\ufffd\ufffdbad", "last"]
    gz = tmp_path / "f.txt.gz"
    gz.write_bytes(gzip.compress(b"a\n\nb\n"))
    assert corpora.read_lines(gz) == ["a", "", "b"]  # an empty line is a line
    p.write_bytes(b"\xef\xbb\xbfa dog\n")  # a byte order mark is not the first line's text
    assert corpora.read_lines(p) == ["a dog"]
    with pytest.raises(DataError, match="missing.txt: file not found"):
        corpora.read_lines(tmp_path / "missing.txt")


def test_a_folder_given_as_a_file_says_so_once(tmp_path):
    from nmt_cli.runtime.errors import DataError

    with pytest.raises(DataError) as caught:
        corpora.read_lines(tmp_path)
    assert str(caught.value) == f"{tmp_path}: cannot read (Is a directory)"


@pytest.mark.parametrize("reader", ["installed", "zlib"])
def test_a_truncated_or_foreign_gzip_file_is_one_data_error(tmp_path, monkeypatch, reader):
    from nmt_cli.runtime.errors import DataError

    if reader == "zlib":  # the standard library's reader, as without the fast-gzip extra
        monkeypatch.setitem(corpora.COMPRESSED_OPENERS, ".gz", gzip.open)
    whole = gzip.compress(b"a line\nanother\n" * 50_000)
    (tmp_path / "cut.gz").write_bytes(whole[: len(whole) // 2])
    (tmp_path / "plain.gz").write_bytes(b"not gzip at all\n")
    for name in ("cut.gz", "plain.gz"):
        with pytest.raises(DataError, match=f"{name}: cannot read"):
            with corpora.LineBlocks(tmp_path / name) as lines:
                while lines.take(1000)[1]:
                    pass
    (tmp_path / "ok.gz").write_bytes(whole)
    with corpora.LineBlocks(tmp_path / "ok.gz") as lines:
        assert lines.take(3) == (b"a line\nanother\na line\n", 3)
