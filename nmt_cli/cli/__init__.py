"""The `nmt` command line. Each command parses its options and calls library functions; how it
starts (torch's import, threads, what an interruption leaves unfinished) is declared with
nmt_cli.runtime.startup.command, and main() turns errors and signals into one line and an exit code.

One module per group of commands registers them with the app, in the order `nmt --help` lists
them: training (preprocess, train, average), translating (translate, score), evaluating (eval),
serving (serve), packaging (export, models), suggestions (suggestions list, export)."""

# isort: off
from nmt_cli.cli import training, translating, evaluating, serving, packaging, suggestions  # noqa: F401

# isort: on
from nmt_cli.cli.app import app, main

__all__ = ["app", "main"]
