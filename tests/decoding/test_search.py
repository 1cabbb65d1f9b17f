import itertools
from dataclasses import replace

import pytest
import torch

from nmt_cli.config.sections import ModelConfig
from nmt_cli.data.tokenizer import BOS, EOS, UNK
from nmt_cli.decoding.search import beam_search, greedy, length_penalty
from nmt_cli.model import build_model

V = 30


def model(seed=0, **kw):
    torch.manual_seed(seed)
    cfg = dict(embed_dim=12, hidden_dim=16, dropout=0.0)
    cfg.update(kw)
    return build_model(ModelConfig(**cfg), V, V).eval()


def sources():
    src = torch.tensor([[5, 6, 7, 8, 9], [10, 11, 12, 0, 0], [13, 0, 0, 0, 0]])
    return src, torch.tensor([5, 3, 1])


def ragged_batch(n: int, seed: int, width: int = 7):
    """n sources of 1..width random pieces, padded; and the generator, to draw more from."""
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(4, V, (n, width), generator=g)
    lengths = torch.randint(1, width + 1, (n,), generator=g)
    for i, length in enumerate(lengths):
        src[i, length:] = 0
    return g, src, lengths


def sequence_logprob(m, src, length, tokens):
    state, memory = m.encode(src, length)
    prev = torch.tensor([BOS])
    total = 0.0
    for tok in tokens + [EOS]:
        logp, state, _ = m.step(prev, state, memory)
        total += float(logp[0, tok].detach())
        prev = torch.tensor([tok])
    return total


def test_batched_beam_equals_one_sentence_at_a_time():
    m = model(1)
    src, lengths = sources()
    together = beam_search(m, src, lengths, beam_size=4, nbest=3)
    for i in range(3):
        alone = beam_search(
            m, src[i : i + 1, : int(lengths[i])], lengths[i : i + 1], beam_size=4, nbest=3
        )
        assert [h.tokens for h in alone[0]] == [h.tokens for h in together[i]]


def test_beam_scores_are_true_log_probabilities_and_sorted():
    m = model(2)
    src, lengths = sources()
    result = beam_search(m, src, lengths, beam_size=5, nbest=5, alpha=0.6)
    for i, hyps in enumerate(result):
        assert len(hyps) == 5
        norms = [h.norm_score for h in hyps]
        assert norms == sorted(norms, reverse=True)
        for h in hyps[:2]:
            lp = sequence_logprob(
                m, src[i : i + 1, : int(lengths[i])], lengths[i : i + 1], h.tokens
            )
            assert h.score == pytest.approx(lp, abs=1e-3)
            assert h.norm_score == pytest.approx(
                h.score / float(length_penalty(torch.tensor(len(h.tokens) + 1), 0.6)), abs=1e-4
            )


def test_min_len_bars_the_empty_translation():
    m = model(5)
    with torch.no_grad():
        m.output.bias[EOS] += 20.0  # EOS dominates every step, as in a barely trained model
    src, lengths = sources()
    for search, kw in ((greedy, {}), (beam_search, {"beam_size": 3})):
        assert all(h[0].tokens == [] for h in search(m, src, lengths, min_len=0, **kw))
        for h in search(m, src, lengths, min_len=2, **kw):
            assert len(h[0].tokens) == 2 and EOS not in h[0].tokens
        # The length cap wins over min_len: with room for EOS only, EOS it is, with a real score.
        for h in search(m, src, lengths, min_len=5, max_len_ratio=0.01, max_len_const=0, **kw):
            assert h[0].tokens == [] and h[0].score > float("-inf")


def test_max_length_is_respected():
    m = model(4)
    src, lengths = sources()
    for hyps in (
        greedy(m, src, lengths, max_len_ratio=1.0, max_len_const=2),
        beam_search(m, src, lengths, beam_size=3, max_len_ratio=1.0, max_len_const=2),
    ):
        for i, h in enumerate(hyps):
            assert len(h[0].tokens) <= int(lengths[i]) + 2


