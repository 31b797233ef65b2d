"""Why two kernels differ: rules over their counters; a rule speaks only when its condition holds on the numbers."""

from __future__ import annotations

import math

import pandas as pd

from profkit.analyse.diff.metrics import STALL_MEANING, STALL_METRICS
from profkit.analyse.diff.work import compare_work, work_of
from profkit.analyse.roofline import sol_bound as bound
from profkit.units import human, to_float as _num

def _times(a: float, b: float, less: str, more: str) -> str:
    if a > 0 and b > 0:
        return f"{a / b:.3g}× {less}" if b < a else f"{b / a:.3g}× {more}"
    return ""

def _bound_text(kind: str, unit: str, pct: float) -> str:
    if kind == "memory":
        return f"memory-bound ({unit} {pct:.0f}% of peak)"
    if kind == "compute":
        return f"compute-bound (SM {pct:.0f}% of peak)"
    return f"latency-bound (busiest unit {unit} at {pct:.0f}%)"

def _rule_duration(a, b):
    da, db = _num(a.get("duration_us")), _num(b.get("duration_us"))
    if math.isnan(da) or math.isnan(db) or da <= 0 or db <= 0:
        return None
    work = compare_work(work_of(a), work_of(b))
    per_work = "" if math.isnan(work.scale) else \
        f"; per {work.unit} {_times(da, db * work.scale, 'faster', 'slower')} (unequal work)"
    if abs(db - da) / da < 0.02:
        return f"duration unchanged within 2% ({human(da, 'µs')} → {human(db, 'µs')}){per_work}"
    return f"duration {human(da, 'µs')} → {human(db, 'µs')} ({_times(da, db, 'faster', 'slower')}){per_work}"

def _rule_work(a, b):
    work = compare_work(work_of(a), work_of(b))
    if work.unit != "FLOP" or work.status != "unequal":
        return None
    return (f"FLOP count {human(work.a)} → {human(work.b)}: the kernels do different amounts of arithmetic "
            "(different problem size, or redundant work)")

def _rule_rate(a, b):
    ta, tb = _num(a.get("achieved_tflops")), _num(b.get("achieved_tflops"))
    if math.isnan(ta) or math.isnan(tb) or ta <= 0 or tb <= 0 or abs(tb - ta) / ta < 0.05:
        return None
    pa, pb = _num(a.get("fp32_pct_of_peak")), _num(b.get("fp32_pct_of_peak"))

    def mostly_fp32(row) -> bool:  # the fp32 peak says nothing about tensor-core work
        fp32, total = _num(row.get("fp32_flops")), _num(row.get("total_flops"))
        return not math.isnan(fp32) and total > 0 and fp32 / total > 0.9

    peak = f" ({human(pa, '%')} → {human(pb, '%')} of the fp32 peak)" if not (math.isnan(pa) or math.isnan(pb)) \
        and (pa > 0 or pb > 0) and mostly_fp32(a) and mostly_fp32(b) else ""
    return f"achieved {ta:.3g} → {tb:.3g} TFLOP/s{peak}"

def _rule_bound(a, b):
    ka, kb = bound(a), bound(b)
    if "unknown" in (ka[0], kb[0]):
        return None
    if (ka[0], ka[1]) == (kb[0], kb[1]):
        unit = "SM" if ka[0] == "compute" else ka[1]
        return f"both {ka[0]}-bound on {unit} ({ka[2]:.0f}% → {kb[2]:.0f}% of peak)"
    return f"{_bound_text(*ka)} → {_bound_text(*kb)}"

def _scaled(a, b, column: str, min_ratio: float) -> tuple[float, float] | None:
    """(A, B) of a positive quantity that changed by at least min_ratio either way, else None."""
    va, vb = _num(a.get(column)), _num(b.get(column))
    if math.isnan(va) or math.isnan(vb) or va <= 0 or vb <= 0 or max(va, vb) / min(va, vb) < min_ratio:
        return None
    return va, vb

def _rule_global_loads(a, b):
    pair = _scaled(a, b, "global_load_requests", 1.5)
    if pair is None:
        return None
    ra, rb = pair
    text = f"global load requests {human(ra)} → {human(rb)} ({_times(ra, rb, 'fewer', 'more')})"
    sa, sb = _num(a.get("shared_load_instructions")), _num(b.get("shared_load_instructions"))
    if rb < ra and not math.isnan(sa) and not math.isnan(sb) and sb > 2 * max(sa, 1):
        text += f", while shared-memory loads rose {human(sa)} → {human(sb)}: operands are reused from shared memory"
    return text

def _moved_a_quarter(a, b, column: str) -> tuple[float, float] | None:
    """(A's, B's) value of a per-request ratio when both are known and B's differs from A's by a quarter or more."""
    sa, sb = _num(a.get(column)), _num(b.get(column))
    if math.isnan(sa) or math.isnan(sb) or sa <= 0 or abs(sb - sa) / sa < 0.25:
        return None
    return sa, sb

def _rule_sectors_per_request(a, b):
    moved = _moved_a_quarter(a, b, "ld_sectors_per_request")
    return None if moved is None else f"global load sectors per request {moved[0]:.1f} → {moved[1]:.1f}"

