"""The additive score's cost on the CPU at a beam search's shapes: torch's tanh against its
sigmoid per element, and ConcatScore.scores (through the sigmoid, a few sentences at a time as when
decoding, or the whole batch at once) against the plain formula v^T tanh(W1 h + W2 s).

    python bench/attention_speed.py --threads 1

Shapes: a batch of ``--sentences`` sentences of ``--source-len`` pieces, ``--beam`` queries each
(beam search passes a sentence's K hypotheses as one attention call), attention size ``--dim``.
Prints the minimum over ``--repeat`` rounds of each, in ms and ns per element of the
(B, K, S, A) hidden tensor, and the largest difference from a float64 reference.
"""

from __future__ import annotations

import argparse
import time

import torch

from nmt_cli.model import attention
from nmt_cli.model.attention import ConcatScore


def _best_ms(fn, repeat: int, inner: int = 20) -> float:
    fn()
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(inner):
            fn()
        best = min(best, (time.perf_counter() - start) / inner)
    return best * 1e3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--sentences", type=int, default=64)
    ap.add_argument("--beam", type=int, default=5)
    ap.add_argument("--source-len", type=int, default=20)
    ap.add_argument("--dim", type=int, default=512, help="attention (and memory, query) size")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    b, k, s, a = args.sentences, args.beam, args.source_len, args.dim
    score = ConcatScore(a, a, heads=1, attn_dim=a)
    memory, query = torch.randn(b, s, a), torch.randn(b, k, a)
    elements = b * k * s * a

    with torch.no_grad():
        raw_keys = score.W1(memory).unsqueeze(1)  # (B, 1, S, A), as before
        keys = score.keys(memory)

        def plain() -> torch.Tensor:
            q = score.W2(query).unsqueeze(1)
            hidden = (raw_keys.unsqueeze(2) + q.unsqueeze(3)).tanh_()
            return torch.einsum("bktsa,ka->bkts", hidden, score.v)

        def shipped() -> torch.Tensor:
            return score.scores(keys, query)

        def whole_batch() -> torch.Tensor:
            chunk, attention.CHUNK_ELEMENTS = attention.CHUNK_ELEMENTS, 1 << 62
            try:
                return score.scores(keys, query)
            finally:
                attention.CHUNK_ELEMENTS = chunk

        x = torch.randn(elements)
        rows = [
            ("torch.tanh_, per element", _best_ms(lambda: x.tanh_(), args.repeat), True),
            ("torch.sigmoid_, per element", _best_ms(lambda: x.sigmoid_(), args.repeat), True),
            ("v^T tanh(W1 h + W2 s), plain", _best_ms(plain, args.repeat), False),
            ("ConcatScore.scores, whole batch", _best_ms(whole_batch, args.repeat), False),
            ("ConcatScore.scores (as decoding)", _best_ms(shipped, args.repeat), False),
        ]
        d = {n: p.double() for n, p in score.named_parameters()}
        exact = torch.einsum(
            "bktsa,ka->bkts",
            (
                (memory.double() @ d["W1.weight"].T)[:, None, None]
                + (query.double() @ d["W2.weight"].T + d["W2.bias"])[:, None, :, None]
            ).tanh(),
            d["v"],
        )
        errors = {
            "plain": (plain().double() - exact).abs().max().item(),
            "shipped": (shipped().double() - exact).abs().max().item(),
        }
    print(
        f"B={b} sentences x K={k} queries x S={s} x A={a} = {elements / 1e6:.2f}M elements, "
        f"{args.threads} thread(s), torch {torch.__version__} ({torch.backends.cpu.get_cpu_capability()})"
    )
    for name, ms, per_element in rows:
        extra = f"  {ms * 1e6 / elements:.2f} ns/element" if per_element else ""
        print(f"{name:36s} {ms:8.2f} ms{extra}")
    print(
        f"largest difference from float64: plain {errors['plain']:.1e}, ConcatScore {errors['shipped']:.1e}"
    )


if __name__ == "__main__":
    main()