@pytest.mark.parametrize(
    "decoder, feeding", [("luong", False), ("bahdanau", True), ("conditional", False)]
)
def test_attention_rows_come_back_from_both_searches(decoder, feeding):
    m = model(5, decoder=decoder, input_feeding=feeding)
    src, lengths = sources()
    for hyps in (
        greedy(m, src, lengths, attention=True),
        beam_search(m, src, lengths, beam_size=3, attention=True),
    ):
        for i, h in enumerate(hyps):
            a = h[0].attention
            assert a.shape == (len(h[0].tokens) + 1, int(lengths[i]))
            assert torch.allclose(a.sum(-1), torch.ones(a.size(0)), atol=1e-5)


def test_length_penalty_formula():
    assert float(length_penalty(torch.tensor(7), 1.0)) == pytest.approx(2.0)
    assert float(length_penalty(torch.tensor(7), 0.0)) == 1.0


# ---------------------------------------------------------------- exactness on a tiny vocabulary

WORDS = 4  # a vocabulary of the 4 specials and 4 words, so every output can be enumerated
OUTPUT = [UNK] + list(range(4, 4 + WORDS))  # what search may emit besides EOS


def tiny(seed):
    torch.manual_seed(seed)
    m = (
        build_model(ModelConfig(embed_dim=8, hidden_dim=8, dropout=0.0), 4 + WORDS, 4 + WORDS)
        .double()
        .eval()
    )
    with torch.no_grad():
        for p in m.parameters():
            p.mul_(3.0)  # peaked distributions, so that rankings (and pruning) matter
    return m


_NEXT: dict = {}


@torch.no_grad()
def next_logp(m, src, prefix):
    """log p(. | prefix, src), from BOS step by step (cached: the exhaustive search asks often)."""
    key = (id(m), tuple(src[0].tolist()), tuple(prefix))
    if key not in _NEXT:
        state, memory = m.encode(src, torch.tensor([src.size(1)]))
        for tok in [BOS] + prefix:
            logp, state, _ = m.step(torch.tensor([tok]), state, memory)
        _NEXT[key] = logp[0].tolist()
    return _NEXT[key]


def reference_beam(m, src, k, alpha, cap, min_len=1):
    """The beam as the module doc defines it, one hypothesis at a time, with no stopping rule but
    'all K finished': each step keeps the best K - F continuations, F = hypotheses finished."""
    alive, finished, steps = [([], 0.0)], [], 0
    for t in range(cap):
        steps += 1
        cands = []
        for prefix, score in alive:
            logp = next_logp(m, src, prefix)
            toks = [EOS] if t == cap - 1 else [EOS] * (t >= min_len) + OUTPUT
            cands += [(score + logp[tok], prefix + [tok]) for tok in toks]
        cands.sort(key=lambda c: -c[0])
        alive = []
        for score, seq in cands[: k - len(finished)]:
            if seq[-1] == EOS:
                finished.append((seq[:-1], score, score / ((5 + t + 1) / 6) ** alpha))
            else:
                alive.append((seq, score))
        if not alive:
            break
    return sorted(finished, key=lambda f: -f[2]), steps


class CountingSteps:
    def __init__(self, m):
        self.m, self.calls = m, 0

    def encode(self, *a):
        return self.m.encode(*a)

    def step(self, *a):
        self.calls += 1
        return self.m.step(*a)


def tiny_sources(n=6):
    g = torch.Generator().manual_seed(3)
    return [torch.randint(4, 4 + WORDS, (1, 1 + i % 3), generator=g) for i in range(n)]


