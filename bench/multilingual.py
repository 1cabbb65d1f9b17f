"""The multilingual experiments of docs/recipes.md#one-model-many-languages, as a user runs them:
whole `nmt` processes, test BLEU per direction with sacreBLEU, and the share of translations a
language identifier (nmt_cli/serving/language_id.py, told the three languages) finds in the
requested language.

    python bench/multilingual.py compare --minutes 60 --work runs/ml-compare
    python bench/multilingual.py zeroshot --minutes 60 --work runs/ml-zeroshot

compare: recipes/multilingual.yaml trained N minutes against six one-pair runs of N/6 minutes
each (the same model and training keys, one direction each), on test_2016_flickr. On two cores
the sides run at once, one thread each:

    python bench/multilingual.py compare --side multilingual --work runs/ml-compare &
    python bench/multilingual.py compare --side bilingual --work runs/ml-compare

``--set`` changes the multilingual run's recipe only, ``--set-both`` every run's (e.g.
``--set-both train.schedule=cosine``). rescore: compare's trained runs in WORK scored again,
without training, on other Multi30k test sets (``--split``, repeat):

    python bench/multilingual.py rescore --work runs/ml-compare --split test_2017_flickr \
        --split test_2017_mscoco

pool: several compare rounds (``--round``, repeat: their WORK folders, e.g. the same keys with
``--set-both train.seed=N``) read together: each side's BLEU per direction averaged over the
rounds on every test set they were all scored on, and whether the equal-time aim (the one
model's mean ahead, no direction more than 1 BLEU behind) holds on each:

    python bench/multilingual.py pool --work runs/ml-pooled --round runs/ml-compare \
        --round runs/ml-compare-seed1

zeroshot: the recipe on en-fr, fr-en, en-de, de-en only, N minutes; fr-de and de-fr zero-shot
(with and without decode.language_vocabulary) against pivoting through English with the same
model (fr -> en -> de). ``--set`` changes the model's recipe, e.g. with denoising pairs:

    python bench/multilingual.py zeroshot --work runs/ml-zs-denoise --set "data.denoise=[fr, de]"

speed: decoding sentences/s of models with the same work per sentence (see ``speed``):

    python bench/multilingual.py speed --work runs/ml-speed -m runs/en-fr \
        -m runs/multilingual:fr --src test.en --test-lines 300 --repeat 5

train-speed: training target tokens/s of two run dirs, step by step in turns:

    python bench/multilingual.py train-speed --work runs/ml-speed -m runs/en-fr \
        -m runs/multilingual --steps 100

vocabularies: each target language's pieces in a multilingual run, and the share of the other
languages' training target tokens they could write:

    python bench/multilingual.py vocabularies --work runs/ml-speed -m runs/multilingual

Back-translation has its own script, bench/back_translation.py.

``--pilot`` runs each end to end in a few minutes (short budgets, --test-lines 100): the figures
mean nothing then. ``--threads`` goes to every nmt process. Results: printed as a Markdown table
and written to WORK/results.json (rescore: WORK/rescore.json).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LANGS = ("en", "fr", "de")
SIX = ["en-fr", "fr-en", "en-de", "de-en", "fr-de", "de-fr"]
SIDES = ("multilingual", "bilingual")


def mirror() -> Path:
    path = os.environ.get("NMT_DATA_MIRROR")
    if not path:
        sys.exit("set NMT_DATA_MIRROR to the folder holding multi30k/ and tatoeba-en-fr/")
    return Path(path)


def nmt(*args, **kw) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "nmt_cli", *map(str, args)]
    print("$ nmt " + " ".join(map(str, args)), flush=True)
    return subprocess.run(cmd, check=True, cwd=ROOT, **kw)


def read(path: Path, n: int | None) -> list[str]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as fh:
        lines = fh.read().split("\n")[:-1]
    return lines[:n] if n else lines


def write(path: Path, lines: list[str]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def train(recipe: str, run_dir: Path, minutes: float, args, *sets: str) -> None:
    budget = [f"train.max_minutes={minutes:g}"]
    if args.pilot:
        budget += ["train.valid_every=100", "train.checkpoint_every=100"]
        budget += ["train.valid_max_sentences=50", "train.average_last=0"]
    options = [x for s in [*budget, *sets] for x in ("--set", s)]
    nmt("train", recipe, "--run-dir", run_dir, "--threads", args.threads, *options)


def translate(run_dir: Path, src: Path, args, *options) -> list[str]:
    out = nmt(
        "translate",
        "-m",
        run_dir,
        "-i",
        src,
        "--threads",
        args.threads,
        *options,
        capture_output=True,
    )
    return out.stdout.decode("utf-8").split("\n")[:-1]


def in_language(lines: list[str], lang: str) -> float:
    """Share of non-empty lines the service's language identifier (told en, fr and de) finds
    in ``lang``."""
    from nmt_cli.serving.language_id import LanguageIdentifier

    identify = LanguageIdentifier(list(LANGS))
    said = [identify.detect(line)[0][0] for line in lines if line.strip()]
    return sum(s == lang for s in said) / max(len(said), 1)


def score(hyps: list[str], refs: list[str], lang: str) -> dict:
    import sacrebleu

    return {
        "bleu": round(sacrebleu.corpus_bleu(hyps, [refs]).score, 2),
        "in_language": round(in_language(hyps, lang), 4),
    }


def test_files(work: Path, n: int | None, split: str = "test_2016_flickr") -> dict[str, Path]:
    return {
        lang: write(
            work / "test" / f"{split}.{lang}", read(mirror() / "multi30k" / f"{split}.{lang}.gz", n)
        )
        for lang in LANGS
    }


def one_pair(direction: str) -> list[str]:
    """--set values that make recipes/multilingual.yaml the one pair ``direction``, clearing
    the keys that only a recipe of several directions takes."""
    src, tgt = direction.split("-")
    one = ["data.directions=[]", "data.weights={}", "data.denoise=[]"]
    return [f"src={src}", f"tgt={tgt}", *one, "name=" + direction]


def compare(args) -> dict:
    work = args.work
    tests = test_files(work, args.test_lines)
    previous = work / "results.json"
    results: dict = {"multilingual": {}, "bilingual": {}}
    if args.side in ("both", "multilingual"):
        train(
            "recipes/multilingual.yaml",
            work / "multilingual",
            args.minutes,
            args,
            *args.set_both,
            *args.set,
        )
        results["multilingual"] = score_side(work, "multilingual", tests, args)
    if args.side in ("both", "bilingual"):
        for direction in SIX:
            sets = [*args.set_both, *one_pair(direction)]
            train("recipes/multilingual.yaml", work / direction, args.minutes / 6, args, *sets)
        results["bilingual"] = score_side(work, "bilingual", tests, args)
    if args.side != "both" and previous.exists():
        # The other side, written by a process that ran beside this one and finished first.
        other = "bilingual" if args.side == "multilingual" else "multilingual"
        results[other] = json.loads(previous.read_text()).get(other, {})
    if not (results["multilingual"] and results["bilingual"]):
        return results
    return with_means(results)


def score_side(work: Path, side: str, tests: dict[str, Path], args) -> dict:
    """Test BLEU and the share in the asked language of each direction of one side of compare:
    the multilingual run asked for each target, or the six one-pair runs."""
    out = {}
    for direction in SIX:
        src, tgt = direction.split("-")
        if side == "multilingual":
            hyps = translate(work / side, tests[src], args, "--target", tgt, "--source", src)
        else:
            hyps = translate(work / direction, tests[src], args)
        out[direction] = score(hyps, read(tests[tgt], None), tgt)
    return out


def rescore(args) -> dict:
    """compare's trained runs in WORK scored on each --split, the sides one after the other."""
    missing = [d for d in ("multilingual", *SIX) if not (args.work / d / "summary.json").exists()]
    if missing:
        sys.exit(f"rescore: {args.work} has no trained {', '.join(missing)}: run compare first")
    results = {}
    for split in args.split or ["test_2016_flickr"]:
        print(f"## {split}", flush=True)
        tests = test_files(args.work, args.test_lines, split)
        sides = {side: score_side(args.work, side, tests, args) for side in SIDES}
        results[split] = with_means(sides)
    return {"rescore": results}


