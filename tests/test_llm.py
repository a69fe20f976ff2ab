"""Models exported by the real tools: stateful LLMs from optimum-intel, NNCF weight compression in
every mode, and an NNCF post-training int8 (FakeQuantize) CNN, run in irrun and in OpenVINO.

The IRs in tests/models/exported/ and their example inputs come from tests/models/export_llm.py
(see tests/models/README.md); these tests need only openvino and irrun.

Each LLM decodes NEW_TOKENS tokens greedily, one call per token, its KV cache in ReadValue/Assign
state (`reset_state` first): irrun must give the same ids as OpenVINO and first-step (prefill)
logits within LOGIT_ATOL.  The oracle is OpenVINO's CPU plugin at f32 in its exact mode
(ovutil.CPU_F32_EXACT): with only INFERENCE_PRECISION_HINT=f32 the plugin still keeps the KV cache
in f16 (later steps' logits move by ~6e-4) and, for int8/int4/int3/int2/nf4/codebook weights,
quantizes the activations to int8 in groups of 32 before the MatMul (first-step logits move by
2e-2..6e-2 on these models): approximations of the plugin's own, not the model's arithmetic.
The distance from that default to the exact mode is measured and printed too.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import openvino as ov
import pytest

from greedy_decoding import decode, decode_seq2seq, openvino_step
from ovutil import CPU_F32, CPU_F32_EXACT, assert_close, compile_cpu, evaluate_without_lpt, run_openvino
import irrun

EXPORTED = Path(__file__).resolve().parent / "models" / "exported"
NEW_TOKENS = 20
LOGIT_ATOL = 1e-3
SEQ2SEQ = ("t5.fp16",)                  # <stem>.encoder.xml + <stem>.decoder.xml
FAKE_QUANTIZED = "resnet.int8_fq"
DECODERS = sorted(p.stem for p in EXPORTED.glob("*.npz")
                  if p.stem not in SEQ2SEQ and p.stem != FAKE_QUANTIZED)

# Every test here runs with irrun/optimize.py on and off (conftest.optimize_both_ways).
pytestmark = pytest.mark.usefixtures("optimize_both_ways")

_core = ov.Core()


def example(stem: str) -> dict[str, np.ndarray]:
    with np.load(EXPORTED / f"{stem}.npz") as npz:
        return dict(npz)


# ------------------------------------------------------------------ decoding in both
def irrun_step(model: irrun.Model):
    model.reset_state()
    return lambda feeds: next(iter(model.infer(feeds).values()))


def greedy(stem: str, step_for) -> tuple[list[int], np.ndarray]:
    """Greedy ids and first-step logits of fixture `stem`, `step_for(xml)` making each IR's step."""
    if stem in SEQ2SEQ:
        encode = step_for(EXPORTED / f"{stem}.encoder.xml")
        return decode_seq2seq(encode, step_for(EXPORTED / f"{stem}.decoder.xml"), example(stem), NEW_TOKENS)
    return decode(step_for(EXPORTED / f"{stem}.xml"), example(stem), NEW_TOKENS)


@dataclass
class Decoding:
    ids: list[int]                  # irrun
    first: np.ndarray
    expected_ids: list[int]         # OpenVINO, exact f32 mode
    expected_first: np.ndarray
    default_ids: list[int]          # OpenVINO with only the f32 hint
    default_first: np.ndarray

    @property
    def logit_error(self) -> float:
        return float(np.abs(self.first - self.expected_first).max())

    def summary(self) -> str:
        same = sum(a == b for a, b in zip(self.ids, self.expected_ids))
        default_same = sum(a == b for a, b in zip(self.default_ids, self.expected_ids))
        return f"max|logit diff| {self.logit_error:.2e}, ids {same}/{NEW_TOKENS} same; OpenVINO f32-hint-only " \
               f"vs exact: {np.abs(self.default_first - self.expected_first).max():.2e}, " \
               f"ids {default_same}/{NEW_TOKENS} same"


RESULTS: dict[str, Decoding] = {}


