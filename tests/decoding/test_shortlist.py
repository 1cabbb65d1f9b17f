import numpy as np
import torch

from nmt_cli.config.sections import ModelConfig
from nmt_cli.data.tokenizer import EOS
from nmt_cli.decoding.search import beam_search, greedy
from nmt_cli.decoding.shortlist import Shortlist, learn_shortlist, merge_shortlists
from nmt_cli.model import build_model


def flat(seqs):
    offsets = np.concatenate([[0], np.cumsum([len(s) for s in seqs])]).astype(np.int64)
    return np.concatenate(seqs).astype(np.int32), offsets


def test_learns_the_associated_pieces_not_the_common_ones():
    # source 10 always comes with target 20, source 11 with 21; target 30 comes with everything.
    src = [np.array([10, 5]), np.array([11, 5]), np.array([10, 5]), np.array([11, 5])] * 5
    tgt = [np.array([20, 30]), np.array([21, 30]), np.array([20, 30]), np.array([21, 30])] * 5
    s_ids, s_off = flat(src)
    t_ids, t_off = flat(tgt)
    sl = learn_shortlist(s_ids, s_off, t_ids, t_off, 40, 40, frequent=5, per_source=1)
    assert sl.table[10, 0] == 20 and sl.table[11, 0] == 21
    assert sl.frequent.tolist() == [0, 1, 2, 3, 30]  # the specials, then the commonest piece
    vocab = sl.vocabulary(torch.tensor([[10, 5]]))
    assert (
        vocab.tolist() == sorted(vocab.tolist())
        and 20 in vocab
        and vocab[:4].tolist() == [0, 1, 2, 3]
    )


def test_learning_on_real_data(tiny_run):
    from nmt_cli.decoding.shortlist import load_shortlist

    recipe, run_dir = tiny_run
    stored = load_shortlist(run_dir)
    assert stored is not None and stored.table.shape[0] == 300
    # A real sentence's shortlist is a small part of the vocabulary that holds most of its
    # reference.
    from nmt_cli.data.store import load_split

    split = load_split(run_dir, "train")
    sl = learn_shortlist(
        split.src.ids,
        split.src.offsets,
        split.tgt.ids,
        split.tgt.offsets,
        300,
        300,
        frequent=50,
        per_source=10,
    )
    vocab = set(sl.vocabulary(torch.as_tensor(split.src.get(0).astype(np.int64))[None]).tolist())
    assert len(vocab) < 150
    covered = np.mean([t in vocab for t in split.tgt.get(0)])
    assert covered > 0.8


def test_search_over_a_shortlist_equals_search_over_a_vocabulary_without_the_rest():
    torch.manual_seed(0)
    v = 30
    model = build_model(
        ModelConfig(embed_dim=12, hidden_dim=16, dropout=0.0, tie_embeddings=False), v, v
    ).eval()
    src, lengths = torch.tensor([[5, 6, 7], [8, 9, 0]]), torch.tensor([3, 2])
    vocab = torch.tensor([0, 1, 2, 3, 5, 9, 12, 17, 25])
    banned = torch.ones(v, dtype=torch.bool)
    banned[vocab] = False
    masked = build_model(
        ModelConfig(embed_dim=12, hidden_dim=16, dropout=0.0, tie_embeddings=False), v, v
    ).eval()
    masked.load_state_dict(model.state_dict())
    with torch.no_grad():
        masked.output.bias[banned] = float(
            "-inf"
        )  # the full-vocabulary equivalent of the shortlist
    for search, kw in ((greedy, {}), (beam_search, {"beam_size": 3, "nbest": 3})):
        fast = search(model, src, lengths, vocab=vocab, **kw)
        slow = search(masked, src, lengths, **kw)
        for a, b in zip(fast, slow):
            assert [h.tokens for h in a] == [h.tokens for h in b]
            assert all(t in vocab.tolist() for h in a for t in h.tokens)
            assert [h.score for h in a] == [pytest_approx(h.score) for h in b]


def pytest_approx(x):
    import pytest

    return pytest.approx(x, abs=1e-4)


def test_ensemble_shortlist_is_the_union():
    a = Shortlist(torch.tensor([0, 1, 2, 3, 7]), torch.tensor([[3], [8]]))
    b = Shortlist(torch.tensor([0, 1, 2, 3, 9]), torch.tensor([[3], [6]]))
    merged = merge_shortlists([a, b])
    assert merged.vocabulary(torch.tensor([[1]])).tolist() == [0, 1, 2, 3, 6, 7, 8, 9]
    assert merge_shortlists([a, None]) is None
    assert EOS in merged.vocabulary(torch.tensor([[0]]))


def test_per_source_keeps_each_pieces_best_candidates():
    table = torch.tensor([[10, 11, 12], [20, 21, 22]])
    sl = Shortlist(torch.tensor([0, 1, 2, 3]), table)
    src = torch.tensor([[0, 1]])
    assert sl.vocabulary(src).tolist() == [0, 1, 2, 3, 10, 11, 12, 20, 21, 22]
    assert sl.vocabulary(src, per_source=1).tolist() == [0, 1, 2, 3, 10, 20]
    assert sl.vocabulary(src, per_source=2).tolist() == [0, 1, 2, 3, 10, 11, 20, 21]
    # An ensemble's merged table: per_source=1 gives every member's best, not member one's two.
    other = Shortlist(torch.tensor([0, 1, 2, 3]), torch.tensor([[30, 31, 32], [40, 41, 42]]))
    merged = merge_shortlists([sl, other])
    assert merged.vocabulary(src, per_source=1).tolist() == [0, 1, 2, 3, 10, 20, 30, 40]
    assert merge_shortlists([merged, sl]).vocabulary(src, per_source=1).tolist() == [
        0,
        1,
        2,
        3,
        10,
        20,
        30,
        40,
    ]


