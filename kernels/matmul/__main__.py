"""Command line of the matmul family: ``python -m profkit.kernels.matmul bench|goals|profile|sweep``."""

from __future__ import annotations

import argparse
from pathlib import Path

from .benchmark import GOAL_ROUNDS, SHAPE_ROUNDS, SWEEP_PATHS, VARIANTS, bench, goals, profile_workload, shapes, sweep


def main(argv: list[str] | None = None) -> int:
    """Command line: ``bench [--quick] [--out-dir DIR]``, ``shapes [--rounds R] [--dtype D ...]``, ``goals [--rounds R] [--case LABEL ...] [--out-dir DIR]``,
    ``profile [--n N] [--dtype VARIANT]`` or
    ``sweep [--dtype bf16|fp32] [--n N ...] [--group-m G ...]``."""
    parser = argparse.ArgumentParser(prog="python -m profkit.kernels.matmul",
                                     description="Triton tiled matmul vs cuBLAS: benchmark or profiling workload")
    sub = parser.add_subparsers(dest="command", required=True)
    p_bench = sub.add_parser("bench", help="benchmark vs cuBLAS and write reports/benchmarks/matmul.json|csv")
    p_bench.add_argument("--quick", action="store_true", help="fewer sizes and rounds")
    p_bench.add_argument("--out-dir", type=Path, default=Path("reports/benchmarks"))
    p_goals = sub.add_parser("goals", help="each goal case over many interleaved rounds, with a verdict from the "
                                           "interval of the median ratio (matmul_goals.json|csv)")
    p_goals.add_argument("--rounds", type=int, default=GOAL_ROUNDS)
    p_goals.add_argument("--case", action="append", dest="cases", metavar="LABEL",
                         help="only this goal case (repeatable), e.g. 'bf16 4096x4096x4096'")
    p_goals.add_argument("--out-dir", type=Path, default=Path("reports/benchmarks"))
    p_shapes = sub.add_parser("shapes", help="24 shapes per dtype (odd squares, Llama-class prefill/decode, "
                                             "vocabulary projections) vs cuBLAS (matmul_shapes.json|csv)")
    p_shapes.add_argument("--rounds", type=int, default=SHAPE_ROUNDS)
    p_shapes.add_argument("--dtype", action="append", dest="dtypes", choices=["bf16", "fp32-ieee"],
                          help="only this dtype (repeatable)")
    p_shapes.add_argument("--out-dir", type=Path, default=Path("reports/benchmarks"))
    p_prof = sub.add_parser("profile", help="one Triton and one cuBLAS launch inside NVTX ranges")
    p_prof.add_argument("--n", type=int, default=4096)
    p_prof.add_argument("--dtype", choices=sorted(VARIANTS), default="bf16")
    p_prof.add_argument("--loop", type=int, default=20, help="back-to-back launches per side after the single ones")
    p_sweep = sub.add_parser("sweep", help="one path's tile configs x GROUP_M vs cuBLAS (matmul_sweep[_fp32].json)")
    p_sweep.add_argument("--dtype", choices=sorted(SWEEP_PATHS), default="bf16",
                         help="bf16: the persistent TMA tiles; fp32: the fma tiles, TF32 off")
    p_sweep.add_argument("--n", type=int, nargs="+", default=[4096, 8192])
    p_sweep.add_argument("--group-m", type=int, nargs="+", default=[4, 8, 16, 32])
    p_sweep.add_argument("--min-tile", type=int, default=0, help="only tiles of at least this many outputs")
    p_sweep.add_argument("--out-dir", type=Path, default=Path("reports/benchmarks"))
    args = parser.parse_args(argv)
    if args.command == "bench":
        bench(out_dir=args.out_dir, quick=args.quick)
    elif args.command == "goals":
        goals(out_dir=args.out_dir, rounds=args.rounds, labels=tuple(args.cases) if args.cases else None)
    elif args.command == "shapes":
        shapes(out_dir=args.out_dir, rounds=args.rounds, variants=tuple(args.dtypes or ("bf16", "fp32-ieee")))
    elif args.command == "sweep":
        sweep(args.dtype, tuple(args.n), tuple(args.group_m), out_dir=args.out_dir, min_tile=args.min_tile)
    else:
        print(profile_workload(n=args.n, dtype=args.dtype, loop=args.loop))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
