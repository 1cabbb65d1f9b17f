import os

import numpy as np
import pytest
import torch

from nmt_cli.config.recipes import recipe_from_dict
from nmt_cli.data.batches import (
    epoch_shards,
    iterate_epoch,
    make_batch,
    padding_fraction,
    token_batches,
)
from nmt_cli.data.corpora import read_lines
from nmt_cli.data.preprocess import preprocess
from nmt_cli.data.splits import save_tok_references, split_files
from nmt_cli.data.store import EncodedSplit, Side, load_split, sampled_split
from nmt_cli.data.tokenizer import BOS, EOS, PAD, Tokenizer, normalize
from nmt_cli.runtime.errors import DataError
from tests.conftest import multi30k_lines, tiny_recipe_dict, write_slice


def test_normalize_collapses_all_whitespace():
    assert normalize("  a\t b\u00a0 c \r") == "a b c"
    assert normalize("  Ärger\tIM Büro ", lowercase=True) == "ärger im büro"


def test_lowercase_recipe_stores_lowercased_splits_and_vocabulary(tmp_path):
    data = write_slice(tmp_path / "corpus", n_train=200, n_valid=20)
    recipe = recipe_from_dict(tiny_recipe_dict({**data, "lowercase": True}))
    run_dir = tmp_path / "run"
    preprocess(recipe, run_dir, log=lambda m: None)
    raw = (tmp_path / "corpus" / "train.en").read_text(encoding="utf-8")
    assert raw != raw.lower()
    for name in ("train", "valid", "test"):
        for side in ("src", "tgt"):
            text = (run_dir / "data" / f"{name}.{side}.txt").read_text(encoding="utf-8")
            assert text and text == text.lower(), f"{name}.{side}"
    tokenizer = Tokenizer.load(run_dir)
    pieces = tokenizer.src_pieces(range(tokenizer.src_vocab_size))
    assert not any(p != p.lower() for p in pieces if not p.startswith("<"))


def test_preprocess_real_slice(tiny_run):
    recipe, run_dir = tiny_run
    train = load_split(run_dir, "train")
    valid = load_split(run_dir, "valid")
    assert len(train) == 400 and len(valid) == 40
    assert train.src.ids.dtype == np.uint16  # a 300-piece vocabulary fits 16 bits
    assert (train.src.lengths > 0).all()
    assert (run_dir / "spm.model").exists() and (run_dir / "recipe.yaml").exists()
    assert (run_dir / "data" / "test.tgt.txt").read_text().count("\n") == 40


def test_tok_references_are_copied_for_held_out_splits(tmp_path, monkeypatch):
    data = {
        "corpus": "multi30k",
        "train": "train",
        "valid": "val",
        "test": ["test_2016_flickr", "test_2017_mscoco"],
    }
    recipe = recipe_from_dict({**tiny_recipe_dict({}), "data": data})
    saved = save_tok_references(recipe, tmp_path, log=lambda m: None)
    assert saved == {
        "valid": "valid.ref.lc-tok.txt",
        "test": "test.ref.lc-tok.txt",
        "test1": "test1.ref.lc-tok.txt",
    }
    assert len(read_lines(tmp_path / "test1.ref.lc-tok.txt")) == 461
    # Without them (an empty cache, a mirror that lacks tok/), preprocessing goes on and says so.
    monkeypatch.setenv("NMT_DATA_DIR", str(tmp_path / "empty-cache"))
    monkeypatch.setenv("NMT_DATA_MIRROR", str(tmp_path / "empty"))
    notes = []
    assert save_tok_references(recipe, tmp_path / "other", log=notes.append) == {}
    assert len(notes) == 3 and all("lc-tok scores will be unavailable" in n for n in notes)


def test_sampled_split_is_a_fresh_but_reproducible_segmentation_per_epoch(tiny_run):
    from nmt_cli.data.tokenizer import Tokenizer

    _, run_dir = tiny_run
    tok = Tokenizer.load(run_dir)
    src, tgt = (read_lines(run_dir / "data" / f"train.{side}.txt") for side in ("src", "tgt"))
    plain = load_split(run_dir, "train")
    e0 = sampled_split(src, tgt, tok, 0.5, seed=1, epoch=0)
    again = sampled_split(src, tgt, tok, 0.5, seed=1, epoch=0)
    e1 = sampled_split(src, tgt, tok, 0.5, seed=1, epoch=1)
    assert len(e0) == len(plain) == 400
    assert np.array_equal(e0.tgt.ids, again.tgt.ids) and np.array_equal(e0.src.ids, again.src.ids)
    assert not np.array_equal(e0.tgt.ids, e1.tgt.ids)
    # Other pieces, the same sentences: longer on average than the most likely segmentation.
    assert tok.decode_tgt([e1.tgt.get(i) for i in range(len(e1))]) == tgt
    assert len(e0.src.ids) > len(plain.src.ids) and len(e0.tgt.ids) > len(plain.tgt.ids)


