"""The machine's matrix-multiply ceiling, so other figures can be read as a fraction of it.

    python bench/matmul_flops.py [--size 1024] [--seconds 3] [--threads N]

Times square matmuls in float32 and bfloat16 (and float16 on a GPU) and prints GFLOP/s
(2 n^3 floating-point operations per product) as JSON and a one-line table.
"""

from __future__ import annotations

import argparse
import json
import time

import torch


def gflops(n: int, dtype: torch.dtype, device: str, seconds: float) -> float:
    a = torch.randn(n, n, device=device).to(dtype)
    b = torch.randn(n, n, device=device).to(dtype)
    for _ in range(3):  # warm-up: thread pools, kernel selection
        a @ b
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    sync()
    count, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        a @ b
        count += 1
        if device == "cuda" and count % 50 == 0:
            sync()
    sync()
    elapsed = time.perf_counter() - start
    return 2 * n**3 * count / elapsed / 1e9


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0 = default)")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    dtypes = {"fp32": torch.float32, "bf16": torch.bfloat16}
    if args.device == "cuda":
        dtypes["fp16"] = torch.float16
    result = {
        "device": args.device,
        "threads": torch.get_num_threads(),
        "size": args.size,
        "torch": torch.__version__,
    }
    for name, dtype in dtypes.items():
        result[f"{name}_gflops"] = round(gflops(args.size, dtype, args.device, args.seconds), 1)
    print(json.dumps(result))
    print(
        "  ".join(f"{k[:-7]} {v:.0f} GFLOP/s" for k, v in result.items() if k.endswith("_gflops"))
    )


if __name__ == "__main__":
    main()
