"""Weights kept compressed (irrun/compressed_products.py): MatMuls whose weights stay compressed
(summed group by group, or a block of rows decompressed at a time) give OpenVINO's outputs, for every
compression NNCF writes, f16 weights, both weight layouts, one row, a few, many and a dynamic count,
and optimum-intel's exported LLMs decode as OpenVINO does; the plan never holds the f32 weight;
"auto" keeps them only where they would not fit, and says so."""
from __future__ import annotations

import pickle
import tracemalloc
import warnings

import numpy as np
import openvino as ov
import openvino.opset13 as ops
import pytest

import irrun
from irrun import analysis, blockwise_folding, compressed_products
from irrun.blockwise_folding import RowChain
from irrun.compressed_products import CompressedProduct, WeightsKeptCompressedWarning
from ovutil import CPU_F32_EXACT, assert_close, compile_cpu, openvino_layer_outputs, save
from test_llm import DECODERS, LOGIT_ATOL, greedy, irrun_step, openvino_decoding
from test_precision import COMPRESSIONS, nncf_weight

RNG = np.random.default_rng(23)
N, K = 320, 288


@pytest.fixture(autouse=True)
def _small_weights_qualify(monkeypatch):
    """A test's weights folded by rows, and multiplied, in many blocks (several blocks per part of
    the pool)."""
    monkeypatch.delenv("IRRUN_OPTIMIZE", raising=False)
    monkeypatch.setattr(blockwise_folding, "SMALLEST_ELEMENTS", 1 << 10)
    monkeypatch.setattr(blockwise_folding, "BLOCK_ELEMENTS", 1 << 12)
    monkeypatch.setattr(compressed_products, "AFFINE_BLOCK_ELEMENTS", 1 << 12)
    monkeypatch.setattr(compressed_products, "WEIGHTS_PER_PART", 1 << 12)


def _weight(compression: str | None, shape) -> ov.Node:
    if compression is None:        # what `compress_to_fp16` writes
        values = (RNG.standard_normal(shape) * 0.1).astype(np.float16)
        return ops.convert(ops.constant(values), ov.Type.f32)
    return nncf_weight(shape=shape, **COMPRESSIONS[compression])


def _weight_in_out(compression: str | None) -> ov.Node:
    """A weight [in, out] as a per-output-channel int8 compression writes it (scales and zero points
    [1, out]), or in f16.  (With NNCF's per-row scales, [in, 1], OpenVINO's CPU plugin computes
    other values, 1.5 off at outputs of about 2.5, where its reference evaluation agrees with irrun.)"""
    if compression is None:
        return _weight(None, (K, N))
    codes = ops.convert(ops.constant(RNG.integers(0, 256, (K, N)).astype(np.uint8)), ov.Type.f16)
    zero_point = ops.convert(ops.constant(RNG.integers(100, 156, (1, N)).astype(np.uint8)), ov.Type.f16)
    scale = ops.constant(((RNG.random((1, N)) + 0.1) * 0.01).astype(np.float16))
    return ops.convert(ops.multiply(ops.subtract(codes, zero_point), scale), ov.Type.f32)


def _products(rows: int, compression: str | None) -> ov.Model:
    """Two products of one datum: by a weight [out, in] (transpose_b, as PyTorch's Linear exports)
    in `compression`, and by one [in, out] (int8 per output channel, or f16)."""
    x = ops.parameter([rows, K], ov.Type.f32, name="x")
    by_rows = ops.matmul(x, _weight(compression, (N, K)), False, True)
    by_columns = ops.matmul(x, _weight_in_out(compression), False, False)
    return ov.Model([ops.result(by_rows), ops.result(by_columns)], [x])


def _kept(model: irrun.Model) -> list:
    plan = model._plan
    return [step for step in plan.steps if isinstance(step.op, CompressedProduct)]


