"""Training loop, checkpoint round trip, and the evaluate command on a tiny CPU model."""
import json
import math

import pytest
import torch

from profkit.kernels.int8.__main__ import main
from profkit.kernels.int8.data import load_splits
from profkit.kernels.int8.evaluate import forward_loop
from profkit.kernels.int8.model import MODEL_SIZES, DecoderLM, ModelConfig, parameter_count, sinusoidal_positions
from profkit.kernels.int8.train import TrainConfig, learning_rate, load_checkpoint, run_training, train_model

TINY = {"d_model": 32, "n_heads": 4, "n_layers": 1, "d_ff": 64, "dropout": 0.1}
TINY_TRAIN = TrainConfig(steps=2, batch_size=2, seq_len=16, warmup_steps=1, eval_every=1,
                         eval_windows=2, seed=0)


def corpus_file(tmp_path):
    lines = ["Holy Bible, test layout."]
    for b in range(14):
        letter = chr(ord("a") + b)
        for v in range(8):
            lines.append(f"Bk{letter}1:{v + 1} And the LORD spake unto w{letter * 3}, saying, "
                         f"Go thou {v % 4}; and he went.")
    path = tmp_path / "bible.txt"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_model_shapes_and_tied_projection():
    cfg = ModelConfig(vocab_size=50, max_seq_len=16, **TINY)
    model = DecoderLM(cfg)
    assert model.lm_head.weight is model.embed.weight
    assert model(torch.zeros(3, 16, dtype=torch.int64)).shape == (3, 16, 50)
    with pytest.raises(ValueError, match="max_seq_len"):
        model(torch.zeros(1, 17, dtype=torch.int64))
    with pytest.raises(ValueError, match="divisible"):
        ModelConfig(vocab_size=50, d_model=30, n_heads=4)
    table = sinusoidal_positions(4, 8)
    assert torch.allclose(table[0], torch.tensor([0.0, 1.0] * 4))


def test_learning_rate_warms_up_then_decays():
    cfg = TrainConfig(steps=100, warmup_steps=10, lr=1.0, min_lr_ratio=0.1)
    assert learning_rate(0, cfg) == pytest.approx(0.1)
    assert learning_rate(9, cfg) == pytest.approx(1.0)
    assert learning_rate(99, cfg) == pytest.approx(0.1, abs=1e-3)
    assert all(learning_rate(s, cfg) >= learning_rate(s + 1, cfg) for s in range(10, 99))


def test_two_training_steps_are_seeded(tmp_path):
    splits = load_splits(corpus_file(tmp_path))
    cfg = ModelConfig(vocab_size=len(splits.vocab), max_seq_len=16, **TINY)
    first, log = train_model(splits, cfg, TINY_TRAIN, torch.device("cpu"))
    second, log2 = train_model(splits, cfg, TINY_TRAIN, torch.device("cpu"))
    assert [h["train_loss"] for h in log["history"]] == [h["train_loss"] for h in log2["history"]]
    for (name, a), (_, b) in zip(first.state_dict().items(), second.state_dict().items()):
        assert torch.equal(a, b), name
    assert len(log["history"]) == 2 and math.isfinite(log["history"][-1]["calibration_loss"])
    assert log["selected_step"] in (1, 2) and log["precision"] == "fp32"
    untrained = DecoderLM(cfg)
    assert not torch.equal(untrained.blocks[0].fc1.weight, first.blocks[0].fc1.weight)


def test_checkpoint_round_trip_and_evaluate_command(tmp_path):
    text = corpus_file(tmp_path)
    ckpt = tmp_path / "ckpt"
    log = run_training(text, ckpt, TINY_TRAIN, model_overrides=TINY, device="cpu")
    assert log["corpus_version"].startswith("unrecognised")  # not the Debian bible.data
    model, vocab, saved_log = load_checkpoint(ckpt)
    assert saved_log["selected_step"] == log["selected_step"] and len(vocab) % 128 == 0
    assert model.cfg.d_model == 32 and not model.training

    out = tmp_path / "int8_model.json"
    code = main(["evaluate", "--text", str(text), "--ckpt", str(ckpt), "--out", str(out),
                 "--variants", "fp32,fp16,int8_fixed,int8_stat,bnb_int8", "--eval-batch", "4"])
    assert code == 0
    payload = json.loads(out.read_text())
    rows = {r["variant"]: r for r in payload["rows"]}
    assert set(rows) == {"fp32", "fp16", "int8_fixed", "int8_stat", "bnb_int8"}
    assert rows["fp16"]["ppl_rel_change_vs_fp16"] == 0.0
    for variant in ("fp32", "int8_fixed", "int8_stat"):
        assert math.isfinite(rows[variant]["perplexity"])
        assert abs(rows[variant]["ppl_rel_change_vs_fp16"]) < 0.05
    assert rows["int8_fixed"]["layers_int8"] == 4 + 1
    assert rows["int8_fixed"]["static_ratio_vs_fp16"] < 0.9
    if rows["bnb_int8"].get("perplexity") is None:  # bitsandbytes is not installed on CPU CI
        assert "bitsandbytes is not usable" in rows["bnb_int8"]["note"]
    assert (tmp_path / "int8_model.csv").is_file()
    assert payload["meta"]["data"]["books"]["evaluation"] == ["Bkg"]
    layers = payload["meta"]["variants"]["int8_stat"]["layers"]
    assert {r["layer"] for r in layers} >= {"lm_head", "embed"}