@functools.lru_cache(maxsize=None)
def openvino_decoding(stem: str) -> tuple:
    """OpenVINO's greedy ids and first logits, exact f32 mode and f32 hint only."""
    return (*greedy(stem, lambda xml: openvino_step(xml, CPU_F32_EXACT)),
            *greedy(stem, lambda xml: openvino_step(xml, CPU_F32)))


@functools.lru_cache(maxsize=None)
def _decoding(stem: str, optimize: bool) -> Decoding:
    ids, first = greedy(stem, lambda xml: irrun_step(irrun.load(xml, optimize=optimize)))
    key = stem if optimize else f"{stem} (unoptimized)"
    RESULTS[key] = Decoding(ids, first, *openvino_decoding(stem))
    return RESULTS[key]


def decoding(stem: str) -> Decoding:
    """irrun's decoding with load's default optimisation (conftest.optimize_both_ways sets it)."""
    from irrun.optimize import optimize_default
    return _decoding(stem, optimize_default())


@pytest.fixture(scope="module", autouse=True)
def report_distances(request):
    """Print every fixture's measured distance to OpenVINO once the module's tests have run."""
    yield
    if RESULTS:
        with request.config.pluginmanager.getplugin("capturemanager").global_and_fixture_disabled():
            print(f"\nexported LLMs, irrun vs OpenVINO CPU f32 exact ({NEW_TOKENS} greedy tokens):")
            for stem, result in sorted(RESULTS.items()):
                print(f"  {stem:40} {result.summary()}")


@pytest.mark.parametrize("stem", [*DECODERS, *SEQ2SEQ])
def test_greedy_ids_match_openvino(stem):
    result = decoding(stem)
    assert result.ids == result.expected_ids, f"{stem}: {result.summary()}\n irrun    {result.ids}\n " \
                                              f"OpenVINO {result.expected_ids}"


@pytest.mark.parametrize("stem", [*DECODERS, *SEQ2SEQ])
def test_first_step_logits_match_openvino(stem):
    result = decoding(stem)
    assert result.first.shape == result.expected_first.shape and result.first.dtype == np.float32
    assert result.logit_error <= LOGIT_ATOL, f"{stem}: {result.summary()}"


def test_every_architecture_and_compression_mode_is_there():
    architectures = {s.split(".")[0] for s in DECODERS} | {s.split(".")[0] for s in SEQ2SEQ}
    assert architectures == {"llama", "qwen2", "qwen3", "phi3", "mistral", "gemma", "gemma2", "gemma3", "mixtral",
                             "qwen2_moe", "gpt2", "t5"}
    modes = {s.split(".", 1)[1] for s in DECODERS if s.startswith("llama.")}
    assert len(modes) == 18
    # Each file carries what its name says (the point of testing it).
    for stem, element_type in [("llama.int4_asym_g32", "u4"), ("llama.nf4_g16", "nf4"), ("llama.nvfp4", "f4e2m1"),
                               ("llama.mxfp4", "f8e8m0"), ("llama.int3_sym_g16", "u3"), ("qwen2.fp16", "f16")]:
        assert f'element_type="{element_type}"' in (EXPORTED / f"{stem}.xml").read_text(), stem
    assert 'type="ReadValue"' in (EXPORTED / "t5.fp16.decoder.xml").read_text()


@pytest.mark.parametrize("xml", sorted(EXPORTED.glob("*.xml")), ids=lambda p: p.stem)
def test_validate_reports_no_problem(xml):
    report = irrun.validate(xml)
    assert not report.diagnostics, "\n".join(d.format() for d in report.diagnostics)