@pytest.mark.parametrize("rows", [1, 5, 40, -1], ids=["one_row", "rows", "many_rows", "dynamic"])
@pytest.mark.parametrize("compression", [*COMPRESSIONS, None], ids=[*COMPRESSIONS, "f16"])
def test_products_of_weights_kept_compressed_match_openvino(compression, rows, tmp_path):
    """Up to AFFINE_MOST_ROWS rows of data, the NNCF weight [out, in] is summed group by group (an
    `Affine` weight); else, and the others always, its blocks are decompressed."""
    xml = save(_products(rows, compression), tmp_path / "m.xml")
    x = (RNG.standard_normal((1 if rows == 1 else 3 if rows < 0 else rows, K)) * 0.1).astype(np.float32)
    expected = [np.asarray(v) for v in compile_cpu(xml, CPU_F32_EXACT)([x]).values()]
    kept = irrun.load(xml, compressed_weights="keep")
    assert len(_kept(kept)) == 2 and all(isinstance(kept._plan.constants[s.inputs[1]], RowChain)
                                         for s in _kept(kept))
    assert all((step.op.affine is not None) == (step.op.transposed and compression is not None)
               for step in _kept(kept))
    got = list(kept.infer({"x": x}).values())
    decompressed = list(irrun.load(xml, compressed_weights="decompress").infer({"x": x}).values())
    for g, d, e in zip(got, decompressed, expected):
        assert g.dtype == e.dtype == np.float32 and g.shape == e.shape
        assert_close(g, e, what=str(compression))
        # (the same weight's values, summed in another order: a GEMV over another layout, blocks)
        assert_close(g, d, rtol=1e-6, atol=1e-6 * np.abs(d).max(), what="against the weights decompressed at load")


def test_the_plan_never_holds_the_decompressed_weight(tmp_path):
    big = 2048          # an int4 weight of 2048 x 2048: 16 MiB of f32, 2 MiB of codes
    x = ops.parameter([1, big], ov.Type.f32, name="x")
    y = ops.matmul(x, nncf_weight(shape=(big, big), **COMPRESSIONS["int4_asym_g16"]), False, True)
    xml = save(ov.Model([ops.result(y)], [x]), tmp_path / "m.xml")
    feeds = {"x": RNG.standard_normal((1, big)).astype(np.float32)}
    f32_bytes = big * big * 4

    def largest_constant(model) -> int:
        return max((v.nbytes for v in model._plan.constants.values() if isinstance(v, np.ndarray)), default=0)
    tracemalloc.start()
    try:
        kept = irrun.load(xml, compressed_weights="keep")
        kept.infer(feeds)
        peak = tracemalloc.get_traced_memory()[1]       # (every NumPy array made, at load and in the run)
    finally:
        tracemalloc.stop()
    # (what stays: the file's 2 MiB of codes, mapped, each group of 16's scale and zero point in f32,
    # 2 MiB, and the same transposed for the product group by group; then a run's small blocks)
    assert peak < f32_bytes / 3 and largest_constant(kept) < f32_bytes / 8
    (chain,) = (kept._plan.constants[s] for s in kept._plan.products_by_rows)
    assert chain.held_bytes < f32_bytes / 3
    assert largest_constant(irrun.load(xml, compressed_weights="decompress")) == f32_bytes


