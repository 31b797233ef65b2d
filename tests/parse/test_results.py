"""Result lines printed by the CUDA harness: JSON objects among other output."""

from profkit.parse.results import parse_result_lines


def test_result_lines_are_picked_out_of_mixed_output():
    stdout = "\n".join([
        "matmul_tiled on NVIDIA H200",
        '{"profkit_result": 1, "kernel": "matmul_tiled", "n": 4096, "median_ms": 4.5, "min_ms": 4.4, '
        '"max_ms": 4.9, "reps": 20, "gflops": 30541.2, "rel_err": 2.1e-07, "grid": [128, 128, 1], "block": [32, 32, 1]}',
        '{"not": "a result"}',
        "{broken json",
        '{"kernel": "matmul_naive", "n": 77, "median_ms": 0.01}',
    ])
    df = parse_result_lines(stdout)
    assert list(df["kernel"]) == ["matmul_tiled", "matmul_naive"]
    assert df.loc[0, "grid"] == "128×128×1" and df.loc[0, "block"] == "32×32×1"
    assert df.loc[0, "median_ms"] == 4.5 and df.loc[1, "n"] == 77


def test_foreign_output_gives_empty_table():
    df = parse_result_lines("hello\n[1, 2, 3]\n")
    assert df.empty and "median_ms" in df.columns
