"""QuantizedLinear / QuantizedEmbedding against float64, and whole-model conversion.

The end-to-end bound is the int8 rounding bound, not a fitted tolerance: with activation step
sx (per token) and weight step sw (per output row), every kept product x*w is replaced by
(x + dx)(w + dw) with |dx| <= sx/2, |dw| <= sw/2, so per output

    |y_int8 - y| <= sx/2 * sum|w| + sw/2 * sum|x| + K * sx * sw / 4     (kept columns)

plus the fp16 rounding of the output (2^-11 relative). Outlier columns are exact in fp16.

The "triton" backend runs compiled on CUDA tensors with a GPU and in triton's CPU interpreter without one
(tests/conftest.py decides once; the ``device`` fixture); the "torch" backend (torch._int_mm) runs on the CPU
in both cases, as it does where Triton cannot run.
"""
import copy

import pytest
import torch
from torch import nn

from profkit.kernels.int8.convert import bitsandbytes_available, module_bytes, quantize_model, quantize_model_bnb
from profkit.kernels.int8.layers import QuantizedEmbedding, QuantizedLinear
from profkit.kernels.int8.model import DecoderLM, ModelConfig


def backend_device(backend: str, device: str) -> str:
    """Where a backend's test runs: the Triton kernels on the test process's device, torch._int_mm on the CPU."""
    return device if backend == "triton" else "cpu"


def int8_error_bound(x: torch.Tensor, layer: QuantizedLinear, weight: torch.Tensor) -> torch.Tensor:
    """The per-output rounding bound above, (M, N) float64."""
    keep = layer.column_lists()[0]
    xk, wk = x.double()[:, keep].abs(), weight.double()[:, keep].abs()
    sx = xk.amax(dim=1) / 127.0
    sw = layer.weight_scale.double()
    return (sx[:, None] / 2 * wk.sum(1)[None, :] + sw[None, :] / 2 * xk.sum(1)[:, None]
            + keep.numel() * sx[:, None] * sw[None, :] / 4)


@pytest.mark.parametrize("backend", ["triton", "torch"])
@pytest.mark.parametrize("m,k,n,outliers", [(3, 67, 45, [0, 33]), (24, 128, 64, []),
                                            (2, 50, 16, [49])])
def test_quantized_linear_within_int8_rounding_bound(device, backend, m, k, n, outliers):
    torch.manual_seed(0)
    where = backend_device(backend, device)
    linear = nn.Linear(k, n).half().requires_grad_(False).to(where)
    x = torch.randn(2, m, k)
    x[..., outliers] *= 30
    x = x.half().to(where)
    layer = QuantizedLinear.from_linear(linear, torch.tensor(outliers, dtype=torch.int64, device=where),
                                        backend=backend)
    y = layer(x)
    assert y.shape == (2, m, n) and y.dtype == torch.float16
    rows = x.reshape(-1, k)
    exact = rows.double() @ linear.weight.double().t() + linear.bias.double()
    bound = int8_error_bound(rows, layer, linear.weight) + 2**-11 * exact.abs() + 1e-6
    err = (y.reshape(-1, n).double() - exact).abs()
    assert (err <= bound).all(), float((err - bound).max())
    # and the bound is not vacuous: the error is a small fraction of the output scale
    assert float(err.max()) < 0.05 * float(exact.abs().max())


@pytest.mark.parametrize("backend", ["triton", "torch"])
def test_loading_another_layers_state_moves_its_outlier_columns_too(device, backend):
    """load_state_dict copies into the buffers in place: the outlier columns the layer derived from its old
    column_map (cached for the kernels) must follow the new map, not the first one."""
    torch.manual_seed(0)
    where = backend_device(backend, device)
    linear = nn.Linear(40, 12).half().requires_grad_(False).to(where)
    x = torch.randn(5, 40)
    x[:, [2, 17, 31]] *= 30
    x = x.half().to(where)
    first = QuantizedLinear.from_linear(linear, torch.tensor([2, 17], device=where), backend=backend)
    second = QuantizedLinear.from_linear(linear, torch.tensor([17, 31], device=where), backend=backend)
    want = second(x)
    assert not torch.equal(first(x), want)  # the two outlier sets give different outputs
    first.load_state_dict(second.state_dict())
    assert first.column_lists()[1].tolist() == [17, 31]
    assert torch.equal(first(x), want)


