"""`nmt serve --suggestions`: LibreTranslate's /suggest stored in SQLite, served back as a
translation memory (alone, inside a paragraph, after a kill and a restart), the cache's hits and
misses, the bad requests LibreTranslate refuses; the store under concurrent writers and a kill;
`nmt suggestions list` and `export` with their checks."""

import signal
import subprocess
import sys
import threading
import urllib.parse
from pathlib import Path

import pytest

pytest.importorskip("fastapi")
requests = pytest.importorskip("requests")

from conftest import multi30k_lines, trained_copy  # noqa: E402
from test_serve import Server, child_env, nmt_command  # noqa: E402

from nmt_cli.runtime.errors import UserError  # noqa: E402
from nmt_cli.serving.suggestions import SuggestionStore  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def metric(text: str, name: str, result: str) -> float:
    for line in text.splitlines():
        if line.startswith(f'{name}_total{{result="{result}"}}'):
            return float(line.split()[-1])
    return 0.0


@pytest.fixture(scope="module")
def run_dir(tiny_run, tmp_path_factory):
    """A tiny model: what it translates does not matter here, only what memory answers."""
    return trained_copy(tiny_run, tmp_path_factory, "suggested", max_steps=8, checkpoint_every=8)


@pytest.fixture(scope="module")
def sentences():
    return [x.strip() for x in multi30k_lines("test_2017_mscoco", "en", 3)]


def test_a_suggestion_is_what_the_next_user_gets_now_and_after_a_kill(run_dir, tmp_path, sentences):
    db = tmp_path / "suggestions.db"
    first, second, third = sentences
    s = Server(run_dir, "--threads", "1", "--suggestions", str(db), "--metrics")
    try:
        assert s.json("GET", "/frontend/settings")[1]["suggestions"] is True
        pair = {"source": "en", "target": "fr"}
        paragraph = f"{first}  {second}\n{third}"
        status, before = s.json("POST", "/translate", {"q": paragraph, **pair})
        assert status == 200
        correction = {"q": f" {second.replace(' ', '  ')}", "s": "Une correction.", **pair}
        assert s.json("POST", "/suggest", correction) == (200, {"success": True})
        # form fields, as LibreTranslate's page sends them
        form = urllib.parse.urlencode({"q": first, "s": "Une autre.", **pair}).encode()
        headers = {"Content-Type": "application/x-www-form-urlencoded"}
        assert s.request("POST", "/suggest", form, headers=headers)[0] == 200
        status, after = s.json("POST", "/translate", {"q": [second, paragraph], **pair})
        assert after["translatedText"][0] == "Une correction."
        old_third = before["translatedText"].split("\n")[1]
        assert after["translatedText"][1] == f"Une autre.  Une correction.\n{old_third}"
        native = s.json("POST", "/v1/translate", {"src": [paragraph, third]})[1]
        assert [t["memory"] for t in native["translations"]] == [[0, 1], []]
        assert native["translations"][0]["segments"] >= 3
        scraped = s.request("GET", "/metrics")[1].decode()
        assert metric(scraped, "nmt_memory_lookups", "hit") >= 5
        assert metric(scraped, "nmt_cache_lookups", "hit") >= 1  # the third sentence's repeats
    finally:
        s.proc.send_signal(signal.SIGKILL)
        s.proc.wait(60)
    s = Server(run_dir, "--threads", "1", "--suggestions", str(db))
    try:
        assert s.json("POST", "/translate", {"q": second, **pair})[1] == {
            "translatedText": "Une correction."
        }
        # a whole text corrected as one, as LibreTranslate's page sends it
        text = f"{third}\n{second}"
        whole = {"q": text, "s": "Tout le texte.\nEn deux lignes.", **pair}
        assert s.json("POST", "/suggest", whole)[0] == 200
        answer = s.json("POST", "/translate", {"q": [text + "\n", third], **pair})[1]
        assert answer["translatedText"][0] == "Tout le texte.\nEn deux lignes.\n"
        assert answer["translatedText"][1] == old_third  # alone, still the model's
        # a file's sentences go the same way as a request's: the correction comes back in it
        upload = {"file": ("notes.txt", f"{second}\n{third}\n".encode(), "text/plain")}
        fields = {"source": "en", "target": "fr"}
        url = requests.post(s.url + "/translate_file", files=upload, data=fields, timeout=60)
        got = requests.get(url.json()["translatedFileUrl"], timeout=30).text
        assert got == f"Une correction.\n{old_third}\n"
    finally:
        assert s.stop() == 0


@pytest.mark.parametrize(
    "body, words",
    [
        ({"q": "A dog.", "s": "Un chien.", "source": "en", "target": "de"}, "de is not supported"),
        ({"q": "", "s": "Un chien.", "source": "en", "target": "fr"}, "missing q parameter"),
        ({"q": "A dog.", "s": "   ", "source": "en", "target": "fr"}, "missing s parameter"),
        ({"q": "A dog.", "s": "Un chien.", "target": "fr"}, "missing source parameter"),
        ({"q": "A dog.", "s": "Un chien.", "source": "en"}, "missing target parameter"),
        ({"q": "A dog.", "s": ["Un"], "source": "en", "target": "fr"}, "s must be a string"),
        ({"q": "A" * 101, "s": "Un", "source": "en", "target": "fr"}, "exceeds text limit (100)"),
        ({"q": "A dog.", "s": "Un", "source": "auto", "target": "fr"}, "not auto"),
    ],
)
def test_bad_suggestions_get_400_as_libretranslate_answers(suggesting, body, words):
    status, answer = suggesting.json("POST", "/suggest", body)
    assert status == 400 and words in answer["error"]


