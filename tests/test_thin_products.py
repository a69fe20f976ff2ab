"""Products of a thin depth cut into pieces for OpenBLAS's small-matrix kernels (irrun/thin_products.py):
the pieces' product is NumPy's, each piece within the kernels' bound; the products left whole;
whether a BLAS has the kernels; and convolutions taking the pieces against OpenVINO."""
import numpy as np
import openvino as ov
import openvino.opset13 as ops
import pytest

import irrun
from irrun import thin_products, threads
from ovutil import WINOGRAD_ERROR, assert_close, run_openvino, save


def rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


@pytest.fixture
def small_kernels(monkeypatch):
    """The BLAS taken to have the small kernels (cutting works on any BLAS; there it is only slower)."""
    monkeypatch.setattr(thin_products, "_small_kernels", True)


def record_products(monkeypatch):
    """A list of (rows, depth, columns) of every np.matmul call from here on."""
    shapes = []
    matmul = np.matmul

    def recorded(a, b, *args, **kwargs):
        shapes.append((a.shape[-2], a.shape[-1], b.shape[-1]))
        return matmul(a, b, *args, **kwargs)
    monkeypatch.setattr(np, "matmul", recorded)
    return shapes


@pytest.mark.parametrize("a_shape, b_shape, long_axis", [
    ((6, 6), (6, 38_400), 1),             # a Winograd transform's, columns cut
    ((4, 6), (6, 43_008), 1),             # Winograd's output transform's
    ((16, 27), (27, 9_001), 1),           # a stem's im2col (an odd column count)
    ((1, 16, 32), (1, 1, 32, 12_544), 1),  # a 1x1 layer's (leading axes of one element)
    ((12_544, 16), (16, 96), 0),          # a tall one, rows cut
    ("T", (16, 96), 0),                   # ...A transposed (a 1x1 layer writing channels-last)
    ((48, 32), (32, 700), 1),             # the widest and deepest cut
])
@pytest.mark.parametrize("into", ["new", "given", "a slice"])
def test_pieces_make_numpys_product(a_shape, b_shape, long_axis, into, small_kernels, monkeypatch):
    a = rand(16, 12_544, seed=1).T if a_shape == "T" else rand(*a_shape, seed=1)
    b = rand(*b_shape, seed=2)
    expected = np.matmul(a, b)
    out = None
    if into == "given":
        out = np.empty_like(expected)
    elif into == "a slice":     # a view with rows longer than its own (im2col writes a block of the output so)
        whole = np.full(expected.shape[:-1] + (expected.shape[-1] + 5,), np.nan, np.float32)
        out = whole[..., 2:2 + expected.shape[-1]]
    shapes = record_products(monkeypatch)
    got = thin_products.matmul(a, b, out)
    assert len(shapes) >= 2, "the product was not cut"
    assert all(m * k * n <= thin_products.SMALL_KERNEL_MACS for m, k, n in shapes)
    assert sum(s[2] if long_axis == 1 else s[0] for s in shapes) == expected.shape[-1 if long_axis == 1 else -2]
    assert got.shape == expected.shape and got.dtype == np.float32
    if out is not None:
        assert got is out
    if into == "a slice":
        assert np.isnan(whole[..., :2]).all() and np.isnan(whole[..., 2 + expected.shape[-1]:]).all()
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("a, b", [
    (rand(6, 33), rand(33, 40_000)),                       # deeper than THIN_DEPTH
    (rand(49, 16), rand(16, 40_000)),                      # a wide one of more than NARROW_ROWS rows
    (rand(40_000, 16), rand(16, 145)),                     # a tall one of more than NARROW_COLUMNS columns
    (rand(6, 6).astype(np.float64), rand(6, 40_000).astype(np.float64)),
    (rand(6, 6), rand(40_000, 6).T),                       # B transposed
    (rand(6, 6), rand(2, 6, 40_000)),                      # a batch of products
    (rand(6, 6), rand(6, 27_000)),                         # within the bound already
])
def test_products_left_whole(a, b, small_kernels, monkeypatch):
    taken = []
    matmul = threads.matmul
    monkeypatch.setattr(threads, "matmul", lambda *args: taken.append(1) or matmul(*args))
    np.testing.assert_allclose(thin_products.matmul(a, b), np.matmul(a, b), rtol=1e-5, atol=1e-5)
    assert taken == [1]