def test_beam_search_equals_the_reference_beam_and_stops_only_when_safe():
    # cap 5 (ratio ~0 and const 4): up to 4 tokens, then EOS; beam 3 < 8 pieces; alpha > 0
    early = 0
    models = [tiny(seed) for seed in range(3)]  # kept alive: next_logp's cache goes by id
    for m, src in itertools.product(models, tiny_sources()):
        expected, ref_steps = reference_beam(m, src, 3, 1.0, cap=5)
        full = beam_search(
            m,
            src,
            torch.tensor([src.size(1)]),
            beam_size=3,
            alpha=1.0,
            nbest=3,
            max_len_ratio=0.01,
            max_len_const=4,
        )[0]
        assert [(h.tokens, round(h.score, 9)) for h in full] == [
            (e[0], round(e[1], 9)) for e in expected
        ]
        counting = CountingSteps(m)
        best = beam_search(
            counting,
            src,
            torch.tensor([src.size(1)]),
            beam_size=3,
            alpha=1.0,
            nbest=1,
            max_len_ratio=0.01,
            max_len_const=4,
        )[0]
        assert best[0].tokens == expected[0][0] and best[0].norm_score == pytest.approx(
            expected[0][2], abs=1e-6
        )
        early += counting.calls < ref_steps
    assert early > 0  # the stopping rule cut some search short, and changed nothing


@torch.no_grad()
def forced_scores(m, src, outputs):
    """log p(y | x), EOS included, for every output at once (teacher forcing)."""
    width = max(len(y) for y in outputs) + 1
    tgt_in = torch.tensor([[BOS] + y + [0] * (width - 1 - len(y)) for y in outputs])
    tgt_out = torch.tensor([y + [EOS] + [0] * (width - 1 - len(y)) for y in outputs])
    n = len(outputs)
    logits, _ = m(src.expand(n, -1), torch.tensor([src.size(1)] * n), tgt_in)
    picked = torch.log_softmax(logits, -1).gather(-1, tgt_out.unsqueeze(-1)).squeeze(-1)
    return picked.masked_fill(tgt_out == 0, 0.0).sum(-1).tolist()


def test_a_beam_wide_enough_finds_the_exhaustive_best():
    # With K = every output there is, nothing is pruned: only the stopping rule can lose the best.
    m = tiny(4)
    outputs = [list(seq) for n in range(1, 5) for seq in itertools.product(OUTPUT, repeat=n)]
    for src in tiny_sources(3):
        totals = forced_scores(m, src, outputs)
        for alpha in (0.0, 1.0, 3.0):
            best = max(
                (total / ((5 + len(seq) + 1) / 6) ** alpha, total, seq)
                for seq, total in zip(outputs, totals)
            )
            hyp = beam_search(
                m,
                src,
                torch.tensor([src.size(1)]),
                beam_size=len(outputs),
                alpha=alpha,
                max_len_ratio=0.01,
                max_len_const=4,
            )[0][0]
            assert hyp.tokens == best[2] and hyp.score == pytest.approx(best[1], abs=1e-9)


def test_greedy_equals_beam_of_one_with_a_length_penalty_and_eos_close_behind():
    m = model(9)
    with torch.no_grad():
        m.output.bias[EOS] += 2.0  # EOS often ranks second: it must not be kept as finished
    g = torch.Generator().manual_seed(0)
    src = torch.randint(4, V, (40, 6), generator=g)
    lengths = torch.randint(1, 7, (40,), generator=g)
    for i, n in enumerate(lengths):
        src[i, n:] = 0
    plain = greedy(m, src, lengths)
    for alpha in (0.0, 1.0):
        beam = beam_search(m, src, lengths, beam_size=1, alpha=alpha)
        for x, y in zip(plain, beam):
            assert x[0].tokens == y[0].tokens
            assert x[0].score == pytest.approx(y[0].score, abs=1e-5)


