import bz2
import gzip
import lzma
import re
from collections import Counter

import numpy as np
import pytest

from nmt_cli.data.corpora import LineBlocks, iter_lines
from nmt_cli.data.pairs import (
    NO_TAB,
    Cleaning,
    Deduplicator,
    PairSource,
    RawPairs,
    chunks,
    clean_raw_pairs,
    filter_reason,
    iter_aligned,
    iter_tsv,
    normalize_lines,
)
from nmt_cli.data.reservoir import Reservoir
from nmt_cli.data.tokenizer import normalize
from nmt_cli.runtime.errors import DataError
from tests.conftest import multi30k_lines


@pytest.mark.parametrize(
    "suffix, opener", [("", open), (".gz", gzip.open), (".bz2", bz2.open), (".xz", lzma.open)]
)
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
    for first, second, counts in (
        ("a.en", "a.fr", "3 lines but .* has 2"),
        ("a.fr", "a.en", "2 lines but .* has 3"),
    ):
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


# Lines that exercise every way normalize() and the filters can act: other whitespace (tab, no-break
# space, line separator, U+3000), double and edge spaces, CR line ends, empty lines, invalid UTF-8,
# a Greek final sigma for lowercasing, a long line and a ratio.
AWKWARD = [
    "A  b",
    " lead",
    "trail ",
    "tab\there",
    "nb\u00a0sp",
    "sep\u2028x",
    "wide\u3000space",
    "cr end\r",
    "",
    "ΟΔΟΣ ΚΑΙ",
    "x " * 30,
    "one",
    "a b c d e f g",
    "\x1fctl",
    "ok line",
    "É grand",
]


def _write(path, lines, opener=open, raw_tail=b""):
    with opener(path, "wb") as fh:
        fh.write(("\n".join(lines) + "\n").encode("utf-8") + raw_tail)


def _reference_reason(src, tgt, max_len, max_ratio):
    """filter_reason's rule written pair by pair, the reference for the vectorised filter."""
    ns, nt = src.count(" ") + 1 if src else 0, tgt.count(" ") + 1 if tgt else 0
    if ns == 0 or nt == 0:
        return "empty side"
    if ns > max_len or nt > max_len:
        return f"longer than {max_len} words"
    if max(ns, nt) > max_ratio * min(ns, nt) and max(ns, nt) > 3:
        return f"length ratio over {max_ratio:g}"
    return None


def _reference(pairs, lowercase, max_len, max_ratio):
    kept, dropped = [], Counter()
    for pair in pairs:
        if pair is None:
            dropped[NO_TAB] += 1
            continue
        s, t = normalize(pair[0], lowercase), normalize(pair[1], lowercase)
        reason = _reference_reason(s, t, max_len, max_ratio)
        if reason:
            dropped[reason] += 1
        else:
            kept.append((s, t))
    return kept, dropped


def _cleaned(source, cleaning, n):
    kept, dropped, read = [], Counter(), 0
    for block, scanned in zip(source.blocks(n), source.raw_pairs(n)):
        chunk = cleaning(block)
        raw = RawPairs(block)
        assert len(raw) == chunk.read and list(raw) == raw[:] and raw[1:-1] == list(raw)[1:-1]
        # The line starts found while reading are the ones a block's own scan finds.
        assert scanned.block == block and all(
            np.array_equal(a, b) for a, b in zip(scanned.starts, raw.starts)
        )
        # Raw pairs (what SentencePiece's sample holds), cleaned on their own, give what the block
        # gives.
        again = clean_raw_pairs(raw[:], cleaning)
        assert (again.pairs(), again.dropped, again.read) == (
            chunk.pairs(),
            chunk.dropped,
            chunk.read,
        )
        kept += chunk.pairs()
        dropped.update(chunk.dropped)
        read += chunk.read
    return kept, dropped, read