def test_mismatched_line_counts_name_both_files(tmp_path):
    data = write_slice(tmp_path / "c", n_train=50)
    src = tmp_path / "c" / "train.en"
    src.write_text(src.read_text() + "one more line\n")
    recipe = recipe_from_dict(tiny_recipe_dict(data))
    with pytest.raises(DataError) as info:
        preprocess(recipe, tmp_path / "run", log=lambda m: None)
    msg = str(info.value)
    assert "train.en" in msg and "train.fr" in msg and "51" in msg and "50" in msg


def test_vanished_data_file_is_named(tmp_path):
    data = write_slice(tmp_path / "c", n_train=50)
    (tmp_path / "c" / "val.fr").unlink()
    with pytest.raises(DataError, match=r"val\.fr: file not found"):
        preprocess(recipe_from_dict(tiny_recipe_dict(data)), tmp_path / "run", log=lambda m: None)


def test_truncated_array_is_caught(tiny_run, tmp_path):
    import shutil

    _, run_dir = tiny_run
    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy)
    ids = copy / "data" / "train.tgt.ids.npy"
    np.save(ids, np.load(ids)[:-5])
    with pytest.raises(DataError, match="re-run nmt preprocess"):
        load_split(copy, "train")
    ids.write_bytes(b"garbage")
    with pytest.raises(DataError, match="re-run nmt preprocess"):
        load_split(copy, "train")


def test_token_batches_respect_budget_and_cover_everything():
    rng = np.random.default_rng(0)
    src = rng.integers(1, 40, size=500)
    tgt = rng.integers(1, 40, size=500)
    batches = token_batches(src, tgt, 300, seed=1, epoch=0)
    flat = np.concatenate(batches)
    assert sorted(flat.tolist()) == list(range(500))
    for b in batches:
        assert (tgt[b] + 1).sum() <= 300 or len(b) == 1
    # Reproducible from (seed, epoch); a new epoch reshuffles.
    again = token_batches(src, tgt, 300, seed=1, epoch=0)
    assert all((a == b).all() for a, b in zip(batches, again))
    other = token_batches(src, tgt, 300, seed=1, epoch=1)
    assert any(len(a) != len(b) or (a != b).any() for a, b in zip(batches, other))


def _token_batches_sentence_by_sentence(
    src_lengths, tgt_lengths, batch_tokens, seed, epoch, shuffle=True
):
    """The batching rule walked one sentence at a time: what token_batches must give."""
    rng = np.random.default_rng([seed, epoch])
    n = len(src_lengths)
    order = np.lexsort((rng.random(n) if shuffle else np.arange(n), src_lengths, tgt_lengths))
    batches, start, total = [], 0, 0
    for pos in range(n):
        cost = int(tgt_lengths[order[pos]] + 1)
        if total and total + cost > batch_tokens:
            batches.append(order[start:pos])
            start, total = pos, 0
        total += cost
    if start < n:
        batches.append(order[start:])
    return [batches[i] for i in rng.permutation(len(batches))] if shuffle else batches


@pytest.mark.parametrize("budget, shuffle", [(300, True), (25, True), (1000, False)])
def test_token_batches_are_the_sentence_by_sentence_rule(budget, shuffle):
    rng = np.random.default_rng(4)
    src, tgt = rng.integers(0, 40, size=3000), rng.integers(0, 40, size=3000)  # some longer than 25
    fast = token_batches(
        src.astype(np.int32), tgt.astype(np.int32), budget, seed=2, epoch=3, shuffle=shuffle
    )
    slow = _token_batches_sentence_by_sentence(src, tgt, budget, 2, 3, shuffle)
    assert len(fast) == len(slow) and all(a.tolist() == b.tolist() for a, b in zip(fast, slow))
    assert fast[-2:][1].tolist() == slow[-1].tolist()
    assert len(token_batches(src[:0], tgt[:0], budget, 2, 3)) == 0