def with_means(results: dict) -> dict:
    """Both sides' results with their mean BLEU added, printed as a Markdown table."""
    for side in SIDES:
        bleus = [r["bleu"] for r in results[side].values()]
        results[side]["mean"] = {"bleu": round(sum(bleus) / len(bleus), 2)}
    print("| direction | multilingual BLEU | bilingual BLEU | difference | in language (multi) |")
    print("|---|---|---|---|---|")
    for d in [*SIX, "mean"]:
        m, b = results["multilingual"][d], results["bilingual"][d]
        diff = m["bleu"] - b["bleu"]
        print(f"| {d} | {m['bleu']} | {b['bleu']} | {diff:+.2f} | {m.get('in_language', '')} |")
    return results


def round_scores(work: Path) -> dict[str, dict]:
    """One compare round's results by test set: compare's (test_2016_flickr) and rescore's."""
    compared = work / "results.json"
    found = json.loads(compared.read_text()) if compared.exists() else {}
    if not all(found.get(side) for side in SIDES):
        sys.exit(f"pool: {work} has no results.json of both sides: run compare first")
    out = {"test_2016_flickr": {side: found[side] for side in SIDES}}
    rescored = work / "rescore.json"
    if rescored.exists():
        out.update(json.loads(rescored.read_text())["rescore"])
    return out