@pytest.mark.parametrize("lowercase", [False, True])
def test_block_cleaning_gives_what_pair_by_pair_cleaning_gives(tmp_path, lowercase):
    en = AWKWARD + multi30k_lines("val", "en", 200)
    fr = list(reversed(AWKWARD)) + multi30k_lines("val", "fr", 200)
    _write(
        tmp_path / "c.en.gz", en, gzip.open, raw_tail=b"bad \xff\xfe utf8"
    )  # unterminated last line
    _write(tmp_path / "c.fr.gz", fr, gzip.open, raw_tail="dernière".encode())
    tsv = tmp_path / "c.tsv"
    _write(
        tsv,
        [f"{e}\t{f}" + ("\t0.5" if i % 3 else "") for i, (e, f) in enumerate(zip(en, fr))]
        + ["no tab", "\t"],
    )
    for source in (
        PairSource("c", (tmp_path / "c.en.gz", tmp_path / "c.fr.gz")),
        PairSource("t", (tsv,), tsv=True),
    ):
        want, want_dropped = _reference(list(source), lowercase, 10, 2.0)
        for n in (1, 7, 1000):
            kept, dropped, read = _cleaned(source, Cleaning(lowercase, 10, 2.0, tsv=source.tsv), n)
            assert kept == want and dropped == want_dropped and read == len(list(source))
    assert want_dropped[NO_TAB] == 1 and len(want_dropped) == 4  # every reason happened


def test_normalize_lines_is_normalize_of_each_line():
    lines = AWKWARD + ["  ", " ", "a\u2029b", "x\u0085y", "Σ", "ΑΣ\u2028", "last "]
    for lowercase in (False, True):
        assert normalize_lines(lines, lowercase) == [normalize(line, lowercase) for line in lines]
    assert normalize_lines([]) == [] and normalize_lines([""]) == [""]


def test_bytes_cleaning_finds_every_kind_of_whitespace_and_nothing_else():
    import sys

    from nmt_cli.data.pairs import _normal_side, _wide_spaces

    spaces = [chr(c) for c in range(sys.maxunicode + 1) if chr(c).isspace() and c != 10]
    wide = [ch for ch in spaces if ord(ch) > 127]
    for ch in wide:
        assert len(_wide_spaces(np.frombuffer(f"x{ch}y".encode(), dtype=np.uint8))) == 1, hex(
            ord(ch)
        )
    # Characters sharing the lead bytes of the wide spaces, and not spaces themselves: ’, …, etc.
    neighbours = [
        chr(c)
        for lo, hi in ((0x80, 0x100), (0x1600, 0x1700), (0x2000, 0x2100), (0x3000, 0x3100))
        for c in range(lo, hi)
        if not chr(c).isspace()
    ]
    assert not len(_wide_spaces(np.frombuffer("".join(neighbours).encode(), dtype=np.uint8)))
    # Through the whole block cleaning: every space kind at a line's start, inside and end.
    lines = (
        [f"{ch}a{ch}b {ch} c{ch}" for ch in spaces]
        + [f"d{ch}" for ch in neighbours]
        + ["", " ", "e  f"]
    )
    block = "".join(line + "\n" for line in lines).encode()
    assert _normal_side(block) is not None  # the bytes path, not the str one
    chunk = Cleaning(False, 1000, 1000.0)((block, block))
    want = [normalize(line) for line in lines]
    assert [s for s, _ in chunk.pairs()] == [w for w in want if w]
    assert chunk.dropped == {"empty side": want.count("")} and chunk.read == len(lines)


def test_line_blocks_take_whole_lines_across_reads(tmp_path, monkeypatch):
    monkeypatch.setattr(LineBlocks, "READ_BYTES", 5)
    path = tmp_path / "l.txt"
    path.write_bytes(b"un\ndeux\n\ntrois quatre\r\nfin sans retour")
    with LineBlocks(path) as blocks:
        assert blocks.take(2) == (b"un\ndeux\n", 2)
        assert blocks.take(2) == (b"\ntrois quatre\r\n", 2)
        assert blocks.take(2) == (b"fin sans retour", 1)
        assert blocks.take(2) == (b"", 0)
    with LineBlocks(path) as blocks:  # line i is block[starts[i]:starts[i + 1] - 1]
        block, starts = blocks.take_lines(3)
        assert (block, starts.tolist()) == (b"un\ndeux\n\n", [0, 3, 8, 9])
        block, starts = blocks.take_lines(5)
        assert [block[a : b - 1] for a, b in zip(starts[:-1], starts[1:])] == [
            b"trois quatre\r",
            b"fin sans retour",
        ]
    with LineBlocks(path) as blocks:
        blocks.take(1)
        assert blocks.count_rest() == len(list(iter_lines(path))) - 1 == 4