def test_greedy_drops_ended_sentences_without_changing_any():
    # Sentences end at different steps, so the batch shrinks several times on the way; each
    # sentence, with its own shortlist row and its attention, must come out as decoded alone.
    from nmt_cli.decoding.shortlist import Shortlist

    m = model(11, input_feeding=True)
    g, src, lengths = ragged_batch(24, seed=3)
    shortlist = Shortlist(torch.arange(4, 10), torch.randint(4, V, (V, 6), generator=g))
    together = greedy(
        m, src, lengths, attention=True, vocab=shortlist.candidates(src, lengths), check_every=1
    )
    ended = sorted(len(h[0].tokens) for h in together)
    assert len(set(ended)) >= 3  # the batch shrank more than once
    for i in range(24):
        one, n = src[i : i + 1, : int(lengths[i])], lengths[i : i + 1]
        alone = greedy(m, one, n, attention=True, vocab=shortlist.candidates(one, n))[0][0]
        assert together[i][0].tokens == alone.tokens
        assert together[i][0].score == pytest.approx(alone.score, abs=1e-5)
        assert torch.allclose(together[i][0].attention, alone.attention, atol=1e-6)


def test_nbest_scores_are_the_force_decoded_scores():
    m = model(6)
    src, lengths = sources()
    result = beam_search(m, src, lengths, beam_size=4, nbest=4, alpha=1.0)
    with torch.no_grad():
        for i, hyps in enumerate(result):
            width = max(len(h.tokens) for h in hyps) + 1
            tgt_in = torch.tensor(
                [[BOS] + h.tokens + [0] * (width - 1 - len(h.tokens)) for h in hyps]
            )
            n = len(hyps)
            logits, _ = m(src[i : i + 1].expand(n, -1), lengths[i : i + 1].expand(n), tgt_in)
            logp = torch.log_softmax(logits, -1)
            for j, h in enumerate(hyps):
                forced = sum(float(logp[j, t, tok]) for t, tok in enumerate(h.tokens + [EOS]))
                assert h.score == pytest.approx(forced, abs=1e-4)


class _Rows:
    def __init__(self, x):
        self.x = x

    def select(self, index):
        return _Rows(self.x.index_select(0, index))

    def shared_by(self, hypotheses):
        return self


class Bigram:
    """A stand-in model whose next-piece log-probabilities depend on the previous piece only."""

    def __init__(self, table):
        self.table = table

    def encode(self, src, src_lengths):
        return _Rows(torch.zeros(src.size(0))), _Rows(torch.zeros(src.size(0)))

    def step(self, prev, state, memory, columns=None):
        return self.table[prev].clone(), state, None


def test_beam_search_does_not_stop_while_a_longer_hypothesis_can_still_win():
    # "A" ends cheaply at once; "B B ... B" costs little per piece. With alpha 2 the longest B
    # chain wins: -1.65 / lp(9) = -0.303 against "A"'s -0.6 / lp(2) = -0.441. A rule with lp at
    # the current length would stop at the second step, when "A" has finished and "B B" has
    # -1.25 / lp(2) = -0.92: below "A", but not for long.
    a, b = 4, 5
    table = torch.full((6, 6), -20.0)
    table[BOS, a], table[BOS, b] = -0.5, -1.2
    table[a, EOS] = -0.1
    table[b, b], table[b, EOS] = -0.05, -0.1
    for nbest in (1, 2):  # with 1 the stopping rule is tried at every step
        hyps = beam_search(
            Bigram(table),
            torch.tensor([[7]]),
            torch.tensor([1]),
            beam_size=2,
            alpha=2.0,
            nbest=nbest,
            max_len_ratio=0.01,
            max_len_const=8,
        )[0]
        assert [h.tokens for h in hyps] == [[b] * 8, [a]][:nbest]
    assert hyps[0].score == pytest.approx(-1.65, abs=1e-5)
    assert hyps[0].norm_score == pytest.approx(-1.65 / (14 / 6) ** 2, abs=1e-5)


