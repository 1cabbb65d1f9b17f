import io
import math
import shutil
from dataclasses import replace

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nmt_cli.config.sections import DecodeConfig
from nmt_cli.decoding.decode import _batches
from nmt_cli.decoding.search import Hypothesis
from nmt_cli.documents.layer import translate_texts
from nmt_cli.documents.lines import OutputOptions, count_lines, shade_rows, translate_stream
from nmt_cli.training.checkpoint import load_model
from nmt_cli.translation.translator import Translator, force_decode
from nmt_cli.translation.words import alignment_pairs
from tests.conftest import multi30k_lines, trained_copy


def decoding(**changes) -> DecodeConfig:
    """A decoding configuration for tests: one worker unless asked, the given keys changed."""
    return DecodeConfig(**{"workers": 1, **changes})


@pytest.fixture(scope="module")
def trained(tiny_run, tmp_path_factory):
    copy = trained_copy(tiny_run, tmp_path_factory, "trained", max_steps=30, checkpoint_every=30)
    loaded = load_model(copy)
    return loaded.model, loaded.tokenizer, copy, loaded.shortlist


def translator(trained, **kw):
    model, tokenizer, _, shortlist = trained
    return Translator(
        model,
        tokenizer,
        decoding(**{"beam_size": 2, "batch_size": 4, "shortlist": False, **kw}),
        shortlist=shortlist,
        warn=lambda m: None,
    )


def run_stream(tr, data: bytes, **out) -> list[str]:
    buf = io.StringIO()
    translate_stream(tr, io.BytesIO(data), buf, interactive=False, out=OutputOptions(**out))
    return buf.getvalue().split("\n")[:-1]


def test_n_lines_in_n_lines_out_in_order(trained):
    lines = [
        "A man is riding a bike.",
        "",
        "   ",
        "Two dogs.",
        "A woman with a red hat sings on a stage.",
    ]
    tr = translator(trained)
    out = run_stream(tr, ("\n".join(lines) + "\n").encode())
    assert len(out) == 5
    assert out[1] == "" and out[2] == "   "  # a blank line comes back as it was
    # Order restored: each line equals translating it alone.
    for i in (0, 3, 4):
        assert out[i] == tr.translate([lines[i]])[0].text


@pytest.mark.parametrize("beam", [1, 3])
def test_worker_threads_give_the_same_output_in_order(trained, beam):
    model, tokenizer, run_dir, shortlist = trained
    lines = (run_dir / "data" / "valid.src.txt").read_text(encoding="utf-8").split("\n")[:40]
    threads = torch.get_num_threads()
    one = translator(trained, beam_size=beam, shortlist=True).translate(lines)
    two = translator(trained, beam_size=beam, shortlist=True, workers=2).translate(lines)
    assert [t.text for t in two] == [t.text for t in one]
    assert [t.hypotheses[0].score for t in two] == pytest.approx(
        [t.hypotheses[0].score for t in one], abs=1e-4
    )
    assert torch.get_num_threads() == threads  # the pool gives the cores back


def test_arguments_of_the_wrong_type_are_type_errors_naming_them(trained):
    from nmt_cli.translation.contract import TranslateOptions

    tr = translator(trained)
    for call, message in [
        (lambda: tr.translate("A dog runs."), "lines: give a sequence of strings"),
        (lambda: tr.translate([None]), "lines: give a sequence of strings"),
        (lambda: translate_texts(tr, "A dog runs."), "texts: give a sequence of strings"),
        (lambda: tr.translate(["A dog."], {"nbest": 2}), "options: give a TranslateOptions"),
        (lambda: tr.translate(["A dog."], nbest="2"), "nbest: give a whole number"),
        (lambda: tr.translate(["A dog."], sampling=5), "sampling: give a Sampling"),
        (lambda: tr.translate(["A dog."], prefixes="Un"), "prefixes: give one string"),
        (lambda: TranslateOptions(alignments=1), "alignments: give True or False"),
    ]:
        with pytest.raises(TypeError, match=message):
            call()
    assert tr.translate([]) == []


def test_shortlist_frequent_limits_the_pieces_a_sentence_may_use(trained):
    model, tokenizer, run_dir, shortlist = trained
    lines = (run_dir / "data" / "valid.src.txt").read_text(encoding="utf-8").split("\n")[:8]
    out = translator(
        trained, shortlist=True, shortlist_per_source=2, shortlist_frequent=4, batch_size=1
    ).translate(lines)
    assert len(out) == len(lines)
    for t in out:  # one sentence per batch: its own specials and candidates, no frequent pieces
        allowed = set(shortlist.vocabulary(torch.tensor([t.src_ids]), 2, 4).tolist())
        assert len(allowed) <= 4 + 2 * len(t.src_ids) and set(t.hypotheses[0].tokens) <= allowed
    wide = translator(trained, shortlist=True, shortlist_per_source=2, batch_size=1).translate(
        lines
    )
    assert [t.text for t in wide] != [t.text for t in out]  # 0 = all 300 of this tiny vocabulary