def test_aligned_blocks_name_both_line_counts(tmp_path):
    (tmp_path / "a.en").write_text("x\n" * 10)
    (tmp_path / "a.fr").write_text("y\n" * 7)
    with pytest.raises(DataError, match=r"a.en has 10 lines but .*a.fr has 7"):
        list(PairSource("a", (tmp_path / "a.en", tmp_path / "a.fr")).blocks(3))


def _offer_one_by_one(sample, items):
    """Algorithm L visiting every item, with the reservoir's own drawn replacements: the
    behaviour the skipping, block-wise offer() must reproduce."""
    for item in items:
        if len(sample.items) < sample.capacity:
            sample.items.append(item)
            sample.seen += 1
            sample._after = sample.seen
            continue
        if sample._next() == sample.seen:  # positions strictly increase: one at most per item
            sample.items[int(sample._slots[0])] = item
            sample._positions, sample._slots = sample._positions[1:], sample._slots[1:]
        sample.seen += 1


@pytest.mark.parametrize("chunk", [1, 13, 500, 5000])
def test_reservoir_skips_to_the_items_it_takes_with_the_same_draws(chunk):
    stream = list(range(20_000))
    slow, fast = Reservoir(100, seed=3), Reservoir(100, seed=3)
    for part in chunks(iter(stream), chunk):
        _offer_one_by_one(slow, part)
        if fast.wants(len(part)):
            fast.offer(part)
        else:
            fast.pass_over(len(part))
    assert (
        fast.items == slow.items
        and fast.seen == slow.seen == 20_000
        and fast._next() == slow._next()
    )


def test_raw_pairs_are_cut_out_of_their_block_alone_or_together():
    import numpy as np

    aligned = RawPairs((b"a b\nc\n\nd e f", b"x\ny y\nz\nw"))
    assert len(aligned) == 4
    assert aligned.take(np.array([2, 0, 3, 0])) == [
        (b"", b"z"),
        (b"a b", b"x"),
        (b"d e f", b"w"),
        (b"a b", b"x"),
    ]
    assert aligned[1] == (b"c", b"y y") and aligned[1:3] == [(b"c", b"y y"), (b"", b"z")]
    with pytest.raises(IndexError):
        aligned[4]
    tsv = RawPairs((b"a\tx\nno tab\nb\ty\tmore\n",))
    assert tsv.take(np.array([1, 2, 0])) == [None, (b"b", b"y"), (b"a", b"x")]
    assert tsv[:] == [(b"a", b"x"), None, (b"b", b"y")]


def test_filter_numbers_drops_pairs_whose_digits_differ_and_keeps_the_others():
    src = multi30k_lines("train", "en", 200)
    tgt = multi30k_lines("train", "fr", 200)
    src[:4] = ["3 dogs play.", "At 10:30, 1,234 people.", "Two dogs.", "Page 12."]
    tgt[:4] = ["3 chiens jouent.", "À 10 h 30, 1 234 personnes.", "2 chiens.", "Page 21."]
    block = ("\n".join(src) + "\n").encode(), ("\n".join(tgt) + "\n").encode()
    plain = Cleaning(False, 80, 3.0)(block)
    chunk = Cleaning(False, 80, 3.0, numbers=True)(block)
    kept = chunk.pairs()
    assert ("Two dogs.", "2 chiens.") not in kept and ("Page 12.", "Page 21.") not in kept
    assert ("3 dogs play.", "3 chiens jouent.") in kept
    assert ("At 10:30, 1,234 people.", "À 10 h 30, 1 234 personnes.") in kept
    dropped = plain.kept - chunk.kept
    assert dropped >= 2 and chunk.dropped["numbers differ"] == dropped
    assert all(sorted(re.findall(r"\d+", s)) == sorted(re.findall(r"\d+", t)) for s, t in kept)
