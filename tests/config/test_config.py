from pathlib import Path

import pytest

from nmt_cli.config.recipes import load_recipe, recipe_differences, recipe_from_dict
from nmt_cli.config.sections import Recipe
from nmt_cli.runtime.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]


def write(tmp_path, text: str) -> Path:
    p = tmp_path / "r.yaml"
    p.write_text(text, encoding="utf-8")
    return p


SHIPPED = sorted((ROOT / "recipes").rglob("*.yaml"))


def test_every_pair_has_a_recipe():
    assert {
        "en-fr",
        "fr-en",
        "en-de",
        "de-en",
        "tatoeba-en-fr",
        "en-fr-converge",
        "en-de-converge",
    } <= {p.stem for p in SHIPPED}


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.stem)
def test_shipped_recipes_validate(path):
    recipe = load_recipe(path)
    assert recipe.name == path.stem
    assert recipe.model.hidden_dim % 2 == 0


def test_defaults_and_nested_types(tmp_path):
    r = load_recipe(write(tmp_path, "name: x\nsrc: en\ntgt: de\nmodel: {hidden_dim: 64}\n"))
    assert isinstance(r, Recipe)
    assert r.model.hidden_dim == 64 and r.model.rnn == "gru"
    assert r.train.lr == pytest.approx(1e-3)
    assert r.data.test == ["test_2016_flickr"]


@pytest.mark.parametrize(
    "text, expected",
    [
        (
            "model: {hiden_dim: 3}\n",
            "model.hiden_dim: unknown key (did you mean 'model.hidden_dim'?)",
        ),
        ("trian: {}\n", "trian: unknown key (did you mean 'train'?)"),
        ("model: {hidden_dim: big}\n", "model.hidden_dim: expected an integer, got 'big'"),
        ("model: {hidden_dim: -4}\n", "model.hidden_dim: -4 is out of range (must be >= 2)"),
        (
            "model: {rnn: gruu}\n",
            "model.rnn: 'gruu' is not one of gru, lstm, rnn (did you mean 'gru'?)",
        ),
        ("train: {lr: 0}\n", "train.lr: 0 is out of range (must be > 0)"),
        ("model: {bidirectional: maybe}\n", "model.bidirectional: expected true or false"),
        ("model: [1, 2]\n", "model: expected a mapping of keys"),
        ("data: {test: 3}\n", "data.test: expected a list"),
        ("model: {hidden_dim: 33}\n", "model.hidden_dim: 33 must be even"),
        ("model: {attention: dot, attention_heads: 2}\n", "model.attention_heads: dot attention"),
        (
            "train: {schedule: cosine}\n",
            "train.schedule: cosine decays over train.max_steps or train.max_minutes",
        ),
        (
            "model: {decoder: bahdanau, initial_state_attention: true}\n",
            "model.initial_state_attention: the bahdanau order already attends from s_{i-1}",
        ),
        (
            "model: {attention: none, initial_state_attention: true}\n",
            "model.initial_state_attention: there is no attention",
        ),
    ],
)
def test_each_error_names_the_key(tmp_path, text, expected):
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load_recipe(path)
    message = str(info.value)
    assert message.startswith(str(path)), message
    assert expected in message
    assert "\n" not in message


def test_broken_empty_and_missing_files(tmp_path):
    with pytest.raises(ConfigError, match="broken YAML at line"):
        load_recipe(write(tmp_path, "model:\n  rnn: [gru\n"))
    with pytest.raises(ConfigError, match="the recipe is empty"):
        load_recipe(write(tmp_path, ""))
    with pytest.raises(ConfigError, match="recipe file not found"):
        load_recipe(tmp_path / "nope.yaml")
    with pytest.raises(ConfigError, match="a recipe must be a mapping"):
        load_recipe(write(tmp_path, "- a\n- b\n"))


def test_set_overrides_are_validated_like_the_file(tmp_path):
    path = write(tmp_path, "name: x\n")
    r = load_recipe(
        path,
        ["model.hidden_dim=128", "train.lr=3e-4", "data.test=[a, b]", "model.bidirectional=false"],
    )
    assert r.model.hidden_dim == 128 and r.train.lr == pytest.approx(3e-4)
    assert r.data.test == ["a", "b"] and r.model.bidirectional is False
    with pytest.raises(ConfigError, match=r"model\.hidden_dim: expected an integer, got 'abc'"):
        load_recipe(path, ["model.hidden_dim=abc"])
    with pytest.raises(ConfigError, match=r"model\.hiddn_dim: unknown key \(did you mean"):
        load_recipe(path, ["model.hiddn_dim=4"])
    with pytest.raises(ConfigError, match="expected KEY=VALUE"):
        load_recipe(path, ["model.hidden_dim"])


def test_name_defaults_to_file_stem(tmp_path):
    p = tmp_path / "my-pair.yaml"
    p.write_text("src: en\ntgt: fr\n")
    assert load_recipe(p).name == "my-pair"


