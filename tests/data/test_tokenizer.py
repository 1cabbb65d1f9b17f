import pytest

from nmt_cli.config.sections import TokenizerConfig
from nmt_cli.data.tokenizer import BOS, EOS, PAD, UNK, Tokenizer, train_tokenizer
from nmt_cli.runtime.errors import DataError
from tests.conftest import multi30k_lines


@pytest.fixture(scope="module")
def pair():
    return multi30k_lines("train", "en", 1500), multi30k_lines("train", "fr", 1500)


def test_joint_model_has_fixed_special_ids_and_round_trips(pair):
    en, fr = pair
    tok = train_tokenizer(TokenizerConfig(vocab_size=500, sample_sentences=3000), en, fr, seed=3)
    assert tok.joint and tok.src is tok.tgt and tok.src_vocab_size == tok.tgt_vocab_size == 500
    assert [tok.tgt.id_to_piece(i) for i in (PAD, UNK, BOS, EOS)] == [
        "<pad>",
        "<unk>",
        "<s>",
        "</s>",
    ]
    # Encoding never emits the control ids, and decoding gives the (whitespace-normalised) text
    # back.
    held_out = [" ".join(line.split()) for line in multi30k_lines("val", "fr", 200)]
    ids = tok.encode_tgt(held_out)
    assert all(PAD not in s and BOS not in s and EOS not in s for s in ids)
    assert tok.decode_tgt(ids) == held_out
    assert tok.encode_src(["A dog runs."]) == tok.encode_tgt(["A dog runs."])  # one vocabulary


def test_separate_models_save_and_load_as_two_files(pair, tmp_path):
    en, fr = pair
    tok = train_tokenizer(
        TokenizerConfig(vocab_size=300, joint=False, sample_sentences=1500), en, fr
    )
    assert not tok.joint and tok.src_proto != tok.tgt_proto
    tok.save(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["spm.src.model", "spm.tgt.model"]
    loaded = Tokenizer.load(tmp_path)
    assert loaded.encode_src(en[:20]) == tok.encode_src(en[:20])
    assert loaded.encode_tgt(fr[:20]) == tok.encode_tgt(fr[:20])
    assert tok.src_pieces(tok.encode_src(["the dog"])[0])[0].startswith("▁")


def test_same_seed_same_vocabulary_when_sampling(pair):
    en, fr = pair
    cfg = TokenizerConfig(vocab_size=300, sample_sentences=1000)  # fewer than the 3,000 lines given
    a, b = train_tokenizer(cfg, en, fr, seed=5), train_tokenizer(cfg, en, fr, seed=5)
    assert a.src_proto == b.src_proto


def test_user_errors_are_data_errors(tmp_path):
    with pytest.raises(DataError, match="no non-empty training sentences"):
        train_tokenizer(TokenizerConfig(vocab_size=300), ["", ""], ["", ""])
    with pytest.raises(DataError, match="no tokenizer"):
        Tokenizer.load(tmp_path)
    with pytest.raises(DataError, match="not a valid SentencePiece model"):
        Tokenizer(b"not a model", what="x.model")
