"""LibreTranslate's API as its clients use it, on `nmt serve`.

Routes: ``POST /translate``, ``POST /detect``, ``GET /languages``, ``GET /frontend/settings``,
``POST /translate_file`` with ``GET /download_file/{name}``, and ``POST /suggest`` (with
``--suggestions``; refused as LibreTranslate refuses it without, nmt_cli/serving/recall.py).
Fields come from a JSON body, an urlencoded or multipart form, or the query string; answers,
status codes and error texts are LibreTranslate's, so its web page, libretranslatepy,
deep-translator, Weblate and SearXNG work unchanged (docs/serve.md lists what each sends and the
tests that replay it).
"""

# No `from __future__ import annotations`: FastAPI reads the route functions' annotations
# (Request) as objects.

from dataclasses import replace
from typing import Any
from urllib.parse import quote

from fastapi import Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, Field

from nmt_cli.documents.formats import EXTENSIONS, MEDIA_TYPES
from nmt_cli.serving import pivot, recall
from nmt_cli.serving.documents import plan_texts, translate_plan
from nmt_cli.serving.files import translate_upload
from nmt_cli.serving.kept_files import clean_name, url_path
from nmt_cli.serving.language_id import LanguageIdentifier
from nmt_cli.serving.request_body import RequestError
from nmt_cli.serving.request_options import hold_back, text_confidences, text_options
from nmt_cli.translation.contract import TranslateOptions

LANGUAGE_NAMES = {
    "ar": "Arabic",
    "cs": "Czech",
    "de": "German",
    "en": "English",
    "es": "Spanish",
    "fi": "Finnish",
    "fr": "French",
    "it": "Italian",
    "ja": "Japanese",
    "nl": "Dutch",
    "pl": "Polish",
    "pt": "Portuguese",
    "ro": "Romanian",
    "ru": "Russian",
    "tr": "Turkish",
    "uk": "Ukrainian",
    "zh": "Chinese",
}
FILE_FORMATS = EXTENSIONS  # .txt, .html, .docx, .pptx, .odt, .epub, .srt, .vtt, .md
FRONTEND_TIMEOUT_MS = 500  # how long LibreTranslate's page waits after typing before it asks


# ---------------------------------------------------------------------- the API description


class TranslateRequest(BaseModel):
    q: str | list[str] = Field(description="Text or texts to translate")
    source: str = Field(description='Source language code, or "auto" to identify it')
    target: str = Field(description="Target language code")
    format: str = Field("text", description='"text" or "html"')
    alternatives: int = Field(0, ge=0, description="Alternative translations wanted per text")
    restore_case: bool = Field(
        True, description="Translate ALL CAPS and Title Case in sentence case, then recase"
    )
    numbers: str = Field("keep", description='"keep", "target" (its convention) or "model"')
    api_key: str | None = Field(None, description="The server's API key, where it needs one")


class DetectRequest(BaseModel):
    q: str | list[str] = Field(description="Text whose language is wanted")
    api_key: str | None = None


class FileRequest(BaseModel):
    file: bytes = Field(
        description="A .txt, .html, .docx, .pptx, .odt, .epub, .srt, .vtt or .md file",
        json_schema_extra={"format": "binary"},
    )
    source: str
    target: str
    api_key: str | None = None


class SuggestRequest(BaseModel):
    q: str = Field(description="The source text")
    s: str = Field(description="Its better translation")
    source: str = Field(description="Source language code")
    target: str = Field(description="Target language code")
    api_key: str | None = None


class NativeRequest(BaseModel):
    src: list[str] = Field(description="Sentences to translate")
    model: str | None = Field(None, description="A model id from /v1/models")
    source: str | None = None
    target: str | None = None
    beam_size: int | None = Field(None, ge=1, le=32)
    nbest: int = Field(1, ge=1, le=32)
    alignments: bool = False
    attention: bool = False
    format: str = Field("text", description='"text" or "html"')
    restore_case: bool = Field(
        True, description="Translate ALL CAPS and Title Case in sentence case, then recase"
    )
    numbers: str = Field("keep", description='"keep", "target" (its convention) or "model"')
    api_key: str | None = None


def body_schema(model: type[BaseModel], forms: bool = True, multipart_only: bool = False) -> dict:
    """The route's request body for the OpenAPI description (the route itself reads its fields
    from several places, so FastAPI cannot infer it)."""
    schema = model.model_json_schema()
    kinds = ["multipart/form-data"] if multipart_only else ["application/json"]
    if forms and not multipart_only:
        kinds += ["application/x-www-form-urlencoded", "multipart/form-data"]
    return {"requestBody": {"required": True, "content": {k: {"schema": schema} for k in kinds}}}


# ---------------------------------------------------------------------- reading the fields


def text_field(body: dict, key: str) -> str:
    value = body.get(key)
    if value is None or value == "":
        raise RequestError(400, f"Invalid request: missing {key} parameter")
    if not isinstance(value, str):
        raise RequestError(400, f"Invalid request: {key} must be a string")
    return value.strip().lower() if key in ("source", "target") else value