def test_base_recipe_is_laid_under_the_variant(tmp_path):
    (tmp_path / "parent.yaml").write_text(
        "name: parent\nsrc: en\ntgt: de\nmodel: {hidden_dim: 64, dropout: 0.1}\n"
        "data: {test: [a, b]}\ntrain: {lr: 0.002}\n"
    )
    (tmp_path / "sub").mkdir()
    child = tmp_path / "sub" / "child.yaml"
    child.write_text("base: ../parent.yaml\nmodel: {dropout: 0.3}\ndata: {test: [c]}\n")
    r = load_recipe(child, ["train.lr=0.001"])
    assert r.name == "child"  # the base's name is not inherited
    assert (r.src, r.tgt, r.model.hidden_dim) == ("en", "de", 64)  # from the base
    assert r.model.dropout == pytest.approx(0.3)  # the variant wins, key by key
    assert r.data.test == ["c"]  # lists replace, not append
    assert r.train.lr == pytest.approx(0.001)  # --set comes last
    grandchild = tmp_path / "grandchild.yaml"
    grandchild.write_text("base: sub/child.yaml\nname: g\nmodel: {hidden_dim: 32}\n")
    g = load_recipe(grandchild)
    assert (g.name, g.model.hidden_dim, g.model.dropout, g.tgt) == (
        "g",
        32,
        pytest.approx(0.3),
        "de",
    )


@pytest.mark.parametrize(
    "files, expected",
    [
        ({"r.yaml": "base: nope.yaml\n"}, "r.yaml: base: "),
        ({"r.yaml": "base: nope.yaml\n"}, "nope.yaml: recipe file not found"),
        ({"r.yaml": "base: 3\n"}, "r.yaml: base: expected the file name of another recipe"),
        (
            {"r.yaml": "base: b.yaml\n", "b.yaml": "base: r.yaml\n"},
            "b.yaml: base: r.yaml leads back to",
        ),
        (
            {"r.yaml": "base: b.yaml\n", "b.yaml": "model: {hiden_dim: 3}\n"},
            "b.yaml: model.hiden_dim: unknown key",
        ),
        ({"r.yaml": "base: b.yaml\n", "b.yaml": "- a\n"}, "b.yaml: a recipe must be a mapping"),
    ],
)
def test_base_errors_name_the_file_at_fault(tmp_path, files, expected):
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    with pytest.raises(ConfigError) as info:
        load_recipe(tmp_path / "r.yaml")
    assert expected in str(info.value) and "\n" not in str(info.value)


def test_recipe_differences_split_blocking_from_allowed():
    a = recipe_from_dict({"name": "a"}).to_dict()
    b = recipe_from_dict(
        {"name": "a", "model": {"hidden_dim": 64}, "train": {"max_steps": 9, "lr": 0.5}}
    ).to_dict()
    blocking, allowed = recipe_differences(a, b)
    assert blocking == ["model.hidden_dim"]
    assert set(allowed) == {"train.max_steps", "train.lr"}


def test_a_set_typo_is_blamed_on_the_set_not_the_file(tmp_path):
    path = write(tmp_path, "name: x\nmodel: {hidden_dim: 64}\n")
    with pytest.raises(ConfigError) as info:
        load_recipe(path, ["trian.lr=0.1"])
    assert str(info.value) == "--set trian.lr=0.1: trian: unknown key (did you mean 'train'?)"
    with pytest.raises(ConfigError) as info:
        load_recipe(path, ["model.hidden_dim=8", "model.dropout=lots"])
    assert str(info.value).startswith("--set model.dropout=lots: model.dropout: expected a number")
    write(tmp_path, "name: x\nmodel: {hiden_dim: 64}\n")
    with pytest.raises(ConfigError) as info:  # the file's own mistake is still the file's
        load_recipe(path, ["model.hidden_dim=8"])
    assert str(info.value).startswith(f"{path}: model.hiden_dim: unknown key")


def test_a_folder_given_as_recipe_says_so(tmp_path):
    with pytest.raises(ConfigError, match="is a folder; give a recipe file"):
        load_recipe(tmp_path)
    (tmp_path / "recipe.yaml").write_text("name: x\n")
    with pytest.raises(ConfigError, match=r"a run dir keeps its own as recipe\.yaml"):
        load_recipe(tmp_path)


def test_overrides_are_checked_as_the_recipe_checks_its_keys():
    import dataclasses

    from nmt_cli.config.sections import DecodeConfig, override

    base = DecodeConfig()
    assert override(base, {"beam_size": 3, "shortlist": None}) == dataclasses.replace(
        base, beam_size=3
    )
    assert (
        override(base, {}) is base and override(base, {"length_penalty": 1}).length_penalty == 1.0
    )
    with pytest.raises(
        ConfigError, match=r"^decode\.beam_size: 0 is out of range \(must be >= 1\)$"
    ):
        override(base, {"beam_size": 0})
    with pytest.raises(ConfigError, match=r"^--precision: 'fp8' is not one of auto, fp32, bf16"):
        override(base, {"precision": "fp8"}, lambda key: "--" + key)
    with pytest.raises(
        ConfigError, match="decode.beam: unknown key .did you mean 'decode.beam_size'"
    ):
        override(base, {"beam": 2})
    # dataclasses.replace itself refuses what a recipe refuses: the section checks its own fields
    with pytest.raises(ConfigError, match=r"^decode\.min_len: -1 is out of range"):
        dataclasses.replace(base, min_len=-1)
    with pytest.raises(ConfigError, match=r"^decode\.beam_size: expected an integer, got 'five'"):
        DecodeConfig(beam_size="five")