@pytest.mark.parametrize("backend", ["triton", "torch"])
def test_a_layer_built_under_inference_mode_runs(device, backend):
    """Inference tensors keep no version counter: the column-list cache must not ask them for one."""
    torch.manual_seed(0)
    where = backend_device(backend, device)
    linear = nn.Linear(24, 8).half().requires_grad_(False).to(where)
    with torch.inference_mode():
        layer = QuantizedLinear.from_linear(linear, torch.tensor([3, 11], device=where), backend=backend)
        x = torch.randn(4, 24).half().to(where)
        y = layer(x)
    assert layer.column_map.is_inference() and y.shape == (4, 8)
    assert torch.equal(layer(x), y)


def test_quantized_linear_validates_and_refuses_recast_buffers():
    linear = nn.Linear(16, 8).half()
    layer = QuantizedLinear.from_linear(linear, torch.tensor([], dtype=torch.int64))
    with pytest.raises(ValueError, match=r"\(\.\.\., 16\)"):
        layer(torch.randn(4, 15).half())
    with pytest.raises(ValueError, match="backend"):
        QuantizedLinear.from_linear(linear, torch.tensor([1]), backend="cuda")
    layer.float()
    with pytest.raises(ValueError, match="changed dtype"):
        layer(torch.randn(4, 16).half())


@pytest.mark.parametrize("outliers", [[3, 20], []])
def test_quantized_embedding_rebuilds_tied_rows(outliers):
    torch.manual_seed(0)
    table = torch.randn(40, 24).half()
    linear = nn.Linear(24, 40, bias=False).half()
    linear.weight = nn.Parameter(table)
    layer = QuantizedLinear.from_linear(linear, torch.tensor(outliers, dtype=torch.int64))
    embedding = QuantizedEmbedding(layer)
    ids = torch.tensor([[0, 5, 39], [7, 7, 1]])
    rows = embedding(ids)
    assert rows.shape == (2, 3, 24) and rows.dtype == torch.float16
    exact = table.double()[ids]
    step = layer.weight_scale.double()[ids][..., None]
    assert ((rows.double() - exact).abs() <= step / 2 + 2**-11 * exact.abs()).all()
    assert torch.equal(rows[..., outliers], table[ids][..., outliers])  # outlier columns exact


def tiny_model() -> DecoderLM:
    torch.manual_seed(0)
    cfg = ModelConfig(vocab_size=128, d_model=64, n_heads=4, n_layers=2, d_ff=128,
                      max_seq_len=16, dropout=0.0)
    return DecoderLM(cfg).half().eval()


@pytest.mark.parametrize("rule, smooth_alpha", [("fixed", None), ("stat", None), ("stat", 0.5)])
def test_quantize_model_replaces_every_linear(device, rule, smooth_alpha):
    """Every linear of a small model quantized after calibration (its layers then run the Triton kernels on the
    test process's device), within 5% of the fp16 model's logits; smoothed, every layer holds its input scale."""
    model = tiny_model().to(device)
    ids = torch.randint(0, 128, (2, 16), generator=torch.Generator().manual_seed(1)).to(device)
    with torch.no_grad():
        reference = model(ids).double()
    fp16_bytes = module_bytes(model)
    calib = [torch.randint(0, 128, (2, 16), generator=torch.Generator().manual_seed(s)).to(device)
             for s in (2, 3)]
    report = quantize_model(model, calib, rule=rule, threshold=3.0, smooth_alpha=smooth_alpha)
    assert not any(isinstance(m, (nn.Linear, nn.Embedding)) for m in model.modules())
    assert isinstance(model.lm_head, QuantizedLinear)
    assert isinstance(model.embed, QuantizedEmbedding) and model.embed.source is model.lm_head
    assert list(report.columns) == ["layer", "kind", "in_features", "out_features", "n_outliers",
                                    "outlier_fraction", "calib_absmax_max", "smooth_alpha", "weight_clip",
                                    "fp_bytes", "quantized_bytes"]
    layers = [m for m in model.modules() if isinstance(m, QuantizedLinear)]
    assert all((m.input_scale is not None) == (smooth_alpha is not None) for m in layers)
    assert (report["kind"] == "linear").sum() == 2 * 4 + 1
    if rule == "fixed":  # a few LayerNorm output channels of this model exceed 3.0
        assert report["n_outliers"].sum() > 0
    with torch.no_grad():
        got = model(ids).double()
    rel = float((got - reference).norm() / reference.norm())
    assert rel < 0.05, rel
    # int8 matrices; fp16 LayerNorms, biases and fp32 scales weigh a lot at d_model = 64
    assert module_bytes(model) < 0.65 * fp16_bytes