def test_invalid_utf8_and_missing_final_newline(trained):
    out = run_stream(
        translator(trained), b"\xff\xfe broken \xc3\n\xe2\x82 last line without newline"
    )
    assert len(out) == 2


def test_invalid_utf8_lines_are_translated_and_named_in_one_warning(trained):
    model, tokenizer, _, _ = trained
    warnings = []
    tr = Translator(model, tokenizer, decoding(beam_size=1), warn=warnings.append)
    lines = [b"A dog runs.", b"A \xff cat.", b"Two men.", b"\xc3", b"ok"] + [b"bad \xfe"] * 6
    buf = io.StringIO()
    # chunks of 2 lines: the warning still comes once, at the end, with every line number
    n = translate_stream(
        tr,
        io.BytesIO(b"\n".join(lines) + b"\n"),
        buf,
        interactive=False,
        out=OutputOptions(),
        chunk_lines=2,
    )
    assert n == len(lines) == buf.getvalue().count("\n")
    assert warnings == [
        "warning: input 8 lines (2, 4, 6, 7, 8 and 3 more) are not valid UTF-8; the bad "
        "bytes were replaced by U+FFFD and translated as such"
    ]
    warnings.clear()
    translate_stream(
        tr, io.BytesIO(b"fine\n\xff\n"), io.StringIO(), interactive=False, out=OutputOptions()
    )
    assert warnings == [
        "warning: input line 2 is not valid UTF-8; the bad bytes were replaced by U+FFFD "
        "and translated as such"
    ]
    warnings.clear()
    run_stream(tr, "Un café à Noël.\n".encode())
    assert warnings == []


def test_count_lines_matches_what_the_stream_reads(tmp_path):
    for data, n in (
        (b"", 0),
        (b"a\n", 1),
        (b"a\nb", 2),
        (b"\n\n", 2),
        (b"x" * 3_000_000 + b"\ny\n", 2),
    ):
        (tmp_path / "f").write_bytes(data)
        assert count_lines(tmp_path / "f") == n


def test_terminal_heat_map_shows_whole_pieces():
    weights = torch.tensor([[0.9, 0.05, 0.05], [0.1, 0.1, 0.8]])
    src, tgt = ["\u2581photographer", "\u2581at", "\u2581work"], ["\u2581photographe", "</s>"]
    rows = shade_rows(weights, src, tgt).split("\n")
    assert all(piece in rows[0] for piece in src) and rows[1].lstrip().startswith(
        "\u2581photographe"
    )
    assert rows[2].lstrip().startswith("</s>")
    cells = rows[1][len(rows[1]) - len(rows[0].lstrip()) :]
    assert cells.startswith("\u2588" * len(src[0]))  # the strongest cell is as wide as its piece


def test_overlong_line_is_truncated_with_one_warning(trained):
    model, tokenizer, _, _ = trained
    warnings = []
    tr = Translator(
        model, tokenizer, decoding(beam_size=1), max_source_tokens=20, warn=warnings.append
    )
    result = tr.translate(["word " * 500, "dog " * 300])
    assert len(result) == 2 and all(r.truncated for r in result)
    assert len(warnings) == 1


def test_scores_and_nbest_formats(trained):
    out = run_stream(translator(trained, beam_size=3), b"A man.\nA dog.\n", nbest=3)
    assert len(out) == 6
    assert out[0].startswith("0 ||| ") and out[3].startswith("1 ||| ")
    scored = run_stream(translator(trained), b"A man.\n", scores=True)
    text, score, confidence = scored[0].split("\t")
    assert float(score) < 0 and 0 < float(confidence) <= 1


def test_alignments_from_greedy_and_beam(trained):
    for beam in (1, 3):
        out = run_stream(translator(trained, beam_size=beam), b"A man sleeps.\n", alignments=True)
        text, align = out[0].split("\t")
        pairs = [tuple(map(int, p.split("-"))) for p in align.split()]
        assert pairs and all(0 <= i < 3 for i, _ in pairs)
        assert len({j for _, j in pairs}) == len(pairs)  # one source word per target word


def test_alignment_sums_subwords_per_word():
    # source words: [▁a ▁b c] -> words a, bc ; target [▁x y ▁z] -> words xy, z
    att = torch.tensor([[0.9, 0.05, 0.05], [0.1, 0.2, 0.7], [0.3, 0.4, 0.3], [1.0, 0.0, 0.0]])
    h = Hypothesis([0, 0, 0], 0.0, 0.0, att)
    pairs = alignment_pairs(h.attention, ["\u2581a", "\u2581b", "c"], ["\u2581x", "y", "\u2581z"])
    # word xy: a = 0.9+0.1 = 1.0, bc = 0.1+0.9 = 1.0 -> argmax picks the first; z: a .3 vs bc .7
    assert pairs == [(0, 0), (1, 1)]