@pytest.mark.parametrize("leave_share", [0.0, 0.125, 0.5])
def test_beam_search_narrows_the_union_as_sentences_leave_without_changing_any(
    leave_share, monkeypatch
):
    # Done sentences leave at once (0.0) or once they are that share of the batch, staying
    # frozen until then: nobody's hypotheses may change
    # Each sentence allows few target ids of its own, so the union shrinks as sentences finish;
    # the output layer then runs over fewer columns, and no sentence's result may change.
    from nmt_cli.decoding.shortlist import Shortlist
    from nmt_cli.model.fast_decoding import prepare_for_decoding

    m = model(12)
    prepare_for_decoding(m)
    m.decoding_setup = replace(m.decoding_setup, group_rows=0, beam_group_rows=0)  # the union
    g, src, lengths = ragged_batch(16, seed=5)
    shortlist = Shortlist(torch.arange(4, 6), torch.randint(4, V, (V, 2), generator=g))
    columns = []
    plain_step = m.step

    def counting_step(prev, state, memory, cols=None):
        assert cols.group_rows is None
        columns.append(cols.ids.numel())
        return plain_step(prev, state, memory, cols)

    m.step = counting_step
    together = beam_search(
        m,
        src,
        lengths,
        beam_size=3,
        nbest=2,
        vocab=shortlist.candidates(src, lengths),
        leave_share=leave_share,
    )
    assert columns[-1] < columns[0]
    m.step = plain_step
    for i in range(16):
        one, n = src[i : i + 1, : int(lengths[i])], lengths[i : i + 1]
        alone = beam_search(m, one, n, beam_size=3, nbest=2, vocab=shortlist.candidates(one, n))[0]
        assert [h.tokens for h in together[i]] == [h.tokens for h in alone]
        assert [h.score for h in together[i]] == pytest.approx([h.score for h in alone], abs=1e-5)


@pytest.mark.parametrize("search", ["greedy", "beam"])
def test_the_output_layer_in_row_groups_changes_nothing(monkeypatch, search):
    # Rows go through the output layer a few whole sentences at a time, each group over its own
    # columns (output_layer.group_columns): hypotheses and scores as over the batch's union.
    import nmt_cli.model.output_layer as output_layer
    from nmt_cli.decoding.shortlist import Shortlist
    from nmt_cli.model.fast_decoding import prepare_for_decoding

    m = model(13)
    prepared = prepare_for_decoding(m)
    g, src, lengths = ragged_batch(12, seed=6)
    shortlist = Shortlist(torch.arange(4, 6), torch.randint(4, V, (V, 2), generator=g))
    group_sizes, plain_step = [], m.step

    def recording_step(prev, state, memory, columns=None):
        groups = columns.group_rows
        group_sizes.append(groups)
        if groups:  # whole sentences per group, and every row's own set kept
            assert all(rows % (1 if search == "greedy" else 3) == 0 for rows in groups)
            assert sum(groups) == prev.numel() and len(groups) == columns.ids.size(0)
            assert columns.ids.dim() == 2
            assert columns.allowed.size(1) == columns.ids.size(1) == max(columns.widths)
        return plain_step(prev, state, memory, columns)

    m.step = recording_step
    results = []
    for rows, share in ((10_000, 0.7), (6, 1.0)):
        m.decoding_setup = replace(prepared, group_rows=rows, beam_group_rows=rows)
        monkeypatch.setattr(output_layer, "GROUPED_SHARE", share)
        group_sizes.clear()
        vocab = shortlist.candidates(src, lengths)
        if search == "greedy":
            results.append(greedy(m, src, lengths, vocab=vocab))
        else:
            results.append(beam_search(m, src, lengths, beam_size=3, nbest=2, vocab=vocab))
        assert any(group_sizes) == (rows == 6)
    plain, grouped = results
    for one, other in zip(plain, grouped):
        assert [h.tokens for h in one] == [h.tokens for h in other]
        assert [h.score for h in one] == pytest.approx([h.score for h in other], rel=1e-6)