def test_quantize_model_needs_calibration_that_reaches_every_layer():
    model = tiny_model()
    with pytest.raises(ValueError, match="at least one batch"):
        quantize_model(model, [])
    with pytest.raises(ValueError, match="no nn.Linear"):
        quantize_model(nn.Sequential(nn.ReLU()), [torch.zeros(1)])


@pytest.mark.skipif(bitsandbytes_available(),
                    reason="bitsandbytes is importable here; this checks the missing-library path")
def test_bitsandbytes_missing_is_reported_not_hidden():
    with pytest.raises(ImportError, match="bitsandbytes is not usable"):
        quantize_model_bnb(tiny_model())


@pytest.mark.gpu
@pytest.mark.skipif(not bitsandbytes_available(),
                    reason="bitsandbytes is only installed on the GPU machine (carried as a wheel)")
def test_bitsandbytes_conversion_reports_every_layer():
    model = tiny_model().cuda()
    report = quantize_model_bnb(model, threshold=6.0)
    assert len(report) == 2 * 4 + 1
    ok = report["status"] == "int8"
    assert (report.loc[~ok, "error_type"] != "").all()
    assert (report.loc[ok, "probe_rel_error"] < 0.05).all()


def test_storage_is_int8_codes_fp16_scales_and_an_int16_map():
    """The buffers the footprint counts: exact byte count, and codes consistent with the stored
    (fp16-rounded) scale: every dequantized weight is within half a step of the original."""
    torch.manual_seed(11)
    k, n = 100, 40
    linear = nn.Linear(k, n).half()
    outliers = torch.tensor([3, 64, 99])
    layer = QuantizedLinear.from_linear(linear, outliers, backend="torch")
    assert layer.weight_scale.dtype == torch.float16 and layer.column_map.dtype == torch.int16
    keep = layer.column_lists()[0]
    weight = linear.weight.detach().double()
    sw = layer.weight_scale.double()
    dequant = layer.weight_int8[:, :keep.numel()].double() * sw[:, None]
    assert ((dequant - weight[:, keep]).abs() <= sw[:, None] / 2 + 1e-12).all()
    kq_pad = layer.weight_int8.shape[1]
    expected = n * kq_pad + 2 * n + 2 * n * len(outliers) + 2 * k + 2 * n  # codes, scales, outliers, map, bias
    assert module_bytes(layer) == expected


