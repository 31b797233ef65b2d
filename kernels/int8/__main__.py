"""Command line: ``python -m profkit.kernels.int8 {train,evaluate,bench,all,forward,profile}``.

    train     --text PATH --out DIR [--size base|large]   train the KJV decoder, save the checkpoint in DIR
    evaluate  --text PATH --ckpt DIR [--out reports/benchmarks/int8_model.json] [--variants ...] [--latency-batches 1,8,32]
    bench     [--quick] [--out-dir reports/benchmarks] [--ckpt DIR --text PATH] [--rule fixed|stat] [--rounds N]
    all       --text PATH --workdir DIR [--out-dir reports/benchmarks] [--quick]
    forward   --text PATH --ckpt DIR [--variant int8_stat] [--batch 8] [--steps 30] [--graphs]   a program to profile
    profile   [--m 2048 --k 4096 --n 4096] [--no-bnb]

PATH is ``usr/lib/bible.data`` under the folder where ``dpkg -x bible-kjv-text_4.38_all.deb``
unpacked the Debian package (or a plain-text verse-per-line file). Each command calls one
library function; ``all`` runs train, evaluate and bench in one process (the checkpoint only
lives on the GPU machine).
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path


def _train(args) -> None:
    from .train import TrainConfig, run_training

    from .model import MODEL_SIZES

    cfg = TrainConfig(steps=args.steps, batch_size=args.batch_size, seq_len=args.seq_len,
                      seed=args.seed)
    log = run_training(args.text, args.out, cfg, model_overrides=MODEL_SIZES[args.size], max_vocab=args.max_vocab,
                       device=args.device)
    print(f"trained {log['train_seconds']:.1f} s ({log['tokens_per_second']:.0f} tokens/s), "
          f"kept step {log['selected_step']} (calibration loss "
          f"{log['selected_calibration_loss']:.4f}); checkpoint in {args.out}")


def _evaluate(args) -> None:
    from .evaluate import evaluate

    variants = tuple(v.strip() for v in args.variants.split(",") if v.strip())
    batches = tuple(int(b) for b in args.latency_batches.split(",") if b.strip())
    evaluate(args.text, args.ckpt, args.out, variants=variants, eval_batch=args.eval_batch,
             latency_batch_sizes=batches)


def _bench(args) -> None:
    from .benchmark import bench

    bench(out_dir=args.out_dir, quick=args.quick, ckpt=args.ckpt, text=args.text, rule=args.rule, rounds=args.rounds,
          smooth_alpha=args.smooth)


def _all(args) -> None:
    from .benchmark import bench
    from .evaluate import evaluate
    from .model import MODEL_SIZES
    from .train import TrainConfig, run_training

    ckpt = Path(args.workdir) / "checkpoint"
    phases = {}
    start = time.perf_counter()
    run_training(args.text, ckpt, TrainConfig(steps=args.steps), model_overrides=MODEL_SIZES[args.size])
    phases["train_s"] = time.perf_counter() - start
    start = time.perf_counter()
    evaluate(args.text, ckpt, Path(args.out_dir) / "int8_model.json")
    phases["evaluate_s"] = time.perf_counter() - start
    start = time.perf_counter()
    bench(out_dir=args.out_dir, quick=args.quick, ckpt=ckpt, text=args.text, rule=args.rule)
    phases["bench_s"] = time.perf_counter() - start
    print("phases: " + ", ".join(f"{k} {v:.1f}" for k, v in phases.items()))


def _forward(args) -> None:
    from .evaluate import forward_loop

    result = forward_loop(args.ckpt, args.text, variant=args.variant, batch=args.batch, steps=args.steps,
                          graphs=args.graphs)
    how = "CUDA graph replays" if result["graphs"] else "eager forwards"
    print(f"{result['variant']}: {result['steps']} {how} of {result['input']} tokens, median {result['median_ms']:.3f} ms "
          f"(first call {result['first_ms']:.1f} ms)")


def _profile(args) -> None:
    from .benchmark import profile_workload

    print(profile_workload(m=args.m, k=args.k, n=args.n, include_bnb=not args.no_bnb))


def _alpha(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"expected a number in [0, 1], got {text!r}")
    return value


def _variant(text: str) -> str:
    from .evaluate import int8_rule

    try:
        int8_rule(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def build_parser() -> argparse.ArgumentParser:
    from .calibrate import RULES
    from .evaluate import VARIANTS
    from .model import MODEL_SIZES
    from .train import TrainConfig

    defaults = TrainConfig()
    parser = argparse.ArgumentParser(prog="python -m profkit.kernels.int8",
                                     description="LLM.int8()-style INT8 quantizer: train, evaluate, benchmark")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("train", help="train the decoder on the KJV training split")
    p.add_argument("--text", required=True, type=Path, help="bible.data (or plain verse text)")
    p.add_argument("--out", required=True, type=Path, help="checkpoint directory")
    p.add_argument("--steps", type=int, default=defaults.steps)
    p.add_argument("--batch-size", type=int, default=defaults.batch_size)
    p.add_argument("--seq-len", type=int, default=defaults.seq_len)
    p.add_argument("--seed", type=int, default=defaults.seed)
    p.add_argument("--max-vocab", type=int, default=16384)
    p.add_argument("--size", choices=sorted(MODEL_SIZES), default="base", help="model size (model.MODEL_SIZES)")
    p.add_argument("--device", default=None, help="cuda or cpu (default: cuda if available)")
    p.set_defaults(run=_train)

    p = sub.add_parser("evaluate", help="perplexity, footprint, peak memory, latency per variant")
    p.add_argument("--text", required=True, type=Path)
    p.add_argument("--ckpt", required=True, type=Path)
    p.add_argument("--out", type=Path, default=Path("reports/benchmarks/int8_model.json"))
    p.add_argument("--variants", default=",".join(VARIANTS),
                   help="comma-separated; int8_fixed@T and int8_stat@S set the rule's threshold or sigmas")
    p.add_argument("--eval-batch", type=int, default=16)
    p.add_argument("--latency-batches", default="1,8,32",
                   help="batch sizes whose forward is timed, comma-separated; empty: perplexity and memory only")
    p.set_defaults(run=_evaluate)

    p = sub.add_parser("bench", help="layer-speed benchmark through profkit's harness")
    p.add_argument("--quick", action="store_true", help="fewer M values and rounds")
    p.add_argument("--out-dir", type=Path, default=Path("reports/benchmarks"))
    p.add_argument("--ckpt", type=Path, default=None, help="take input profiles from this model")
    p.add_argument("--text", type=Path, default=None, help="corpus, needed with --ckpt")
    p.add_argument("--rule", choices=RULES, default="fixed", help="outlier rule of the custom int8 layers")
    p.add_argument("--rounds", type=_positive, default=None,
                   help="interleaved timing rounds (default 6, 2 with --quick; 6 or more give each goal an interval)")
    p.add_argument("--smooth", type=_alpha, default=None, metavar="A",
                   help="SmoothQuant migration strength A in [0, 1] for the custom int8 layers (default: none)")
    p.set_defaults(run=_bench)

    p = sub.add_parser("all", help="train + evaluate + bench in one process")
    p.add_argument("--text", required=True, type=Path)
    p.add_argument("--workdir", required=True, type=Path, help="the checkpoint goes to WORKDIR/checkpoint")
    p.add_argument("--out-dir", type=Path, default=Path("reports/benchmarks"))
    p.add_argument("--steps", type=int, default=defaults.steps)
    p.add_argument("--size", choices=sorted(MODEL_SIZES), default="base", help="model size (model.MODEL_SIZES)")
    p.add_argument("--quick", action="store_true", help="quick layer benchmark")
    p.add_argument("--rule", choices=RULES, default="fixed", help="outlier rule of the custom int8 layers")
    p.set_defaults(run=_all)

    p = sub.add_parser("forward", help="the model's forward in a loop: a program for profkit profile")
    p.add_argument("--text", required=True, type=Path)
    p.add_argument("--ckpt", required=True, type=Path)
    p.add_argument("--variant", type=_variant, default="int8_stat",
                   help=f"one of {', '.join(VARIANTS)}, or int8_<rule>[@P][+s<A>][+mse][+fused] (evaluate's variant names)")
    p.add_argument("--batch", type=_positive, default=8)
    p.add_argument("--steps", type=_positive, default=30)
    p.add_argument("--graphs", action="store_true", help="capture the forward once as a CUDA graph and replay it")
    p.set_defaults(run=_forward)

    p = sub.add_parser("profile", help="one custom and one bitsandbytes call in NVTX ranges")
    p.add_argument("--m", type=int, default=2048)
    p.add_argument("--k", type=int, default=4096)
    p.add_argument("--n", type=int, default=4096)
    p.add_argument("--no-bnb", action="store_true", help="profile the custom layer alone")
    p.set_defaults(run=_profile)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        args.run(args)
    except ValueError as exc:
        print(f"error: {exc}")
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