def test_attention_plot_files(trained, tmp_path):
    pytest.importorskip("matplotlib")
    out = run_stream(translator(trained), b"A man.\nA dog runs.\n", attention_plot=str(tmp_path))
    assert len(out) == 2
    pngs = sorted(p.name for p in tmp_path.glob("*.png"))
    assert pngs == ["000000.png", "000001.png"]
    assert (tmp_path / pngs[0]).read_bytes()[:4] == b"\x89PNG"


def test_force_decoding_matches_search_score(trained):
    model, tokenizer, _, _ = trained
    tr = translator(trained, beam_size=1)
    result = tr.translate(["A man is walking."])[0]
    lp = force_decode(model, tokenizer, ["A man is walking."], [result.text])
    # Re-encoding the detokenized output may split it differently; when it is the same pieces
    # the scores agree.
    if tokenizer.encode_tgt([result.text])[0] == result.hypotheses[0].tokens:
        assert lp[0] == pytest.approx(result.hypotheses[0].score, abs=1e-3)
    assert lp[0] < 0


def test_force_decoding_per_piece_divides_by_the_target_pieces_and_eos(trained):
    model, tokenizer, _, _ = trained
    sources = ["A man.", "Two dogs run on the beach near a red boat."]
    targets = ["Un homme.", "Deux chiens courent sur la plage près d'un bateau rouge."]
    summed = force_decode(model, tokenizer, sources, targets)
    per_piece = force_decode(model, tokenizer, sources, targets, per_piece=True)
    for total, mean, pieces in zip(summed, per_piece, tokenizer.encode_tgt(targets), strict=True):
        assert mean == pytest.approx(total / (len(pieces) + 1), rel=1e-5)


def test_lowercase_translator_lowercases_what_it_encodes_and_keeps_the_line(trained):
    model, tokenizer, _, _ = trained
    tr = Translator(model, tokenizer, decoding(beam_size=1), lowercase=True)
    shouted, quiet = tr.translate(["A MAN IS WALKING.", "a man is walking."])
    assert shouted.src_ids == quiet.src_ids == tokenizer.encode_src(["a man is walking."])[0]
    assert shouted.text == quiet.text
    assert shouted.source == "A MAN IS WALKING."
    cased = Translator(model, tokenizer, decoding(beam_size=1)).translate(["A MAN IS WALKING."])[0]
    assert cased.src_ids != quiet.src_ids


def test_load_translator_follows_the_recipes_lowercase(trained, monkeypatch):
    import dataclasses

    from nmt_cli.packages import loading
    from nmt_cli.runtime.errors import UserError
    from nmt_cli.translation import translator as translator_module
    from nmt_cli.translation.translator import load_translator

    _, _, run_dir, _ = trained
    real = loading.load_any

    def load(path, device="cpu"):  # the same run, as if trained with data.lowercase
        loaded = real(path, device)
        if str(path).endswith("lower"):
            loaded.recipe = dataclasses.replace(
                loaded.recipe, data=dataclasses.replace(loaded.recipe.data, lowercase=True)
            )
        return loaded

    monkeypatch.setattr(translator_module, "load_any", load)
    lower = run_dir.parent / "lower"
    shutil.copytree(run_dir, lower, dirs_exist_ok=True)
    assert load_translator([str(lower)], device="cpu").lowercase
    assert not load_translator([str(run_dir)], device="cpu").lowercase
    with pytest.raises(UserError, match="data.lowercase differs"):
        load_translator([str(lower), str(run_dir)], device="cpu")


def test_force_decoding_lowercases_for_a_lowercase_model(trained):
    model, tokenizer, _, _ = trained
    loud = force_decode(model, tokenizer, ["A DOG."], ["UN CHIEN."], lowercase=True)
    quiet = force_decode(model, tokenizer, ["a dog."], ["un chien."])
    assert loud == pytest.approx(quiet, abs=1e-5)


def test_int8_quantized_model_translates(trained):
    from nmt_cli.model.quantize import quantize_int8

    model, tokenizer, _, _ = trained
    q = quantize_int8(model)
    tr = Translator(q, tokenizer, decoding(beam_size=2))
    assert len(tr.translate(["A man.", "", "A dog."])) == 3