def test_mse_clip_rebuilds_each_row_no_worse_than_its_absmax():
    """clip="mse": every row's squared rounding error (float64, from the stored codes and scale) is at most the
    absmax scale's, and strictly less for the rows of a heavy-tailed (Student t, 3 dof) matrix where clipping pays
    (about a fifth at 301 columns); clipped weights sit at +-127 steps, the others within half a step; the buffers
    keep their dtypes and shapes; the chosen range lies in [0.6, 1] of the row's absmax."""
    from profkit.kernels.int8.layers import CLIP_RATIOS, quantize_weight, row_scales

    torch.manual_seed(5)
    n, k = 48, 301
    weight = (torch.distributions.StudentT(3.0).sample((n, k)) * 0.02).half()
    outliers = torch.tensor([2, 150])
    parts = {clip: quantize_weight(weight, outliers, torch.float16, clip=clip) for clip in ("absmax", "mse")}
    keep = parts["mse"]["keep_idx"]
    kept = weight.double()[:, keep]

    def rebuilt(p):
        return p["weight_int8"][:, :keep.numel()].double() * p["weight_scale"].double()[:, None]

    err = {clip: (rebuilt(p) - kept).square().sum(dim=1) for clip, p in parts.items()}
    assert (err["mse"] <= err["absmax"] * (1 + 1e-9)).all()
    improved = err["mse"] < err["absmax"] * (1 - 1e-6)
    assert improved.sum() >= 5, improved
    mse = parts["mse"]
    scale = mse["weight_scale"].double()[:, None]
    clipped = kept.abs() > 127.5 * scale
    assert clipped[improved].any(dim=1).all()  # a row gains only by clipping something
    assert (mse["weight_int8"][:, :keep.numel()].abs()[clipped] == 127).all()
    assert ((rebuilt(mse) - kept).abs()[~clipped] <= scale.expand_as(kept)[~clipped] / 2 + 1e-9).all()
    assert all(mse[b].dtype == parts["absmax"][b].dtype and mse[b].shape == parts["absmax"][b].shape
               for b in ("weight_int8", "weight_scale", "weight_outlier"))
    ratio = mse["weight_scale"].double() * 127 / kept.abs().amax(dim=1)
    assert (ratio > CLIP_RATIOS[0] - 0.01).all() and (ratio < 1.0 + 2**-10).all()
    with pytest.raises(ValueError, match="clip"):
        row_scales(kept.float(), "percentile")


def test_scales_outside_fp16_normal_range_stay_fp32():
    tiny = nn.Linear(16, 8)
    with torch.no_grad():
        tiny.weight.mul_(1e-6)  # absmax / 127 below fp16's smallest normal number
    layer = QuantizedLinear.from_linear(tiny, torch.tensor([], dtype=torch.long), backend="torch")
    assert layer.weight_scale.dtype == torch.float32 and layer.column_map is None
    x = torch.randn(5, 16)
    bias16 = tiny.bias.detach().half().double()  # the layer keeps its bias in 16 bits
    reference = x.double() @ tiny.weight.detach().double().t() + bias16
    assert torch.allclose(layer(x).double(), reference, rtol=0, atol=1e-6)


