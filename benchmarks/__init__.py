"""profkit's measurements of itself: how fast it captures, reads and launches. Not part of the installed
package (the wheel ships ``profkit`` only); they run from a source checkout.

    quick_capture  `profile --quick` against `--set full` on the ladder: wall time and table agreement (GPU)
    ncu_overhead   where an ncu capture's wall time goes, variant by variant (GPU)
    host_probe     host time per call of the kernels' Python paths (GPU)
    many_launches  a program of many small launches in one NVTX range, to capture a large report (GPU)
    many_report    many-launch reports built from real launches, for the loading benchmark
    loading        cold and cached `profkit show` of large timelines, a 1000-launch --set full report and the
                   committed sessions, against the goals of issue 29 (no GPU)
    synthetic_nsys 10^4-10^6-kernel nsys exports generated from a committed capture, for the loading benchmark
    train_step     a small GPT-style training step (bf16, fused AdamW): the foreign program guided capture is
                   measured on (GPU)
    guided_capture guided capture of train_step timed against its plain run and its nsys capture (GPU)
    ncu_short_kernels  why ncu and nsys disagree on microsecond kernels: ncu's fixed per-launch cost (GPU)

`profkit bench <name>` runs every module here that defines ``bench(out_dir: pathlib.Path, quick: bool)``
(``profkit.bench.workloads`` finds them by reading the files); the others run as
``python -m benchmarks.<name>`` from the checkout's root.
"""