lines_strategy = st.lists(
    st.one_of(
        st.text(max_size=40),
        st.just(""),
        st.just("   "),
        st.binary(max_size=30).map(lambda b: b.decode("latin-1")),
    ),
    max_size=12,
)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(raw=st.lists(st.binary(max_size=60), max_size=12))
def test_random_bytes_give_one_line_each(trained, raw):
    data = b"\n".join(r.replace(b"\n", b" ") for r in raw)
    expected = len(data.split(b"\n")) if data else 0
    if data.endswith(b"\n"):
        expected -= 1
    out = run_stream(translator(trained, beam_size=1), data)
    assert len(out) == expected


@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(lines=lines_strategy)
def test_random_text_keeps_order(trained, lines):
    lines = [
        " ".join(line.splitlines())
        .replace("\r", " ")
        .replace("\x0b", " ")
        .replace("\x0c", " ")
        .replace("\x1c", " ")
        .replace("\x1d", " ")
        .replace("\x1e", " ")
        .replace("\x85", " ")
        .replace("\u2028", " ")
        .replace("\u2029", " ")
        for line in lines
    ]
    tr = translator(trained, beam_size=1)
    out = run_stream(tr, "".join(line + "\n" for line in lines).encode("utf-8", "replace"))
    assert len(out) == len(lines)
    for line, text in zip(lines, out):
        if not line.strip():
            assert text == line


def test_load_translator_takes_the_recipe_defaults_and_ensembles(trained):
    from nmt_cli.model.ensemble import Ensemble
    from nmt_cli.runtime.errors import UserError
    from nmt_cli.translation.translator import load_translator

    _, _, run_dir, _ = trained
    recipe = load_model(run_dir).recipe
    one = load_translator([str(run_dir)], device="cpu")
    assert one.config == recipe.decode
    tuned = load_translator([str(run_dir)], {"beam_size": 3, "length_penalty": 0.0}, device="cpu")
    assert tuned.config == replace(recipe.decode, beam_size=3, length_penalty=0.0)
    assert load_translator([str(run_dir)], tuned.config, device="cpu").config == tuned.config
    unchanged = load_translator([str(run_dir)], {"beam_size": None}, device="cpu")
    assert unchanged.config.beam_size == recipe.decode.beam_size  # None keeps the recipe's value
    pair = load_translator([str(run_dir), str(run_dir)], device="cpu")
    assert isinstance(pair.model, Ensemble) and pair.shortlist is not None
    assert [t.text for t in pair.translate(["a dog runs ."])] == [
        t.text for t in one.translate(["a dog runs ."])
    ]
    with pytest.raises(UserError, match="--quantize"):
        load_translator([str(run_dir)], device="cpu", quantize="int4")
    bf16 = load_translator([str(run_dir)], {"precision": "bf16"}, device="cpu")
    assert bf16.precision == "bf16" and {p.dtype for p in bf16.model.parameters()} == {
        torch.bfloat16
    }
    fp32 = load_translator([str(run_dir)], {"precision": "fp32"}, device="cpu")
    assert fp32.precision == "fp32"
    assert load_translator([str(run_dir)], device="cpu", quantize="int8").precision == "fp32"
    with pytest.raises(UserError, match="exclude each other"):
        load_translator([str(run_dir)], {"precision": "bf16"}, device="cpu", quantize="int8")


def test_decode_precision_int8_quantises_as_the_quantize_option_does(trained):
    from torch.ao.nn.quantized.dynamic import Linear as Int8Linear

    from nmt_cli.translation.translator import load_translator

    _, _, run_dir, _ = trained
    lines = multi30k_lines("test_2016_flickr", "en", 8)
    by_option = load_translator([str(run_dir)], {"beam_size": 2}, device="cpu", quantize="int8")
    by_key = load_translator([str(run_dir)], {"beam_size": 2, "precision": "int8"}, device="cpu")
    assert any(isinstance(m, Int8Linear) for m in by_key.model.modules())
    assert by_key.precision == "fp32"  # what is not int8 stays fp32
    assert [t.text for t in by_key.translate(lines)] == [t.text for t in by_option.translate(lines)]
    float_ = load_translator([str(run_dir)], {"precision": "fp32"}, device="cpu")
    assert not any(isinstance(m, Int8Linear) for m in float_.model.modules())


def test_decode_overrides_are_checked_as_recipe_keys(trained):
    from nmt_cli.runtime.errors import ConfigError
    from nmt_cli.translation.translator import load_translator

    _, _, run_dir, _ = trained
    with pytest.raises(
        ConfigError, match=r"^decode\.beam_size: 0 is out of range \(must be >= 1\)$"
    ):
        load_translator([str(run_dir)], {"beam_size": 0}, device="cpu")
    with pytest.raises(
        ConfigError, match=r"^--precision: 'fp8' is not one of auto, fp32, bf16, int8$"
    ):
        load_translator(
            [str(run_dir)], {"precision": "fp8"}, device="cpu", name_of=lambda k: "--" + k
        )
    with pytest.raises(
        ConfigError, match="decode.beam: unknown key .did you mean 'decode.beam_size'"
    ):
        Translator.load(run_dir, device="cpu", beam=3)
    tr = Translator.load(run_dir, device="cpu", beam_size=2, shortlist=False)
    assert (tr.config.beam_size, tr.config.shortlist) == (2, False)
    with pytest.raises(ConfigError, match="decode.beam_size: 101 is out of range"):
        tr.translate(["A dog."], beam_size=101)
    assert torch.is_grad_enabled()  # a library call leaves the caller's grad mode alone