def pool(args) -> dict:
    """compare's rounds (--round) averaged, side by side, on each test set all of them have."""
    if len(args.round) < 2:
        sys.exit("pool: give two --round folders or more (compare's WORK folders)")
    rounds = [round_scores(work) for work in args.round]
    splits = [s for s in rounds[0] if all(s in r for r in rounds[1:])]
    results = {}
    for split in splits:
        print(f"## {split}, the mean of {len(rounds)} rounds")
        print("| direction | one model | one-pair | difference | each round's difference |")
        print("|---|---|---|---|---|")
        table: dict = {side: {} for side in SIDES}
        behind = []
        for d in [*SIX, "mean"]:
            each = [
                r[split]["multilingual"][d]["bleu"] - r[split]["bilingual"][d]["bleu"]
                for r in rounds
            ]
            sides = [sum(r[split][side][d]["bleu"] for r in rounds) / len(rounds) for side in SIDES]
            for side, bleu in zip(SIDES, sides):
                table[side][d] = {"bleu": round(bleu, 2)}
            diff = sides[0] - sides[1]
            if d != "mean" and diff < -1:
                behind.append(d)
            rounds_text = " / ".join(f"{x:+.2f}" for x in each)
            print(f"| {d} | {sides[0]:.2f} | {sides[1]:.2f} | {diff:+.2f} | {rounds_text} |")
        ahead = table["multilingual"]["mean"]["bleu"] > table["bilingual"]["mean"]["bleu"]
        met = ahead and not behind
        print(
            f"aim {'met' if met else 'not met'}: mean {'ahead' if ahead else 'not ahead'}, "
            f"more than 1 BLEU behind: {', '.join(behind) or 'none'}\n"
        )
        results[split] = {**table, "aim_met": met, "behind": behind}
    return {"pool": results, "rounds": [str(w) for w in args.round]}