# ------------------------------------------------------------------ state
def test_state_and_reset_state_follow_openvino():
    """irrun's variables hold OpenVINO's KV cache after a few steps; after reset_state the same Model
    decodes the same ids again; without it, both read the next call as a continuation."""
    stem = "llama.fp32"
    xml = EXPORTED / f"{stem}.xml"
    compiled = compile_cpu(xml, CPU_F32_EXACT)
    request = compiled.create_infer_request()
    request.reset_state()
    ov_step = lambda feeds: request.infer(feeds)[compiled.outputs[0]].copy()  # noqa: E731
    model = irrun.load(xml)
    expected = decode(ov_step, example(stem), 4)
    assert decode(irrun_step(model), example(stem), 4)[0] == expected[0]
    assert decode(irrun_step(model), example(stem), 4)[0] == expected[0]     # after reset_state
    ov_state = {s.name: s.state.data.copy() for s in request.query_state()}
    assert sorted(model.state) == sorted(ov_state) and len(ov_state) == 4     # key and value of 2 layers
    for name, value in model.state.items():
        assert value.shape == (1, 2, 8 + 3, 16), name                        # prompt + 3 generated tokens
        assert_close(value, ov_state[name], rtol=0, atol=1e-5, what=name)
    # No reset: the prompt again, read after the 11 cached tokens.
    feeds = {**example(stem), "attention_mask": np.ones((1, 11 + 8), np.int64),
             "position_ids": np.arange(11, 19)[None]}
    assert_close(ir_continued := next(iter(model.infer(feeds).values())), ov_step(feeds), rtol=0,
                 atol=LOGIT_ATOL / 10, what="continued logits")
    assert ir_continued.shape == (1, 8, 256)
    assert all(v.shape[2] == 19 for v in model.state.values())


def test_beam_idx_reorders_the_cache():
    """Two beams, then every step continues from beam 1 (beam_idx [1, 1]) as beam search does:
    the Gather on each cached key/value picks rows as OpenVINO's does."""
    stem = "llama.fp32"
    xml = EXPORTED / f"{stem}.xml"
    rng = np.random.default_rng(3)
    prompts = rng.integers(3, 256, (2, 6))
    feeds = {"input_ids": prompts, "attention_mask": np.ones((2, 6), np.int64),
             "position_ids": np.tile(np.arange(6), (2, 1)), "beam_idx": np.array([0, 1], np.int32)}
    steps = [feeds] + [{"input_ids": np.array([[t], [t + 1]]), "attention_mask": np.ones((2, 7 + i), np.int64),
                        "position_ids": np.full((2, 1), 6 + i), "beam_idx": np.array([1, 1], np.int32)}
                       for i, t in enumerate((17, 40, 99))]
    ov_step = openvino_step(xml, CPU_F32_EXACT)
    ir_step = irrun_step(irrun.load(xml))
    for i, f in enumerate(steps):
        expected, actual = ov_step(f), ir_step(f)
        assert_close(actual, expected, rtol=0, atol=LOGIT_ATOL / 10, what=f"step {i} logits")


# ------------------------------------------------------------------ NNCF post-training int8 CNN
# One FakeQuantize level flipped in an intermediate tensor (summation order differs between CPUs)
# moves the output by less than this; the CPU plugin's integer kernels are 3e-3 away.
FAKE_QUANTIZE_ATOL = 1e-3


def test_fake_quantized_cnn_matches_float_fake_quantize(capsys):
    xml = EXPORTED / f"{FAKE_QUANTIZED}.xml"
    model = _core.read_model(str(xml))
    assert sum(op.get_type_name() == "FakeQuantize" for op in model.get_ops()) == 14
    x = example(FAKE_QUANTIZED)["x"]
    (reference,) = evaluate_without_lpt(model, [x])
    (cpu,) = run_openvino(xml, [x])
    (actual,) = irrun.load(xml).infer([x]).values()
    scale = float(np.abs(reference).max())
    distances = f"{FAKE_QUANTIZED}: max|irrun - float-FakeQuantize reference| " \
                f"{np.abs(actual - reference).max():.2e}, max|irrun - CPU plugin (integer kernels)| " \
                f"{np.abs(actual - cpu).max():.2e}, max|CPU - reference| {np.abs(cpu - reference).max():.2e} " \
                f"(max|reference| {scale:.2f})"
    with capsys.disabled():
        print("\n" + distances)
    assert_close(actual, reference, rtol=0, atol=FAKE_QUANTIZE_ATOL, what=distances)
    assert np.array_equal(actual.argmax(-1), reference.argmax(-1))
