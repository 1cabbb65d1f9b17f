"""Preparing models for decoding (nmt_cli/model/fast_decoding.py) through the decoding entry
points: decode_ids, ensembles and int8 models."""

import pytest
import torch

from nmt_cli.config.sections import DecodeConfig, ModelConfig
from nmt_cli.data.tokenizer import BOS, EOS, PAD
from nmt_cli.decoding.search import beam_search, greedy
from nmt_cli.decoding.shortlist import Shortlist
from nmt_cli.model import build_model
from nmt_cli.model.ensemble import Ensemble
from nmt_cli.model.fast_decoding import prepare_for_decoding, setup_of, unprepared
from nmt_cli.model.quantize import quantize_int8
from nmt_cli.translation.translator import decode_ids

V = 40


def model(seed=0, **kw):
    torch.manual_seed(seed)
    cfg = dict(embed_dim=12, hidden_dim=16, dropout=0.0, attention="concat")
    cfg.update(kw)
    return build_model(ModelConfig(**cfg), V, V)


def sources(n=12, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(4, V, (1 + i % 6,), generator=g).tolist() for i in range(n)]


def outputs(hyps):
    return [[(h.tokens, h.score) for h in hs] for hs in hyps]


@pytest.mark.parametrize("beam", [1, 3])
def test_decode_ids_prepares_a_model_nobody_prepared_for_the_call_only(beam):
    # Validation decodes the training model: prepared afresh for each call, so that a call after
    # an optimiser step reads the new weights, and left as it was (plain, in training mode)
    m = model(1).train()
    opts = DecodeConfig(beam_size=beam, batch_size=5)
    first = outputs(decode_ids(m, sources(), opts))
    assert unprepared(m) and m.training and m.decoder.rnn_step is None
    reference = model(1)
    prepare_for_decoding(reference)
    assert outputs(decode_ids(reference, sources(), opts)) == first  # the same paths, exactly
    assert not unprepared(reference)
    with torch.no_grad():
        for p in m.parameters():
            p.mul_(1.5)  # an optimiser step between two validations
    second = outputs(decode_ids(m, sources(), opts))
    moved = model(1)
    with torch.no_grad():
        for p in moved.parameters():
            p.mul_(1.5)
    prepare_for_decoding(moved)
    assert second == outputs(decode_ids(moved, sources(), opts)) != first


def test_decode_ids_leaves_a_prepared_model_prepared():
    m = model(2)
    setup = prepare_for_decoding(m)
    decode_ids(m, sources(4), DecodeConfig(beam_size=1))
    assert setup_of(m) is setup and m.decoder.rnn_step is not None


def test_an_ensemble_prepares_its_members_and_decodes_over_shared_columns():
    members = [model(3), model(4)]
    ensemble = Ensemble(members).eval()
    setup = prepare_for_decoding(ensemble)
    assert setup.group_rows and all(m.decoder.rnn_step is not None for m in members)
    g = torch.Generator().manual_seed(5)
    shortlist = Shortlist(torch.arange(4, 8), torch.randint(4, V, (V, 3), generator=g))
    src = torch.randint(4, V, (30, 6), generator=g)
    lengths = torch.randint(1, 7, (30,), generator=g)
    for i, n in enumerate(lengths):
        src[i, n:] = 0
    for search in (greedy, beam_search):
        over_columns = search(ensemble, src, lengths, vocab=shortlist.candidates(src, lengths))
        for i in (0, 7, 29):  # alone, over its own set: the same hypotheses
            one, n = src[i : i + 1, : int(lengths[i])], lengths[i : i + 1]
            alone = search(ensemble, one, n, vocab=shortlist.candidates(one, n))[0]
            assert [h.tokens for h in alone] == [h.tokens for h in over_columns[i]]
            assert [h.score for h in alone] == pytest.approx(
                [h.score for h in over_columns[i]], abs=1e-5
            )


@pytest.mark.parametrize("rnn", ["gru", "lstm"])
def test_an_int8_model_decodes_prepared_with_the_paths_its_modules_allow(rnn):
    float_model = model(6, rnn=rnn, decoder="luong").eval()
    prepare_for_decoding(float_model)
    q = quantize_int8(float_model)
    assert unprepared(q) and q.decoder.rnn_step is None  # the copy read the float modules
    setup = prepare_for_decoding(q)
    assert setup.group_rows and q.decoder.rnn_step is None  # torch's int8 RNN runs as it is
    assert not q.decoder.fold_context  # its combine layer is int8 too
    assert q.decoder.attention.decoding_score is not None
    g = torch.Generator().manual_seed(7)
    shortlist = Shortlist(torch.arange(4, 8), torch.randint(4, V, (V, 3), generator=g))
    src = torch.randint(4, V, (10, 5), generator=g)
    lengths = torch.full((10,), 5)
    hyps = beam_search(q, src, lengths, beam_size=3, vocab=shortlist.candidates(src, lengths))
    assert all(hs and not {PAD, BOS, EOS} & set(hs[0].tokens) for hs in hyps)
