import math
import subprocess
import sys

import pytest

from nmt_cli.decoding.sampling import Sampling
from nmt_cli.runtime.errors import UserError
from nmt_cli.translation.glossary import Glossary, Term, as_glossary, merged, read_glossary
from tests.translation.test_translate import trained, translator  # noqa: F401 (the fixture)

LINES = [
    "A man is riding a bike.",
    "Two dogs play in the snow.",
    "A woman in a red coat walks down the street.",
    "People are standing.",
    "A little girl climbs the stairs.",
]


def write(tmp_path, text: str):
    path = tmp_path / "terms.tsv"
    path.write_text(text, encoding="utf-8")
    return path


def test_a_malformed_line_is_an_error_naming_the_file_and_line(tmp_path):
    path = write(tmp_path, "# terms\ndog\tchien\n\ncat chat\n")
    with pytest.raises(UserError, match=r"terms.tsv:4: expected 'source term<TAB>target term'"):
        read_glossary(path)
    with pytest.raises(UserError, match=r"terms.tsv:1: expected"):
        read_glossary(write(tmp_path, "dog\tchien\textra\n"))


def test_conflicting_terms_are_an_error_naming_both_lines_and_repeats_are_kept_once(tmp_path):
    with pytest.raises(UserError, match=r"terms.tsv:3: 'Dog' already maps to 'chien' \(.*:1\)"):
        read_glossary(write(tmp_path, "dog\tchien\ncat\tchat\nDog\tclébard\n"))
    assert len(read_glossary(write(tmp_path, "dog\tchien\ndog\tchien\n"))) == 1
    # a file saved with a byte order mark (Notepad, Excel) keeps its first term
    (term, _) = read_glossary(write(tmp_path, "\ufeffdog\tchien\ncat\tchat\n")).terms
    assert term.source == "dog"


def test_matching_is_whole_words_case_insensitive_longest_first():
    g = as_glossary({"New York": "New York", "york": "Yorck", "dog": "chien", "red  coat": "X"})
    assert g.targets("The new   york taxis and a dog") == ["New York", "chien"]
    assert g.targets("York dogs") == ["Yorck"]  # "dogs" is not "dog"
    assert g.targets("a Red coat") == ["X"]
    assert merged(g, [["dog", "toutou"]]).targets("a dog") == ["toutou"]


def test_a_term_the_vocabulary_cannot_spell_is_an_error_naming_it(trained):  # noqa: F811
    tr = translator(trained)
    with pytest.raises(UserError, match="cannot spell the term '日本語'"):
        tr.translate(["A dog."], glossary={"dog": "日本語"})


def plain_and_unused_word(tr, lines):
    """The plain translations, and a target word none of them uses that the vocabulary spells."""
    plain = tr.translate(lines)
    words = " ".join(t.text for t in plain).split()
    for candidate in ("maison", "bateau", "voiture", "fleur", "montagne", "oiseau"):
        if candidate not in words:
            return plain, candidate
    raise AssertionError("every candidate word is used")


def test_a_glossary_forces_its_term_and_leaves_other_sentences_byte_identical(trained):  # noqa: F811
    for beam, shortlist in ((1, False), (3, False), (3, True)):
        tr = translator(trained, beam_size=beam, shortlist=shortlist, shortlist_frequent=20)
        plain, word = plain_and_unused_word(tr, LINES)
        terms = Glossary([Term("dogs", word, "test"), Term("girl", "la fille", "test")])
        out = tr.translate(LINES, glossary=terms)
        assert word in out[1].text.split() and word not in plain[1].text.split()
        assert "la fille" in out[4].text and "la fille" not in plain[4].text
        for i in (0, 2, 3):  # no term: the same translation, to the bit
            assert out[i].text == plain[i].text
            assert out[i].hypotheses[0].tokens == plain[i].hypotheses[0].tokens
            assert out[i].score == plain[i].score


