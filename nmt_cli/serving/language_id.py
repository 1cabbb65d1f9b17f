"""Which served language a text is in, for `source: "auto"` and POST /detect.

py3langid (the ``serve`` extra; langid.py's naive Bayes model over byte n-grams, shipped in the
package) is restricted to the languages the server translates from, so a guess is always one it
can use. Its normalised probabilities are given as LibreTranslate gives confidences: percentages.
Where one language is served, every text is that language, with full confidence. Accuracy by
length on Tatoeba lines, speed, and the other identifier measured:
[docs/serve.md](../docs/serve.md#language-identification).
"""

from __future__ import annotations

from collections.abc import Sequence

from nmt_cli.runtime.errors import UserError


class LanguageIdentifier:
    def __init__(self, languages: Sequence[str]):
        self.languages = sorted(set(languages))
        self._model = None
        if len(self.languages) > 1:
            try:  # loaded only where there are languages to tell apart
                from py3langid.langid import MODEL_FILE
                from py3langid.langid import LanguageIdentifier as Model
            except ImportError:
                raise UserError(
                    "language identification needs the serve extra: pip install 'nmt[serve]'"
                ) from None
            self._model = Model.from_model_file(MODEL_FILE, norm_probs=True)
            known = [code for code in self.languages if code in self._model.nb_classes]
            if len(known) > 1:
                self._model.set_languages(known)
            else:
                self._model = None  # at most one language it knows: nothing to choose between

    def detect(self, text: str) -> list[tuple[str, float]]:
        """(language, confidence in percent) of the served languages, likeliest first."""
        if self._model is None:
            return [(self.languages[0], 100.0)]
        return [(lang, round(100.0 * float(p), 1)) for lang, p in self._model.rank(text)]

    def detect_many(self, texts: Sequence[str]) -> list[tuple[str, float]]:
        """One language for texts sent together (as LibreTranslate does for a list): the one whose
        confidence, weighted by each text's length, is largest."""
        if self._model is None or len(texts) == 1:
            return self.detect(texts[0]) if texts else [(self.languages[0], 0.0)]
        weight: dict[str, float] = {}
        total = sum(len(t) for t in texts) or 1
        for text in texts:
            for lang, conf in self.detect(text):
                weight[lang] = weight.get(lang, 0.0) + conf * len(text) / total
        return sorted(((lang, round(w, 1)) for lang, w in weight.items()), key=lambda x: -x[1])
