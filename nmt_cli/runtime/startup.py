"""How an `nmt` process starts: what main() does before any command, and the one decorator every
command is declared with.

Start-up tuning that remains, each through a public interface of Python or torch:

- The cores' load is sampled from the first moment (:func:`nmt_cli.runtime.cores.start_sample`), so
that
  the sample spans the imports and choosing the default number of threads afterwards need not
  wait for a sample of its own.
- ``TORCH_DEVICE_BACKEND_AUTOLOAD=0``, unless the user's environment sets it: nmt runs on the
  CPU, CUDA or MPS, all built into torch, so torch's import need not scan every installed package
  for out-of-tree device backends.
- A command that needs torch imports it with the garbage collector off, then freezes what the
  import built (``gc.freeze``) and turns the collector back on. Nearly every object torch's import
  creates lives until the process ends: collecting during the import finds almost nothing to free,
  and once frozen these objects stay out of every later collection too.

Everything else is the command's own: the decorator records what an interruption would leave
unfinished (nmt_cli/runtime/interrupts.py) and sets torch's threads from ``--threads``; the
interpreter then ends as usual, after the command has closed its outputs.
"""

from __future__ import annotations

import functools
import gc
import os
from collections.abc import Callable
from typing import Any

from nmt_cli.runtime import interrupts
from nmt_cli.runtime.cores import start_sample
from nmt_cli.runtime.memory import bound_primitive_cache


def prepare_process() -> None:
    """What main() does before parsing the command line: start sampling the cores' load, skip
    torch's scan for device backends, bound the kernel caches that grow with every new tensor
    shape (nmt_cli/runtime/memory.py: every command, not only training and the service), and have
    SIGINT and SIGTERM stop a command cleanly."""
    start_sample()
    os.environ.setdefault("TORCH_DEVICE_BACKEND_AUTOLOAD", "0")
    bound_primitive_cache()
    interrupts.install()


def import_torch() -> None:
    """Import torch with the collector off, then freeze what the import built and collect again."""
    gc.disable()
    try:
        import torch  # noqa: F401  (the command's torch, loaded here on purpose)
    finally:
        gc.freeze()
        gc.enable()


def command(
    unfinished: str | Callable[..., str],
    *,
    uses_torch: bool | Callable[..., bool] = True,
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Declare how a command starts. Put it under ``@app.command()``; the command is called with
    its options as keywords.

    ``unfinished`` says what a Ctrl-C or SIGTERM during the command leaves undone (a string, or a
    function of the command's options returning one); a task inside may say more.
    ``uses_torch`` (or a function of the options deciding it) has torch imported first, as
    :func:`import_torch` does, and then a ``threads`` option replaced by the number of threads
    configured for torch (nmt_cli.runtime.device.configure_threads: ``--threads``, ``$NMT_THREADS``,
    ``$OMP_NUM_THREADS`` or the cores not already busy)."""

    def declare(run: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(run)
        def started(**options: Any) -> Any:
            interrupts.command(unfinished(**options) if callable(unfinished) else unfinished)
            if uses_torch(**options) if callable(uses_torch) else uses_torch:
                import_torch()
                if "threads" in options:
                    # here, not at the top: runtime.device imports torch, loaded just above
                    from nmt_cli.runtime.device import configure_threads

                    options["threads"] = configure_threads(options["threads"])
            return run(**options)

        return started

    return declare
