"""Training throughput of a recipe's model on its preprocessed data, without validation:
target tokens/s and sentences/s over N steps after a short warm-up.

    python bench/train_speed.py recipes/en-fr.yaml --run-dir runs/en-fr [--steps 30] [--set K=V ...]

``--device cuda`` (default: auto) times it on a GPU, under the recipe's ``train.precision``
(``auto`` is fp32 there; ``--set train.precision=fp16`` adds the loss scaler ``nmt train`` uses).
``--threads N|auto`` sets torch's CPU threads as ``nmt train --threads`` does (default: torch's own
choice, one per core or OMP_NUM_THREADS). ``--compile`` wraps the model in
``torch.compile(dynamic=True)``; give it ``--warmup 20`` so the compilations (batch shapes vary)
fall in the warm-up, whose seconds are printed too.

Prints one line: parameters, model, device and precision, target tokens/s, sentences/s, ms per
step; `--record FILE` also writes it as a record for bench/report.py.
"""

from __future__ import annotations

import argparse
import itertools
import time
from pathlib import Path

import record
import torch

from nmt_cli.config.recipes import load_recipe
from nmt_cli.data.batches import iterate_epoch
from nmt_cli.data.store import load_split
from nmt_cli.data.tokenizer import Tokenizer
from nmt_cli.model import build_model
from nmt_cli.runtime.device import (
    autocast_context,
    configure_threads,
    pick_device,
    resolve_precision,
)
from nmt_cli.training.loop import make_optimizer


def synchronize(device: torch.device) -> None:
    """GPU work is asynchronous: wait for it so the clock measures it."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("recipe")
    ap.add_argument("--run-dir", type=Path, required=True)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--set", dest="overrides", action="append", default=[])
    ap.add_argument(
        "--compile", action="store_true", help="torch.compile the model (dynamic shapes)"
    )
    ap.add_argument("--device", default="auto", help="auto, cpu, cuda or mps")
    ap.add_argument(
        "--threads",
        default="default",
        help="torch CPU threads: a number, 'auto' (what nmt train picks: the cores not "
        "already busy) or 'default' (torch's own choice)",
    )
    ap.add_argument("--record", type=Path, help="write the figure here (bench/records/NAME.json)")
    args = ap.parse_args()
    if args.threads != "default":
        configure_threads(None if args.threads == "auto" else int(args.threads))
    device = pick_device(args.device)
    recipe = load_recipe(args.recipe, args.overrides)
    tok = Tokenizer.load(args.run_dir)
    split = load_split(args.run_dir, "train")
    torch.manual_seed(0)
    model = build_model(recipe.model, tok.src_vocab_size, tok.tgt_vocab_size).to(device).train()
    opt = make_optimizer(model, recipe)
    forward = torch.compile(model, dynamic=True) if args.compile else model
    precision = resolve_precision(recipe.train.precision, device)
    scaler = torch.amp.GradScaler("cuda") if precision == "fp16" else None
    # as many epochs as the steps need: large batches use up a small corpus in a few dozen steps
    batches = (
        b
        for epoch in itertools.count()
        for b in iterate_epoch(split, recipe.train.batch_tokens, 0, epoch)
    )
    tokens = sents = 0
    start = None
    began = time.perf_counter()
    for i in range(args.warmup + args.steps):
        if i == args.warmup:
            synchronize(device)
            start, tokens, sents = time.perf_counter(), 0, 0
            warmup_s = start - began
        _, b = next(batches)
        b = b.to(device)
        with autocast_context(device, precision):
            summed, _ = forward(
                b.src,
                b.src_lengths,
                b.tgt_in,
                tgt_out=b.tgt_out,
                label_smoothing=recipe.train.label_smoothing,
            )
        loss = summed / b.tgt_tokens
        opt.zero_grad()
        if scaler is not None:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        else:
            loss.backward()
            opt.step()
        tokens += b.tgt_tokens
        sents += b.src.size(0)
    synchronize(device)
    dt = time.perf_counter() - start
    print(
        f"{recipe.name}: {model.parameter_count() / 1e6:.2f}M params, {recipe.model.rnn} "
        f"{recipe.model.attention}/{recipe.model.decoder}, {device.type} {precision}: "
        f"{tokens / dt:.0f} tgt tok/s, {sents / dt:.1f} sent/s, "
        f"{1000 * dt / args.steps:.0f} ms/step{', compiled' if args.compile else ''}, "
        f"warm-up {warmup_s:.1f} s, {torch.get_num_threads()} threads"
    )
    if args.record:
        record.write(
            args.record,
            figure=f"Training speed ({device.type})",
            about=f"Training steps of `{args.recipe}` (forward, backward, optimiser step) on its "
            f"preprocessed data, {args.steps} steps after {args.warmup} of warm-up, without the "
            "trainer's validation and bookkeeping.",
            columns=["model", "precision", "target tokens/s", "sentences/s", "ms per step"],
            rows=[
                [
                    f"{recipe.name}: {model.parameter_count() / 1e6:.2f}M parameters, "
                    f"{recipe.model.attention}/{recipe.model.decoder}",
                    precision,
                    round(tokens / dt),
                    round(sents / dt, 1),
                    round(1000 * dt / args.steps),
                ]
            ],
            threads=torch.get_num_threads(),
        )


if __name__ == "__main__":
    main()