@pytest.mark.parametrize("backend", ["triton", "torch"])
def test_fused_decoder_computes_the_unfused_int8_model(device, backend):
    """fuse_decoder moves every LayerNorm into the quantizer of the layer it feeds, GELU into fc1's epilogue and the
    residual adds into the out and fc2 epilogues: the same logits as the unfused INT8 model to 16-bit rounding
    (LayerNorms and biases made random so none is the identity), the same bytes, and no LayerNorm, GELU or
    residual add left to run outside the two kernels of each layer."""
    from torch.utils._python_dispatch import TorchDispatchMode

    from profkit.kernels.int8.fusion import FusedBlock, fuse_decoder

    model = tiny_model()
    gen = torch.Generator().manual_seed(4)
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, (nn.LayerNorm, nn.Linear)) and module.bias is not None:
                module.bias.copy_(0.1 * torch.randn(module.bias.shape, generator=gen))
            if isinstance(module, nn.LayerNorm):
                module.weight.copy_(1 + 0.3 * torch.randn(module.weight.shape, generator=gen))
    model = model.to(backend_device(backend, device))
    dev = model.lm_head.weight.device
    calib = [torch.randint(0, 128, (2, 16), generator=torch.Generator().manual_seed(s)).to(dev) for s in (2, 3)]
    quantize_model(model, calib, rule="stat", smooth_alpha=0.5, backend=backend)
    ids = torch.randint(0, 128, (3, 16), generator=torch.Generator().manual_seed(5)).to(dev)
    fused = fuse_decoder(copy.deepcopy(model))
    assert all(isinstance(b, FusedBlock) for b in fused.blocks) and isinstance(fused.ln_f, nn.Identity)
    assert not any(isinstance(m, nn.LayerNorm) for m in fused.modules())
    assert module_bytes(fused) == module_bytes(model)

    class Ops(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.names = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.names.append(func.__name__)
            return func(*args, **(kwargs or {}))

    with torch.no_grad():
        unfused = model(ids).double()
        ops = Ops()
        with ops:
            got = fused(ids).double()
    rel = float((got - unfused).norm() / unfused.norm())
    assert rel < 5e-3, rel  # a code may move by one step where 16-bit rounding happens elsewhere
    if backend == "triton":
        assert not [n for n in ops.names if "layer_norm" in n or "gelu" in n], ops.names
    with pytest.raises(RuntimeError, match="inference"):
        fused.train()(ids)
    with pytest.raises(ValueError, match="quantized"):
        fuse_decoder(tiny_model())


@pytest.mark.gpu
@pytest.mark.parametrize("pdl", ["0", "1"])
def test_cuda_graph_replay_of_the_fused_int8_decoder_is_its_eager_forward(monkeypatch, request, pdl):
    """The fused INT8 decoder captured into a CUDA graph and replayed on new ids gives the eager forward's logits bit
    for bit, with its quantizers and GEMMs launched normally and with programmatic dependent launch (PROFKIT_PDL=1:
    each kernel must wait for the one before it). 64 x 16 tokens, so the layers take the persistent TMA GEMM
    (M >= TMA_MIN_M)."""
    from profkit.bench.timing import capture_graph
    from profkit.kernels import common
    from profkit.kernels.int8 import gemm
    from profkit.kernels.int8.fusion import fuse_decoder

    monkeypatch.setenv(common.PDL_SWITCH, pdl)
    common.dependent_launch.cache_clear()
    request.addfinalizer(common.dependent_launch.cache_clear)  # later tests read the switch as their process set it
    hopper = torch.cuda.get_device_capability()[0] >= 9
    assert common.dependent_launch(torch.cuda.current_device()) == (pdl == "1" and hopper)

    model = tiny_model().cuda()
    calib = [torch.randint(0, 128, (8, 16), generator=torch.Generator().manual_seed(s)).cuda() for s in (2, 3)]
    quantize_model(model, calib, rule="stat", smooth_alpha=0.5, backend="triton")
    model = fuse_decoder(model)
    batches = [torch.randint(0, 128, (64, 16), generator=torch.Generator().manual_seed(s)).cuda() for s in (6, 7, 8)]
    assert batches[0].numel() >= gemm.TMA_MIN_M
    with torch.no_grad():
        eager = [model(ids).clone() for ids in batches]
        ids = batches[0].clone()
        out = {}
        replay = capture_graph(lambda: out.__setitem__("logits", model(ids)))
        for batch, want in zip(batches[::-1], eager[::-1]):
            ids.copy_(batch)
            replay()
            torch.cuda.synchronize()
            assert torch.equal(out["logits"], want)


def test_a_layer_built_from_strided_buffers_stores_them_contiguous(device):
    """QuantizedLinear keeps weight_scale, column_map and bias as given unless it copies them; the kernels read them
    at stride 1, so buffers handed over as stride-2 views are stored contiguous and the layer computes what the
    one built from contiguous buffers does, bit for bit."""
    torch.manual_seed(3)
    linear = nn.Linear(48, 20).half().requires_grad_(False)
    built = QuantizedLinear.from_linear(linear, torch.tensor([5, 40], dtype=torch.int64)).to(device)

    def spaced(v):
        return torch.stack([v, v], dim=-1).reshape(-1)[::2]

    layer = QuantizedLinear(48, 20, built.weight_int8, spaced(built.weight_scale), built.weight_outlier,
                            spaced(built.column_map), spaced(built.bias))
    assert all(t.is_contiguous() for t in (layer.weight_scale, layer.column_map, layer.bias))
    x = (torch.randn(3, 48) * 2).half().to(device)
    assert torch.equal(layer(x), built(x))


def test_a_replay_key_holds_out_s_and_the_residual_s_device():
    """A recorded launch writes where its first call's out and residual lay: the same call with them on another
    device must miss the recording and reach the first call's checks (which reject an out off x's GPU)."""
    layer = QuantizedLinear.from_linear(nn.Linear(24, 8), torch.tensor([5], dtype=torch.int64))
    x = torch.randn(3, 24)
    here, elsewhere = torch.empty(3, 8), torch.empty(3, 8, device="meta")
    assert layer._replay_key(x, here, None) == layer._replay_key(x, torch.empty(3, 8), None)
    assert layer._replay_key(x, here, None) != layer._replay_key(x, elsewhere, None)
    assert layer._replay_key(x, None, here) != layer._replay_key(x, None, elsewhere)
