"""Language identification restricted to the served languages (nmt_cli/serving/language_id.py)."""

import gzip

import pytest
from conftest import MIRROR

pytest.importorskip("py3langid")

from nmt_cli.serving.language_id import LanguageIdentifier  # noqa: E402


def test_one_served_language_is_every_text_and_guesses_stay_among_the_served():
    assert LanguageIdentifier(["en"]).detect("Der Hund läuft.") == [("en", 100.0)]
    ident = LanguageIdentifier(["en", "fr"])
    found = ident.detect("Der Hund läuft schnell durch den Park.")
    assert {lang for lang, _ in found} == {"en", "fr"}
    assert sum(c for _, c in found) == pytest.approx(100, abs=0.5)
    assert ident.detect("Le chien court dans le parc.")[0][0] == "fr"
    assert ident.detect_many(["The dog runs.", "A man and a woman walk in the park."])[0][0] == "en"


def test_tatoeba_test_lines_of_en_fr_de_are_identified_at_least_98_percent_right():
    files = {
        "en": "tatoeba-en-fr/test.en.gz",
        "fr": "tatoeba-en-fr/test.fr.gz",
        "de": "tatoeba-en-de/test.de.gz",
    }
    if not (MIRROR / files["de"]).exists():
        pytest.skip(f"real data not found at {MIRROR}; set NMT_DATA_MIRROR")
    ident = LanguageIdentifier(list(files))
    right = total = 0
    for lang, name in files.items():
        with gzip.open(MIRROR / name, "rt", encoding="utf-8") as fh:
            for line in fh:
                if line.strip():
                    right += ident.detect(line.strip())[0][0] == lang
                    total += 1
    assert total > 9000 and right / total >= 0.98