@pytest.mark.parametrize("beam", [1, 3])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_a_line_translates_the_same_whatever_its_batch_mates(trained, beam, dtype):
    """With the shortlist on, each sentence is normalised over its own candidates: translating a
    file whole, shuffled or line by line gives the same lines, in fp32 and in bf16 (whose output
    layer is rounded up to whole multiples of columns). Narrow candidate sets (2 per source
    piece, 8 common pieces) make the batch's union differ much from each sentence's set.
    (Not so under --quantize int8, whose activation scales are per batch: docs/translate.md.)"""
    import copy

    from conftest import multi30k_lines

    model, tokenizer, _, _ = trained
    model = copy.deepcopy(model).to(dtype)
    lines = multi30k_lines("val", "en", 24)
    opts = dict(
        beam_size=beam, batch_size=8, shortlist=True, shortlist_per_source=2, shortlist_frequent=8
    )
    tr = Translator(model, tokenizer, decoding(**opts), warn=lambda m: None)
    whole = [t.text for t in tr.translate(lines)]
    order = list(range(len(lines)))[::-1][1::2] + list(range(len(lines)))[::-1][0::2]
    shuffled = [t.text for t in tr.translate([lines[i] for i in order])]
    assert [shuffled[order.index(i)] for i in range(len(lines))] == whole
    assert [tr.translate([line])[0].text for line in lines] == whole


def test_python_api_loads_a_run_and_gives_typed_results(trained):
    import nmt_cli

    _, tokenizer, run_dir, _ = trained
    assert nmt_cli.Translator is Translator
    tr = nmt_cli.Translator.load(run_dir, device="cpu", beam_size=3, threads=1)
    assert tr.recipe.src == "en" and tr.checkpoint.name in ("best.pt", "last.pt")
    lines = ["A man is riding a bike.", "", "Two dogs play in the snow."]
    plain = tr.translate(lines)
    rich = tr.translate(lines, nbest=3, alignments=True, attention=True)
    assert [t.text for t in rich] == [t.text for t in plain]
    assert rich[1].text == "" and rich[1].score == 0.0 and rich[1].attention is None
    for t in (rich[0], rich[2]):
        assert len(t.alternatives) == 3 and t.alternatives[0].text == t.text
        assert t.score == t.alternatives[0].score == t.hypotheses[0].score
        norms = [a.norm_score for a in t.alternatives]
        assert norms == sorted(norms, reverse=True)
        src_p, tgt_p = tokenizer.src_pieces(t.src_ids), tokenizer.tgt_pieces(t.hypotheses[0].tokens)
        assert t.alignment == alignment_pairs(t.hypotheses[0].attention, src_p, tgt_p)
        assert t.attention.source_words == t.source.split()
        assert len(t.attention.weights) == len(t.attention.target_words) == len(t.text.split())
    with pytest.raises(Exception, match="nbest 4"):
        tr.translate(lines, nbest=4)


@pytest.mark.parametrize(
    "opts, size",
    [
        (dict(beam_size=1), 128),
        (dict(beam_size=5), 64),
        (dict(beam_size=2, nbest=2), 64),
        (dict(beam_size=1, batch_size=7), 7),
        (dict(beam_size=5, batch_size=200), 200),
    ],
)
def test_batches_default_to_more_sentences_for_greedy_than_for_beam_search(opts, size):
    lengths = [3 + i % 11 for i in range(300)]
    order = sorted(range(300), key=lambda i: -lengths[i])
    nbest = opts.pop("nbest", 1)
    batches = list(_batches(order, lengths, decoding(**opts), nbest=nbest))
    assert [len(b) for b in batches[:-1]] == [size] * (len(batches) - 1)
    assert sorted(i for b in batches for i in b) == list(range(300))


