"""Pictures from the plot extra (matplotlib): the attention matrix of one translation as a heatmap
(Bahdanau et al.'s Figure 3), and BLEU by source-length bucket with one line per model (their
Figure 2)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from nmt_cli.runtime.errors import UserError

if TYPE_CHECKING:  # only for annotations: `nmt eval --plot` need not import torch
    import torch


def _pyplot(option: str):
    try:
        import matplotlib  # an optional dependency (the plot extra)

        matplotlib.use("Agg")  # files only: no display on servers
        import matplotlib.pyplot as plt
    except ImportError:
        raise UserError(f"{option} needs matplotlib: pip install 'nmt[plot]'") from None
    return plt


def check_plotting(path: Path) -> Path:
    """--attention-plot's folder created and matplotlib found, or a one-line error, before a
    model is loaded."""
    _pyplot("--attention-plot")
    return plot_dir(path)


def plot_dir(path: Path) -> Path:
    """Create the folder for --attention-plot's pictures, or say in one line why it cannot be."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(
            f"--attention-plot {path}: cannot create the folder ({exc.strerror})"
        ) from None
    return path


def _save(plt, fig, path: Path, dpi: int) -> None:
    try:
        fig.savefig(path, dpi=dpi)
    except OSError as exc:
        raise UserError(f"{path}: cannot write ({exc.strerror})") from None
    finally:
        plt.close(fig)


def attention_heatmap(
    weights: torch.Tensor, src_pieces: Sequence[str], tgt_pieces: Sequence[str], path: Path
) -> None:
    """Save alpha_ij (target piece i attending to source piece j) as a grey-scale heatmap: source
    pieces along x, target pieces along y, white = 1."""
    plt = _pyplot("--attention-plot")
    w = weights[: len(tgt_pieces), : len(src_pieces)].float().numpy()
    fig, ax = plt.subplots(
        figsize=(max(3, 0.35 * len(src_pieces) + 1.5), max(3, 0.35 * len(tgt_pieces) + 1.5))
    )
    ax.imshow(w, cmap="gray", vmin=0.0, vmax=1.0, aspect="auto")
    ax.set_xticks(range(len(src_pieces)), src_pieces, rotation=90, fontsize=8)
    ax.set_yticks(range(len(tgt_pieces)), tgt_pieces, fontsize=8)
    ax.set_xlabel("source")
    ax.set_ylabel("translation")
    fig.tight_layout()
    _save(plt, fig, path, dpi=100)


def bleu_by_length_chart(report: dict, path: Path) -> None:
    """One line per model: BLEU of each source-length bucket (buckets without sentences skipped)."""
    plt = _pyplot("--plot")
    fig, ax = plt.subplots(figsize=(6, 4))
    for name, entry in report.items():
        rows = [r for r in entry["by_length"] if r["bleu"] is not None]
        ax.plot(
            [r["bucket"] for r in rows],
            [r["bleu"] for r in rows],
            marker="o",
            label=Path(name).name,
        )
    ax.set_xlabel("source sentence length (words)")
    ax.set_ylabel("BLEU")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    _save(plt, fig, path, dpi=120)
