import pytest

from nmt_cli.serving.request_options import hold_back, text_confidences
from nmt_cli.translation.results import Translation
from tests.serving.test_serve import Server, run_dir  # noqa: F401 (the fixture)


@pytest.fixture(scope="module")
def controlled_server(run_dir, tmp_path_factory):  # noqa: F811
    terms = tmp_path_factory.mktemp("glossary") / "terms.tsv"
    terms.write_text("bike\tbateau\n", encoding="utf-8")
    s = Server(run_dir, "--glossary", str(terms), "--min-confidence", "0.99")
    yield s
    assert s.stop() == 0


def test_native_route_forces_glossaries_and_prefixes_and_gives_confidence(controlled_server):
    s = controlled_server
    src = ["A man is riding a bike.", "People.", "Two dogs play in the snow.", "A little girl."]
    status, plain = s.json("POST", "/v1/translate", {"src": src})
    assert status == 200
    texts = [t["text"] for t in plain["translations"]]
    assert "bateau" in texts[0].split()  # the served model's glossary
    for t in plain["translations"]:
        if t["text"]:
            assert 0 < t["confidence"] <= 1
    body = {
        "src": src,
        "glossary": {"dogs": "maison"},
        "prefix": [None, None, None, "Une voiture"],
    }
    status, forced = s.json("POST", "/v1/translate", body)
    assert status == 200, forced
    out = [t["text"] for t in forced["translations"]]
    assert "maison" in out[2].split() and "bateau" in out[0].split()
    assert out[3].startswith("Une voiture") and out[1] == texts[1]
    status, pairs = s.json(
        "POST", "/v1/translate", {"src": src[2:3], "glossary": [["dogs", "maison"]]}
    )
    assert status == 200 and pairs["translations"][0]["text"] == out[2]


@pytest.mark.parametrize(
    "extra, message",
    [
        ({"prefix": ["le " * 60]}, "prefix of line 1"),
        ({"prefix": "Un"}, "prefix: expected a list of 1"),
        ({"glossary": [["dog"]]}, "glossary[0]: a term pair"),
        ({"glossary": {"dog": "日本語"}}, "cannot spell the term"),
    ],
)
def test_bad_glossaries_and_prefixes_get_a_one_line_400(controlled_server, extra, message):
    status, answer = controlled_server.json("POST", "/v1/translate", {"src": ["A dog."], **extra})
    assert status == 400 and message in answer["error"] and "\n" not in answer["error"]


def test_libretranslate_route_gives_the_source_back_below_the_threshold(controlled_server):
    status, answer = controlled_server.json(
        "POST", "/translate", {"q": ["A man.", "Two dogs.\nA cat."], "source": "en", "target": "fr"}
    )
    assert status == 200
    assert answer["translatedText"] == ["A man.", "Two dogs.\nA cat."]
    assert answer["lowConfidence"] == [True, True]
    assert all(0 < c < 0.99 for c in answer["confidence"])


def test_a_text_comes_back_as_sent_when_one_of_its_sentences_is_below_the_threshold():
    from nmt_cli.documents.plan import plan_documents

    plan = plan_documents(["A man runs. A dog sleeps.", "   ", "Two cats."])
    sure = Translation("a", "A", [], [1], confidence=0.9)
    unsure = Translation("b", "B", [], [1], confidence=0.2)
    confidences = text_confidences(plan, [sure, unsure, sure], 3)
    assert confidences == [0.2, None, 0.9]
    texts = ["A man runs. A dog sleeps.", "   ", "Two cats."]
    out, low = hold_back(texts, ["Un. Deux.", "", "Trois."], confidences, 0.5)
    assert out == ["A man runs. A dog sleeps.", "", "Trois."] and low == [True, False, False]


@pytest.mark.slow
def test_page_shows_confidence_and_retranslates_after_an_edited_beginning(controlled_server):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import WebDriverWait

    from tests.serving.test_serve import chromium_driver

    s = controlled_server
    driver = chromium_driver()
    try:
        driver.get(s.url + "/")
        wait = WebDriverWait(driver, 30)
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#model option"))
        driver.find_element(By.ID, "source").send_keys("Two dogs play in the snow.")
        driver.find_element(By.ID, "translate").click()
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#segments .segment-confidence"))
        answer = s.json("POST", "/v1/translate", {"src": ["Two dogs play in the snow."]})[1]
        shown = driver.find_element(By.CSS_SELECTOR, "#segments .segment-confidence").text
        assert shown == f"{round(100 * answer['translations'][0]['confidence'])}%"
        box = driver.find_element(By.ID, "prefix")
        assert box.get_attribute("value") == answer["translations"][0]["text"]
        box.clear()
        box.send_keys("Une voiture", Keys.ENTER)
        wait.until(
            lambda d: d.find_element(By.CSS_SELECTOR, "#segments .segment-text").text.startswith(
                "Une voiture"
            )
        )
        forced = s.json(
            "POST",
            "/v1/translate",
            {"src": ["Two dogs play in the snow."], "prefix": ["Une voiture"]},
        )[1]["translations"][0]["text"]
        assert driver.find_element(By.CSS_SELECTOR, "#segments .segment-text").text == forced
    finally:
        driver.quit()
