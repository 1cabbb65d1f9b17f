"""Errors a user can cause, and the signal that stopped a training. The CLI prints each as one line
and exits with code 2 for an error, 128 + the signal number for an interruption."""

import signal


class UserError(Exception):
    """A problem with the user's input, files or environment, reported without a traceback."""

    exit_code = 2


class ConfigError(UserError):
    """A recipe or --set override that does not validate."""


class DataError(UserError):
    """Missing, mismatched or corrupt corpus, tokenizer or preprocessed files."""


class CheckpointError(UserError):
    """A checkpoint that cannot be loaded safely."""


def failure_reason(exc: BaseException) -> str:
    """Why a file could not be used, as the system says it ("Is a directory"), without the
    errno and the path that str() of an OSError repeats."""
    return getattr(exc, "strerror", None) or str(exc)


def refusal_line(exc: OSError) -> str:
    """One line for a file or folder the system refused (missing, read-only, full): the path it
    concerns and the system's reason."""
    reason = failure_reason(exc)
    return f"{exc.filename}: {reason}" if exc.filename else reason


class TrainingInterrupted(Exception):
    """Raised after a signal made training checkpoint and stop; carries the exit code."""

    def __init__(self, signum: int):
        super().__init__(f"interrupted by {signal.Signals(signum).name}")
        self.exit_code = 128 + signum
