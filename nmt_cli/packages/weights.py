"""A package's tensors as one safetensors file: the model's weights, its vocabulary shortlist and
a multilingual model's language vocabularies, under the prefixes ``model.``, ``shortlist.`` and
``languages.``. safetensors holds tensors and a string-to-string header only: loading it builds
tensors from bytes and runs nothing.

A tensor that several weights share (tied embeddings) is stored once; the header's ``aliases``
names the others. With int8, each floating matrix of at least :data:`INT8_MIN_ELEMENTS` elements
is stored row by row as q = round(w / s), s = max|w_row| / 127 (symmetric, one scale a row,
under ``scale.``), and read back as q * s in its own dtype: a quarter of the bytes for the weights
that hold nearly all of them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

import torch
from safetensors import SafetensorError
from safetensors.torch import load as load_tensors
from safetensors.torch import save as save_tensors

from nmt_cli.runtime.errors import CheckpointError

FORMAT = "nmt-weights-1"
INT8_MIN_ELEMENTS = 1024
QUANTIZE_CHOICES = ("none", "int8")


def _key(tensor: torch.Tensor) -> tuple:
    return (tuple(tensor.shape), tensor.dtype)


def _stored_as(tensor: torch.Tensor, candidates: list[tuple[torch.Tensor, str]]) -> str | None:
    """The name of a tensor already stored that ``tensor`` equals: the same storage, or equal
    values (tied weights that an averaged or moving-average checkpoint holds as copies)."""
    for other, name in candidates:
        if other.data_ptr() == tensor.data_ptr() or torch.equal(other, tensor):
            return name
    return None


def _quantized(tensor: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    rows = tensor.float().reshape(tensor.shape[0], -1)
    scale = rows.abs().amax(dim=1).clamp_min(1e-12) / 127.0
    q = torch.round(rows / scale[:, None]).clamp(-127, 127).to(torch.int8)
    return q.reshape(tensor.shape).contiguous(), scale.contiguous()


def weights_bytes(
    state: Mapping[str, torch.Tensor],
    shortlist: Mapping | None = None,
    languages: Mapping[str, torch.Tensor] | None = None,
    quantize: str = "none",
) -> bytes:
    """The safetensors file of a model's ``state`` dict, its shortlist payload and its language
    vocabularies' payload (nmt_cli/decoding), ``quantize`` none or int8."""
    if quantize not in QUANTIZE_CHOICES:
        raise CheckpointError(f"--quantize: '{quantize}' is not one of none, int8")
    tensors: dict[str, torch.Tensor] = {}
    aliases: dict[str, str] = {}
    seen: dict[tuple, list[tuple[torch.Tensor, str]]] = {}
    dtypes: dict[str, str] = {}
    for name, tensor in state.items():
        candidates = seen.setdefault(_key(tensor), [])
        original = _stored_as(tensor, candidates)
        if original is not None:
            aliases[f"model.{name}"] = original
            continue
        candidates.append((tensor, f"model.{name}"))
        big = tensor.is_floating_point() and tensor.dim() >= 2
        if quantize == "int8" and big and tensor.numel() >= INT8_MIN_ELEMENTS:
            tensors[f"model.{name}"], tensors[f"scale.{name}"] = _quantized(tensor)
            dtypes[f"model.{name}"] = str(tensor.dtype).removeprefix("torch.")
        else:
            tensors[f"model.{name}"] = tensor.detach().cpu().contiguous()
    header = {"format": FORMAT, "quantized": quantize, "aliases": json.dumps(aliases)}
    header["dtypes"] = json.dumps(dtypes)
    if shortlist is not None:
        tensors["shortlist.frequent"] = shortlist["frequent"].contiguous()
        tensors["shortlist.table"] = shortlist["table"].contiguous()
        header["shortlist_ranked"] = "true" if shortlist.get("ranked") else "false"
    for lang, ids in (languages or {}).items():
        tensors[f"languages.{lang}"] = ids.contiguous()
    return save_tensors(tensors, metadata=header)


def _header(data: bytes) -> dict[str, str]:
    """The string header of a safetensors file (its first 8 bytes give the header's length)."""
    size = int.from_bytes(data[:8], "little")
    if size > len(data) - 8:
        raise ValueError("header longer than the file")
    meta = json.loads(data[8 : 8 + size].decode("utf-8")).get("__metadata__") or {}
    if not isinstance(meta, dict) or not all(isinstance(v, str) for v in meta.values()):
        raise ValueError("malformed header")
    return meta


def read_weights(data: bytes, what: str) -> dict:
    """The ``model``, ``shortlist`` and ``languages`` entries of a checkpoint payload, from a
    package's safetensors bytes; ``what`` names the package in errors."""
    try:
        header = _header(data)
        tensors = load_tensors(data)
        aliases = json.loads(header.get("aliases", "{}"))
        dtypes = json.loads(header.get("dtypes", "{}"))
    except (SafetensorError, ValueError, UnicodeDecodeError, RuntimeError) as exc:
        raise CheckpointError(f"{what}: refused: unreadable weights ({str(exc)[:80]})") from None
    if header.get("format") != FORMAT or not isinstance(aliases, dict):
        raise CheckpointError(f"{what}: refused: weights in an unknown format")
    model: dict[str, torch.Tensor] = {}
    payload: dict = {}
    for name, tensor in tensors.items():
        kind, _, key = name.partition(".")
        if kind == "model":
            scale = tensors.get(f"scale.{key}")
            if scale is not None:
                dtype = getattr(torch, dtypes.get(name, "float32"), None)
                if not isinstance(dtype, torch.dtype) or scale.shape[0] != tensor.shape[0]:
                    raise CheckpointError(f"{what}: refused: malformed int8 weights {key[:60]}")
                rows = tensor.float().reshape(tensor.shape[0], -1) * scale[:, None]
                tensor = rows.reshape(tensor.shape).to(dtype)
            model[key] = tensor
        elif kind == "languages":
            payload.setdefault("languages", {})[key] = tensor
        elif kind == "shortlist":
            payload.setdefault("shortlist", {})[key] = tensor
    for alias, original in aliases.items():
        if not (isinstance(alias, str) and original in tensors and alias.startswith("model.")):
            raise CheckpointError(f"{what}: refused: malformed weight aliases")
        model[alias.removeprefix("model.")] = model[original.removeprefix("model.")]
    if "shortlist" in payload:
        payload["shortlist"]["ranked"] = header.get("shortlist_ranked") == "true"
    payload["model"] = model
    return payload
