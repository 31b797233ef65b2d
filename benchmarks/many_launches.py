"""A program with many small kernel launches in one NVTX range: the large report for `profkit bench loading`.

    python -m benchmarks.many_launches [--count 1000]

Captured on the H200 with
    profkit profile --quick --name many-launches --nvtx-include many/ --launch-count 1000 \\
        -- python -m benchmarks.many_launches
Each launch scales a 1 Mi-element fp32 vector in place (4 MiB: replays stay short).
"""

from __future__ import annotations

import argparse


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.many_launches", description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=1000, help="kernel launches inside the range")
    args = parser.parse_args(argv)
    if args.count < 1:
        parser.error("--count must be at least 1")
    from profkit.bench.device import require_profiling

    torch, nvtx = require_profiling("many_launches")
    x = torch.randn(1 << 20, device="cuda")
    torch.cuda.synchronize()
    with nvtx.annotate("many"):
        for _ in range(args.count):
            x.mul_(1.0001)
        torch.cuda.synchronize()
    print(f"launched {args.count}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
