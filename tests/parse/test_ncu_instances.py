"""Per-PC metric instances decoded from a report's bytes equal what the native reader returns, on every committed
report; on made-up and damaged messages the decoder returns what a protobuf reading gives, or None (then the native
reader reads that metric), never something else."""

from pathlib import Path

import numpy as np
import pytest

from profkit.parse import ncu, ncu_file, ncu_instances
from profkit.parse.files import plain_file

ROOT = Path(__file__).resolve().parents[2]
REPORTS = sorted(str(p.relative_to(ROOT)) for folder in ("sessions", "tests/data")
                 for p in (ROOT / folder).rglob("*.ncu-rep*"))
DEFAULT_REPORTS = {f"sessions/{name}" for name in (
    "ladder1-full-n4096/ladder_bench.ncu-rep.xz", "ladder-quick-n4096/matmul_tiled.ncu-rep",
    "fa2-n4096-d64-tuned/python3.ncu-rep.xz", "train-step-guided/python3.ncu0.ncu-rep.xz",
    "triton-matmul-bf16-n4096/python3.ncu-rep.xz")}
"""Compared in the default run: --set full and --quick, CUDA, Triton and a guided PyTorch capture; the other reports
(each read through the native reader too) in the slow set."""
PC_METRIC_NAMES = frozenset(name for _, name in ncu.PC_COLUMNS)


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PROFKIT_CACHE", str(tmp_path / "cache"))


def test_every_committed_report_is_found():
    assert len(REPORTS) >= 40 and DEFAULT_REPORTS <= set(REPORTS)


def decoded_launches(path: Path, layout: ncu_file.Layout) -> list[list[tuple[int, ncu_instances.Instances | None]]]:
    """Per launch of a report: (metric id, decoded instances or None) of each per-PC metric in it."""
    ids = frozenset(i for i, metric in enumerate(layout.dictionary) if metric in PC_METRIC_NAMES)
    out = []
    with path.open("rb") as handle:
        for block in layout.launches:
            payload = ncu_file._message(handle, block.payload_offset)
            _, taken = ncu_file.prune_payload(payload, set(), ids)
            decoded = ncu_instances.decode([payload[body:end] for _, _, body, end in taken])
            out.append([(metric_id, found) for (metric_id, _, _, _), found in zip(taken, decoded)])
    return out


@pytest.mark.parametrize("name", [pytest.param(name, marks=() if name in DEFAULT_REPORTS else pytest.mark.slow)
                                  for name in REPORTS])
def test_decoded_instances_equal_the_native_readers(name):
    ncu_report = pytest.importorskip("ncu_report")
    path = plain_file(ROOT / name)
    layout = ncu_file.scan(path)
    assert layout is not None
    context = ncu_report.load_report(str(path))
    actions = [context.range_by_idx(r).action_by_idx(a) for r in range(context.num_ranges())
               for a in range(context.range_by_idx(r).num_actions())]
    assert len(actions) == len(layout.launches)
    compared = 0
    for launch, action in zip(decoded_launches(path, layout), actions):
        for metric_id, found in launch:
            assert found is not None, f"{layout.dictionary[metric_id]} fell back to the native reader"
            metric = action.metric_by_name(layout.dictionary[metric_id])
            if not metric.has_correlation_ids():
                assert len(found[0]) == len(found[1]) == 0
                continue
            pcs, values = ncu._instances(metric, metric.num_instances())
            assert found[0].dtype == pcs.dtype and found[1].dtype == values.dtype
            np.testing.assert_array_equal(found[0], pcs)
            np.testing.assert_array_equal(found[1], values)
            compared += 1
    if any(metric in PC_METRIC_NAMES for metric in layout.dictionary):
        assert compared > 0


def test_a_shard_leaves_the_decoded_metrics_out_and_reads_the_same(tmp_path):
    path = plain_file(ROOT / "sessions" / "ladder1-full-n4096" / "ladder_bench.ncu-rep.xz")
    layout = ncu_file.scan(path)
    names = ncu.catalog.read_metric_names()
    plain = ncu_file.write_shard(layout, [0, 5], tmp_path / "plain.ncu-rep", names)
    lean = ncu_file.write_shard(layout, [0, 5], tmp_path / "lean.ncu-rep", names, decode=ncu.DECODED_PC_METRICS)
    assert plain.instances == [{}, {}] and len(lean.instances) == 2
    assert set(lean.instances[0]) == ncu.DECODED_PC_METRICS & set(layout.dictionary)
    payload_bytes = [sum(block.payload_size for block in ncu_file.scan(shard.path).launches) for shard in (plain, lean)]
    assert payload_bytes[1] < payload_bytes[0] / 5  # the instances were most of a pruned launch
    whole = ncu.extract_entries(plain.path)["entries"]
    read = ncu.extract_entries(lean.path, instances=lean.instances)["entries"]
    for launch in (0, 1):
        for table in ("launch", "source", "instructions", "opcodes"):
            assert read[launch][table] == whole[launch][table]


# Made-up metric messages: the encoder below writes what ncu writes; `reference` reads a message the way a protobuf
# parser would (any field order, last value wins), for comparing on damaged bytes.

def field(number: int, value) -> bytes:
    return ncu_file.encode_field(number, value)


def metric_message(metric_id: int, pcs: list[int], values: list[int], scalar: int = 7) -> bytes:
    instances = b"".join(field(3, field(1, field(5, pc)) + field(2, field(5, value))) for pc, value in zip(pcs, values))
    return field(1, metric_id) + field(2, field(5, scalar)) + instances + field(4, 0)


