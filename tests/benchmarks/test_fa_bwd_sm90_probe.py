"""benchmarks/fa_bwd_sm90_probe.py's configs: what --config accepts and which head dims a config is built for."""
import argparse

import pytest

from benchmarks.fa_bwd_sm90_probe import config_name, fits, launch_options, parse_config


def test_a_config_left_short_takes_64_row_blocks_and_v4_adds_and_a_whole_one_reaches_the_kernel():
    assert parse_config("0,2,64") == (0, 2, 64, 64, 4)
    assert parse_config("0,2,64,128") == (0, 2, 64, 128, 4)
    assert launch_options(parse_config("1,3,32,128,2")) == dict(stages=3, pipeline=True, dq_cols=32, block_q=128,
                                                                dq_vec=2)
    assert config_name(parse_config("0,2,64,128,2")) == "in-step s2 dq64 q128 v2"


@pytest.mark.parametrize("spec", ["0,2", "0,2,64,128,2,1"])
def test_a_config_of_another_length_is_refused(spec):
    with pytest.raises(argparse.ArgumentTypeError):
        parse_config(spec)


def test_128_row_query_blocks_are_built_at_d_64_only():
    assert fits((0, 2, 64, 128, 4), 64) and not fits((0, 2, 64, 128, 4), 128)
    assert fits((0, 2, 64, 64, 2), 128)