def test_batches_taper_at_the_end_when_workers_decode_side_by_side():
    """With two workers no batch takes more than half the sentences still left (down to 32 rows
    a step), so the last full batch does not leave one worker decoding while the other waits; one
    worker's batches stay whole."""
    lengths = [3 + i % 11 for i in range(1000)]
    order = sorted(range(1000), key=lambda i: -lengths[i])

    def sizes(workers, **opts):
        batches = list(_batches(order, lengths, decoding(**opts), workers=workers))
        assert [i for b in batches for i in b] == order  # every sentence once, in length order
        return [len(b) for b in batches]

    assert sizes(1, beam_size=1) == [128] * 7 + [104]
    assert sizes(2, beam_size=1) == [128] * 6 + [116, 58, 32, 26]
    assert sizes(2, beam_size=5) == [64] * 14 + [52, 26, 13, 7, 6]  # 7 sentences: 35 rows a step
    assert sizes(4, beam_size=1, batch_size=100)[-7:] == [75, 57, 42, 32, 32, 32, 30]
    budget = 400
    tokens = list(_batches(order, lengths, decoding(beam_size=1, batch_tokens=budget), workers=2))
    assert all(len(b) * max(lengths[i] for i in b) <= budget for b in tokens)
    assert [len(b) for b in tokens][-3:] == [
        44,
        32,
        11,
    ]  # the budget's 88, then halves of what is left


def test_default_batch_size_follows_search_and_precision():
    """Greedy search batches more sentences when the model decodes in bf16 on the CPU, whose
    products gain more from rows; a batch size given is used as it is."""
    from nmt_cli.decoding.decode import auto_batch_size

    assert auto_batch_size(decoding(beam_size=1)) == 128
    assert auto_batch_size(decoding(beam_size=1), bf16=True) == 192
    assert auto_batch_size(decoding(beam_size=5), bf16=True) == 64
    assert auto_batch_size(decoding(beam_size=1, batch_size=7), bf16=True) == 7
    order, lengths = list(range(400)), [5] * 400
    assert [len(b) for b in _batches(order, lengths, decoding(beam_size=1), bf16=True)] == [
        192,
        192,
        16,
    ]


def test_a_paragraph_translates_as_its_sentences_one_by_one(trained):
    from tests.conftest import multi30k_lines

    sentences = [x for x in multi30k_lines("test_2016_flickr", "en", 12) if x.endswith(".")][:3]
    tr = translator(trained, max_segment_tokens=0)  # its 300-piece vocabulary needs no cuts
    (result,) = translate_texts(tr, ["  " + " ".join(sentences) + "\t"])
    assert [s.source for s in result.segments] == sentences
    alone = [t.text for t in translate_texts(tr, sentences)]
    assert result.text == "  " + " ".join(alone) + "\t"
    assert result.cut is False


def test_the_document_stream_keeps_every_line_and_its_spacing(trained):
    from nmt_cli.documents.layer import DocumentOptions

    lines = ["A man is riding a bike. Two dogs run.", "", "   ", "A woman sings.  "]
    buf = io.StringIO()
    data = ("\n".join(lines) + "\n").encode()
    tr = translator(trained)
    opts = OutputOptions()
    translate_stream(
        tr, io.BytesIO(data), buf, interactive=False, out=opts, documents=DocumentOptions()
    )
    out = buf.getvalue().split("\n")[:-1]
    assert len(out) == 4 and out[1] == "" and out[2] == "   " and out[3].endswith("  ")
    assert out[0] == " ".join(
        t.text for t in translate_texts(tr, ["A man is riding a bike.", "Two dogs run."])
    )


def test_protected_spans_come_back_verbatim_once(trained):
    tr = translator(trained)
    texts = ["Visit https://example.com/page?id=42 today.", "Hello {name}, you have %d dogs."]
    out = [r.text for r in translate_texts(tr, texts, protect=[r"\bdogs\b"])]
    assert out[0].count("https://example.com/page?id=42") == 1
    assert out[1].count("{name}") == 1 and out[1].count("%d") == 1 and out[1].count("dogs") == 1


def test_a_long_sentence_is_translated_in_clauses_and_never_cut(trained):
    from tests.conftest import multi30k_lines

    model, tokenizer, _, _ = trained
    lines = [x.rstrip(".") for x in multi30k_lines("test_2016_flickr", "en", 8)]
    text = ", and ".join(lines) + "."
    warnings = []
    tr = Translator(
        model,
        tokenizer,
        decoding(beam_size=1, max_segment_tokens=30),
        max_source_tokens=40,
        warn=warnings.append,
    )
    (result,) = translate_texts(tr, [text])
    assert len(result.segments) > 2 and not result.cut and not warnings
    assert all(len(s.src_ids) <= 30 for s in result.segments)
    assert " ".join(s.source for s in result.segments) == text
    whole = Translator(
        model,
        tokenizer,
        decoding(beam_size=1, max_segment_tokens=0),
        max_source_tokens=40,
        warn=warnings.append,
    )
    (cut,) = translate_texts(whole, [text])
    assert cut.cut and len(warnings) == 1