def texts_field(body: dict) -> tuple[list[str], bool]:
    """(texts, whether q was a list); line ends made "\\n" as LibreTranslate makes them."""
    q = body.get("q")
    if q is None or q == "" or q == []:
        raise RequestError(400, "Invalid request: missing q parameter")
    batch = isinstance(q, list)
    texts = q if batch else [q]
    if not all(isinstance(t, str) for t in texts):
        raise RequestError(400, "Invalid request: q must be a string or a list of strings")
    return [t.replace("\r\n", "\n").replace("\r", "\n") for t in texts], batch


def check_count(texts: list[str], most: int) -> None:
    if len(texts) > most:
        raise RequestError(
            400, f"Invalid request: request ({len(texts)}) exceeds text limit ({most})"
        )


def alternatives_field(body: dict, most: int) -> int:
    value = body.get("alternatives", 0)
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise RequestError(400, "Invalid request: alternatives parameter is not a number")
    try:
        n = max(0, int(value))
    except ValueError:
        raise RequestError(400, "Invalid request: alternatives parameter is not a number") from None
    if n > most:
        raise RequestError(400, f"Invalid request: alternatives parameter must be <= {most}")
    return n


def unique(items: list[str], best: str) -> list[str]:
    """Items in order without repeats, the best translation and empty (or blank) ones."""
    seen = {best}
    out = []
    for item in items:
        if item.strip() and item not in seen:
            seen.add(item)
            out.append(item)
    return out


def name(code: str) -> str:
    return LANGUAGE_NAMES.get(code, code)


# ---------------------------------------------------------------------- translating


class LibreTranslate:
    """What the routes share: the service, identifiers per set of candidate languages."""

    def __init__(self, service):
        self.service = service
        self.languages = pivot.languages(service.models)
        self._identifiers: dict[tuple[str, ...], LanguageIdentifier] = {}

    def identifier(self, candidates: list[str]) -> LanguageIdentifier:
        key = tuple(sorted(candidates))
        if key not in self._identifiers:
            self._identifiers[key] = LanguageIdentifier(key)
        return self._identifiers[key]

    def route(self, source: str, target: str, texts: list[str]):
        """(route, detected language or None) for a request's pair; "auto" identifies the source
        among the languages that translate into the target."""
        routes = self.service.routes
        if target not in self.languages:
            raise RequestError(400, f"{target[:20]} is not supported")
        detected = None
        if source == "auto":
            candidates = [s for s, t in routes if t == target]
            if not candidates:
                raise RequestError(400, f"{target[:20]} is not supported")
            language, confidence = self.identifier(candidates).detect_many(texts)[0]
            detected = {"confidence": confidence, "language": language}
            source = language
        elif source not in self.languages:
            raise RequestError(400, f"{source[:20]} is not supported")
        if (source, target) not in routes:
            raise RequestError(
                400,
                f"{name(target)} ({target}) is not available as a target language from "
                f"{name(source)} ({source})",
            )
        return routes[source, target], detected

    async def translate(
        self,
        route,
        texts: list[str],
        alternatives: int,
        fmt: str,
        asked: TranslateOptions | None = None,
    ):
        """(translations, alternatives per text, which texts had a sentence cut, each text's
        confidence) of LibreTranslate's texts: plain text or HTML through the document layer,
        the segments of all texts decoded together; a whitespace-only text gives "".
        ``asked``: the request's ``restore_case`` and ``numbers`` (request_options.py)."""
        asked = asked or TranslateOptions()
        beam = max(route.last.translator.config.beam_size, alternatives + 1)
        plan = plan_texts(route, texts, fmt, numbers=asked.numbers, restore_case=asked.restore_case)
        options = replace(asked, beam_size=beam, nbest=alternatives + 1)
        results = await translate_plan(self.service, route, plan, options)
        versions = [plan.assemble(results, alternative=k) for k in range(alternatives + 1)]
        translated = [t if t.strip() else "" for t in versions[0]]
        alts = [
            unique([v[i] for v in versions[1:]], translated[i]) if fmt == "text" else []
            for i in range(len(texts))
        ]
        confidences = text_confidences(plan, results, len(texts))
        return translated, alts, plan.cut(results), confidences


