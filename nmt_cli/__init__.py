"""nmt: attentional RNN encoder-decoder translation from the command line.

The Python API: ``from nmt_cli import Translator``; ``Translator.load(run_dir).translate(lines)``;
``translate_texts(translator, texts)`` for whole texts and ``translate_file(translator, "a.docx",
"a.fr.docx")`` for files.
"""

from nmt_cli.runtime.version import __version__

__all__ = ["Translator", "Translation", "translate_texts", "translate_file", "__version__"]


def __getattr__(name: str):
    # Lazy, so that `nmt --help` and `import nmt_cli` do not import torch.
    if name in ("Translator", "Translation", "Alternative"):
        from nmt_cli.translation import translator as translate

        return getattr(translate, name)
    if name == "translate_texts":
        from nmt_cli.documents.layer import translate_texts

        return translate_texts
    if name == "translate_file":  # a .docx, .pptx, .odt, .epub, .srt, .vtt, .md, .txt, .html file
        from nmt_cli.documents.files import translate_path

        return translate_path
    raise AttributeError(f"module 'nmt_cli' has no attribute {name!r}")
