"""benchmarks/matmul_tile_probe.py --tail: the row bands it splits a product into fill whole waves, worked by hand."""
import pytest

from benchmarks.matmul_tile_probe import main_rows


@pytest.mark.parametrize("m, n, tile, sms, rows", [
    (3000, 3000, (128, 256), 132, 2816),  # 288 tiles, 2.18 waves: 22 bands of 12 tiles fill two waves, 184 rows left
    (5000, 5000, (128, 256), 132, 4992),  # 800 tiles, 6.06 waves: 39 bands of 20 (780 of the 792), 8 rows left
    (2000, 2000, (128, 256), 132, 0),     # 128 tiles: not one full wave
    (4096, 4096, (128, 256), 132, 3072),  # 512 tiles, 3.88 waves: 24 bands of 16 fill three (384 of the 396)
    (8448, 4096, (128, 256), 132, 0),     # 1056 tiles, 8 waves exactly: nothing left for a tail
])
def test_main_rows_fill_whole_waves(m, n, tile, sms, rows):
    assert main_rows(m, n, *tile, sms) == rows
    if rows:
        tiles = rows // tile[0] * -(-n // tile[1])
        waves = -(-m // tile[0]) * -(-n // tile[1]) // sms
        assert tiles <= waves * sms and rows % tile[0] == 0 and 0 < rows < m