def zeroshot(args) -> dict:
    work = args.work
    tests = test_files(work, args.test_lines)
    run = work / "en-pivot"
    train(
        "recipes/multilingual.yaml",
        run,
        args.minutes,
        args,
        "data.directions=[en-fr, fr-en, en-de, de-en]",
        "name=en-pivot",
        *args.set,
    )
    results = {}
    for direction in ("fr-de", "de-fr"):
        src, tgt = direction.split("-")
        refs = read(tests[tgt], None)
        direct = translate(run, tests[src], args, "--target", tgt, "--source", src)
        free = translate(
            run, tests[src], args, "--target", tgt, "--source", src, "--no-language-vocabulary"
        )
        english = write(
            work / f"pivot.{direction}.en",
            translate(run, tests[src], args, "--target", "en", "--source", src),
        )
        pivot = translate(run, english, args, "--target", tgt, "--source", "en")
        results[direction] = {
            "zero_shot": score(direct, refs, tgt),
            "zero_shot_any_piece": score(free, refs, tgt),
            "pivot": score(pivot, refs, tgt),
        }
    print("| direction | decoding | BLEU | in the asked language |")
    print("|---|---|---|---|")
    for d, r in results.items():
        for name, label in (
            ("zero_shot", "zero-shot, the language's pieces"),
            ("zero_shot_any_piece", "zero-shot, --no-language-vocabulary"),
            ("pivot", "through English"),
        ):
            print(f"| {d} | {label} | {r[name]['bleu']} | {r[name]['in_language']} |")
    return results


def speed(args) -> dict:
    """Decoding sentences/s of two models on the same sources with the same work: every sentence
    decodes exactly --steps target steps (decode.min_len and the length cap pinned), so what
    differs is the model's own cost (a multilingual model's source tokens, its routing), not how
    long each writes. The models take turns, --repeat times; the best of each is kept."""
    import time

    from nmt_cli.translation.translator import Translator

    lines = read(args.src, args.test_lines or None)
    pinned = dict(min_len=args.steps, max_len_const=args.steps, max_len_ratio=1e-6, shortlist=False)
    models = {}
    for spec in args.model:
        path, _, target = spec.partition(":")
        models[spec] = (Translator.load(path, device="cpu", threads=1, **pinned), target or None)
    best: dict[str, dict] = {}
    for _ in range(args.repeat):
        for spec, (tr, target) in models.items():
            for beam in (1, 5):
                started = time.perf_counter()
                tr.translate(lines, beam_size=beam, target=target)
                rate = len(lines) / (time.perf_counter() - started)
                key = f"{spec} beam {beam}"
                best[key] = max(best.get(key, 0.0), rate)
    for key, rate in best.items():
        print(f"{key}: {rate:.1f} sent/s")
    return {key: round(rate, 1) for key, rate in best.items()}


def train_speed(args) -> dict:
    """Training target tokens/s of two run dirs' recipes on their own data, step by step in
    turns in one process (forward, backward, optimiser, as bench/train_speed.py times them), so a
    busy machine slows both alike. Each run dir's recipe.yaml gives its model and batches."""
    import itertools
    import time

    import torch

    from nmt_cli.config.recipes import load_recipe
    from nmt_cli.data.batches import iterate_epoch
    from nmt_cli.data.store import load_split
    from nmt_cli.data.tokenizer import Tokenizer
    from nmt_cli.model import build_model
    from nmt_cli.runtime.device import autocast_context, pick_device, resolve_precision
    from nmt_cli.training.loop import make_optimizer

    torch.set_num_threads(int(args.threads))
    device = pick_device("cpu")
    sides = []
    for run in args.model:
        recipe = load_recipe(Path(run) / "recipe.yaml")
        tok = Tokenizer.load(Path(run))
        split = load_split(Path(run), "train")
        torch.manual_seed(0)
        model = build_model(recipe.model, tok.src_vocab_size, tok.tgt_vocab_size).train()
        batches = (
            b
            for epoch in itertools.count()
            for _, b in iterate_epoch(split, recipe.train.batch_tokens, 0, epoch)
        )
        precision = resolve_precision(recipe.train.precision, device)
        sides.append(
            [run, recipe, model, make_optimizer(model, recipe), batches, precision, 0, 0.0]
        )
    for i in range(args.warmup + args.steps):
        for side in sides:
            run, recipe, model, opt, batches, precision, tokens, seconds = side
            b = next(batches)
            started = time.perf_counter()
            with autocast_context(device, precision):
                summed, _ = model(b.src, b.src_lengths, b.tgt_in, tgt_out=b.tgt_out)
            opt.zero_grad()
            (summed / b.tgt_tokens).backward()
            opt.step()
            if i >= args.warmup:
                side[6] += b.tgt_tokens
                side[7] += time.perf_counter() - started
    out = {}
    for run, *_, tokens, seconds in sides:
        out[run] = round(tokens / seconds, 1)
        print(f"{run}: {tokens / seconds:.0f} tgt tok/s over {args.steps} steps")
    return out