def _split_of_lengths(src_lengths, tgt_lengths) -> EncodedSplit:
    """An in-memory split whose pairs have these lengths (ids: the pair's index, for checking)."""
    sides = []
    for lengths in (src_lengths, tgt_lengths):
        offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        ids = np.repeat(np.arange(len(lengths)) + 10, lengths).astype(np.int32)
        sides.append(Side(ids, offsets))
    return EncodedSplit(*sides)


def test_large_splits_are_batched_a_shard_at_a_time(monkeypatch):
    from nmt_cli.data import batches as data_module

    monkeypatch.setattr(data_module, "EPOCH_SHARD", 1000)
    monkeypatch.setattr(data_module, "SHARD_BLOCK", 64)
    rng = np.random.default_rng(5)
    src, tgt = rng.integers(0, 30, size=5000), rng.integers(1, 30, size=5000)
    split = _split_of_lengths(src, tgt)
    shards = list(epoch_shards(split, 200, seed=1, epoch=0))
    assert len(shards) == 5
    rows = [np.concatenate(list(shard)) for shard in shards]
    assert sorted(np.concatenate(rows).tolist()) == list(range(5000))  # every pair once an epoch
    for shard, members in zip(shards, rows):
        blocks = np.unique(members // 64)
        assert len(members) <= 1024 and len(blocks) >= 15
        assert blocks.max() - blocks.min() > 40  # drawn from across the corpus, not one stretch
        assert np.array_equal(
            np.sort(members),
            np.concatenate([np.arange(b * 64, min(b * 64 + 64, 5000)) for b in blocks]),
        )  # whole runs
        keys = tgt[shard.order] * 100 + src[shard.order]
        assert (np.diff(keys) >= 0).all()  # within a shard, sorted by (target, source) length
        for batch in shard:  # the budget, as for a small split
            assert len(batch) == 1 or int((tgt[batch] + 1).sum()) <= 200
    again = list(epoch_shards(split, 200, seed=1, epoch=0))
    other = list(epoch_shards(split, 200, seed=1, epoch=1))
    assert all(
        np.array_equal(a.order, b.order) and np.array_equal(a.taken, b.taken)
        for a, b in zip(again, shards)
    )
    assert not np.array_equal(np.concatenate(list(other[0])), rows[0])
    # Positions run on across shards; resuming mid-shard and ranks work as for one shard.
    full = [(p, b.src) for p, b in iterate_epoch(split, 200, 1, 0)]
    assert [p for p, _ in full] == list(range(sum(len(s) for s in shards)))
    start = len(shards[0]) + 3
    tail = [(p, b.src) for p, b in iterate_epoch(split, 200, 1, 0, start=start)]
    assert [p for p, _ in tail] == [p for p, _ in full[start:]]
    assert all(
        a.shape == b.shape and bool((a == b).all()) for (_, a), (_, b) in zip(tail, full[start:])
    )
    ranks = [list(iterate_epoch(split, 200, 1, 0, rank=r, world=2)) for r in (0, 1)]
    assert [p for p, _ in ranks[0]] == [p for p, _ in ranks[1]]
    assert all(p % 2 == 0 for p, _ in ranks[0])
    seen = np.concatenate([b.tgt_out[b.tgt_out >= 10].numpy() for r in ranks for _, b in r]) - 10
    used = [
        shard[j] for shard in shards for j in range(len(shard) - len(shard) % 2)
    ]  # one odd batch a shard dropped
    assert np.array_equal(np.unique(seen), np.unique(np.concatenate(used)))


def test_bucketing_keeps_padding_small(tiny_run):
    _, run_dir = tiny_run
    split = load_split(run_dir, "train")
    batches = token_batches(np.asarray(split.src.lengths), np.asarray(split.tgt.lengths), 400, 3, 0)
    sorted_pad = padding_fraction(split, batches)
    rng = np.random.default_rng(0)
    random_batches = np.array_split(rng.permutation(len(split)), len(batches))
    assert sorted_pad < 0.5 * padding_fraction(split, random_batches)


def test_batches_have_bos_eos_and_padding(tiny_run):
    _, run_dir = tiny_run
    split = load_split(run_dir, "train")
    pos, batch = next(iterate_epoch(split, 400, seed=1, epoch=0))
    assert pos == 0
    assert (batch.tgt_in[:, 0] == BOS).all()
    lengths = (batch.tgt_out != PAD).sum(1)
    assert int(lengths.sum()) == batch.tgt_tokens
    assert (batch.tgt_out.gather(1, (lengths - 1).unsqueeze(1)) == EOS).all()
    assert batch.tgt_tokens <= 400


def test_iterate_epoch_resumes_from_position_and_shards(tiny_run):
    _, run_dir = tiny_run
    split = load_split(run_dir, "train")
    full = [(p, b.src) for p, b in iterate_epoch(split, 400, 5, 0)]
    tail = [(p, b.src) for p, b in iterate_epoch(split, 400, 5, 0, start=3)]
    assert [p for p, _ in tail] == [p for p, _ in full[3:]]
    assert all((a == b).all() for (_, a), (_, b) in zip(tail, full[3:]))
    r0 = [p for p, _ in iterate_epoch(split, 400, 5, 0, rank=0, world=2)]
    r1 = [p for p, _ in iterate_epoch(split, 400, 5, 0, rank=1, world=2)]
    assert len(r0) == len(r1) and r0 == list(range(0, 2 * len(r0), 2))


def test_chunked_encoding_equals_encoding_at_once():
    from nmt_cli.data.store import _flat, encode_flat

    encode = lambda lines: [[len(w) for w in line.split()] for line in lines]
    lines = ["a bb ccc", "", "dddd", "e f", "gg hh ii jj", "k"]
    for chunk in (1, 2, 4, 100):
        ids, offsets = encode_flat(encode, lines, chunk=chunk)
        want_ids, want_offsets = _flat(encode(lines))
        assert ids.dtype == np.int32 and ids.tolist() == want_ids.tolist()
        assert offsets.tolist() == want_offsets.tolist()
    ids, offsets = encode_flat(encode, [])
    assert len(ids) == 0 and offsets.tolist() == [0]


def test_local_paths_expand_environment_variables_or_name_the_unset_one(tmp_path, monkeypatch):
    recipe = recipe_from_dict(
        tiny_recipe_dict({"train": "${NMT_TEST_CORPUS}/train.{lang}.gz", "valid": "v.{lang}"})
    )
    monkeypatch.delenv("NMT_TEST_CORPUS", raising=False)
    with pytest.raises(
        DataError, match="needs the environment variable NMT_TEST_CORPUS, which is not set"
    ):
        split_files(recipe, recipe.data.train)
    monkeypatch.setenv("NMT_TEST_CORPUS", str(tmp_path))
    assert split_files(recipe, recipe.data.train) == (
        tmp_path / "train.en.gz",
        tmp_path / "train.fr.gz",
    )


def test_failed_preprocess_leaves_no_run_dir(tmp_path):
    data = write_slice(tmp_path / "corpus", n_train=30, n_valid=5)
    (tmp_path / "corpus" / "train.fr").write_text("one line only\n")  # line counts differ
    recipe = recipe_from_dict(tiny_recipe_dict(data))
    with pytest.raises(DataError):
        preprocess(recipe, tmp_path / "runs" / "new", log=lambda m: None)
    assert not (tmp_path / "runs" / "new").exists()
    existing = tmp_path / "mine"
    (existing / "notes").mkdir(parents=True)
    with pytest.raises(DataError):
        preprocess(recipe, existing, log=lambda m: None)
    assert sorted(p.name for p in existing.iterdir()) == ["notes"]  # only what preprocess made goes


def _run_preprocess(recipe_dict, run_dir, logs=None):
    return preprocess(
        recipe_from_dict(recipe_dict),
        run_dir,
        log=(logs.append if logs is not None else lambda m: None),
    )


def test_several_corpora_tsv_and_dedup_with_counts_per_corpus(tmp_path):
    import bz2

    data = write_slice(tmp_path / "c", n_train=120, n_valid=10)
    en, fr = multi30k_lines("train", "en", 200), multi30k_lines("train", "fr", 200)
    tsv = tmp_path / "extra.tsv.bz2"
    rows = (
        [f"{e}\t{f}" for e, f in zip(en[150:200], fr[150:200])]
        + ["no tab"]
        + [f"{en[0]}\t{fr[0]}", f"  {en[151]} \t{fr[151]}"]
    )  # two repeats (one after cleaning)
    tsv.write_bytes(bz2.compress(("\n".join(rows) + "\n").encode()))
    recipe = tiny_recipe_dict(
        {**data, "train": [data["train"], str(tsv)], "format": "tsv", "dedup": True}
    )
    logs = []
    meta = _run_preprocess(recipe, tmp_path / "run", logs)
    first, second = meta["corpora"]
    assert first["read"] == 120 and second["read"] == 53
    assert second["dropped"]["no tab (not source<TAB>target)"] == 1
    assert second["dropped"]["duplicate pair"] == 2
    kept = first["kept"] + second["kept"]
    assert (
        len(load_split(tmp_path / "run", "train"))
        == kept
        == meta["splits"]["train"]["src"]["sentences"]
    )
    assert kept + sum(meta["dropped"].values()) == 173
    assert any(line.startswith(f"train {tsv}: 53 pairs read") for line in logs)
    assert any("from 2 corpora" in line for line in logs)
    stored = (tmp_path / "run" / "data" / "train.src.txt").read_text().split("\n")[:-1]
    assert stored[-1] == en[199] and len(set(zip(stored, stored))) == len(stored)


def test_read_and_clean_on_worker_processes_stores_what_one_process_stores(tmp_path, monkeypatch):
    from nmt_cli.data import preprocess as data_module

    data = write_slice(tmp_path / "c", n_train=400, n_valid=10)
    monkeypatch.setattr(data_module, "TEXT_CHUNK", 37)  # many blocks through the workers
    monkeypatch.setattr(data_module, "ENCODE_CHUNK", 50)  # and many encoded chunks
    recipe = tiny_recipe_dict(
        {**data, "dedup": True, "max_len": 20},
        tokenizer={"vocab_size": 300, "sample_sentences": 1000},
    )
    metas = {}
    for workers in (1, 2):
        monkeypatch.setattr(data_module, "usable_cores", lambda n=workers: n)
        metas[workers] = _run_preprocess(recipe, tmp_path / f"run{workers}")
    one, two = tmp_path / "run1", tmp_path / "run2"
    assert metas[1]["splits"] == metas[2]["splits"] and metas[1]["corpora"] == metas[2]["corpora"]
    assert metas[1]["dropped"]  # max_len 20 drops some pairs
    files = sorted(
        p.relative_to(one) for p in one.rglob("*") if p.is_file() and p.name != "meta.json"
    )
    assert files == sorted(
        p.relative_to(two) for p in two.rglob("*") if p.is_file() and p.name != "meta.json"
    )
    for path in files:
        assert (one / path).read_bytes() == (two / path).read_bytes(), path
    # The arrays are SentencePiece's encoding of the stored text, line for line.
    tok, split = Tokenizer.load(two), load_split(two, "train")
    for side, stored in (("src", split.src), ("tgt", split.tgt)):
        lines = (two / "data" / f"train.{side}.txt").read_text(encoding="utf-8").split("\n")[:-1]
        want = tok.encode_ids(side, lines)
        assert len(stored) == len(lines) and all(
            stored.get(i).tolist() == want[i] for i in range(len(lines))
        )


def test_tsv_held_out_split_keeps_every_line_or_names_the_bad_one(tmp_path):
    data = write_slice(tmp_path / "c", n_train=100, n_valid=10)
    valid = tmp_path / "valid.tsv"
    valid.write_text(
        "".join(
            f"{e}\t{f}\n"
            for e, f in zip(multi30k_lines("val", "en", 12), multi30k_lines("val", "fr", 12))
        )
        + "\t\n"
    )
    _run_preprocess(
        tiny_recipe_dict({**data, "valid": str(valid), "format": "tsv"}), tmp_path / "run"
    )
    assert len(load_split(tmp_path / "run", "valid")) == 13  # N lines in, N stored, empty ones too
    valid.write_text("a\tb\nonly one column\n")
    with pytest.raises(DataError, match=r"valid.tsv: line 2 has no tab"):
        _run_preprocess(
            tiny_recipe_dict({**data, "valid": str(valid), "format": "tsv"}), tmp_path / "run2"
        )


def test_corpus_split_and_local_path_in_one_list(tmp_path):
    data = write_slice(tmp_path / "c", n_train=100, n_valid=10)
    recipe = tiny_recipe_dict({**data, "train": ["val", data["train"]]})
    recipe["data"]["corpus"] = "multi30k"
    meta = _run_preprocess(recipe, tmp_path / "run")
    assert [c["corpus"] for c in meta["corpora"]] == ["multi30k:val", data["train"]]
    assert meta["corpora"][0]["read"] == 1014 and meta["corpora"][1]["read"] == 100


def test_sentencepiece_learns_from_a_bounded_sample_or_a_sample_file(tmp_path):
    data = write_slice(tmp_path / "c", n_train=400, n_valid=10)
    logs = []
    _run_preprocess(
        tiny_recipe_dict(
            data,
            tokenizer={"vocab_size": 200, "sample_sentences": 1000, "joint": False},
            model={"share_embeddings": False},
        ),
        tmp_path / "a",
        logs,
    )
    assert any("on a sample of 400 of the 400 training pairs" in line for line in logs)
    logs.clear()
    # 1000 lines for a joint model: 500 of the pairs.
    big = write_slice(tmp_path / "big", n_train=2000, n_valid=10)
    _run_preprocess(
        tiny_recipe_dict(big, tokenizer={"vocab_size": 200, "sample_sentences": 1000}),
        tmp_path / "b",
        logs,
    )
    assert any("on a sample of 500 of the 2000 training pairs" in line for line in logs)
    tok = Tokenizer.load(tmp_path / "b")
    _run_preprocess(
        tiny_recipe_dict(
            data,
            tokenizer={"vocab_size": 200, "sample_file": str(tmp_path / "big" / "train.{lang}")},
        ),
        tmp_path / "c",
        logs,
    )
    assert any(str(tmp_path / "big" / "train.{lang}") in line for line in logs)
    assert Tokenizer.load(tmp_path / "c").src_proto != tok.src_proto


def test_sentencepiece_sample_is_drawn_from_the_raw_pairs_then_cleaned_like_the_corpus(tmp_path):
    from nmt_cli.data.pairs import filter_reason
    from nmt_cli.data.reservoir import Reservoir
    from nmt_cli.data.splits import pair_source
    from nmt_cli.data.tokenizer_sample import _draw_sample

    data = write_slice(tmp_path / "c", n_train=2000, n_valid=10)
    en = multi30k_lines("train", "en", 2000)
    en[5], en[9] = (
        "  " + en[5].replace(" ", "\t  ") + " ",
        "word " * 30,
    )  # to be normalised / dropped as too long
    (tmp_path / "c" / "train.en").write_text("\n".join(en) + "\n", encoding="utf-8")
    fr = multi30k_lines("train", "fr", 2000)
    recipe = recipe_from_dict(
        tiny_recipe_dict({**data, "max_len": 14}, tokenizer={"sample_sentences": 1000})
    )
    src, tgt, origin = _draw_sample(recipe, [pair_source(recipe, recipe.data.train)])
    reference = Reservoir(
        500, recipe.train.seed
    )  # 1000 lines of a joint model: 500 pairs, offered as one list
    reference.offer(list(zip(en, fr)))
    cleaned = [(normalize(s), normalize(t)) for s, t in reference.items]
    want = [(s, t) for s, t in cleaned if filter_reason(s, t, 14, recipe.data.max_ratio) is None]
    assert list(zip(src, tgt)) == want and 0 < len(want) < 500
    assert (
        origin
        == f"a sample of {len(want)} of the 2000 training pairs ({500 - len(want)} more drawn, "
        "and dropped by the filters)"
    )
    small = recipe_from_dict(
        tiny_recipe_dict({**data, "max_len": 14}, tokenizer={"sample_sentences": 6000})
    )
    src, tgt, _ = _draw_sample(
        small, [pair_source(small, small.data.train)]
    )  # the corpus fits: all of it, in order, cleaned and filtered
    cleaned = [(normalize(s), normalize(t)) for s, t in zip(en, fr)]
    assert list(zip(src, tgt)) == [
        (s, t) for s, t in cleaned if filter_reason(s, t, 14, small.data.max_ratio) is None
    ]
    assert len(src) < 2000 and not any(s.startswith("word word") for s in src)


def test_interrupted_preprocess_leaves_nothing_complete_and_reruns_cleanly(
    tiny_run, tmp_path, monkeypatch
):
    import shutil

    from nmt_cli.data import preprocess as data_module
    from nmt_cli.data.preprocess import ensure_preprocessed

    recipe, run_dir = tiny_run
    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy)
    calls = []

    def stopped(*args, **kw):
        calls.append(args[2])
        if len(calls) == 2:
            raise KeyboardInterrupt  # Ctrl-C while encoding the second split
        return real(*args, **kw)

    real = data_module.encode_text_file
    monkeypatch.setattr(data_module, "encode_text_file", stopped)
    logs = []
    with pytest.raises(KeyboardInterrupt):
        preprocess(recipe, copy, log=logs.append)
    assert "replacing the preprocessed data" in logs[0]
    assert not (copy / "data" / "meta.json").exists() and not list((copy / "data").glob("*.part"))
    with pytest.raises(DataError, match="run nmt preprocess first"):
        load_split(copy, "train")
    monkeypatch.setattr(data_module, "encode_text_file", real)
    logs.clear()
    ensure_preprocessed(recipe, copy, log=logs.append)
    assert any("stopped before it finished; starting over" in line for line in logs)
    assert np.array_equal(load_split(copy, "train").tgt.ids, load_split(run_dir, "train").tgt.ids)


