import bz2
import gzip
import lzma
from collections import Counter

import numpy as np
import pytest

from nmt_cli.errors import DataError
from nmt_cli.pairs import Deduplicator, PairSource, Reservoir, chunks, filter_reason, iter_aligned, iter_tsv
from tests.conftest import multi30k_lines


@pytest.mark.parametrize("suffix, opener", [("", open), (".gz", gzip.open), (".bz2", bz2.open), (".xz", lzma.open)])
def test_aligned_files_stream_from_every_compression(tmp_path, suffix, opener):
    en, fr = multi30k_lines("val", "en", 30), multi30k_lines("val", "fr", 30)
    for lang, lines in (("en", en), ("fr", fr)):
        with opener(tmp_path / f"v.{lang}{suffix}", "wb") as fh:
            fh.write(("\n".join(lines) + "\r\n").encode("utf-8"))  # a CRLF ending is stripped too
    pairs = list(iter_aligned(tmp_path / f"v.en{suffix}", tmp_path / f"v.fr{suffix}"))
    assert pairs == list(zip(en, fr))


def test_aligned_files_of_different_length_name_both_counts(tmp_path):
    (tmp_path / "a.en").write_text("x\ny\nz\n")
    (tmp_path / "a.fr").write_text("x\ny\n")
    for first, second, counts in (("a.en", "a.fr", "3 lines but .* has 2"), ("a.fr", "a.en", "2 lines but .* has 3")):
        with pytest.raises(DataError, match=counts):
            list(iter_aligned(tmp_path / first, tmp_path / second))


def test_tsv_takes_two_columns_and_flags_lines_without_a_tab(tmp_path):
    path = tmp_path / "c.tsv"
    path.write_text("Hello.\tBonjour.\nno tab here\nA\tB\t0.93\n\tvide\n", encoding="utf-8")
    assert list(iter_tsv(path)) == [("Hello.", "Bonjour."), None, ("A", "B"), ("", "vide")]
    assert list(PairSource("c", (path,), tsv=True))[0] == ("Hello.", "Bonjour.")


def test_filter_reasons_on_normalised_pairs():
    assert filter_reason("a b", "c d", 10, 3.0) is None
    assert filter_reason("", "c", 10, 3.0) == "empty side"
    assert filter_reason(" ".join("w" * 11), "c", 10, 3.0) == "longer than 10 words"
    assert filter_reason("a b c d e f", "x", 10, 3.0) == "length ratio over 3"
    assert filter_reason("a b c", "x", 10, 3.0) is None  # short pairs are never ratio-filtered


def test_deduplicator_keeps_first_of_each_pair_across_chunks():
    rng = np.random.default_rng(0)
    pairs = [(f"s{i}", f"t{i % 7}") for i in rng.integers(0, 300, size=5000)]
    dedup, kept = Deduplicator(), []
    for chunk in chunks(iter(pairs), 97):
        kept += [p for p, fresh in zip(chunk, dedup.fresh(chunk)) if fresh]
    want = list(dict.fromkeys(pairs))
    assert kept == want and len(dedup) == len(want)
    # Runs stay few (binary-counter merging) and each is sorted.
    assert len(dedup.runs) <= int(np.log2(len(want))) + 1
    assert all((r[1:] > r[:-1]).all() for r in dedup.runs)  # np.diff would overflow on int64 hashes
    assert dedup.fresh([("s1", "t9"), ("s1", "t9")]) == [True, False]


def test_reservoir_is_the_whole_stream_while_it_fits_and_uniform_beyond():
    small = Reservoir(10, seed=1)
    small.offer(list(range(7)))
    assert small.items == list(range(7)) and small.seen == 7
    hits = Counter()
    for seed in range(400):
        r = Reservoir(10, seed=seed)
        for chunk in chunks(iter(range(100)), 13):
            r.offer(chunk)
        assert len(r.items) == 10 and len(set(r.items)) == 10 and r.seen == 100
        hits.update(i // 10 for i in r.items)
    # Each tenth of the stream holds a tenth of the sample: 400 expected per decile.
    assert all(320 < hits[d] < 480 for d in range(10)), hits
