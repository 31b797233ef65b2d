"""benchmarks/synthetic_nsys.py: the timelines `bench loading` times are read right, not only fast.

The issue's check for the scale work is that `profkit show` of a large foreign export "prints the right launch
counts and NVTX paths". The generator lays its kernels out by formula (kernel i in step i // 96, layer
(i // 8) % 12, op (i // 2) % 4, epoch i // EPOCH_KERNELS; every fifth step on a second thread whose push/pop
ranges nest with the main thread's start/end ranges), so each launch's NVTX path is known without profkit;
the kernel names come from the export's own rows. Every launch read from the SQLite export and from its parquetdir
and arrowdir folders must carry exactly that path; `show -t nvtx` must count every range, `-t timeline` every
launch of each kernel, and `-t copies` one copy and one memset per step.
"""

from __future__ import annotations

import sqlite3
from collections import Counter

import pytest

import profkit
from benchmarks import synthetic_nsys as syn

pytest.importorskip("duckdb")  # the timeline engine; the GPU machine has none


def truth_paths(kernels: int, epoch_kernels: int) -> list[str]:
    """The NVTX path of each generated kernel, in launch order, from the generator's layout: the ranges that
    enclose it, outermost first, which is the order they began in. Each range begins a few hundred ns before its
    first kernel's slot (train 1000, epoch 500, step 300, layer 200, op 100), so an epoch that begins inside a
    step nests below it: "train/step 1041/epoch 1/layer 8/..." at 180k kernels."""
    per_layer = syn.KERNELS_PER_OP * syn.OPS_PER_LAYER
    paths = []
    for i in range(kernels):
        epoch, step, layer, op = (i // epoch_kernels, i // syn.KERNELS_PER_STEP, i // per_layer,
                                  i // syn.KERNELS_PER_OP)
        ranges = [(-1, -1000, "train"), (epoch * epoch_kernels, -500, f"epoch {epoch}"),
                  (step * syn.KERNELS_PER_STEP, -300, f"step {step}"),
                  (layer * per_layer, -200, f"layer {layer % syn.LAYERS_PER_STEP}"),
                  (op * syn.KERNELS_PER_OP, -100, syn.OP_NAMES[op % len(syn.OP_NAMES)])]
        paths.append("/".join(name for _, _, name in sorted(ranges)))
    return paths


def export_kernel_names(export) -> list[str]:
    """Each kernel's short name as the export itself stores it, in start order."""
    with sqlite3.connect(export) as conn:
        return [name for (name,) in conn.execute(
            "select s.value from CUPTI_ACTIVITY_KIND_KERNEL k join StringIds s on s.id = k.shortName order by k.start")]


def attributed(profile: profkit.Profile) -> list[tuple[str, str]]:
    """(NVTX path, kernel) of every launch profkit read, in start order."""
    rows = profile.bundle.stored("nsys_kernels").sort_values("start_ns", kind="stable")
    return list(zip(rows["nvtx_path"], rows["kernel"]))


def range_counts(profile: profkit.Profile) -> dict[str, int]:
    """How many times each NVTX range occurs, from `profkit show -t nvtx`."""
    table = profile.table("nvtx")
    return dict(zip(table["range"], table["count"].astype(int)))


def expected_range_counts(kernels: int, epoch_kernels: int) -> dict[str, int]:
    """One train range, one range per epoch and per step, a layer range per 8 kernels and an op range per 2."""
    per_layer = syn.KERNELS_PER_OP * syn.OPS_PER_LAYER
    names = ["train", *(f"epoch {e}" for e in range(-(-kernels // epoch_kernels))),
             *(f"step {s}" for s in range(-(-kernels // syn.KERNELS_PER_STEP))),
             *(f"layer {layer % syn.LAYERS_PER_STEP}" for layer in range(-(-kernels // per_layer))),
             *(syn.OP_NAMES[op % len(syn.OP_NAMES)] for op in range(-(-kernels // syn.KERNELS_PER_OP)))]
    return dict(Counter(names))


def build(tmp_path, kernels: int):
    """The export and its truth: each launch's (path, kernel) in start order."""
    export = syn.build_export(kernels, tmp_path / f"synthetic-{kernels}.sqlite")
    truth = list(zip(truth_paths(kernels, syn.EPOCH_KERNELS), export_kernel_names(export)))
    assert len(truth) == kernels
    return export, truth


def test_every_launch_lands_on_its_generated_path_in_all_three_formats(tmp_path, monkeypatch):
    # 1,037 kernels: ten full steps (two of them on the side thread) and a partial eleventh; epochs of 400
    # kernels, so that start/end ranges end and begin inside the run and inside a step
    monkeypatch.setattr(syn, "EPOCH_KERNELS", 400)
    kernels = 10 * syn.KERNELS_PER_STEP + 77
    export, truth = build(tmp_path, kernels)
    assert {path.split("/")[1] for path, _ in truth} == {"epoch 0", "epoch 1", "epoch 2", "step 4", "step 8"}
    parquet = syn.parquet_dir(export, tmp_path / "parquetdir")
    arrow = syn.arrow_dir(parquet, tmp_path / "arrowdir")
    ranges = expected_range_counts(kernels, 400)
    for source in (export, parquet, arrow):
        profile = profkit.load(source)
        assert attributed(profile) == truth, source.name
        assert range_counts(profile) == ranges, source.name

    profile = profkit.load(export)
    timeline = profile.table("timeline")
    assert timeline.groupby("kernel")["launches"].sum().to_dict() == Counter(name for _, name in truth)
    steps = -(-kernels // syn.KERNELS_PER_STEP)
    copies = profile.table("copies").set_index("kind")
    assert copies.loc["HtoD", "count"] == copies.loc["memset", "count"] == steps
    assert copies.loc["HtoD", "total_bytes"] == sum(1_048_576 + s % 7 for s in range(steps))
    assert copies.loc["memset", "total_bytes"] == 4096 * steps


def test_a_wrong_layout_is_noticed(tmp_path):
    """The truth above is not the reader's echo: the same paths shifted by one kernel no longer match."""
    export, truth = build(tmp_path, 3 * syn.KERNELS_PER_STEP)
    paths = [path for path, _ in truth]
    shifted = list(zip(paths[1:] + paths[:1], (name for _, name in truth)))
    assert attributed(profkit.load(export)) == truth != shifted


@pytest.mark.slow
def test_the_180k_kernel_timeline_reads_every_launch_on_its_path(tmp_path):
    """The issue's held-out size: 180k kernels, 1.44M CUDA API rows, two epochs (the second begins inside step
    1041, below it in the paths)."""
    export, truth = build(tmp_path, 180_000)
    with sqlite3.connect(export) as conn:
        assert conn.execute("select count(*) from CUPTI_ACTIVITY_KIND_RUNTIME").fetchone()[0] == \
            180_000 * syn.API_CALLS_PER_KERNEL
    assert ("train/step 1041/epoch 1/layer 8/attention", truth[100_000][1]) == truth[100_000]
    profile = profkit.load(export)
    assert attributed(profile) == truth
    assert range_counts(profile) == expected_range_counts(180_000, syn.EPOCH_KERNELS)