@pytest.mark.slow
def test_sigkill_during_preprocess_never_leaves_data_that_loads_as_complete(tmp_path):
    import random
    import signal
    import subprocess
    import sys
    import time

    import yaml

    data = write_slice(tmp_path / "c", n_train=3000, n_valid=20)
    recipe_path = tmp_path / "r.yaml"
    recipe_path.write_text(yaml.safe_dump(tiny_recipe_dict(data)))
    run = tmp_path / "run"
    cmd = [sys.executable, "-m", "nmt_cli", "preprocess", str(recipe_path), "--run-dir", str(run)]
    rng = random.Random(1)
    for _ in range(4):
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(rng.uniform(0.5, 4.0))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        if (run / "data" / "meta.json").exists():  # finished before the kill: complete and loadable
            assert len(load_split(run, "train")) > 2900
        else:
            with pytest.raises(DataError):
                load_split(run, "train")
    done = subprocess.run(cmd, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert len(load_split(run, "train")) > 2900


@pytest.mark.parametrize("pread", [False, True])
def test_rows_read_from_the_stored_arrays_are_the_sentences(tiny_run, monkeypatch, pread):
    from nmt_cli.data import store as data_module
    from nmt_cli.data.store import read_rows

    if pread:  # as for a split past PREAD_FROM bytes of ids
        monkeypatch.setattr(data_module, "PREAD_FROM", 0)
    _, run_dir = tiny_run
    split, data = load_split(run_dir, "train"), run_dir / "data"
    rows = np.array([0, 3, 4, 250, len(split) - 1])
    ids, offsets = read_rows(data / "train.tgt.ids.npy", data / "train.tgt.offsets.npy", rows)
    assert ids.dtype == np.int64 and offsets.tolist()[0] == 0 and len(offsets) == len(rows) + 1
    assert all(
        ids[offsets[k] : offsets[k + 1]].tolist() == split.tgt.get(r).tolist()
        for k, r in enumerate(rows)
    )


def test_shortlist_of_a_large_split_is_learned_from_a_sample(tiny_run, monkeypatch):
    from nmt_cli.data import store as data_module
    from nmt_cli.decoding.shortlist import learn_split_shortlist

    _, run_dir = tiny_run
    tok = Tokenizer.load(run_dir)
    whole = learn_split_shortlist(run_dir / "data", tok)
    monkeypatch.setattr(data_module, "SHORTLIST_PAIRS", 100)
    monkeypatch.setattr(data_module, "SHORTLIST_SAMPLE", 150)
    sampled = learn_split_shortlist(run_dir / "data", tok)
    assert sampled.table.shape == whole.table.shape
    assert {PAD, EOS, BOS} <= set(sampled.frequent.tolist())
    # The sample's rows come from the real split: most of its top target pieces are the whole
    # split's.
    top = lambda s: set(s.frequent[:40].tolist())
    assert len(top(sampled) & top(whole)) >= 25


def _resident_file_kb() -> int:
    for line in open("/proc/self/status"):
        if line.startswith("RssFile:"):
            return int(line.split()[1])
    pytest.skip("no RssFile in /proc/self/status")


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="Linux only")
def test_release_pages_drops_what_batches_mapped_in_and_keeps_the_data(tmp_path):
    from nmt_cli.data.store import EncodedSplit, Side

    n = 8_000_000  # 16 MB of uint16 ids a side
    ids = (np.arange(n) % 7000).astype(np.uint16)
    offsets = np.arange(0, n + 1, 20, dtype=np.int64)
    for name, array in (("ids", ids), ("offsets", offsets)):
        np.save(tmp_path / f"{name}.npy", array)
    load = lambda: Side.open(tmp_path / "ids.npy", tmp_path / "offsets.npy")
    split = EncodedSplit(load(), load())
    before = _resident_file_kb()
    total = int(split.src.ids.astype(np.int64).sum()) + int(
        split.tgt.offsets[-1]
    )  # every page read
    assert _resident_file_kb() - before > 12_000
    split.release_pages()
    assert _resident_file_kb() - before < 2_000
    assert (
        int(split.src.ids.astype(np.int64).sum()) + int(split.tgt.offsets[-1]) == total
    )  # still readable


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="Linux only")
def test_side_lengths_reads_every_offset_without_keeping_its_pages(tmp_path):
    from nmt_cli.data.batches import side_lengths
    from nmt_cli.data.store import Side

    lengths = (np.arange(4_000_000) % 50 + 1).astype(np.int64)  # 32 MB of offsets
    np.save(tmp_path / "offsets.npy", np.concatenate([[0], np.cumsum(lengths)]))
    np.save(tmp_path / "ids.npy", np.zeros(1, dtype=np.uint16))
    side = Side.open(tmp_path / "ids.npy", tmp_path / "offsets.npy")
    before = _resident_file_kb()
    got = side_lengths(side, chunk=1 << 18)
    assert got.dtype == np.int16 and np.array_equal(got, lengths)
    assert (
        _resident_file_kb() - before < 8_000
    )  # one release every 8 chunks of 2 MB, and one at the end


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="Linux only")
def test_batches_of_large_stored_arrays_are_read_without_mapping_them(tmp_path, monkeypatch):
    import nmt_cli.data.store as data

    lengths = (np.arange(400_000) * 7919 % 40 + 1).astype(np.int64)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    ids = (np.arange(int(offsets[-1])) % 7000).astype(np.uint16)  # 16 MB
    np.save(tmp_path / "ids.npy", ids)
    np.save(tmp_path / "offsets.npy", offsets)
    load = lambda: Side.open(tmp_path / "ids.npy", tmp_path / "offsets.npy")
    stored = EncodedSplit(load(), load())
    in_memory = EncodedSplit(Side(ids, offsets), Side(ids, offsets))
    rows = np.random.default_rng(0).integers(0, 400_000, size=(50, 40))
    before = _resident_file_kb()
    mapped = [
        make_batch(stored, r) for r in rows
    ]  # 16 MB of ids: under PREAD_FROM, read through the mapping
    assert _resident_file_kb() - before > 5_000
    stored.release_pages()
    monkeypatch.setattr(data, "PREAD_FROM", 8 << 20)
    before = _resident_file_kb()
    batches = [make_batch(stored, r) for r in rows]
    assert (
        _resident_file_kb() - before < 1_000
    )  # through the mapping: about 10 MB a batch like these
    assert all(
        torch.equal(a.src, b.src) and torch.equal(a.tgt_in, b.tgt_in)
        for a, b in zip(mapped, batches)
    )
    for r, got in zip(rows, batches):
        want = make_batch(in_memory, r)
        assert torch.equal(got.src, want.src) and torch.equal(got.tgt_out, want.tgt_out)
        assert torch.equal(got.src_lengths, torch.as_tensor(lengths[r]))
    truncated = make_batch(stored, rows[0], max_src=3)
    assert truncated.src.shape[1] == 3 and torch.equal(
        truncated.src, make_batch(in_memory, rows[0], max_src=3).src
    )