@pytest.mark.parametrize("beam", [1, 3])
def test_the_repetition_guard_keeps_every_4gram_to_its_limit(trained, beam):
    from collections import Counter

    from tests.conftest import multi30k_lines

    sources = [" ".join(multi30k_lines("test_2016_flickr", "en", 40)[i : i + 4]) for i in (0, 8)]

    def most(tr):
        worst = 0
        for t in tr.translate(sources):
            ids = t.hypotheses[0].tokens
            grams = Counter(tuple(ids[i : i + 4]) for i in range(len(ids) - 3))
            worst = max([worst, *grams.values()])
        return worst

    assert most(translator(trained, beam_size=beam, max_repeats=2)) <= 2
    assert most(translator(trained, beam_size=beam, max_repeats=1)) <= 1


def test_lines_cut_at_the_source_limit_are_named_in_one_warning(trained):
    from nmt_cli.documents.layer import DocumentOptions

    model, tokenizer, _, _ = trained
    warnings = []
    tr = Translator(
        model,
        tokenizer,
        decoding(beam_size=1, max_segment_tokens=0),
        max_source_tokens=20,
        warn=warnings.append,
    )
    data = ("A dog.\n" + "word " * 60 + "\nA cat.\n" + "dog " * 50 + "\n").encode()
    buf = io.StringIO()
    translate_stream(
        tr,
        io.BytesIO(data),
        buf,
        interactive=False,
        out=OutputOptions(),
        documents=DocumentOptions(),
    )
    assert len(buf.getvalue().split("\n")) == 5
    assert warnings == [
        "warning: input lines 2, 4 have a sentence part longer than 20 subwords, cut to that "
        "length (decode.max_segment_tokens cuts long sentences at clauses first)"
    ]


def cli_env() -> dict:
    import os
    from pathlib import Path

    root = str(Path(__file__).resolve().parents[2])
    return {**os.environ, "PYTHONPATH": root, "OMP_NUM_THREADS": "1"}


SPANS = ["{name}", "https://x.org", "a@b.com", "%s"]
PROTECTED_LINE = "Hello {name}, see https://x.org or write to a@b.com about %s today."


@pytest.mark.parametrize(
    "args",
    [["--scores"], ["--nbest", "2"], ["--alignments"], ["--prefix-tab"], ["--show-attention"]],
)
def test_every_output_option_keeps_protected_spans(trained, args):
    import subprocess
    import sys

    run = str(trained[2])
    line = PROTECTED_LINE + ("\tBonjour" if "--prefix-tab" in args else "")
    out = subprocess.run(
        [sys.executable, "-m", "nmt_cli", "translate", "-m", run, "--beam-size", "2", *args],
        input=line + "\n",
        capture_output=True,
        text=True,
        check=True,
        env=cli_env(),
    ).stdout.splitlines()
    assert len(out) == (2 if "--nbest" in args else 1)
    for row in out:
        text = row.split(" ||| ")[1] if "--nbest" in args else row.split("\t")[0]
        assert all(text.count(span) == 1 for span in SPANS), text


def test_a_line_cut_into_sentences_has_one_score_confidence_and_alignment(trained):
    import math

    tr = translator(trained)
    sentences = ["A man sleeps.", "Two dogs run in the snow."]
    (line,) = run_stream(tr, (" ".join(sentences) + "\n").encode(), scores=True, alignments=True)
    text, score, confidence, alignment = line.split("\t")
    alone = tr.translate(sentences, alignments=True)
    assert text == " ".join(t.text for t in alone)
    assert float(score) == pytest.approx(sum(t.score for t in alone), abs=2e-4)
    tokens = sum(len(t.hypotheses[0].tokens) + 1 for t in alone)
    assert float(confidence) == pytest.approx(
        math.exp(sum(t.score for t in alone) / tokens), abs=2e-4
    )
    first_src, first_tgt = len(sentences[0].split()), len(alone[0].text.split())
    shifted = alone[0].alignment + [(i + first_src, j + first_tgt) for i, j in alone[1].alignment]
    assert alignment == " ".join(f"{i}-{j}" for i, j in shifted)


def test_nbest_lines_of_a_cut_line_are_whole_lines(trained):
    tr = translator(trained, beam_size=2)
    out = run_stream(tr, b"A man sleeps. Two dogs run.\n\n12345\nhttps://example.com/a\n", nbest=2)
    assert [row.split(" ||| ")[0] for row in out] == ["0", "0", "1", "2", "3"]
    # lines without words come back as they were, in the same fields
    assert out[2:] == [
        "1 |||  ||| 0.0000 ||| 0.0000",
        "2 ||| 12345 ||| 0.0000 ||| 0.0000",
        "3 ||| https://example.com/a ||| 0.0000 ||| 0.0000",
    ]
    (whole,) = translate_texts(tr, ["A man sleeps. Two dogs run."], nbest=2)
    assert len(whole.segments) == 2  # both sentences in each line
    assert [row.split(" ||| ")[1] for row in out[:2]] == [
        a.text for a in whole.translation.alternatives
    ]