def test_forward_command_runs_the_quantized_model(tmp_path, capsys):
    text = corpus_file(tmp_path)
    ckpt = tmp_path / "ckpt"
    run_training(text, ckpt, TINY_TRAIN, model_overrides=TINY, device="cpu")
    result = forward_loop(ckpt, text, variant="int8_stat", batch=2, steps=3, device="cpu")
    assert result["input"] == (2, TINY_TRAIN.seq_len) and result["steps"] == 3
    assert 0 < result["median_ms"] and result["variant"] == "int8_stat"
    assert main(["forward", "--text", str(text), "--ckpt", str(ckpt), "--batch", "1", "--steps", "2"]) == 0
    assert "int8_stat: 2 eager forwards of (1, " in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["forward", "--text", str(text), "--ckpt", str(ckpt), "--steps", "0"])
    with pytest.raises(ValueError, match="CUDA graph"):
        forward_loop(ckpt, text, graphs=True, device="cpu")


def test_variant_names_carry_smoothing_and_fusion():
    from profkit.kernels.int8.evaluate import int8_rule, variant_options

    assert variant_options("int8_stat+s0.5+fused") == ("int8_stat", 0.5, True, "absmax")
    assert variant_options("int8_fixed@4+fused+s0") == ("int8_fixed@4", 0.0, True, "absmax")
    assert variant_options("int8_stat+s0.8+mse+fused") == ("int8_stat", 0.8, True, "mse")
    assert variant_options("int8_stat+mse") == ("int8_stat", None, False, "mse")
    assert variant_options("fp16") == ("fp16", None, False, "absmax")
    assert variant_options("int8_stat@2.5+s1")[1] == 1.0 and variant_options("int8_stat+fused")[1] is None
    assert int8_rule("int8_stat@2+s0.3+fused") == ("stat", 2.0)
    for bad in ("int8_stat+s1.5", "int8_stat+sx", "int8_stat+s0.5+s0.6", "int8_stat+fused+fused",
                "int8_stat+fast", "fp16+fused", "bnb_int8+s0.5", "int8_stat+", "int8_stat+mse+mse", "fp16+mse"):
        with pytest.raises(ValueError):
            int8_rule(bad)


def test_rule_variants_set_the_outlier_rule_and_latency_can_be_left_out(tmp_path):
    from profkit.kernels.int8.evaluate import int8_rule

    assert int8_rule("int8_stat") == ("stat", 3.0) and int8_rule("int8_fixed@4.5") == ("fixed", 4.5)
    assert int8_rule("fp16") is None and int8_rule("bnb_int8") is None
    for bad in ("int8_stat@-1", "int8_stat@x", "int8_median", "fp8"):
        with pytest.raises(ValueError):
            int8_rule(bad)
    text = corpus_file(tmp_path)
    ckpt = tmp_path / "ckpt"
    run_training(text, ckpt, TINY_TRAIN, model_overrides=TINY, device="cpu")
    out = tmp_path / "sweep.json"
    assert main(["evaluate", "--text", str(text), "--ckpt", str(ckpt), "--out", str(out), "--eval-batch", "4",
                 "--variants", "fp16,int8_stat@0.5,int8_stat@3,int8_fixed@1e9", "--latency-batches", ""]) == 0
    payload = json.loads(out.read_text())
    rows = {r["variant"]: r for r in payload["rows"]}
    outliers = {v: sum(layer["n_outliers"] for layer in payload["meta"]["variants"][v]["layers"])
                for v in ("int8_stat@0.5", "int8_stat@3", "int8_fixed@1e9")}
    assert outliers["int8_stat@0.5"] > outliers["int8_stat@3"] and outliers["int8_fixed@1e9"] == 0
    assert rows["int8_stat@0.5"]["static_bytes"] > rows["int8_stat@3"]["static_bytes"]  # fp16 columns cost more
    assert not any(k.startswith("latency") for k in rows["fp16"])


def test_cli_rejects_missing_corpus(tmp_path, capsys):
    code = main(["evaluate", "--text", str(tmp_path / "nope.data"), "--ckpt", str(tmp_path)])
    assert code == 2
    assert "model.pt" in capsys.readouterr().out


@pytest.mark.parametrize("size", sorted(MODEL_SIZES))
def test_parameter_count_matches_the_built_model(size):
    """parameter_count against the parameters of the model itself (built on the meta device: no memory), for every
    named size with the KJV vocabulary (12928 words); ``large`` is the >= 100M-parameter model of issue 47."""
    cfg = ModelConfig(vocab_size=12928, **MODEL_SIZES[size])
    with torch.device("meta"):
        model = DecoderLM(cfg)
    assert parameter_count(cfg) == sum(p.numel() for p in model.parameters())
    assert (parameter_count(cfg) >= 100_000_000) == (size == "large")


def test_train_command_takes_a_size(tmp_path, monkeypatch):
    """--size hands MODEL_SIZES[size] to run_training as the model's overrides."""
    import profkit.kernels.int8.train as train

    seen = {}

    def fake_run_training(text, out, cfg, model_overrides=None, **kwargs):
        seen["overrides"] = model_overrides
        return {"train_seconds": 1.0, "tokens_per_second": 1.0, "selected_step": 1, "selected_calibration_loss": 1.0}

    monkeypatch.setattr(train, "run_training", fake_run_training)
    assert main(["train", "--text", str(tmp_path / "t"), "--out", str(tmp_path / "o"), "--size", "large"]) == 0
    assert seen["overrides"] == MODEL_SIZES["large"]