def reference(message: bytes) -> tuple[list[int], list[int]] | None:
    """A protobuf reading of a metric message's instances, or None where it would not parse as one."""
    def uint64(inner: bytes) -> int | None:
        found = [v for n, w, v, _, _ in ncu_file.fields(inner) if n == 5 and w == 0]
        return found[-1] if found else None

    try:
        pcs, values = [], []
        for number, wire, value, _, _ in ncu_file.fields(message):
            if number != 3:
                continue
            if wire != 2:
                return None
            parts = {n: v for n, w, v, _, _ in ncu_file.fields(value) if w == 2}
            pc, number_value = uint64(parts.get(1, b"")), uint64(parts.get(2, b""))
            if pc is None or number_value is None:
                return None
            pcs.append(pc)
            values.append(number_value)
        return pcs, values
    except ncu_file.LayoutError:
        return None


def random_message(rng: np.random.Generator) -> tuple[bytes, list[int], list[int]]:
    count = int(rng.integers(0, 60))
    base = int(rng.integers(1 << 40, 1 << 48)) & ~0xF
    pcs = [base + 16 * i for i in range(count)]
    # values of every varint length, and some whose bytes are the keys the decoder searches for
    values = [int(rng.choice([rng.integers(0, 1 << int(rng.integers(1, 62))), 0x1A, 0x0A, 0x28, 0x0A << 7 | 0x1A]))
              for _ in range(count)]
    return metric_message(int(rng.integers(0, 3000)), pcs, values), pcs, values


@pytest.mark.parametrize("seed", range(30))
def test_made_up_messages_decode_exactly(seed):
    """In a well-formed message no byte but an instance's key can start an instance's pattern (a varint's bytes
    before its last have the high bit set; lengths stay below 0x1A), so every one decodes."""
    rng = np.random.default_rng(seed)
    messages = [random_message(rng) for _ in range(8)]
    decoded = ncu_instances.decode([message for message, _, _ in messages])
    for (message, pcs, values), found in zip(messages, decoded):
        assert found is not None, message.hex()
        assert found[0].dtype == np.uint64 and found[1].dtype == np.float64
        assert found[0].tolist() == pcs
        assert found[1].tolist() == [float(v) for v in values]


@pytest.mark.parametrize("seed", range(40))
def test_damaged_messages_decode_as_protobuf_reads_them_or_not_at_all(seed):
    rng = np.random.default_rng(1000 + seed)
    messages = []
    for _ in range(6):
        message = bytearray(random_message(rng)[0])
        for _ in range(int(rng.integers(1, 4))):
            at = int(rng.integers(0, len(message)))
            if rng.random() < 0.7:
                message[at] = int(rng.integers(0, 256))
            else:
                del message[at]
        messages.append(bytes(message))
    for message, found in zip(messages, ncu_instances.decode(messages)):
        if found is None:
            continue
        expected = reference(message)
        assert expected is not None, message.hex()
        assert found[0].tolist() == expected[0]
        assert found[1].tolist() == [float(v) for v in expected[1]]


def test_other_encodings_are_left_to_the_native_reader():
    pcs, values = [1 << 44, (1 << 44) + 16], [3, 5]
    double_value = field(1, 9) + field(3, field(1, field(5, pcs[0])) + field(2, b"\x09" + bytes(8))) + field(4, 0)
    long_instance = field(1, 9) + field(3, field(1, field(5, pcs[0])) + field(2, field(5, 1)) + bytes(130))
    tenth_byte = metric_message(9, pcs, [values[0], 1 << 63])
    assert ncu_instances.decode([double_value, long_instance, tenth_byte]) == [None, None, None]
    empty, = ncu_instances.decode([metric_message(9, [], [])])
    assert len(empty[0]) == 0 and empty[0].dtype == np.uint64
    good, = ncu_instances.decode([metric_message(9, pcs, values)])
    assert good[0].tolist() == pcs and good[1].tolist() == [3.0, 5.0]


@pytest.mark.gpu
def test_a_fresh_full_capture_reads_the_same_through_decoded_shards(tmp_path):
    """A --set full report this GPU's ncu writes now (two cuBLAS matmuls): read whole by the native reader and by
    the shard reader (per-PC metrics decoded here), the same tables, and no per-PC metric left to the native
    reader."""
    import shutil
    import subprocess
    import sys

    import pandas as pd

    if shutil.which("ncu") is None:
        pytest.skip("ncu is not on PATH")
    program = ("import torch; a = torch.randn(1000, 1000, device='cuda'); b = a.half(); "
               "[(a @ a, b @ b) for _ in range(2)]; torch.cuda.synchronize()")
    subprocess.run(["ncu", "--set", "full", "--clock-control", "none", "--launch-skip", "2", "-c", "2",
                    "-o", str(tmp_path / "fresh"), "-f", sys.executable, "-c", program],
                   check=True, capture_output=True, timeout=600)
    path = tmp_path / "fresh.ncu-rep"
    whole = ncu.extract_tables(path)
    shards = ncu.load_ncu_report(path, use_cache=False)
    for name in ("launches", "rules", "source", "instructions", "opcodes"):
        pd.testing.assert_frame_equal(getattr(shards, name), whole[name], check_exact=True)
    assert len(whole["launches"]) == 2 and len(whole["instructions"]) > 0
    launches = decoded_launches(path, ncu_file.scan(path))
    assert launches and all(launch and all(found is not None for _, found in launch) for launch in launches)