def add_routes(app, service, read) -> None:
    """LibreTranslate's routes on ``app``; ``read(request, allow_form)`` gives a request's fields
    with its api_key checked."""
    lt = LibreTranslate(service)
    most_alternatives = 31

    @app.post(
        "/translate",
        summary="Translate text (LibreTranslate)",
        openapi_extra=body_schema(TranslateRequest),
    )
    async def libretranslate(request: Request):
        body = await read(request, allow_form=True)
        texts, batch = texts_field(body)
        source, target = text_field(body, "source"), text_field(body, "target")
        alternatives = alternatives_field(body, most_alternatives)
        fmt = body.get("format") or "text"
        if not isinstance(fmt, str) or fmt not in ("text", "html"):
            raise RequestError(400, f"{str(fmt)[:20]} format is not supported")
        check_count(texts, service.settings.max_queue)
        service.check_length(texts)
        route, detected = lt.route(source, target, texts)
        service.charge(request, body["api_key"], sum(len(t) for t in texts))
        request.state.log_texts = texts
        asked = text_options(body, TranslateOptions())
        translated, alts, _cut, confidences = await lt.translate(
            route, texts, alternatives, fmt, asked
        )
        threshold = service.settings.min_confidence
        if threshold > 0:
            translated, low = hold_back(texts, translated, confidences, threshold)
            alts = [[] if held else a for a, held in zip(alts, low)]
        out: dict[str, Any] = {"translatedText": translated if batch else translated[0]}
        if detected is not None:
            out["detectedLanguage"] = [detected] * len(texts) if batch else detected
        if alternatives:
            out["alternatives"] = alts if batch else alts[0]
        if threshold > 0:  # the answer stays LibreTranslate's own without the option
            out["confidence"] = confidences if batch else confidences[0]
            out["lowConfidence"] = low if batch else low[0]
        return out

    @app.post(
        "/detect",
        summary="Identify the language of a text (LibreTranslate)",
        openapi_extra=body_schema(DetectRequest),
    )
    async def detect(request: Request):
        body = await read(request, allow_form=True)
        texts, _batch = texts_field(body)
        check_count(texts, service.settings.max_queue)
        service.check_length(texts)
        service.charge(request, body["api_key"], sum(len(t) for t in texts))
        sources = sorted({m.source for m in service.models})
        found = lt.identifier(sources).detect_many(texts)
        return [{"confidence": c, "language": language} for language, c in found]

    @app.get("/languages", summary="Languages served, each with its targets (LibreTranslate)")
    async def languages():
        return [
            {"code": code, "name": name(code), "targets": sorted(targets)}
            for code, targets in sorted(lt.languages.items())
        ]

    @app.get("/frontend/settings", summary="Settings of LibreTranslate's web page")
    async def frontend_settings():
        sources = sorted({s for s, _ in service.routes})
        source = "auto" if len(sources) > 1 else sources[0]
        target = service.models[0].target
        keyed = service.settings.api_key is not None
        return {
            "charLimit": service.settings.max_chars,
            "frontendTimeout": FRONTEND_TIMEOUT_MS,
            "apiKeys": keyed,
            "keyRequired": keyed,
            "suggestions": service.recall.store is not None,
            "filesTranslation": True,
            "supportedFilesFormat": sorted(FILE_FORMATS),
            "language": {
                "source": {
                    "code": source,
                    "name": "Auto Detect" if source == "auto" else name(source),
                },
                "target": {"code": target, "name": name(target)},
            },
        }

    @app.post(
        "/suggest",
        summary="Suggest a better translation of a text (LibreTranslate; --suggestions)",
        openapi_extra=body_schema(SuggestRequest),
    )
    async def suggest(request: Request):
        return await recall.suggest(service, lt, request, await read(request, allow_form=True))

    _add_file_routes(app, service, lt)


def _add_file_routes(app, service, lt: LibreTranslate) -> None:
    """``POST /translate_file`` and ``GET /download_file/{name}``: a file translated whole
    (nmt_cli/serving/files.py), kept for its download."""

    @app.post(
        "/translate_file",
        summary="Translate a .txt, .html, .docx, .pptx, .odt, .epub, .srt, .vtt or .md file "
        "(LibreTranslate)",
        openapi_extra=body_schema(FileRequest, multipart_only=True),
    )
    async def translate_file(request: Request):
        body, files = await service.fields(request, allow_form=True, file=True)
        key = service.check_key(body, request.headers)
        upload = files.get("file")
        if upload is None:
            raise RequestError(400, "Invalid request: missing file parameter")
        source, target = text_field(body, "source"), text_field(body, "target")
        filename = clean_name(upload.filename or "")
        if not filename:
            raise RequestError(400, "Invalid request: empty file")
        extension = ("." + filename.rsplit(".", 1)[-1].lower()) if "." in filename else ""
        if extension not in FILE_FORMATS:
            raise RequestError(400, "Invalid request: file format not supported")
        translated = await translate_upload(
            service,
            await upload.read(),
            FILE_FORMATS[extension],
            filename,
            lambda sample: lt.route(source, target, sample)[0],
            lambda chars: service.charge(request, key, chars),
        )
        client = service.client(request, key)
        stored = service.files.keep(client, filename, translated)
        url = request.url_for("download_file", filename=url_path(stored, filename))
        return {"translatedFileUrl": str(url)}

    @app.get("/download_file/{filename}", summary="A translated file (LibreTranslate)")
    async def download_file(filename: str):
        kept = service.files.get(filename)  # only files this process translated; never a path
        if kept is None:
            return JSONResponse({"error": "Invalid filename"}, status_code=404)
        original = kept.name
        return Response(
            kept.content,
            media_type=MEDIA_TYPES[FILE_FORMATS[_extension(original)]],
            headers={"Content-Disposition": f"attachment; filename*=UTF-8''{quote(original)}"},
        )


def _extension(filename: str) -> str:
    return "." + filename.rsplit(".", 1)[-1].lower()
