"""LibreTranslate's clients against a real `nmt serve` on 127.0.0.1: each client's requests as its
source sends them (LibreTranslate's own web page, libretranslatepy, deep-translator, Weblate,
SearXNG), and the client packages from the registry run unchanged."""

import json
import urllib.parse

import pytest

pytest.importorskip("fastapi")
requests = pytest.importorskip("requests")

from conftest import multi30k_lines, trained_copy  # noqa: E402
from test_serve import Server, cli_translate  # noqa: E402

KEY = "s3cret"
ORIGIN = "http://page.example"
LINES = ["A man is riding a bike.", "Two dogs play in the snow.", "A girl in a red dress."]


@pytest.fixture(scope="session")
def client_run(tiny_run, tmp_path_factory):
    return trained_copy(tiny_run, tmp_path_factory, "clients", max_steps=40, checkpoint_every=40)


@pytest.fixture(scope="module")
def expected(client_run):
    lines = LINES + multi30k_lines("test_2016_flickr", "en", 20)
    return dict(zip(lines, cli_translate(client_run, lines)))


@pytest.fixture(scope="module")
def wide(client_run):
    """`nmt translate` with a beam of 4: a request for 3 alternatives decodes 4 best."""
    return dict(zip(LINES, cli_translate(client_run, LINES, "--beam-size", "4")))


@pytest.fixture(scope="module")
def server(client_run):
    s = Server(client_run, "--threads", "1", "--api-key", KEY, "--cors", ORIGIN)
    yield s
    assert s.stop() == 0


def test_libretranslate_page_loads_its_settings_and_languages_and_translates_auto(server, wide):
    """What LibreTranslate's page (templates/app.js.template) sends: GET /frontend/settings and
    /languages, then a multipart POST /translate with source auto, alternatives 3, format and
    api_key; it looks each target of the chosen source up in /languages."""
    settings = requests.get(server.url + "/frontend/settings", timeout=30).json()
    assert settings["charLimit"] == 5000 and settings["apiKeys"] and settings["keyRequired"]
    assert settings["language"]["source"]["code"] == "en"  # one source served: no auto menu
    assert settings["language"]["target"]["code"] == "fr"
    assert settings["supportedFilesFormat"] == sorted(
        [".txt", ".html", ".htm", ".docx", ".pptx", ".odt", ".epub", ".srt", ".vtt", ".md"]
        + [".markdown"]
    )
    langs = requests.get(server.url + "/languages", timeout=30).json()
    codes = {entry["code"] for entry in langs}
    assert all(t in codes for entry in langs for t in entry["targets"])
    form = {
        "q": (None, LINES[0]),
        "source": (None, "auto"),
        "target": (None, "fr"),
        "format": (None, "text"),
        "alternatives": (None, "3"),
        "api_key": (None, KEY),
    }
    answer = requests.post(server.url + "/translate", files=form, timeout=60)
    body = answer.json()
    assert answer.status_code == 200 and body["translatedText"] == wide[LINES[0]]
    assert body["detectedLanguage"] == {"confidence": 100.0, "language": "en"}
    alts = body["alternatives"]
    assert len(alts) <= 3 and len(set(alts)) == len(alts) and all(a.strip() for a in alts)
    assert body["translatedText"] not in alts
    # the page's key box left empty: LibreTranslate's answer to a missing key
    form["api_key"] = (None, "")
    answer = requests.post(server.url + "/translate", files=form, timeout=60)
    assert (answer.status_code, answer.json()) == (
        400,
        {"error": "Please contact the server operator to get an API key"},
    )
    # suggestions are off, as /frontend/settings says
    form["api_key"] = (None, KEY)
    answer = requests.post(server.url + "/suggest", files=form, timeout=60)
    assert (answer.status_code, answer.json()) == (
        403,
        {"error": "Suggestions are disabled on this server."},
    )


def test_libretranslate_page_translates_a_file_and_downloads_it(server, expected):
    text = f"{LINES[0]}\n\n{LINES[1]}\n"
    answer = requests.post(
        server.url + "/translate_file",
        files={
            "file": ("notes.txt", text.encode(), "text/plain"),
            "source": (None, "en"),
            "target": (None, "fr"),
            "api_key": (None, KEY),
        },
        timeout=60,
    )
    assert answer.status_code == 200, answer.text
    url = answer.json()["translatedFileUrl"]
    assert url.startswith(server.url + "/download_file/") and url.endswith(".notes.txt")
    got = requests.get(url, timeout=30)
    assert got.status_code == 200 and "notes.txt" in got.headers["content-disposition"]
    assert got.text == f"{expected[LINES[0]]}\n\n{expected[LINES[1]]}\n"
    assert requests.get(server.url + "/download_file/x.notes.txt", timeout=30).status_code == 404
    bad = requests.post(
        server.url + "/translate_file",
        files={
            "file": ("a.pdf", b"%PDF", "application/pdf"),
            "source": (None, "en"),
            "target": (None, "fr"),
            "api_key": (None, KEY),
        },
        timeout=30,
    )
    assert bad.json() == {"error": "Invalid request: file format not supported"}


