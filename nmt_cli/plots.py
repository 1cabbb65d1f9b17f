"""Charts from the plot extra (matplotlib): BLEU by source-length bucket, one line per model."""

from __future__ import annotations

from pathlib import Path

from nmt_cli.errors import UserError


def bleu_by_length_chart(report: dict, path: Path) -> None:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise UserError("--plot needs matplotlib: pip install 'nmt[plot]'") from None
    fig, ax = plt.subplots(figsize=(6, 4))
    for name, entry in report.items():
        rows = [r for r in entry["by_length"] if r["bleu"] is not None]
        ax.plot([r["bucket"] for r in rows], [r["bleu"] for r in rows], marker="o", label=Path(name).name)
    ax.set_xlabel("source sentence length (words)")
    ax.set_ylabel("BLEU")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