def test_nothing_cut_without_the_small_kernels(monkeypatch):
    monkeypatch.setattr(thin_products, "_small_kernels", False)
    assert thin_products._cut(rand(6, 6), rand(6, 40_000), None) is None
    monkeypatch.setattr(thin_products, "_small_kernels", True)
    monkeypatch.setattr(thin_products, "SMALL_KERNEL_MACS", 0)
    assert thin_products._cut(rand(6, 6), rand(6, 40_000), None) is None


@pytest.mark.parametrize("kernels, expected", [
    ((("openblas", "SkylakeX"),), True),
    ((("openblas", "SapphireRapids"), ("openblas", "Cooperlake")), True),
    ((("openblas", "Haswell"),), False),                   # AVX2: no small kernels
    ((("openblas", "Zen"),), False),
    ((("openblas", "SkylakeX"), ("mkl", "")), False),      # another BLAS loaded beside it
    ((), False),                                           # none known (threadpoolctl found none)
])
def test_small_kernels_from_the_blas_loaded(kernels, expected, monkeypatch):
    monkeypatch.setattr(thin_products, "_small_kernels", None)
    monkeypatch.setattr(threads, "blas_kernels", lambda: kernels)
    assert thin_products.small_kernels() is expected


def test_the_blas_here_is_named():
    """threadpoolctl names NumPy's BLAS and its kernels (scipy-openblas: OpenBLAS)."""
    kernels = threads.blas_kernels()
    assert kernels and all(isinstance(library, str) and isinstance(core, str) for library, core in kernels)


def test_pieces_in_parts_while_the_pool_owns_the_cores(small_kernels, two_threads, monkeypatch):
    """A thin product large enough for parts runs its pieces on every core while the pool owns them."""
    ranges = []
    run_parts = threads.run_parts
    monkeypatch.setattr(threads, "run_parts", lambda fn, r: ranges.append(list(r)) or run_parts(fn, r))
    a, b = rand(16, 27), rand(27, 40_000)
    with threads.network_parts():
        assert threads.pool_owns_cores()
        got = thin_products.matmul(a, b)
    assert ranges and len(ranges[0]) == 2
    np.testing.assert_allclose(got, np.matmul(a, b), rtol=1e-5, atol=1e-5)


def test_convolutions_in_pieces_match_openvino(small_kernels, monkeypatch, tmp_path):
    """A stem of 3 channels (im2col's columns, depth 27), a 1x1 layer of 16 input channels and a
    Winograd F(4,3) layer (its transforms) take the pieces, and give OpenVINO's output."""
    monkeypatch.setenv("IRRUN_WINOGRAD", "4")
    cut = []
    find = thin_products._cut
    monkeypatch.setattr(thin_products, "_cut", lambda *args: (lambda found: cut.append(found is not None) or found)(find(*args)))
    x = ops.parameter([1, 3, 160, 160], np.float32, name="x")
    stem = ops.relu(ops.convolution(x, ops.constant(rand(16, 3, 3, 3, seed=3) * 0.3), [2, 2], [1, 1], [1, 1], [1, 1]))
    wide = ops.convolution(stem, ops.constant(rand(32, 16, 1, 1, seed=4) * 0.25), [1, 1], [0, 0], [0, 0], [1, 1])
    y = ops.convolution(ops.relu(wide), ops.constant(rand(32, 32, 3, 3, seed=5) / 17), [1, 1], [1, 1], [1, 1], [1, 1])
    xml = save(ov.Model([ops.result(y)], [x]), tmp_path)
    feeds = [rand(1, 3, 160, 160, seed=6)]
    expected = run_openvino(xml, feeds)[0]
    (got,) = irrun.load(xml).infer(feeds).values()
    assert sum(cut) >= 3, "fewer than three products were cut"
    assert_close(got, expected, rtol=0, atol=WINOGRAD_ERROR[4] * np.abs(expected).max())