def test_auto_keeps_them_only_where_they_would_not_fit(monkeypatch, tmp_path):
    xml = save(_products(2, "int4_sym_g32"), tmp_path / "m.xml")
    x = RNG.standard_normal((2, K)).astype(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        roomy = irrun.load(xml)
    assert not _kept(roomy)
    monkeypatch.setattr(compressed_products, "available_memory", lambda: 400_000)   # (the two: 737 KB of f32)
    with pytest.warns(WeightsKeptCompressedWarning, match=r"m\.xml: decompressing its weights would take 720\.0 KiB, "
                                                          r"more than 75% of the 390\.6 KiB of memory available: "
                                                          r"the weights of 2 MatMul layers stay compressed "
                                                          r"\(526\.2 KiB less\), each product reading its codes"):
        tight = irrun.load(xml)
    assert len(_kept(tight)) == 2
    expected = compile_cpu(xml, CPU_F32_EXACT)([x]).values()
    for got, want, oracle in zip(tight.infer({"x": x}).values(), roomy.infer({"x": x}).values(), expected):
        assert_close(got, np.asarray(oracle))
        assert_close(got, want, rtol=1e-6, atol=1e-6 * np.abs(want).max())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert not _kept(irrun.load(xml, compressed_weights="decompress"))


def test_a_weight_something_else_reads_is_decompressed(tmp_path):
    """Tied embeddings (a Gather and the head's MatMul read one table) and a weight a Result
    shows: arrays, as without the option."""
    ids = ops.parameter([3], ov.Type.i64, name="ids")
    table = nncf_weight(shape=(N, K), **COMPRESSIONS["int8_asym"])
    hidden = ops.gather(table, ids, ops.constant(np.int64(0)))
    logits = ops.matmul(hidden, table, False, True)
    shown = nncf_weight(shape=(N, K), **COMPRESSIONS["int4_asym_g16"])
    other = ops.matmul(hidden, shown, False, True)
    xml = save(ov.Model([ops.result(logits), ops.result(other), ops.result(shown)], [ids]), tmp_path / "m.xml")
    feeds = {"ids": np.array([0, 319, 7], np.int64)}
    model = irrun.load(xml, compressed_weights="keep")
    assert not _kept(model)
    for got, want in zip(model.infer(feeds).values(), compile_cpu(xml, CPU_F32_EXACT)(feeds).values()):
        assert_close(got, np.asarray(want))


def test_watchers_and_pickles(tmp_path):
    xml = save(_products(2, "int4_asym_g16"), tmp_path / "m.xml")
    x = RNG.standard_normal((2, K)).astype(np.float32)
    model = irrun.load(xml, compressed_weights="keep")
    seen = model.infer({"x": x}, intermediates=True)
    plain = irrun.load(xml, optimize=False).infer({"x": x}, intermediates=True)
    expected = openvino_layer_outputs(xml, {"x": x})
    assert seen.keys() == plain.keys() and len(seen.keys() & expected.keys()) >= 10
    for key in plain:
        if key in expected:             # (each folded layer and product, as OpenVINO computes it)
            assert_close(seen[key], expected[key], what=key)
        assert_close(seen[key], plain[key], rtol=1e-6, atol=1e-6 * np.abs(plain[key]).max(), what=key)
    again = pickle.loads(pickle.dumps(model))
    assert again.options()["compressed_weights"] == "keep" and len(_kept(again)) == 2


def test_bad_options_are_refused(tmp_path):
    xml = save(_products(1, "int8_sym"), tmp_path / "m.xml")
    with pytest.raises(irrun.UsageError, match=r"compressed_weights='some': expected one of auto, decompress, keep"):
        irrun.load(xml, compressed_weights="some")
    with pytest.raises(irrun.UsageError, match=r'compressed_weights="keep" needs the optimizer'):
        irrun.load(xml, compressed_weights="keep", optimize=False)


def test_the_cli_takes_the_option(tmp_path):
    from click.testing import CliRunner
    from irrun.cli import cli
    xml = save(_products(1, "int4_sym_g32"), tmp_path / "m.xml")
    x = tmp_path / "x.npy"
    data = RNG.standard_normal((1, K)).astype(np.float32)
    np.save(x, data)
    out = tmp_path / "out.npz"
    result = CliRunner().invoke(cli, ["infer", str(xml), "-i", str(x), "-o", str(out), "--compressed-weights", "keep"])
    assert result.exit_code == 0, result.output
    expected = compile_cpu(xml, CPU_F32_EXACT)([data])
    with np.load(out) as got:
        for key, want in zip(got.files, expected.values()):
            assert_close(got[key], np.asarray(want))
    bad = CliRunner().invoke(cli, ["infer", str(xml), "-i", str(x), "--compressed-weights", "some"])
    assert bad.exit_code == 2 and "'some' is not one of 'auto', 'decompress', 'keep'" in bad.output


@pytest.mark.parametrize("stem", DECODERS)
def test_exported_llms_decode_as_openvino_with_their_weights_kept_compressed(stem, monkeypatch):
    """optimum-intel's stateful decoders in every NNCF mode (and f16): the same greedy ids as
    OpenVINO, first logits within test_llm's bound.  (Their weights are small enough for shape
    inference to fold: it is told not to, so that the plan folds them by rows, as a real LLM's.)"""
    monkeypatch.setattr(analysis, "FOLD_LIMIT", 1 << 10)
    kept = []

    def step_for(xml):
        model = irrun.load(xml, compressed_weights="keep")
        kept.append(len(_kept(model)))
        return irrun_step(model)
    ids, first = greedy(stem, step_for)
    expected_ids, expected_first = openvino_decoding(stem)[:2]
    assert kept[0] == 0 if stem.endswith(".fp32") else kept[0] > 0
    assert ids == expected_ids
    assert float(np.abs(first - expected_first).max()) <= LOGIT_ATOL
