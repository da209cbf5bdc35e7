#!/usr/bin/env python
"""Benchmark the training-step ladder of one size against the GPU's measured bf16 matmul rate.

Prints each rung's median step time and achieved TFLOP/s (model FLOPs,
6N + 12·L·H·Q·T per token) beside the dense bf16 matmul ceiling measured
on the same GPU before and after the rungs (bursts of back-to-back products
at steady clocks: lmstudy.measure.matmul_ceiling), and the best rung's share of it. The
hand-run form of the workflow's ladder section (section 7: one job per
rung, lmstudy measure ladder), with the same code (lmstudy.measure.ladder_bench).

Example (the 2.7B model, context 1024, batch 4):
    python scripts/bench_ladder.py --out results/bench/ladder_2.7B.csv \
        --d-model 2560 --d-ff 10240 --num-layers 32 --num-heads 32 --context-length 1024
"""

from __future__ import annotations

import argparse
from pathlib import Path

from lmstudy.cli import compile_from_scratch, model_choice, run_main
from lmstudy.ladder_rungs import DEFAULT_RUNGS, RUNGS
from lmstudy.measure.fresh_process import mark_forking_parent

compile_from_scratch()
mark_forking_parent()

RUNG_KEYS = list(RUNGS)
# The model's dimensions, as argparse names them (dest).
DIMENSIONS = ("d_model", "d_ff", "num_layers", "num_heads", "context_length", "batch_size", "vocab_size")


def add_dimension_arguments(p: argparse.ArgumentParser) -> None:
    """A benchmark by hand's own model: --d-model ... --context-length (required), --batch-size,
    --vocab-size (the study's are config.yaml's; `lmstudy measure ladder` takes them from its spec)."""
    p.add_argument("--d-model", type=int, required=True)
    p.add_argument("--d-ff", type=int, required=True)
    p.add_argument("--num-layers", type=int, required=True)
    p.add_argument("--num-heads", type=int, required=True)
    p.add_argument("--context-length", type=int, required=True)
    p.add_argument("--batch-size", type=int, default=4)
    p.add_argument("--vocab-size", type=int, default=10000)
    p.add_argument("--model", type=model_choice, default=None, metavar="JSON",
                   help="the model's factory and label, as config model: gives them "
                        "(default: the built-in model), e.g. "
                        '{"factory": "my_model.py:build", "name": "mine"}')


def dimension_kwargs(args: argparse.Namespace) -> dict:
    """The parsed dimensions and model, as keyword arguments of a spec."""
    from lmstudy.model_choice import ModelChoice

    return {**{name: getattr(args, name) for name in DIMENSIONS}, "model": args.model or ModelChoice()}


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, required=True, help="CSV of one row per rung")
    p.add_argument("--size", default="", help="the size's name, recorded in the rows (optional)")
    add_dimension_arguments(p)
    p.add_argument("--rungs", nargs="+", choices=RUNG_KEYS, default=list(DEFAULT_RUNGS))
    p.add_argument("--warmup-steps", type=int, default=5)
    p.add_argument("--timed-steps", type=int, default=20)
    p.add_argument(
        "--profile-steps",
        type=int,
        default=0,
        help="after timing, profile this many steps and break each rung's GPU time down by kernel category",
    )
    p.add_argument(
        "--matmul-n", type=int, nargs="+",
        help="sizes of the square bf16 matmuls of the ceiling (default: 8192 16384 on cuda, 512 on cpu)",
    )
    p.add_argument("--matmul-bursts", type=int, default=10, help="timed bursts per size, before and after")
    p.add_argument("--matmul-burst-products", type=int, default=20, help="back-to-back products per burst")
    p.add_argument("--target", type=float, default=0.7, help="share of the matmul rate to reach")
    p.add_argument(
        "--check-loss",
        type=int,
        metavar="STEPS",
        default=0,
        help="also train each rung this many steps from one seed and check that its loss stays within "
        "bf16's noise of the plain bf16 rung's (written to OUT with the suffix .losses.csv)",
    )
    p.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    return p.parse_args(argv)