def vocabularies(args) -> dict:
    """Each target language's pieces in a multilingual run
    (nmt_cli/decoding/language_vocabulary.py): how
    many, and what share of another language's training target tokens they could write."""
    from nmt_cli.data.store import load_meta
    from nmt_cli.decoding.language_vocabulary import piece_counts
    from nmt_cli.training.checkpoint import load_model

    (run,) = args.model
    languages = load_model(run).languages.pieces
    meta = load_meta(Path(run))
    counts = piece_counts(Path(run) / "data", meta)
    out: dict = {}
    for lang, pieces in sorted(languages.items()):
        writable = {
            other: round(float(c[pieces.numpy()].sum() / c.sum()), 3)
            for other, c in sorted(counts.items())
            if other != lang
        }
        out[lang] = {"pieces": len(pieces), "of": meta["tgt_vocab"], "writes_of_others": writable}
        print(
            f"{lang}: {len(pieces)} of {meta['tgt_vocab']} pieces; "
            f"share of others' tokens {writable}"
        )
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "experiment",
        choices=("compare", "rescore", "pool", "zeroshot", "speed", "train-speed", "vocabularies"),
    )
    ap.add_argument(
        "--round",
        action="append",
        type=Path,
        default=[],
        help="pool: a compare round's WORK folder, repeat",
    )
    ap.add_argument(
        "--split",
        action="append",
        default=[],
        help="rescore: a Multi30k test set, repeat (default test_2016_flickr)",
    )
    ap.add_argument("--warmup", type=int, default=5, help="train-speed: untimed steps")
    ap.add_argument(
        "-m", "--model", action="append", default=[], help="speed: RUN or RUN:TARGET, repeat"
    )
    ap.add_argument("--src", type=Path, help="speed: the sources")
    ap.add_argument(
        "--steps", type=int, default=20, help="speed: target steps a sentence; train-speed: steps"
    )
    ap.add_argument("--repeat", type=int, default=3, help="speed: turns of each model")
    ap.add_argument("--work", type=Path, required=True, help="folder for the runs and outputs")
    ap.add_argument("--minutes", type=float, default=60.0)
    ap.add_argument("--threads", default="1")
    ap.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="compare: a recipe key for the multilingual run only; zeroshot: for its model",
    )
    ap.add_argument(
        "--set-both",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="compare: a recipe key for the multilingual and the one-pair runs alike",
    )
    ap.add_argument("--test-lines", type=int, default=0, help="first N test lines (0 = all)")
    ap.add_argument(
        "--side",
        choices=("both", "multilingual", "bilingual"),
        default="both",
        help="compare: one side only, so the two can run at once on one core each; the second "
        "to finish merges the first's WORK/results.json and prints the table",
    )
    ap.add_argument(
        "--pilot", action="store_true", help="end to end in minutes; figures mean nothing"
    )
    args = ap.parse_args()
    if args.pilot:
        args.test_lines = args.test_lines or 100
    args.work.mkdir(parents=True, exist_ok=True)
    experiments = {"compare": compare, "rescore": rescore, "pool": pool, "zeroshot": zeroshot}
    measures = {"speed": speed, "train-speed": train_speed, "vocabularies": vocabularies}
    results = {**experiments, **measures}[args.experiment](args)
    # rescore writes beside compare's results rather than over them
    out = args.work / ("rescore.json" if args.experiment == "rescore" else "results.json")
    out.write_text(
        json.dumps({"args": {k: str(v) for k, v in vars(args).items()}, **results}, indent=1)
    )
    print(f"written {out}")


if __name__ == "__main__":
    main()