def test_a_prefix_is_kept_and_the_rest_decoded_and_an_overlong_one_refused(trained):  # noqa: F811
    tr = translator(trained, beam_size=3)
    plain = tr.translate(LINES)
    prefixes = ["Le bateau", None, "", plain[3].text.split()[0], "Une maison rouge"]
    out = tr.translate(LINES, prefixes=prefixes)
    for p, o, f in zip(prefixes, out, plain):
        if p:
            assert o.text.startswith(p)
        else:
            assert o.text == f.text
    assert out[0].text != plain[0].text
    with pytest.raises(UserError, match="prefix of line 2: .* at most"):
        tr.translate(["A dog.", "A man."], prefixes=[None, "le " * 40])
    with pytest.raises(UserError, match="prefix of line 1: the target vocabulary cannot spell"):
        tr.translate(["A dog."], prefixes=["Le 🐶"])
    with pytest.raises(UserError, match="prefixes: 1 given for 2 lines"):
        tr.translate(["A dog.", "A man."], prefixes=["Le"])
    # a prefix repeating itself more than decode.max_repeats allows is the user's: kept
    source = " ".join(["dog"] * 30)  # long enough for the guard to watch it
    (out,) = tr.translate([source], prefixes=["le " * 10])
    assert out.text.startswith("le " * 9 + "le")


def test_confidence_is_the_geometric_mean_token_probability_and_ranks_forced_text_lower(
    trained,  # noqa: F811
):
    tr = translator(trained, beam_size=3)
    free = tr.translate(LINES)
    for t in free:
        assert 0 < t.confidence <= 1
        assert math.isclose(
            t.confidence, math.exp(t.score / (len(t.hypotheses[0].tokens) + 1)), rel_tol=1e-6
        )
    bad = tr.translate(LINES, prefixes=["maison bateau voiture fleur"] * len(LINES))
    assert all(b.confidence < f.confidence for b, f in zip(bad, free))
    assert tr.translate(["", "  "])[0].confidence is None


def test_sampling_is_reproducible_per_seed_and_keeps_one_line_per_line(trained):  # noqa: F811
    tr = translator(trained, beam_size=3)
    lines = LINES * 4
    first = [t.text for t in tr.translate(lines, sampling=Sampling(seed=1))]
    again = [t.text for t in tr.translate(lines, sampling=Sampling(seed=1))]
    other = [t.text for t in tr.translate(lines, sampling=Sampling(seed=2))]
    assert first == again and len(first) == len(lines)
    assert first != other
    greedy = [t.text for t in translator(trained, beam_size=1).translate(lines)]
    assert [t.text for t in tr.translate(lines, sampling=Sampling(seed=3, topk=1))] == greedy
    with pytest.raises(UserError, match="--temperature"):
        Sampling(temperature=0)


def nmt(*args, stdin=""):
    return subprocess.run(
        [sys.executable, "-m", "nmt_cli", *args],
        input=stdin,
        capture_output=True,
        text=True,
        env={"OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"},
    )


def test_cli_glossary_prefix_tab_and_sample(trained, tmp_path):  # noqa: F811
    run = str(trained[2])
    bad = write(tmp_path, "dog\tchien\nno tab here\n")
    out = nmt("translate", "-m", run, "--glossary", str(bad), stdin="A dog.\n")
    assert out.returncode == 2 and out.stderr.strip().count("\n") == 0
    assert f"{bad}:2:" in out.stderr
    out = nmt("translate", "-m", run, "--prefix-tab", stdin="A dog runs.\tUne maison\nA man.\n")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.split("\n")[:-1]
    assert len(lines) == 2 and lines[0].startswith("Une maison")
    args = ("translate", "-m", run, "--sample", "--seed", "5", "--sampling-topk", "10")
    one, two = nmt(*args, stdin="A dog.\nA cat.\n"), nmt(*args, stdin="A dog.\nA cat.\n")
    assert one.returncode == 0 and one.stdout == two.stdout and one.stdout.count("\n") == 2


def test_a_term_inside_the_prefix_counts_and_is_not_repeated(trained):  # noqa: F811
    tr = translator(trained, beam_size=3)
    out = tr.translate(
        ["Two dogs play in the snow."], glossary={"dogs": "maison"}, prefixes=["Une maison"]
    )
    assert out[0].text.startswith("Une maison") and out[0].text.split().count("maison") == 1
