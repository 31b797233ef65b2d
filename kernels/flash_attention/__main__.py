"""Command line of the FlashAttention-2 family: ``python -m profkit.kernels.flash_attention bench|goals|profile|power``."""

from __future__ import annotations

import argparse
from pathlib import Path

from .benchmark import BENCH_SEQS, DTYPES, GOAL_ROUNDS, QUICK_SEQS, bench, goals, power_probe, profile_workload
from .fa2 import SUPPORTED_HEAD_DIMS


def main(argv: list[str] | None = None) -> int:
    """python -m profkit.kernels.flash_attention bench [--quick] [--seqs N ...] [--dtypes T ...] | goals [--rounds R]
    [--dtypes T ...] | profile [--n N] [--d D] [--batch B] [--heads H] [--non-causal] | power [--n N]"""
    parser = argparse.ArgumentParser(prog="python -m profkit.kernels.flash_attention",
                                     description="FlashAttention-2 forward and backward in Triton")
    commands = parser.add_subparsers(dest="command", required=True)
    bench_cmd = commands.add_parser("bench", help="benchmark vs SDPA and write reports")
    bench_cmd.add_argument("--quick", action="store_true", help=f"only N in {QUICK_SEQS}")
    bench_cmd.add_argument("--seqs", type=int, nargs="+", help=f"these N only (default {BENCH_SEQS})")
    bench_cmd.add_argument("--dtypes", nargs="+", choices=DTYPES, default=list(DTYPES))
    bench_cmd.add_argument("--out-dir", type=Path, default=Path("reports/benchmarks"))
    goals_cmd = commands.add_parser("goals", help="the issue's goals vs SDPA's cuDNN backend, with verdicts")
    goals_cmd.add_argument("--rounds", type=int, default=GOAL_ROUNDS, help="interleaved rounds per case")
    goals_cmd.add_argument("--dtypes", nargs="+", choices=DTYPES, default=list(DTYPES))
    goals_cmd.add_argument("--out-dir", type=Path, default=Path("reports/benchmarks"))
    profile_cmd = commands.add_parser("profile", help="run the NVTX-ranged profiling workload")
    profile_cmd.add_argument("--n", type=int, default=4096, help="sequence length")
    profile_cmd.add_argument("--d", type=int, default=64, choices=SUPPORTED_HEAD_DIMS)
    profile_cmd.add_argument("--batch", type=int, help="batch size (default the benchmark's: 4)")
    profile_cmd.add_argument("--heads", type=int, help="heads (default the benchmark's: 8 at d=64, 16 at d=128)")
    profile_cmd.add_argument("--non-causal", action="store_true")
    profile_cmd.add_argument("--loop", type=int, default=20, help="back-to-back forwards per side at the end")
    power_cmd = commands.add_parser("power", help="short bursts vs sustained forwards with the GPU's clocks")
    power_cmd.add_argument("--n", type=int, default=16384, help="sequence length")
    power_cmd.add_argument("--out-dir", type=Path, default=Path("reports/benchmarks"))
    args = parser.parse_args(argv)
    if args.command == "bench":
        if args.seqs and min(args.seqs) < 1:
            parser.error(f"--seqs must be positive, got {args.seqs}")
        bench(args.out_dir, quick=args.quick, seqs=args.seqs, dtypes=tuple(args.dtypes))
    elif args.command == "goals":
        if args.rounds < 1:
            parser.error(f"--rounds must be at least 1, got {args.rounds}")
        goals(args.out_dir, rounds=args.rounds, dtypes=tuple(args.dtypes))
    elif args.command == "power":
        power_probe(seq=args.n, out_dir=args.out_dir)
    else:
        if (args.batch is not None and args.batch < 1) or (args.heads is not None and args.heads < 1):
            parser.error(f"--batch and --heads must be at least 1, got {args.batch} and {args.heads}")
        print(profile_workload(n=args.n, d=args.d, causal=not args.non_causal, loop=args.loop, batch=args.batch,
                               heads=args.heads))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