def test_preprocessing_never_imports_torch(tmp_path):
    """torch takes 2-3 s to import, and nothing of preprocessing needs it."""
    import subprocess
    import sys

    data = write_slice(tmp_path / "corpus", n_train=200, n_valid=20)
    recipe = tmp_path / "r.yaml"
    import yaml

    recipe.write_text(yaml.safe_dump(tiny_recipe_dict(data)))
    script = (
        "import sys\nfrom nmt_cli.cli import main\n"
        "sys.argv = ['nmt', 'preprocess', sys.argv[1], '--run-dir', sys.argv[2]]\n"
        "try:\n    main()\nexcept SystemExit as stop:\n    assert not stop.code, stop.code\n"
        "print('torch' in sys.modules)"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(recipe), str(tmp_path / "run")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "False"
    assert load_split(tmp_path / "run", "train").src.offsets[-1] > 0


def test_map_array_reads_what_np_load_reads_and_refuses_other_arrays(tmp_path):
    from nmt_cli.data.store import map_array

    for array in (np.arange(70000, dtype=np.uint16), np.zeros(0, dtype=np.int64)):
        np.save(tmp_path / "a.npy", array)
        mapped = map_array(tmp_path / "a.npy")
        assert mapped.array.dtype == array.dtype and np.array_equal(mapped.array, array)
        assert (tmp_path / "a.npy").stat().st_size == mapped.start + array.nbytes
        mapped.release_pages()
        assert np.array_equal(mapped.array, array)  # still readable after its pages are dropped
    np.save(tmp_path / "b.npy", np.zeros((2, 3)))
    with pytest.raises(ValueError, match="not a 1-D array"):
        map_array(tmp_path / "b.npy")
    np.save(tmp_path / "c.npy", np.arange(10))
    (tmp_path / "c.npy").write_bytes((tmp_path / "c.npy").read_bytes()[:-8])  # truncated
    with pytest.raises(ValueError):
        map_array(tmp_path / "c.npy")
