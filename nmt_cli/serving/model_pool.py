"""Many served models in bounded memory: `nmt serve` with no -m (every installed model) or with
``--max-loaded N``.

Each model is known from the start by what is small: its card, recipe, decoding settings and
SentencePiece model (:class:`PooledTranslator`); its weights are loaded on its first request, by
the decoding thread that translates it, and the :class:`ModelPool` keeps at most ``max_loaded``
models' weights (0: no bound), unloading the least recently used first. A request whose model is
loading waits for it like any request waits for its batch, within ``--timeout``. A model unloaded
while a batch of it is still decoding is freed once that batch ends.
"""

from __future__ import annotations

import os
import sys
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from nmt_cli.config.recipes import recipe_from_dict
from nmt_cli.config.sections import DecodeConfig, override
from nmt_cli.packages.archive import RECIPE, SOURCE_SPM, TARGET_SPM, read_package
from nmt_cli.packages.loading import package_tokenizer, recipe_dict
from nmt_cli.translation.contract import TranslateOptions
from nmt_cli.translation.routing import Routing
from nmt_cli.translation.translator import MAX_SOURCE_TOKENS, Translator, load_translator


def resident_bytes(translator: Translator) -> int:
    """The bytes of a loaded model's tensors (parameters and buffers, each shared one once)."""
    tensors = {}
    for t in (*translator.model.parameters(), *translator.model.buffers()):
        tensors[t.data_ptr()] = t.numel() * t.element_size()
    return sum(tensors.values())


class ModelPool:
    """The loaded models, most recently used last; ``load`` makes a model's Translator."""

    def __init__(self, max_loaded: int, load: Callable[[str, Path, DecodeConfig], Translator]):
        self.max_loaded = max_loaded
        self.load = load
        self.lock = threading.Lock()
        self.loaded: OrderedDict[str, Translator] = OrderedDict()
        self.loading: dict[str, threading.Lock] = {}
        self.loads: dict[str, int] = {}
        self.unloads: dict[str, int] = {}
        self.resident: dict[str, int] = {}

    def get(self, name: str, path: Path, config: DecodeConfig) -> Translator:
        """The Translator of model ``name``, loaded from ``path`` if it is not."""
        with self.lock:
            if name in self.loaded:
                self.loaded.move_to_end(name)
                return self.loaded[name]
            one = self.loading.setdefault(name, threading.Lock())
        with one:  # one thread loads a model; the others wanting it wait for that load
            with self.lock:
                if name in self.loaded:
                    self.loaded.move_to_end(name)
                    return self.loaded[name]
            translator = self.load(name, path, config)
            with self.lock:
                self.loaded[name] = translator
                self.loads[name] = self.loads.get(name, 0) + 1
                self.resident[name] = resident_bytes(translator)
                while self.max_loaded and len(self.loaded) > self.max_loaded:
                    gone, _ = self.loaded.popitem(last=False)
                    self.unloads[gone] = self.unloads.get(gone, 0) + 1
                    self.resident.pop(gone, None)
            return translator

    def is_loaded(self, name: str) -> bool:
        with self.lock:
            return name in self.loaded

    def snapshot(self) -> dict[str, dict]:
        """Per model ever loaded: whether it is loaded now, its resident bytes, loads, unloads."""
        with self.lock:
            return {
                name: {
                    "loaded": name in self.loaded,
                    "resident_bytes": self.resident.get(name, 0),
                    "loads": self.loads.get(name, 0),
                    "unloads": self.unloads.get(name, 0),
                }
                for name in self.loads
            }


class PooledTranslator:
    """A package's Translating whose weights the pool loads on first use: its tokenizer, recipe
    and decoding settings are read at start, so that requests are checked, cut and batched
    without the weights."""

    def __init__(self, pool: ModelPool, name: str, path: Path, decode: dict[str, Any]):
        files = read_package(path, names=(RECIPE, SOURCE_SPM, TARGET_SPM))
        self.pool, self.name, self.checkpoint = pool, name, path
        self.recipe = recipe_from_dict(recipe_dict(files), f"{path} (recipe)")
        self.tokenizer = package_tokenizer(files)
        self.config = override(self.recipe.decode, decode)
        self.lowercase = self.recipe.data.lowercase
        self.max_source_tokens = MAX_SOURCE_TOKENS
        self.routing = Routing(self.recipe)
        self.warn = lambda msg: print(msg, file=sys.stderr)  # as a Translator's default

    @property
    def loaded(self) -> bool:
        return self.pool.is_loaded(self.name)

    @property
    def multilingual(self) -> bool:
        return self.routing.multilingual

    @property
    def directions(self) -> list[str]:
        return self.routing.directions

    @property
    def zero_shot_directions(self) -> list[str]:
        return self.routing.zero_shot

    def translate(self, lines: Sequence[str], options: TranslateOptions | None = None, /, **kw):
        translator = self.pool.get(self.name, self.checkpoint, self.config)
        return translator.translate(lines, options, **kw)


def translator_loader(device: str) -> Callable[[str, Path, DecodeConfig], Translator]:
    """How the pool loads a model: its package on ``device`` with the decoding settings it was
    served with."""

    def load(name: str, path: Path, config: DecodeConfig) -> Translator:
        return load_translator([os.fspath(path)], config, device=device)

    return load


class PoolCollector:
    """The pool's metrics for prometheus-client's registry (``--metrics``): per model, whether
    it is loaded, its resident bytes, its loads and unloads."""

    def __init__(self, pool: ModelPool):
        self.pool = pool

    def collect(self):
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        state = self.pool.snapshot()
        loaded = GaugeMetricFamily(
            "nmt_model_loaded", "1 while the model is loaded", labels=["model"]
        )
        resident = GaugeMetricFamily(
            "nmt_model_resident_bytes", "Bytes of a loaded model's tensors", labels=["model"]
        )
        loads = CounterMetricFamily("nmt_model_loads", "Times a model was loaded", labels=["model"])
        unloads = CounterMetricFamily(
            "nmt_model_unloads", "Times a model was unloaded", labels=["model"]
        )
        for name, s in state.items():
            loaded.add_metric([name], 1.0 if s["loaded"] else 0.0)
            resident.add_metric([name], s["resident_bytes"])
            loads.add_metric([name], s["loads"])
            unloads.add_metric([name], s["unloads"])
        return [loaded, resident, loads, unloads]