def _rule_l2_sectors_per_request(a, b):
    """Fewer sectors per L2 read request: the same bytes in more, smaller requests, as when rows stop starting on
    32-byte boundaries (TMA boxes then split at sectors and lines)."""
    moved = _moved_a_quarter(a, b, "l2_ld_sectors_per_request")
    if moved is None:
        return None
    sa, sb = moved
    how = "fewer, fuller" if sb > sa else "more, smaller"
    return f"L2 read sectors per request {sa:.2f} → {sb:.2f}: the same bytes in {how} requests"

def _rule_excessive(a, b):
    ea, eb = _num(a.get("excessive_sectors_pct")), _num(b.get("excessive_sectors_pct"))
    if math.isnan(ea) or math.isnan(eb) or abs(eb - ea) < 5:
        return None
    why = "less uncoalesced access" if eb < ea else "more uncoalesced access"
    return f"excessive global sectors {human(ea, '%')} → {human(eb, '%')} ({why})"

def _rule_vector_loads(a, b):
    out = []
    for column, what in (("ldg128_fraction", "global"), ("lds128_fraction", "shared")):
        fa, fb = _num(a.get(column)), _num(b.get(column))
        if not (math.isnan(fa) or math.isnan(fb)) and abs(fb - fa) >= 0.25:
            out.append(f"128-bit {what} loads {100 * fa:.0f}% → {100 * fb:.0f}% of {what} load instructions")
    return "; ".join(out) or None

def _rule_dram(a, b):
    pair = _scaled(a, b, "dram_bytes", 1.25)
    if pair is None:
        return None
    da, db = pair
    return f"DRAM traffic {human(da, 'B')} → {human(db, 'B')} ({_times(da, db, 'less', 'more')})"

def _rule_l2_hit(a, b):
    ha, hb = _num(a.get("l2_hit_pct")), _num(b.get("l2_hit_pct"))
    if math.isnan(ha) or math.isnan(hb) or abs(hb - ha) < 10:
        return None
    return f"L2 hit rate {human(ha, '%')} → {human(hb, '%')}"

def _limited_by_registers(row) -> bool:
    return "registers" in str(row.get("occupancy_limiter", ""))

def _rule_registers(a, b):
    ra, rb = _num(a.get("registers_per_thread")), _num(b.get("registers_per_thread"))
    if math.isnan(ra) or math.isnan(rb) or ra == rb:
        return None
    text = f"registers {ra:.0f} → {rb:.0f} per thread"
    ta, tb = _num(a.get("theoretical_occupancy_pct")), _num(b.get("theoretical_occupancy_pct"))
    occ = f" (theoretical {human(ta, '%')} → {human(tb, '%')})" if not (math.isnan(ta) or math.isnan(tb)) else ""
    if _limited_by_registers(b) and not _limited_by_registers(a):
        text += f", occupancy now limited by registers{occ}"
    elif _limited_by_registers(a) and not _limited_by_registers(b):
        text += f", occupancy no longer limited by registers{occ}"
    return text

def _rule_limiter(a, b):
    la, lb = str(a.get("occupancy_limiter", "") or ""), str(b.get("occupancy_limiter", "") or "")
    said_by_registers_rule = (_limited_by_registers(a) != _limited_by_registers(b)
                              and _num(a.get("registers_per_thread")) != _num(b.get("registers_per_thread")))
    if not la or not lb or la == lb or said_by_registers_rule:
        return None
    ta, tb = _num(a.get("theoretical_occupancy_pct")), _num(b.get("theoretical_occupancy_pct"))
    return f"occupancy limiter {la} → {lb} (theoretical {human(ta, '%')} → {human(tb, '%')})"

def _rule_achieved_occupancy(a, b):
    oa, ob = _num(a.get("achieved_occupancy_pct")), _num(b.get("achieved_occupancy_pct"))
    if math.isnan(oa) or math.isnan(ob) or abs(ob - oa) < 10:
        return None
    return f"achieved occupancy {human(oa, '%')} → {human(ob, '%')} of the warp slots"

def _rule_spills(a, b):
    sa, sb = _num(a.get("local_bytes")), _num(b.get("local_bytes"))
    if math.isnan(sa) or math.isnan(sb) or sa == sb:
        return None
    if sa == 0:
        return f"register spills appeared: local-memory traffic 0 → {human(sb, 'B')}"
    if sb == 0:
        return f"register spills gone: local-memory traffic {human(sa, 'B')} → 0"
    if max(sa, sb) / min(sa, sb) >= 1.25:
        return f"local-memory (spill) traffic {human(sa, 'B')} → {human(sb, 'B')}"
    return None

def _conflict_pct(row) -> float:
    conflicts, wavefronts = _num(row.get("bank_conflicts")), _num(row.get("shared_wavefronts"))
    return 100 * conflicts / wavefronts if wavefronts and wavefronts > 0 and not math.isnan(conflicts) else math.nan