def test_row_groups_keep_each_rows_set_the_specials_in_place_and_map_back_to_ids(monkeypatch):
    import nmt_cli.model.output_layer as output_layer
    from nmt_cli.data.tokenizer import PAD
    from nmt_cli.model.output_layer import group_columns, remaining_columns

    monkeypatch.setattr(output_layer, "GROUPED_SHARE", 1.0)
    vocab = torch.tensor([0, 1, 2, 3, 7, 9, 12, 15, 20, 21])
    allowed = torch.zeros(5, 10, dtype=torch.bool)
    allowed[:, :4] = True
    allowed[0, [5, 8]] = True
    allowed[1, 9] = True
    allowed[2, 4] = True
    allowed[4, [6, 7, 8]] = True
    columns = group_columns(vocab, allowed, 2)  # rows 0-1, 2-3 and 4
    assert columns.group_rows == (2, 2, 1) and columns.widths == (7, 5, 7)
    # each group's own columns first, in id order (the specials at 0..3), then PAD
    assert columns.ids.tolist() == [
        [0, 1, 2, 3, 9, 20, 21],
        [0, 1, 2, 3, 7, PAD, PAD],
        [0, 1, 2, 3, 12, 15, 20],
    ]
    for row in range(5):
        own = vocab[allowed[row]].tolist()
        assert columns.ids[row // 2][columns.allowed[row]].tolist() == own
    assert not columns.allowed[2:4, 5:].any()  # padding: allowed to nobody
    # a chosen column maps back to its group's id
    assert columns.token_ids(torch.tensor([4, 4, 4, 4, 6])).tolist() == [9, 9, 7, 7, 20]
    assert columns.token_ids(torch.tensor([[4], [6]]), torch.tensor([1, 4])).tolist() == [[9], [20]]
    # values over the union, laid out as the groups' columns
    over_union = vocab.float().expand(5, -1)
    laid_out = over_union.gather(1, columns.union_positions())
    assert torch.equal(
        laid_out[columns.allowed], columns.ids.repeat_interleave(2, 0)[:5][columns.allowed].float()
    )
    assert columns.arithmetic() == 2 * 7 + 2 * 5 + 7
    # rows leaving: the same groups over the same columns while that costs little more
    kept = remaining_columns(columns, torch.tensor([0, 1, 4]), vocab, allowed[[0, 1, 4]], 2)
    assert kept.ids is columns.ids and kept.group_rows == (2, 0, 1)
    assert kept.token_ids(torch.tensor([4, 4, 6])).tolist() == [9, 9, 20]
    monkeypatch.setattr(output_layer, "REGROUP_SLACK", 0.5)  # fresh groups do less: formed again
    fresh = remaining_columns(columns, torch.tensor([0, 1, 4]), vocab, allowed[[0, 1, 4]], 2)
    assert fresh.ids is not columns.ids and fresh.group_rows == (2, 1)
    # not worth it: the union for every row
    monkeypatch.setattr(output_layer, "GROUPED_SHARE", 0.1)
    assert group_columns(vocab, allowed, 2).group_rows is None
    assert group_columns(vocab, allowed, 5).group_rows is None  # one group


@pytest.mark.parametrize("search", ["greedy", "beam"])
def test_bf16_shapes_rounded_up_to_whole_multiples_change_nothing(monkeypatch, search):
    # In bf16 the shortlist union is rounded up with columns that no row allows (and rows are not
    # grouped), and finished rows (sentences) stay in the batch to keep its rows a multiple
    # (fewer distinct matrix shapes for oneDNN to plan): hypotheses and scores as with the exact
    # shapes, and every width the output layer and row count the decoder meets is a whole multiple.
    import nmt_cli.model.fast_decoding as fast_decoding
    import nmt_cli.model.output_layer as output_layer
    from nmt_cli.decoding.shortlist import Shortlist

    m = model(14).to(torch.bfloat16)
    g, src, lengths = ragged_batch(12, seed=7)
    shortlist = Shortlist(torch.arange(4, 6), torch.randint(4, V, (V, 2), generator=g))
    monkeypatch.setattr(fast_decoding, "GROUP_ROWS", 6)
    monkeypatch.setattr(fast_decoding, "BEAM_GROUP_ROWS", 6)
    monkeypatch.setattr(output_layer, "GROUPED_SHARE", 1.0)  # would group in fp32; bf16 never does
    widths, groups, row_counts = [], [], []
    plain_step = m.step

    def recording_step(prev, state, memory, columns=None):
        widths.append(columns.ids.numel())
        row_counts.append(prev.numel())
        groups.append(columns.group_rows)
        return plain_step(prev, state, memory, columns)

    m.step = recording_step
    results = {}
    for multiple in (1, 8):
        monkeypatch.setattr(fast_decoding, "COLUMN_MULTIPLE", multiple)
        monkeypatch.setattr(fast_decoding, "ROW_MULTIPLE", multiple // 2 or 1)  # 4 rows
        monkeypatch.setattr(fast_decoding, "SENTENCE_MULTIPLE", multiple // 4 or 1)  # 2 sentences
        fast_decoding.prepare_for_decoding(m)
        assert m.decoding_setup.column_multiple == multiple
        widths.clear()
        groups.clear()
        row_counts.clear()
        if search == "greedy":
            results[multiple] = greedy(m, src, lengths, vocab=shortlist.candidates(src, lengths))
        else:
            results[multiple] = beam_search(
                m, src, lengths, beam_size=3, nbest=2, vocab=shortlist.candidates(src, lengths)
            )
    assert widths and all(w % 8 == 0 for w in widths)
    assert len(set(row_counts)) > 2 and all(
        n % (4 if search == "greedy" else 6) == 0 for n in row_counts[1:]
    ), row_counts
    assert groups and not any(groups)
    for exact, rounded in zip(results[1], results[8]):
        assert [h.tokens for h in exact] == [h.tokens for h in rounded]
        assert [h.score for h in exact] == pytest.approx([h.score for h in rounded], abs=1e-4)


def test_union_padding_adds_columns_no_row_allows():
    from nmt_cli.model.output_layer import pad_union

    vocab, allowed = torch.arange(10), torch.ones(3, 10, dtype=torch.bool)
    padded_vocab, padded_allowed = pad_union(vocab, allowed, 8)
    assert padded_vocab.tolist() == list(range(10)) + [0] * 6
    assert padded_allowed[:, :10].all() and not padded_allowed[:, 10:].any()
    assert pad_union(vocab, allowed, 1)[0] is vocab
    assert pad_union(vocab, allowed, 5)[0] is vocab
    assert pad_union(vocab, None, 8)[0] is vocab


def test_narrowing_keeps_every_rows_set_and_the_specials_in_place():
    from nmt_cli.model.output_layer import narrow

    vocab = torch.tensor([0, 1, 2, 3, 7, 9, 12, 15, 20, 21])
    allowed = torch.zeros(2, 10, dtype=torch.bool)
    allowed[:, :4] = True
    allowed[0, [5, 8]] = True
    allowed[1, 8] = True
    narrow_vocab, narrow_allowed = narrow(vocab, allowed)
    assert narrow_vocab.tolist() == [0, 1, 2, 3, 9, 20]
    assert narrow_allowed.all(dim=1).tolist() == [True, False]
    assert narrow_allowed[1].tolist() == [True, True, True, True, False, True]
    wide = torch.ones(20, dtype=torch.long).cumsum(0)
    nearly_all = torch.ones(2, 20, dtype=torch.bool)
    nearly_all[:, 19] = False  # less than a tenth would go: not worth a copy of W_s
    assert narrow(wide, nearly_all)[0] is wide
