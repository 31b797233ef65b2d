"""Cross-check rules on constructed timings: each reason fires only when its numbers say so."""

import pandas as pd

from profkit.analyse.crosscheck import cross_check


def _timings(ms):
    return pd.DataFrame({"kernel": ["k"], "median_ms": [ms], "grid": ["8×8×1"]})


def _ncu(us):
    return pd.DataFrame({"kernel": ["k"], "nvtx_path": ["k"], "duration_ns": [us * 1e3], "grid": ["8×8×1"]})


def _nsys(us_list):
    return pd.DataFrame({"kernel": ["k"] * len(us_list), "nvtx_path": ["k"] * len(us_list),
                         "duration_ns": [u * 1e3 for u in us_list], "grid": ["8×8×1"] * len(us_list)})


def test_agreement_is_ok():
    row = cross_check(_timings(1.0), _ncu(1000), _nsys([1000, 1001, 999])).iloc[0]
    assert row.flag == "ok" and row.reasons == ""
    assert abs(row.ncu_over_events - 1) < 1e-9


def test_event_window_overhead_is_explained():
    row = cross_check(_timings(3.0), _ncu(1920), _nsys([1930, 1925, 1921])).iloc[0]
    assert row.flag == "DISAGREE"
    assert "event window" in row.reasons and "ncu is slower" not in row.reasons
    assert abs(row.ncu_over_events - 0.64) < 1e-9


def test_cold_cache_replay_is_explained():
    row = cross_check(_timings(1.0), _ncu(1300), _nsys([1000] * 5), cache_control="all").iloc[0]
    assert "--cache-control all" in row.reasons
    row = cross_check(_timings(1.0), _ncu(1300), _nsys([1000] * 5), cache_control="none",
                      clock_control="base").iloc[0]
    assert "locked clocks" in row.reasons and "--cache-control all" not in row.reasons


def test_first_launch_cost_is_seen():
    row = cross_check(_timings(1.0), _ncu(1000), _nsys([5000, 1000, 1000, 1000])).iloc[0]
    assert "first launch" in row.reasons


def test_missing_event_timings_are_said():
    table = cross_check(pd.DataFrame(), _ncu(1000), _nsys([1000]))
    assert "no cudaEvent timings" in table.iloc[0].reasons


def test_cublas_kernels_are_labelled_by_nvtx_range():
    ncu = pd.DataFrame({"kernel": ["nvjet_sm90_x"], "nvtx_path": ["matmul_cublas"], "duration_ns": [2e6],
                        "grid": ["8×8×1"]})
    t = pd.DataFrame({"kernel": ["matmul_cublas"], "median_ms": [2.0], "grid": ["8×8×1"]})
    row = cross_check(t, ncu, pd.DataFrame()).iloc[0]
    assert row.label == "matmul_cublas" and row.flag == "ok"


def test_library_calls_without_a_grid_match_their_launches_by_size():
    ncu = pd.DataFrame({"kernel": ["nvjet_a", "nvjet_b"], "nvtx_path": ["matmul_cublas"] * 2,
                        "duration_ns": [40e3, 2e6], "grid": ["4×4×1", "64×32×1"]})
    t = pd.DataFrame({"kernel": ["matmul_cublas"] * 2, "n": [4096, 1024], "median_ms": [2.0, 0.04],
                      "grid": ["0×0×0", "0×0×0"]})
    table = cross_check(t, ncu, pd.DataFrame()).set_index("grid")
    assert table.loc["4×4×1", "events_us"] == 40 and table.loc["64×32×1", "events_us"] == 2000
    assert (table["flag"] == "ok").all()


def test_one_kernel_under_two_ranges_stays_two_rows():
    ncu = pd.DataFrame({"kernel": ["_attn_fwd", "_attn_fwd"], "nvtx_path": ["fa2_fwd", "fa2_fwd_noskip"],
                        "duration_ns": [210e3, 429e3], "grid": ["2048×1×1"] * 2})
    nsys = ncu.assign(duration_ns=[213e3, 431e3])
    table = cross_check(pd.DataFrame(), ncu, nsys).set_index("label")
    assert set(table.index) == {"fa2_fwd/_attn_fwd", "fa2_fwd_noskip/_attn_fwd"}
    assert table.loc["fa2_fwd/_attn_fwd", "ncu_us"] == 210 and table.loc["fa2_fwd_noskip/_attn_fwd", "nsys_us"] == 431
    assert (table["flag"] == "ok").all()


def test_by_capture_compares_each_capture_on_its_own_in_the_order_named():
    """One pass over a session's captures gives what one call per capture gave: each capture's labels come from its
    own timings, rows follow the captures' order, and rows without a capture are left out."""
    timings = pd.concat([_timings(2.0).assign(capture="second"), _timings(1.0).assign(capture="first")])
    ncu = pd.concat([_ncu(1000).assign(capture="first"), _ncu(2000).assign(capture="second"),
                     _ncu(9000).assign(capture="third", nvtx_path="range"), _ncu(5).assign(capture=None)])
    nsys = pd.concat([_nsys([1000, 1001]).assign(capture="first"), _nsys([2000] * 3).assign(capture="second")])
    table = cross_check(timings, ncu, nsys, by_capture=True)
    assert table["capture"].tolist() == ["second", "first", "third"]
    assert table.set_index("capture")["label"].to_dict() == {"second": "k", "first": "k", "third": "range/k"}
    assert table.set_index("capture")["nsys_launches"].to_dict()["second"] == 3
    for name, rows in table.groupby("capture"):
        alone = cross_check(timings[timings["capture"] == name], ncu[ncu["capture"] == name],
                            nsys[nsys["capture"] == name])
        pd.testing.assert_frame_equal(rows.drop(columns="capture").reset_index(drop=True), alone,
                                      check_dtype=False)