@pytest.fixture(scope="module")
def suggesting(run_dir, tmp_path_factory):
    db = tmp_path_factory.mktemp("suggest") / "s.db"
    s = Server(run_dir, "--threads", "1", "--suggestions", str(db), "--max-chars", "100")
    yield s
    assert s.stop() == 0


def test_without_the_option_suggest_is_refused_as_libretranslate_refuses_it(run_dir):
    server = Server(run_dir, "--threads", "1", "--cache-size", "0", "--metrics")
    try:
        body = {"q": "A dog.", "s": "Un chien.", "source": "en", "target": "fr"}
        assert server.json("POST", "/suggest", body) == (
            403,
            {"error": "Suggestions are disabled on this server."},
        )
        assert server.json("GET", "/frontend/settings")[1]["suggestions"] is False
        for _ in range(2):
            server.json("POST", "/translate", {"q": "A dog runs.", "source": "en", "target": "fr"})
        scraped = server.request("GET", "/metrics")[1].decode()
        for name in ("nmt_memory_lookups", "nmt_cache_lookups"):  # nothing to look up in
            assert metric(scraped, name, "hit") == metric(scraped, name, "miss") == 0
    finally:
        assert server.stop() == 0


def test_an_unwritable_file_is_one_line_at_start(run_dir, tmp_path):
    missing = tmp_path / "no such folder" / "s.db"
    done = subprocess.run(
        nmt_command("serve", "-m", str(run_dir), "--port", "0", "--suggestions", str(missing)),
        capture_output=True,
        text=True,
        env=child_env(),
        timeout=300,
    )
    assert done.returncode != 0
    assert done.stderr.strip().count("\n") == 0 and "cannot use it as a suggestions file" in (
        done.stderr
    )


WRITER = """
import sys, time
from nmt_cli.serving.suggestions import SuggestionStore
store = SuggestionStore(sys.argv[1])
for i in range(int(sys.argv[2])):
    store.add("en", "fr", f"{sys.argv[3]} {i}", f"traduction {i}")
print("stored", flush=True)
time.sleep(60)
"""


def test_the_store_keeps_every_suggestion_of_concurrent_writers_and_a_killed_one(tmp_path):
    db = tmp_path / "s.db"
    store = SuggestionStore(db)
    env = {**child_env(), "PYTHONPATH": str(ROOT)}
    killed = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(db), "20", "killed"],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    threads = [
        threading.Thread(
            target=lambda k=k: [store.add("en", "fr", f"t{k} {i}", "x") for i in range(10)]
        )
        for k in range(4)
    ]
    for t in threads:
        t.start()
    assert killed.stdout.readline().strip() == "stored"
    killed.kill()  # SIGKILL: no chance to close anything
    killed.wait(30)
    for t in threads:
        t.join()
    reopened = SuggestionStore(db, readonly=True)
    assert len(reopened) == 60
    assert reopened.recall("en", "fr", "killed 19") == "traduction 19"
    assert reopened.recall("en", "fr", "t3 9") == "x"
    with pytest.raises(UserError, match="reading only"):
        reopened.add("en", "fr", "a", "b")
    store.add("en", "fr", "killed  19 ", "newer")
    assert reopened.recall("en", "fr", "killed 19") == "newer"  # the newest wins
    with pytest.raises(UserError, match="no such suggestions file"):
        SuggestionStore(tmp_path / "missing.db", readonly=True)


def test_export_keeps_usable_pairs_and_says_what_each_check_dropped(tmp_path):
    sources = [x.strip() for x in multi30k_lines("test_2017_mscoco", "en", 6)]
    references = [x.strip() for x in multi30k_lines("test_2017_mscoco", "fr", 6)]
    db = tmp_path / "s.db"
    store = SuggestionStore(db)
    store.add("en", "fr", sources[0], "premier essai")  # replaced by the next: a duplicate
    for q, s in zip(sources[:3], references[:3]):
        store.add("en", "fr", q, s)
    store.add("en", "fr", sources[3], sources[3].upper())  # the source pasted back
    store.add("en", "fr", sources[4], "aaaaaaaaaa")  # keyboard mashing
    store.add("en", "fr", sources[5], "Oui.")  # far shorter than its source
    store.add("en", "fr", "Two men are playing football in a park.", "Two men are playing soccer.")
    store.close()
    out = tmp_path / "pairs.tsv"
    env = {**child_env(), "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        nmt_command("suggestions", "export", str(db), "-o", str(out)),
        capture_output=True,
        text=True,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    assert out.read_text(encoding="utf-8").splitlines() == [
        f"{' '.join(q.split())}\t{' '.join(s.split())}" for q, s in zip(sources[:3], references[:3])
    ]
    for line in [
        "8 read, 3 kept, 5 dropped",
        "dropped 1: duplicate",
        "dropped 1: untranslated copy",
        "dropped 1: repeated characters",
        "dropped 1: length ratio",
        "dropped 1: not in the target language",
    ]:
        assert line in done.stderr
    listed = subprocess.run(
        nmt_command("suggestions", "list", str(db)), capture_output=True, text=True, env=env
    )
    rows = [line.split("\t") for line in listed.stdout.splitlines()]
    assert [r[2] for r in rows] == [
        "duplicate",
        "kept",
        "kept",
        "kept",
        "untranslated copy",
        "repeated characters",
        "length ratio",
        "not in the target language",
    ]
    assert rows[0][1:] == ["en-fr", "duplicate", " ".join(sources[0].split()), "premier essai"]