def _rule_bank_conflicts(a, b):
    ca, cb = _conflict_pct(a), _conflict_pct(b)
    if math.isnan(ca) or math.isnan(cb) or abs(cb - ca) < 5:
        return None
    return (f"shared-memory bank conflicts {human(ca, '%')} → {human(cb, '%')} of shared wavefronts "
            f"({human(a.get('bank_conflicts'))} → {human(b.get('bank_conflicts'))})")

def _top_stall(row) -> tuple[str, float]:
    values = {r: _num(row.get(f"stall_{r}")) for r in STALL_METRICS}
    values = {r: v for r, v in values.items() if not math.isnan(v)}
    if not values:
        return "", math.nan
    reason = max(values, key=lambda r: values[r])
    return reason, values[reason]

def _rule_stalls(a, b):
    (ra, va), (rb, vb) = _top_stall(a), _top_stall(b)
    if not ra or not rb:
        return None
    if ra != rb:
        return (f"dominant stall {ra} ({va:.1f} cycles/issue, {STALL_MEANING.get(ra, '')}) → {rb} ({vb:.1f}, "
                f"{STALL_MEANING.get(rb, '')})")
    if va > 0 and abs(vb - va) / va >= 0.25:
        return f"dominant stall still {ra} ({STALL_MEANING.get(ra, '')}): {va:.1f} → {vb:.1f} cycles/issue"
    return None

def _rule_tensor(a, b):
    ta, tb = _num(a.get("tensor_flops")), _num(b.get("tensor_flops"))
    pa, pb = _num(a.get("tensor_pipe_pct")), _num(b.get("tensor_pipe_pct"))
    if math.isnan(ta) or math.isnan(tb) or (ta > 0) == (tb > 0):
        return None
    state = "now uses" if tb > 0 else "no longer uses"
    return f"{state} tensor cores (tensor pipe {human(pa, '%')} → {human(pb, '%')} busy)"

def _rule_instructions(a, b):
    pair = _scaled(a, b, "instructions_executed", 1.2)
    if pair is None:
        return None
    ia, ib = pair
    return f"warp instructions executed {human(ia)} → {human(ib)} ({_times(ia, ib, 'fewer', 'more')})"

def _rule_ffma_operands(a, b):
    """FFMA register use (parse.ncu._ffma_operand_reuse) when it moved: the share of FFMAs that can take no operand
    from the reuse cache, and how many more dispatch stalls those draw than the rest in each kernel."""
    ua, ub = _num(a.get("ffma_unshared_fraction")), _num(b.get("ffma_unshared_fraction"))
    ia, ib = _num(a.get("ffma_inplace_fraction")), _num(b.get("ffma_inplace_fraction"))
    if math.isnan(ua) or math.isnan(ub) or (abs(ub - ua) < 0.1 and (math.isnan(ia) or math.isnan(ib)
                                                                    or abs(ib - ia) < 0.25)):
        return None
    text = (f"FFMAs sharing no source register with the FFMA before them {100 * ua:.0f}% → {100 * ub:.0f}%"
            f" (accumulating in place {100 * ia:.0f}% → {100 * ib:.0f}%)")
    ratios = []
    for row in (a, b):
        shared, unshared = _num(row.get("ffma_dispatch_shared_per_m")), _num(row.get("ffma_dispatch_unshared_per_m"))
        ratios.append(unshared / shared if shared > 0 and not math.isnan(unshared) else math.nan)
    if not any(math.isnan(r) for r in ratios):
        text += (f"; those draw {ratios[0]:.1f}× / {ratios[1]:.1f}× the dispatch stalls per execution of the FFMAs "
                 "that share one")
    return text

def _rule_intensity(a, b):
    pair = _scaled(a, b, "l2_flop_per_byte", 1.5)
    if pair is None:
        return None
    ia, ib = pair
    return f"arithmetic intensity against L2 {ia:.3g} → {ib:.3g} FLOP/byte"

RULES = [
    ("duration", _rule_duration),
    ("work", _rule_work),
    ("rate", _rule_rate),
    ("bound", _rule_bound),
    ("global_loads", _rule_global_loads),
    ("sectors_per_request", _rule_sectors_per_request),
    ("l2_sectors_per_request", _rule_l2_sectors_per_request),
    ("coalescing", _rule_excessive),
    ("vector_loads", _rule_vector_loads),
    ("dram_traffic", _rule_dram),
    ("l2_hit", _rule_l2_hit),
    ("intensity", _rule_intensity),
    ("registers", _rule_registers),
    ("occupancy_limiter", _rule_limiter),
    ("achieved_occupancy", _rule_achieved_occupancy),
    ("spills", _rule_spills),
    ("bank_conflicts", _rule_bank_conflicts),
    ("stalls", _rule_stalls),
    ("tensor_cores", _rule_tensor),
    ("instructions", _rule_instructions),
    ("ffma_operands", _rule_ffma_operands),
]

def explain(a: pd.Series, b: pd.Series) -> pd.DataFrame:
    """The rules (RULES, in order) whose conditions hold on kernel rows A and B. Columns: rule, message."""
    rows = []
    for name, rule in RULES:
        message = rule(a, b)
        if message:
            rows.append({"rule": name, "message": message})
    return pd.DataFrame(rows, columns=["rule", "message"])
