"""Is one system better than another? sacreBLEU's paired significance tests, and per-sentence
scores.

``paired_tests`` compares a baseline and a system on the same references with sacreBLEU's
``PairedTest``, either way with p = (c + 1) / (n + 1) for the observed absolute difference d:

- paired bootstrap resampling (``bs``, Koehn 2004): n = 1,000 resamples of the sentences, c the
  resamples whose absolute difference, less the resamples' mean one, exceeds d; each system also
  gets its bootstrap mean and 95% interval;
- approximate randomisation (``ar``, Riezler & Maxwell 2005): n = 10,000 trials that swap the two
  systems' translations of each sentence at random, c the trials whose difference exceeds d.

sacreBLEU's seed is fixed (12345, unless SACREBLEU_SEED says otherwise), so a report repeats.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from sacrebleu.metrics import BLEU, CHRF, TER
from sacrebleu.significance import PairedTest

from nmt_cli.evaluation.scores import lc_tok_references, moses_lc_tok
from nmt_cli.runtime.errors import UserError

TESTS = {"bs": "paired bootstrap resampling", "ar": "approximate randomization"}


def _metrics(names: Sequence[str], lc_tok: str | None) -> dict:
    made = {}
    for name in names:
        if name == "bleu":
            made[name] = BLEU(tokenize="none", force=True) if lc_tok else BLEU()
        elif name == "chrf":
            made[name] = CHRF()
        else:
            made[name] = TER()
    return made


def paired_tests(
    systems: Sequence[tuple[str, Sequence[str]]],
    refs: Sequence[str],
    metrics: Sequence[str],
    test: str,
    lc_tok: str | None = None,
) -> list[dict]:
    """The first of ``systems`` as the baseline against the others, by ``test`` (bs or ar):
    one dict per metric and system: its score, the baseline's, p, and with bootstrap the mean
    and 95% interval of each."""
    if len(systems) < 2:
        raise UserError(f"--paired-{test}: give two systems (two --hyp, or two -m)")
    for name, hyps in systems:
        if len(hyps) != len(refs):
            raise UserError(f"{name}: {len(hyps)} lines, but the references have {len(refs)}")
    named = [(n, moses_lc_tok(list(h), lc_tok) if lc_tok else list(h)) for n, h in systems]
    if lc_tok:
        refs = lc_tok_references(refs, lc_tok)
    made = _metrics(metrics, lc_tok)
    trials = PairedTest(named, made, [list(refs)], test_type=test, n_samples=0, n_ar_confidence=-1)
    signatures, table = trials()
    out = []
    for metric, results in table.items():
        if metric == "System":
            continue
        base = results[0]
        for system, result in zip(table["System"][1:], results[1:]):
            entry = {
                "test": test,
                "metric": metric,
                "baseline": table["System"][0],
                "system": system,
                "baseline_score": round(base.score, 2),
                "score": round(result.score, 2),
                "p_value": float(result.p_value),
                "signature": str(signatures[metric]),
            }
            if result.mean is not None:
                entry["mean"], entry["ci"] = (
                    round(float(result.mean), 2),
                    round(float(result.ci), 2),
                )
                entry["baseline_mean"] = round(float(base.mean), 2)
                entry["baseline_ci"] = round(float(base.ci), 2)
            out.append(entry)
    return out


def sentence_scores(hyps: Sequence[str], refs: Sequence[str]) -> list[dict]:
    """Per sentence: sacreBLEU's sentence BLEU (effective n-gram order, exp smoothing) and
    sentence chrF."""
    bleu, chrf = BLEU(effective_order=True), CHRF()
    return [
        {
            "bleu": round(bleu.sentence_score(h, [r]).score, 2),
            "chrf": round(chrf.sentence_score(h, [r]).score, 2),
        }
        for h, r in zip(hyps, refs)
    ]


def compare_systems(
    systems: dict[str, Sequence[str]],
    refs: Sequence[str],
    metrics: Sequence[str],
    lc_tok: str | None,
    paired_bs: bool,
    paired_ar: bool,
    sentence_file=None,
) -> list[dict]:
    """`nmt eval`'s --paired-bs / --paired-ar (the first system as the baseline) and
    --sentence (JSON lines: line, system, bleu, chrf)."""
    if (paired_bs or paired_ar) and len(systems) != 2:
        flag = "--paired-bs" if paired_bs else "--paired-ar"
        raise UserError(
            f"{flag}: compares two systems; give two --hyp, or two -m (got {len(systems)})"
        )
    tests = []
    for wanted, test in ((paired_bs, "bs"), (paired_ar, "ar")):
        if wanted:
            tests += paired_tests(list(systems.items()), refs, metrics, test, lc_tok)
    if sentence_file is not None:
        with open(sentence_file, "w", encoding="utf-8") as out:
            for name, hyps in systems.items():
                for i, scores in enumerate(sentence_scores(hyps, refs), 1):
                    out.write(json.dumps({"line": i, "system": name, **scores}) + "\n")
    return tests


def significance_lines(tests: Sequence[dict]) -> list[str]:
    """The tests as `nmt eval` prints them: one line per test and metric."""
    lines = []
    for t in tests:
        spread = ""
        if "mean" in t:
            spread = (
                f" (bootstrap means {t['baseline_mean']:.2f} ± {t['baseline_ci']:.2f} vs "
                f"{t['mean']:.2f} ± {t['ci']:.2f})"
            )
        lines.append(
            f"{TESTS[t['test']]}, {t['metric']}: {t['system']} {t['score']:.2f} vs baseline "
            f"{t['baseline']} {t['baseline_score']:.2f}, p = {t['p_value']:.4f}{spread}"
        )
    return lines
