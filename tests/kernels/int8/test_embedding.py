"""The tied embedding's one-kernel lookup (``embedding.embedding_rows``) against its PyTorch form and the table it
stores: bit-equal to the torch path, within half an int8 step of the fp16 table in the kept columns, exact in the
outlier columns; plain, with outliers, smoothed, on odd sizes and id shapes."""
import pytest
import torch
from torch import nn

from profkit.kernels.int8 import embedding
from profkit.kernels.int8.layers import QuantizedEmbedding, QuantizedLinear
from profkit.kernels.launch import LaunchCache


def tied_layer(vocab: int, width: int, outliers: list[int], smooth: bool, seed: int, device: str) -> tuple:
    gen = torch.Generator().manual_seed(seed)
    table = (torch.randn(vocab, width, generator=gen) * 0.3).half()
    table[:, outliers] *= 20.0
    linear = nn.Linear(width, vocab, bias=False).half()
    linear.weight = nn.Parameter(table)
    factors = (torch.rand(width, generator=gen) * 3 + 0.25) if smooth else None
    if factors is not None:
        factors[outliers] = 1.0
    layer = QuantizedLinear.from_linear(linear, torch.tensor(outliers, dtype=torch.int64), smooth=factors)
    return table, layer.to(device)


def table_args(layer: QuantizedLinear) -> tuple:
    return (layer.weight_int8, layer.weight_scale, layer.column_map, layer.weight_outlier, layer.input_scale,
            layer.in_features)


@pytest.mark.parametrize("vocab,width,outliers,smooth", [(97, 72, [3, 40, 71], False), (131, 200, [], False),
                                                         (61, 1030, [0, 513, 1029], True), (50, 33, [], True)],
                         ids=lambda v: str(v))
@pytest.mark.parametrize("fast_launch", [True, False])
def test_kernel_rows_equal_the_torch_rows_and_the_table(device, monkeypatch, vocab, width, outliers, smooth,
                                                        fast_launch):
    monkeypatch.setattr(LaunchCache, "enabled", fast_launch)
    seed = torch.seed() % 2**31
    table, layer = tied_layer(vocab, width, outliers, smooth, seed, device)
    gen = torch.Generator().manual_seed(seed + 1)
    for shape in [(3, 37), (5,), (2, 1, 7)]:
        ids = torch.randint(0, vocab, shape, generator=gen).to(device)
        rows = embedding.embedding_rows(ids, *table_args(layer))
        assert rows.shape == (*shape, width) and rows.dtype == torch.float16
        reference = embedding.embedding_rows_torch(ids.cpu(), *(t.cpu() if isinstance(t, torch.Tensor) else t
                                                                 for t in table_args(layer)))
        assert torch.equal(rows.cpu(), reference)
        exact = table.double()[ids.cpu()]
        kept = [k for k in range(width) if k not in outliers]
        step = layer.weight_scale.double().cpu()[ids.cpu()][..., None]
        if smooth:  # the int8 columns hold W * s, so a step of them is a step times c = 1 / s in the table
            step = step * layer.input_scale.double().cpu()[kept]
        error = (rows.cpu().double()[..., kept] - exact[..., kept]).abs()
        assert (error <= step / 2 + 2**-11 * exact[..., kept].abs() + 1e-6).all(), error.max()
        assert torch.equal(rows.cpu()[..., outliers], table[ids.cpu()][..., outliers])


def test_an_id_outside_the_table_gets_a_nan_row(device, monkeypatch):
    monkeypatch.setattr(LaunchCache, "enabled", False)
    table, layer = tied_layer(29, 40, [7], False, 3, device)
    ids = torch.tensor([[0, 29, 5, -1]]).to(device)
    rows = embedding.embedding_rows(ids, *table_args(layer)).cpu()
    assert rows[0, [1, 3]].isnan().all() and not rows[0, [0, 2]].isnan().any()
    assert torch.equal(rows[0, [0, 2]], embedding.embedding_rows_torch(ids.cpu()[0, [0, 2]],
                                                                       *(t.cpu() if isinstance(t, torch.Tensor)
                                                                         else t for t in table_args(layer))))


@pytest.mark.parametrize("backend", ["triton", "torch"])
def test_quantized_embedding_takes_its_layers_backend(device, monkeypatch, backend):
    """QuantizedEmbedding runs the kernel with a Triton layer and the PyTorch form with a torch one: same rows."""
    calls = []
    monkeypatch.setattr(embedding, "embedding_rows", lambda *a: calls.append("triton") or
                        embedding.embedding_rows_torch(*(t.cpu() if isinstance(t, torch.Tensor) else t for t in a)))
    _, layer = tied_layer(40, 24, [3, 20], True, 0, device if backend == "triton" else "cpu")
    layer.backend = backend
    ids = torch.tensor([[0, 5, 39], [7, 7, 1]]).to(layer.weight_int8.device)
    rows = QuantizedEmbedding(layer)(ids)
    assert calls == (["triton"] if backend == "triton" else [])
    assert torch.equal(rows.cpu(), embedding.embedding_rows_torch(ids.cpu(), *(t.cpu() if isinstance(t, torch.Tensor)
                                                                              else t for t in table_args(layer))))


def test_embedding_rows_refuses_a_table_of_the_wrong_shape(device):
    _, layer = tied_layer(20, 16, [2], False, 0, device)
    args = list(table_args(layer))
    ids = torch.tensor([1, 2]).to(device)
    with pytest.raises(ValueError, match="weight_scale"):
        embedding.embedding_rows(ids, args[0], args[1][:5], *args[2:])
    with pytest.raises(ValueError, match="column_map"):
        embedding.embedding_rows(ids, args[0], args[1], args[2][:5], *args[3:])
    with pytest.raises(ValueError, match="weight_outlier"):
        embedding.embedding_rows(ids, *args[:3], args[3][:, :4], *args[4:])


@pytest.mark.parametrize("pick", ["last column", "every other", "transposed"])
def test_ids_taken_as_a_strided_view_read_their_own_tokens(device, pick):
    """A decode step's ``ids[:, -1:]`` of a (B, T) batch flattens to a view whose one stride is T, not 1; the kernel
    indexes the ids it is handed as contiguous, so the wrapper must hand it contiguous ids (it read the first B ids
    of the batch instead of each row's last)."""
    table, layer = tied_layer(101, 48, [5, 30], False, 11, device)
    gen = torch.Generator().manual_seed(torch.seed() % 2**31)
    batch = torch.randint(0, 101, (6, 9), generator=gen).to(device)
    ids = {"last column": batch[:, -1:], "every other": batch[:, ::2], "transposed": batch.t()}[pick]
    assert not ids.is_contiguous()
    rows = embedding.embedding_rows(ids, *table_args(layer))
    reference = embedding.embedding_rows_torch(ids.cpu().contiguous(), *(t.cpu() if isinstance(t, torch.Tensor) else t
                                                                         for t in table_args(layer)))
    assert torch.equal(rows.cpu(), reference)


def test_table_vectors_with_gaps_are_refused(device):
    """weight_scale and column_map are read at stride 1: a stride-2 view of either is refused, not misread."""
    _, layer = tied_layer(37, 24, [4, 9], False, 5, device)
    ids = torch.randint(0, 37, (3, 4)).to(device)
    args = list(table_args(layer))
    for position, name in ((1, "weight_scale"), (2, "column_map")):
        spaced = list(args)
        spaced[position] = torch.stack([args[position], args[position]], dim=-1).reshape(-1)[::2]
        with pytest.raises(ValueError, match=f"{name} must be contiguous"):
            embedding.embedding_rows(ids, *spaced)