def progress(line: str) -> None:
    """A line as each stage starts or ends, flushed: the whole run takes many minutes on a large model."""
    print(line, flush=True)


def main(argv=None) -> None:
    args = parse_args(argv)
    import pandas as pd

    from lmstudy.atomic import write_csv, write_json
    from lmstudy.measure.ladder_bench import BenchSpec, check_losses, run_bench

    base = BenchSpec(
        rung=args.rungs[0],
        size=args.size,
        **dimension_kwargs(args),
        warmup_steps=args.warmup_steps,
        timed_steps=args.timed_steps,
        profile_steps=args.profile_steps,
        device=args.device,
        tf32=False,  # fp32 is fp32 here; the study's ladder takes config.yaml's tf32
        memory_cap_gb=None,
    )
    matmul_n = args.matmul_n or ([8192, 16384] if args.device == "cuda" else [512])
    rows, summary = run_bench(
        base, args.rungs, tuple(matmul_n), bursts=args.matmul_bursts,
        burst_products=args.matmul_burst_products, say=progress,
    )
    summary["target"] = args.target
    write_csv(args.out, pd.DataFrame(rows))
    write_json(args.out.with_suffix(".json"), summary)
    print(f"GPU: {summary['gpu']}, torch {summary['torch']}")
    before, after = summary["matmul_before"], summary["matmul_after"]
    print(
        f"dense bf16 matmul ceiling: {before['ceiling_tflops']:.1f} TFLOP/s before (n={before['n']}, "
        f"median burst {before['median_tflops']:.1f}), {after['ceiling_tflops']:.1f} after the rungs "
        f"(n={after['n']}, median burst {after['median_tflops']:.1f}); "
        f"reference {summary['matmul_tflops']:.1f}"
    )
    for row in rows:
        if row["status"] == "ok":
            print(
                f"  {row['rung']:<50} {row['median_ms']:9.2f} ms  "
                f"{row['achieved_tflops'] or float('nan'):7.1f} TFLOP/s  "
                f"{(row['share_of_matmul'] or float('nan')) * 100:5.1f}% of matmul  "
                f"(first step {row['first_step_s']:.1f} s)"
            )
            if row.get("gpu_busy_ms") is not None:
                parts = sorted(
                    ((k.removeprefix("gpu_ms_"), v) for k, v in row.items() if k.startswith("gpu_ms_")),
                    key=lambda kv: -kv[1],
                )
                print(
                    f"      GPU busy {row['gpu_busy_ms']:.1f} ms per step: "
                    + ", ".join(f"{name} {ms:.1f}" for name, ms in parts)
                )
                print(f"      top kernels: {row['top_kernels']}")
        else:
            # OOM with the error's first line; unsupported (this device cannot run it) with the reason
            print(f"  {row['rung']:<50} {row['status']}: {row.get('reason') or row.get('error', '')}")
    if args.check_loss:
        checked = check_losses(base, args.rungs, args.check_loss, say=progress)
        write_csv(args.out.with_suffix(".losses.csv"), pd.DataFrame(checked))
        for row in checked:
            print(
                f"  loss over {row['steps']} steps, {row['rung']:<50} {row['first_loss']:.4f} -> "
                f"{row['last_loss']:.4f}; largest gap to bf16 {row['max_gap_to_bf16']:.2e} vs bf16's own "
                f"noise {row['bf16_noise']:.2e}: {'within' if row['within_bf16_noise'] else 'OUTSIDE'}"
            )
    if "best_rung" in summary:
        verdict = "meets" if summary["best_share"] >= args.target else "misses"
        print(
            f"best: {summary['best_rung']}, {summary['best_tflops']:.1f} TFLOP/s = "
            f"{summary['best_share'] * 100:.1f}% of the measured matmul rate: {verdict} the "
            f"{args.target * 100:.0f}% target"
        )


if __name__ == "__main__":
    run_main(main)