def test_libretranslatepy_requests(server, expected):
    """libretranslatepy (api.py): urlencoded POSTs to /translate and /detect, and a GET of
    /languages that carries its key as an urlencoded body."""
    data = urllib.parse.urlencode({"q": LINES[1], "source": "en", "target": "fr", "api_key": KEY})
    answer = requests.post(
        server.url + "/translate",
        data=data,
        headers={"Content-Type": "application/x-www-form-urlencoded"},
        timeout=60,
    )
    assert answer.json() == {"translatedText": expected[LINES[1]]}
    answer = requests.post(server.url + "/detect", data={"q": LINES[1], "api_key": KEY}, timeout=30)
    assert answer.json() == [{"confidence": 100.0, "language": "en"}]
    answer = requests.request(
        "GET", server.url + "/languages", data=f"api_key={KEY}".encode(), timeout=30
    )
    assert answer.status_code == 200 and answer.json()[0]["code"] == "en"


def test_deep_translator_requests(server, expected):
    """deep-translator (libre.py): every field in the query string of a POST with no body; it
    raises on 403 and on any status outside 2xx."""
    params = {"q": LINES[2], "source": "en", "target": "fr", "format": "text", "api_key": KEY}
    answer = requests.post(server.url + "/translate", params=params, timeout=60)
    assert answer.status_code == 200 and answer.json() == {"translatedText": expected[LINES[2]]}
    answer = requests.post(server.url + "/translate", params={**params, "api_key": "x"}, timeout=60)
    assert (answer.status_code, answer.json()) == (403, {"error": "Invalid API key"})


def test_weblate_requests(server, expected):
    """Weblate (machinery/libretranslate.py): the codes of GET /languages, then a form POST of
    api_key, q, source and target for one string at a time; it reads translatedText."""
    codes = [x["code"] for x in requests.get(server.url + "/languages", timeout=30).json()]
    assert codes == ["en", "fr"]  # the source's and the target's: Weblate needs both
    strings = multi30k_lines("test_2016_flickr", "en", 20)
    for text in strings:
        answer = requests.post(
            server.url + "/translate",
            data={"api_key": KEY, "q": text, "source": "en", "target": "fr"},
            timeout=60,
        )
        assert answer.json()["translatedText"] == expected[text]


def test_searxng_requests(server, wide):
    """SearXNG (engines/libretranslate.py): a JSON POST with alternatives 3 on every query,
    reading translatedText and the alternatives as examples."""
    args = {"q": LINES[0], "source": "en", "target": "fr", "alternatives": 3, "api_key": KEY}
    answer = requests.post(
        server.url + "/translate",
        data=json.dumps(args),
        headers={"Content-Type": "application/json"},
        timeout=60,
    )
    body = answer.json()
    assert answer.status_code == 200 and body["translatedText"] == wide[LINES[0]]
    assert 1 <= len(body["alternatives"]) <= 3 and wide[LINES[0]] not in body["alternatives"]
    # a single-word query whose beam yields fewer distinct alternatives is still answered
    one = requests.post(
        server.url + "/translate", json={**args, "q": "dog", "alternatives": 8}, timeout=60
    ).json()
    assert len(one["alternatives"]) <= 8 and len(set(one["alternatives"])) == len(
        one["alternatives"]
    )


def test_lists_whitespace_and_per_text_limits(server, expected):
    q = [LINES[0], "   ", "", LINES[1]]
    answer = requests.post(
        server.url + "/translate",
        json={"q": q, "source": "en", "target": "fr", "api_key": KEY},
        timeout=60,
    )
    assert answer.json() == {"translatedText": [expected[LINES[0]], "", "", expected[LINES[1]]]}
    # twenty texts of 400 characters: each under the per-text limit, so the batch is served
    batch = [("A dog runs in the park. " * 17)[:400]] * 20
    answer = requests.post(
        server.url + "/translate",
        json={"q": batch, "source": "en", "target": "fr", "api_key": KEY},
        timeout=120,
    )
    assert answer.status_code == 200 and len(answer.json()["translatedText"]) == 20


def test_the_client_packages_run_unchanged(server, expected):
    libretranslatepy = pytest.importorskip("libretranslatepy")
    deep_translator = pytest.importorskip("deep_translator")
    api = libretranslatepy.LibreTranslateAPI(server.url, api_key=KEY)
    assert api.translate(LINES[0], "en", "fr") == expected[LINES[0]]
    assert api.detect(LINES[0]) == [{"confidence": 100.0, "language": "en"}]
    assert [x["code"] for x in api.languages()] == ["en", "fr"]
    translator = deep_translator.LibreTranslator(
        source="en", target="fr", api_key=KEY, custom_url=server.url + "/"
    )
    assert translator.translate(LINES[1]) == expected[LINES[1]]
    assert translator.translate_batch(LINES[:2]) == [expected[x] for x in LINES[:2]]
    wrong = deep_translator.LibreTranslator(
        source="en", target="fr", api_key="nope", custom_url=server.url + "/"
    )
    with pytest.raises(deep_translator.exceptions.AuthorizationException):
        wrong.translate(LINES[1])