def _pairs(field: str) -> list[tuple[int, int]]:
    return [tuple(map(int, p.split("-"))) for p in field.split()]


def test_nbest_with_alignments_and_scores_gives_each_alternative_its_own(trained):
    tr = translator(trained, beam_size=3)
    source = "A man is riding a bike in the park."
    rows = run_stream(tr, (source + "\n").encode(), nbest=3, alignments=True, scores=True)
    assert len(rows) == 3
    (best,) = run_stream(tr, (source + "\n").encode(), alignments=True, scores=True)
    text, _, confidence, alignment = best.split("\t")
    fields = [row.split(" ||| ") for row in rows]
    assert all(len(f) == 6 and f[0] == "0" for f in fields)
    assert fields[0][1] == text and fields[0][5] == alignment and fields[0][4] == confidence
    for _, words, _, _, conf, pairs in fields:
        assert 0.0 <= float(conf) <= 1.0
        aligned = _pairs(pairs)
        assert aligned, words
        n_src, n_tgt = len(source.split()), len(words.split())
        assert all(0 <= i < n_src and 0 <= j < n_tgt for i, j in aligned)
        assert len({j for _, j in aligned}) == len(aligned)  # one source word per target word
    # each alternative's alignment is computed from its own hypothesis' attention
    (whole,) = translate_texts(tr, [source], nbest=3, alignments=True)
    assert [a.alignment for a in whole.translation.alternatives] == [_pairs(f[5]) for f in fields]
    assert [float(f[4]) for f in fields] == pytest.approx(
        [a.confidence for a in whole.translation.alternatives],
        abs=2e-4,
    )


def test_nbest_alignment_of_a_cut_line_is_shifted_per_alternative(trained):
    tr = translator(trained, beam_size=2)
    sentences = ["A man sleeps.", "Two dogs run in the snow."]
    line = " ".join(sentences)
    rows = run_stream(tr, (line + "\n").encode(), nbest=2, alignments=True, scores=True)
    alone = tr.translate(sentences, nbest=2, alignments=True)
    first_src = len(sentences[0].split())
    for k, row in enumerate(rows):
        _, text, score, _, confidence, alignment = row.split(" ||| ")
        parts = [t.alternatives[min(k, len(t.alternatives) - 1)] for t in alone]
        assert text == " ".join(a.text for a in parts)
        assert float(score) == pytest.approx(sum(a.score for a in parts), abs=2e-4)
        tokens = sum(a.length + 1 for a in parts)
        assert float(confidence) == pytest.approx(
            math.exp(sum(a.score for a in parts) / tokens), abs=2e-4
        )
        first_tgt = len(parts[0].text.split())
        shifted = parts[0].alignment + [
            (i + first_src, j + first_tgt) for i, j in parts[1].alignment
        ]
        assert _pairs(alignment) == shifted
        assert any(i >= first_src and j >= first_tgt for i, j in shifted)


def test_nbest_alignment_of_a_placeholder_line_indexes_the_printed_words(trained):
    tr = translator(trained, beam_size=3)
    source = "Hello {name}, the dog runs in the park."
    rows = run_stream(tr, (source + "\n").encode(), nbest=3, alignments=True)
    (best,) = run_stream(tr, (source + "\n").encode(), alignments=True)
    assert rows[0].split(" ||| ")[1] == best.split("\t")[0]
    assert rows[0].split(" ||| ")[4] == best.split("\t")[1]
    model_words = 7  # "Hello, the dog runs in the park.": the words the model reads
    for row in rows:
        _, text, _, _, alignment = row.split(" ||| ")
        assert text.count("{name}") == 1
        words = text.split()
        pairs = _pairs(alignment)
        assert pairs and all(0 <= i < len(source.split()) and 0 <= j < len(words) for i, j in pairs)
        # every pair's target word holds a word the model wrote: none is the placeholder alone
        assert all(words[j].replace("{name}", "") for _, j in pairs)
        # the printed words outnumber the model's where the placeholder stands apart
        assert max(j for _, j in pairs) < len(words) and len(source.split()) > model_words


@pytest.mark.parametrize(
    "args, message",
    [
        (["--format", "html", "--scores"], "--format html: --scores describes input lines"),
        (["--prefix-tab", "--split-sentences"], "--prefix-tab: a prefix begins its whole line"),
    ],
)
def test_an_output_option_that_cannot_apply_is_a_one_line_error(trained, args, message):
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "nmt_cli", "translate", "-m", str(trained[2]), *args],
        input="A dog.\n",
        capture_output=True,
        text=True,
        env=cli_env(),
    )
    assert done.returncode != 0 and message in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and not done.stdout