def test_frequent_pieces_are_ranked_and_a_decoder_takes_the_commonest():
    src = [np.array([10, 5]), np.array([11, 5]), np.array([10, 5]), np.array([11, 5])] * 5
    tgt = [np.array([20, 30]), np.array([21, 30]), np.array([20, 30]), np.array([21, 30])] * 5
    sl = learn_shortlist(*flat(src), *flat(tgt), 40, 40, frequent=6, per_source=1)
    assert sl.ranked and sl.frequent.tolist()[:5] == [0, 1, 2, 3, 30]  # 30 is the commonest
    assert sl.frequent.tolist()[5] in (20, 21)
    source_5 = torch.tensor([[5]])  # its best candidate is 30, which comes with it every time
    assert sl.vocabulary(source_5, per_source=1, frequent=5).tolist() == [0, 1, 2, 3, 30]
    assert sl.vocabulary(source_5, per_source=1).tolist() == sorted(sl.frequent.tolist())
    # The specials stay in however few frequent pieces are asked for.
    assert sl.vocabulary(source_5, per_source=1, frequent=1).tolist() == [0, 1, 2, 3, 30]


def test_an_unranked_older_shortlist_is_used_whole():
    payload = {
        "frequent": torch.tensor([0, 1, 2, 3, 7, 9], dtype=torch.int32),
        "table": torch.tensor([[3], [8]], dtype=torch.int32),
    }  # saved before "ranked" existed
    old = Shortlist.from_payload(payload)
    assert not old.ranked
    assert old.vocabulary(torch.tensor([[1]]), frequent=5).tolist() == [0, 1, 2, 3, 7, 8, 9]
    new = Shortlist.from_payload(
        Shortlist(torch.tensor([0, 1, 2, 3, 9, 7]), torch.tensor([[3], [8]])).to_payload()
    )
    assert new.ranked and new.vocabulary(torch.tensor([[1]]), frequent=5).tolist() == [
        0,
        1,
        2,
        3,
        8,
        9,
    ]


def test_run_dir_keeps_the_ranking_and_reads_older_files_unranked(tmp_path):
    from nmt_cli.decoding.shortlist import load_shortlist, save_shortlist

    data = tmp_path / "run" / "data"
    data.mkdir(parents=True)
    save_shortlist(data, Shortlist(torch.tensor([0, 1, 2, 3, 9, 7]), torch.tensor([[3], [8]])))
    loaded = load_shortlist(tmp_path / "run")
    assert loaded.ranked and loaded.frequent.tolist() == [0, 1, 2, 3, 9, 7]
    (data / "shortlist.ranked.npy").unlink()
    np.save(data / "shortlist.frequent.npy", np.array([0, 1, 2, 3, 7, 9], dtype=np.int32))
    older = load_shortlist(tmp_path / "run")
    assert not older.ranked and older.frequent.tolist() == [0, 1, 2, 3, 7, 9]


def test_ensemble_interleaves_ranked_frequent_pieces():
    a = Shortlist(torch.tensor([0, 1, 2, 3, 7, 5]), torch.tensor([[3], [8]]))
    b = Shortlist(torch.tensor([0, 1, 2, 3, 9, 7]), torch.tensor([[3], [6]]))
    merged = merge_shortlists([a, b])
    assert merged.ranked and merged.frequent.tolist() == [0, 1, 2, 3, 7, 9, 5]
    assert merged.vocabulary(torch.tensor([[0]]), frequent=6).tolist() == [0, 1, 2, 3, 7, 9]
    older = Shortlist(torch.tensor([0, 1, 2, 3, 4]), torch.tensor([[3], [6]]), ranked=False)
    assert not merge_shortlists([a, older]).ranked


def _reference_table(src_ids, src_offsets, tgt_ids, tgt_offsets, vocab, per_source):
    """The shortlist's ranking written pair by pair and piece by piece (module doc)."""
    from collections import Counter

    cooc, s_docs, t_docs = Counter(), Counter(), Counter()
    for i in range(len(src_offsets) - 1):
        s = set(src_ids[src_offsets[i] : src_offsets[i + 1]].tolist())
        t = set(tgt_ids[tgt_offsets[i] : tgt_offsets[i + 1]].tolist())
        s_docs.update(s)
        t_docs.update(t)
        cooc.update((a, b) for a in s for b in t)
    table = np.full((vocab, per_source), EOS)
    for a in range(vocab):
        ranked = sorted(
            (b for (x, b) in cooc if x == a),
            key=lambda b: (-(cooc[a, b] ** 2) / (s_docs[a] * t_docs[b]), b),
        )
        table[a, : len(ranked[:per_source])] = ranked[:per_source]
    return table


def test_counting_in_chunks_of_pairs_equals_counting_pair_by_pair(monkeypatch):
    import nmt_cli.data.shortlist_counts as shortlist_counts

    g = np.random.default_rng(4)
    lengths = g.integers(1, 9, size=(2, 57))
    src_offsets, tgt_offsets = (np.concatenate([[0], np.cumsum(n)]) for n in lengths)
    src_ids = g.integers(4, 30, src_offsets[-1]).astype(np.uint16)
    tgt_ids = g.integers(4, 30, tgt_offsets[-1]).astype(np.uint16)
    expected = _reference_table(src_ids, src_offsets, tgt_ids, tgt_offsets, 30, 5)
    for chunk in (10, 1_000):  # several chunks merged, and one
        monkeypatch.setattr(shortlist_counts, "CHUNK_PAIRS", chunk)
        learned = learn_shortlist(src_ids, src_offsets, tgt_ids, tgt_offsets, 30, 30, per_source=5)
        assert np.array_equal(learned.table.numpy(), expected)