def test_spec_describes_every_route_and_cors_answers_the_allowed_origin(server):
    spec = requests.get(server.url + "/spec", timeout=30).json()
    paths = set(spec["paths"])
    for route in (
        "/translate",
        "/detect",
        "/languages",
        "/frontend/settings",
        "/translate_file",
        "/download_file/{filename}",
        "/v1/translate",
        "/v1/models",
        "/health",
        "/ready",
    ):
        assert route in paths, route
    body = spec["paths"]["/translate"]["post"]["requestBody"]["content"]
    assert set(body) == {
        "application/json",
        "application/x-www-form-urlencoded",
        "multipart/form-data",
    }
    assert {"q", "source", "target", "alternatives", "api_key", "format"} <= set(
        body["application/json"]["schema"]["properties"]
    )
    pre = requests.options(
        server.url + "/translate",
        headers={"Origin": ORIGIN, "Access-Control-Request-Method": "POST"},
        timeout=30,
    )
    assert pre.status_code == 200 and pre.headers["access-control-allow-origin"] == ORIGIN
    other = requests.get(
        server.url + "/languages", headers={"Origin": "http://elsewhere.example"}, timeout=30
    )
    assert "access-control-allow-origin" not in other.headers


def test_html_on_translate_and_translate_file(server):
    """`format: "html"` (the page sends it when the text looks like HTML) and an .html file: the
    markup comes back around the translated text, as the native route plans it."""
    pytest.importorskip("nmt_cli.documents.markup")
    document = "<p>A man is riding a <b>bike</b>.</p>\n<p>Two dogs play in the snow.</p>"
    native = server.json(
        "POST", "/v1/translate", {"src": [document], "format": "html", "api_key": KEY}
    )[1]["translations"][0]["text"]
    answer = requests.post(
        server.url + "/translate",
        json={"q": document, "source": "en", "target": "fr", "format": "html", "api_key": KEY},
        timeout=60,
    ).json()
    assert answer == {"translatedText": native}
    assert native.count("<p>") == 2 and native.count("</p>") == 2 and "<b>" in native
    page = f"<html><body>{document}</body></html>\n"
    answer = requests.post(
        server.url + "/translate_file",
        files={
            "file": ("page.html", page.encode(), "text/html"),
            "source": (None, "en"),
            "target": (None, "fr"),
            "api_key": (None, KEY),
        },
        timeout=60,
    ).json()
    got = requests.get(answer["translatedFileUrl"], timeout=30)
    assert got.headers["content-type"].startswith("text/html")
    assert got.text == f"<html><body>{native}</body></html>\n"


def test_documents_and_subtitles_on_translate_file(server):
    """A .docx comes back a .docx with its formatting and other parts, a .srt with its cue
    numbers and timings; a zip bomb and a file past the character limit are refused (413)."""
    import io
    import zipfile

    from document_files import PICTURE, docx, srt

    lines = [x.rstrip(" .") for x in multi30k_lines("test_2016_flickr", "en", 6)]

    def send(name: str, data: bytes):
        return requests.post(
            server.url + "/translate_file",
            files={
                "file": (name, data, "application/octet-stream"),
                "source": (None, "en"),
                "target": (None, "fr"),
                "api_key": (None, KEY),
            },
            timeout=120,
        )

    answer = send("report.docx", docx(*lines))
    assert answer.status_code == 200, answer.text
    got = requests.get(answer.json()["translatedFileUrl"], timeout=30)
    assert got.headers["content-type"].startswith("application/vnd.openxmlformats")
    with zipfile.ZipFile(io.BytesIO(got.content)) as z:
        assert z.read("word/media/image1.png") == PICTURE
        document = z.read("word/document.xml").decode()
    assert "<w:b/>" in document and "<w:hyperlink" in document and lines[0] not in document
    subtitles = srt(*lines[:3])
    answer = send("film.srt", subtitles.encode())
    got = requests.get(answer.json()["translatedFileUrl"], timeout=30).text
    timings = [x for x in subtitles.split("\r\n") if "-->" in x or x.isdigit()]
    assert [x for x in got.split("\r\n") if "-->" in x or x.isdigit()] == timings
    bomb = io.BytesIO()
    with zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("word/document.xml", b" " * (4 << 20))
    refused = send("bomb.docx", bomb.getvalue())
    assert refused.status_code == 413 and "expands" in refused.json()["error"]
    long = (" ".join(lines) + "\n") * (250_000 // len(" ".join(lines)))
    refused = send("long.md", long.encode())
    assert refused.status_code == 413 and "characters to translate" in refused.json()["error"]
