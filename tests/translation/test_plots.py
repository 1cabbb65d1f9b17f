import sys

import pytest
import torch

from nmt_cli.runtime.errors import UserError
from nmt_cli.translation.plots import attention_heatmap, bleu_by_length_chart, plot_dir

image = pytest.importorskip("matplotlib.image")


def _middle(path):
    """The centre of the picture, where the matrix is drawn, as grey levels in [0, 1]."""
    pixels = image.imread(path)[..., :3].mean(axis=-1)
    h, w = pixels.shape
    return pixels, pixels[int(0.4 * h) : int(0.6 * h), int(0.45 * w) : int(0.65 * w)]


def test_attention_heatmap_is_white_where_attention_is_one(tmp_path):
    src, tgt = ["▁a", "▁dog", "▁runs", "."], ["▁un", "▁chien", "▁court", ".", "</s>"]
    attention_heatmap(torch.ones(5, 4), src, tgt, tmp_path / "ones.png")
    attention_heatmap(torch.zeros(5, 4), src, tgt, tmp_path / "zeros.png")
    _, ones = _middle(tmp_path / "ones.png")
    _, zeros = _middle(tmp_path / "zeros.png")
    assert ones.mean() > 0.95 and zeros.mean() < 0.05


def test_attention_heatmap_grows_with_the_sentence_and_ignores_padding(tmp_path):
    short, long = tmp_path / "short.png", tmp_path / "long.png"
    attention_heatmap(torch.eye(4), ["a"] * 4, ["b"] * 4, short)
    # Rows and columns past the pieces (padding of a batch) are cut off, not drawn.
    attention_heatmap(torch.eye(30)[:, :30], ["a"] * 20, ["b"] * 25, long)
    (small, _), (big, _) = _middle(short), _middle(long)
    assert big.shape[0] > small.shape[0] and big.shape[1] > small.shape[1]


def test_bleu_by_length_chart_skips_empty_buckets(tmp_path):
    rows = [
        {"bucket": "0-10", "bleu": 40.0},
        {"bucket": "10-20", "bleu": 30.0},
        {"bucket": "20-30", "bleu": None},
        {"bucket": "30+", "bleu": 12.5},
    ]
    bleu_by_length_chart(
        {
            "runs/attention": {"by_length": rows},
            "runs/none": {"by_length": [dict(r, bleu=r["bleu"] and r["bleu"] / 2) for r in rows]},
        },
        tmp_path / "chart.png",
    )
    pixels, _ = _middle(tmp_path / "chart.png")
    assert pixels.shape[:2] == (480, 720)  # 6 x 4 inches at 120 dpi
    assert pixels.min() < 0.5  # lines and labels are drawn on the white background


def test_without_matplotlib_the_option_is_named(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib now raises ImportError
    with pytest.raises(
        UserError, match=r"--attention-plot needs matplotlib: pip install 'nmt\[plot\]'"
    ):
        attention_heatmap(torch.eye(2), ["a", "b"], ["c", "d"], tmp_path / "x.png")
    with pytest.raises(UserError, match="--plot needs matplotlib"):
        bleu_by_length_chart({}, tmp_path / "y.png")


def test_unwritable_places_are_one_line_errors(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    with pytest.raises(
        UserError, match="--attention-plot .*a-file/pictures: cannot create the folder"
    ):
        plot_dir(blocker / "pictures")
    assert plot_dir(tmp_path / "new" / "pictures").is_dir()
    with pytest.raises(UserError, match="a-file/x.png: cannot write"):
        attention_heatmap(torch.eye(2), ["a", "b"], ["c", "d"], blocker / "x.png")
