"""Export the stateful-LLM and quantized-CNN test IRs in tests/models/exported/ (see README.md).

Tiny random-weight Hugging Face models, built locally from their configs (no hub access), are
exported by optimum-intel as stateful OpenVINO IRs (KV cache in ReadValue/Assign, `beam_idx`
input), the way `optimum-cli export openvino` writes them; one tiny Llama is compressed by NNCF in
every weight-compression mode NNCF can write; a small CNN is quantized post-training by
`nncf.quantize` (int8 FakeQuantize, the POT/NNCF style).  Each IR gets an `.npz` of example
inputs.  tests/test_llm.py reads only the committed files: it needs openvino, not torch.

Run it with an exporter environment kept outside the repo, never committed:

    python -m venv /work/exporters && E=/work/exporters/bin
    $E/pip install torch==2.13.0              # the CPU wheel on this machine's disk, first
    echo torch==2.13.0 > /tmp/torch-pin.txt    # or pip swaps it for a CUDA build of several GB
    $E/pip install -c /tmp/torch-pin.txt openvino==2026.4.1 nncf==3.4.0 optimum==2.3.0 \
        "optimum-intel[openvino]==2.2.0" transformers==5.0.0
    $E/pip uninstall -y torchvision            # optimum-intel requires it, never imports it here, and
                                               # PyPI's build does not import beside the CPU torch
    $E/python tests/models/export_llm.py [name ...]     # no names: every fixture

Versions of the committed files: torch 2.13.0+cpu, transformers 5.0.0, optimum 2.3.0, optimum-intel
2.2.0, nncf 3.4.0, openvino 2026.4.1, numpy 2.4.6.  transformers 5.0.0 because optimum-intel 2.2.0
exports Gemma, Gemma2 and Gemma3 only with transformers <= 5.0.  Weights come from fixed seeds, so
the same versions give the same weights and graphs; the decoder-only and compressed files come out
byte for byte the same, but the order in which T5's decoder layers are written and the numbers in
the CNN's auto-generated names ("Constant_69098") change from run to run.
"""
from __future__ import annotations

import logging
import math
import os
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")          # everything is built locally
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")   # the tracing warnings and progress bars
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
warnings.filterwarnings("ignore")

import numpy as np
import openvino as ov
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from greedy_decoding import decode, decode_seq2seq, decoder_feeds, openvino_step  # noqa: E402

OUT = Path(__file__).resolve().parent / "exported"
PROMPT_LENGTH = 8
NEW_TOKENS = 20
VOCAB = 256
# tests/ovutil.py's CPU_F32_EXACT (ovutil needs irrun): at f32 OpenVINO's CPU plugin still keeps the KV
# cache in f16 and quantizes activations to int8 before MatMuls with compressed weights unless told not to.
CPU_EXACT = {"INFERENCE_PRECISION_HINT": "f32", "KV_CACHE_PRECISION": "f32", "DYNAMIC_QUANTIZATION_GROUP_SIZE": "0"}

_core = ov.Core()


# ---------------------------------------------------------------- configs
def _common(**extra) -> dict:
    """A tiny decoder: 64 wide, 2 layers, 4 query heads over 2 KV heads, 256 tokens."""
    return {**dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                   bos_token_id=1, eos_token_id=2, pad_token_id=0, tie_word_embeddings=False), **extra}


# name -> (model_type, config keyword arguments, weight seed).  Sliding windows are shorter than
# prompt + generated tokens, so that the window's mask is exercised; Gemma's head_dim is set (its
# default is 256).  Seeds other than 1 were picked for varied greedy output (seed 1 repeats a token).
DECODERS: dict[str, tuple[str, dict, int]] = {
    "llama": ("llama", _common(), 1),
    "qwen2": ("qwen2", _common(), 3),
    "qwen3": ("qwen3", _common(head_dim=16), 1),
    "phi3": ("phi3", _common(), 1),
    "mistral": ("mistral", _common(sliding_window=12), 1),
    "gemma": ("gemma", _common(head_dim=16), 1),
    "gemma2": ("gemma2", _common(head_dim=16, sliding_window=12, query_pre_attn_scalar=16), 1),
    "gemma3": ("gemma3_text", _common(head_dim=16, sliding_window=12, query_pre_attn_scalar=16,
                                      layer_types=["sliding_attention", "full_attention"]), 1),
    "mixtral": ("mixtral", _common(intermediate_size=64, num_local_experts=4, num_experts_per_tok=2), 1),
    "qwen2_moe": ("qwen2_moe", _common(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=64,
                                       shared_expert_intermediate_size=64, decoder_sparse_step=1), 1),
    "gpt2": ("gpt2", dict(vocab_size=VOCAB, n_embd=64, n_layer=2, n_head=4, n_positions=128,
                          bos_token_id=1, eos_token_id=2, tie_word_embeddings=False), 5),
}
SEQ2SEQ: dict[str, tuple[str, dict, int]] = {
    "t5": ("t5", dict(vocab_size=VOCAB, d_model=64, d_ff=128, d_kv=16, num_layers=2, num_decoder_layers=2,
                      num_heads=4, relative_attention_num_buckets=8, relative_attention_max_distance=32,
                      decoder_start_token_id=0, pad_token_id=0, eos_token_id=1, tie_word_embeddings=False), 2),
}


# ---------------------------------------------------------------- weights
def randomize(model: torch.nn.Module, seed: int) -> None:
    """Weights of unit-scale activations instead of the 0.02-std init, whose tiny logits make greedy
    decoding repeat one token: matrices N(0, 1/fan_in), embeddings N(0, 1), norm scales around
    their neutral value, biases small."""
    g = torch.Generator().manual_seed(seed)
    gemma = "gemma" in type(model).__name__.lower()       # Gemma's RMSNorm scales by (1 + weight)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() >= 2:
                embedding = any(k in name for k in ("embed", "wte", "wpe", "shared", "relative_attention_bias"))
                p.copy_(torch.randn(p.shape, generator=g) * (1.0 if embedding else 1 / math.sqrt(p.shape[-1])))
            elif "norm" in name or ".ln_" in name:
                p.copy_((0.0 if gemma else 1.0) + 0.1 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(0.1 * torch.randn(p.shape, generator=g))


def strengthen_t5_decoder(model: torch.nn.Module) -> None:
    """transformers 5 always ties T5's output layer to its input embedding, so the decoder's
    residual stream points at the token it was fed and greedy decoding repeats it.  A smaller
    embedding and a stronger decoder make it generate varied tokens."""
    with torch.no_grad():
        model.shared.weight.mul_(0.5)
        for name, p in model.decoder.named_parameters():
            if "SelfAttention" in name or name.endswith((".wi.weight", ".wo.weight")):
                p.mul_(3.0)


def prompt() -> np.ndarray:
    return np.random.default_rng(2024).integers(3, VOCAB, (1, PROMPT_LENGTH)).astype(np.int64)


# ---------------------------------------------------------------- greedy decoding (the export checks)
def openvino_greedy(xml: Path) -> tuple[list[int], np.ndarray]:
    names = {n for i in _core.read_model(str(xml)).inputs for n in i.get_names()}
    return decode(openvino_step(xml, CPU_EXACT), decoder_feeds(names, prompt(), 0), NEW_TOKENS)


def torch_agreement(forward, ids: list[int], first: np.ndarray) -> str:
    """How OpenVINO's greedy run compares with PyTorch fed the same tokens at once (teacher forcing;
    `generate` would differ where it bans the EOS token): `forward()` gives PyTorch's logits."""
    with torch.no_grad():
        expected = forward().numpy()[0]
    steps = expected[-len(ids):]
    same = sum(int(row.argmax()) == i for row, i in zip(steps, ids))
    first_step = expected[:first.shape[1]] if first.shape[1] > 1 else steps[:1]
    return f"{same}/{len(ids)} greedy ids as PyTorch's, first logits {np.abs(first_step - first[0]).max():.1e} " \
           f"from PyTorch's; ids {ids}"


# ---------------------------------------------------------------- saving
def save(model: ov.Model, stem: str, *, fp16: bool) -> Path:
    """Save as optimum-intel does: `--weight-format fp16` compresses f32 constants to f16; fp32 and
    NNCF-compressed models are saved with compress_to_fp16=False."""
    xml = OUT / f"{stem}.xml"
    ov.save_model(model, str(xml), compress_to_fp16=fp16)
    return xml


def size(*paths: Path) -> str:
    return f"{sum(p.stat().st_size for p in paths) / 1024:.0f} KiB"


def export_decoder(name: str, tmp: Path) -> ov.Model:
    """Build, check and export one decoder; returns the exported f32 model (before any fp16 save)."""
    from optimum.intel import OVModelForCausalLM
    from transformers import AutoConfig, AutoModelForCausalLM

    model_type, kwargs, seed = DECODERS[name]
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(AutoConfig.for_model(model_type, **kwargs)).eval()
    randomize(model, seed)
    model.save_pretrained(tmp / "torch")
    exported = OVModelForCausalLM.from_pretrained(str(tmp / "torch"), export=True, stateful=True, compile=False)
    exported.save_pretrained(tmp / "ov")
    ids, first = openvino_greedy(tmp / "ov" / "openvino_model.xml")
    tokens = np.concatenate([prompt()[0], ids[:-1]])
    agreement = torch_agreement(lambda: model(torch.from_numpy(tokens)[None]).logits, ids, first)
    print(f"{name}: {sum(p.numel() for p in model.parameters())} parameters; {agreement}")
    return _core.read_model(str(tmp / "ov" / "openvino_model.xml"))


def write_decoder_inputs(stem: str, xml: Path) -> None:
    names = {n for i in _core.read_model(str(xml)).inputs for n in i.get_names()}
    np.savez(OUT / f"{stem}.npz", **decoder_feeds(names, prompt(), 0))


def build_decoder(name: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        ov_model = export_decoder(name, Path(tmp))
        # The compression base stays f32, the way optimum-intel hands models to NNCF.
        stem = f"{name}.fp32" if name == COMPRESSION_BASE else f"{name}.fp16"
        xml = save(ov_model, stem, fp16=name != COMPRESSION_BASE)
    write_decoder_inputs(stem, xml)
    print(f"  {stem}: {size(xml, xml.with_suffix('.bin'))}")


def build_t5() -> None:
    from optimum.intel import OVModelForSeq2SeqLM
    from transformers import AutoConfig, AutoModelForSeq2SeqLM

    model_type, kwargs, seed = SEQ2SEQ["t5"]
    torch.manual_seed(0)
    model = AutoModelForSeq2SeqLM.from_config(AutoConfig.for_model(model_type, **kwargs)).eval()
    randomize(model, seed)
    strengthen_t5_decoder(model)
    stem = "t5.fp16"
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        model.save_pretrained(tmp / "torch")
        exported = OVModelForSeq2SeqLM.from_pretrained(str(tmp / "torch"), export=True, stateful=True, compile=False)
        exported.save_pretrained(tmp / "ov")
        written = [save(_core.read_model(str(tmp / "ov" / f"openvino_{part}_model.xml")), f"{stem}.{part}", fp16=True)
                   for part in ("encoder", "decoder")]
    example = dict(input_ids=prompt(), attention_mask=np.ones_like(prompt()),
                   decoder_input_ids=np.array([[model.config.decoder_start_token_id]], np.int64),
                   beam_idx=np.zeros(1, np.int32))
    np.savez(OUT / f"{stem}.npz", **example)
    encoder = _core.compile_model(str(written[0]), "CPU", CPU_EXACT)
    ids, first = decode_seq2seq(lambda feeds: encoder(feeds)[0], openvino_step(written[1], CPU_EXACT), example,
                                NEW_TOKENS)
    decoder_ids = torch.from_numpy(np.concatenate([example["decoder_input_ids"][0], ids[:-1]]))[None]
    agreement = torch_agreement(lambda: model(input_ids=torch.from_numpy(prompt()), decoder_input_ids=decoder_ids,
                                                attention_mask=torch.from_numpy(example["attention_mask"])).logits,
                                ids, first)
    print(f"t5: {sum(p.numel() for p in model.parameters())} parameters; {agreement} (fp16 weights)")
    print(f"  {stem}.encoder + .decoder: {size(*written, *(x.with_suffix('.bin') for x in written))}")


# ---------------------------------------------------------------- NNCF weight compression
COMPRESSION_BASE = "llama"


def compression_modes():
    """Fixture suffix -> nncf.compress_weights arguments: every mode NNCF 3.4 writes, group sizes and
    per-channel scales, and LoRA correction (low-rank adapters beside the int4 weights)."""
    import nncf
    from nncf import CompressWeightsMode as M

    names = {"input_ids", "attention_mask", "position_ids", "beam_idx"}
    data = nncf.Dataset([decoder_feeds(names, np.random.default_rng(i).integers(3, VOCAB, (1, 16)), 0)
                         for i in range(8)])
    custom_codebook = np.array([-8, -4, -2, -1, -0.5, 0, 0.5, 1, 2, 4, 8], np.float32)
    return {
        "int8_asym": dict(mode=M.INT8_ASYM),                        # per output channel, u8 + u8 zero point
        "int8_sym": dict(mode=M.INT8_SYM),
        "int4_sym_g16": dict(mode=M.INT4_SYM, group_size=16),
        "int4_asym_g32": dict(mode=M.INT4_ASYM, group_size=32),
        "int4_sym_cw": dict(mode=M.INT4_SYM, group_size=-1),        # per channel
        "int3_sym_g16": dict(mode=M.INT3_SYM, group_size=16),
        "int2_sym_g16": dict(mode=M.INT2_SYM, group_size=16),
        "nf4_g16": dict(mode=M.NF4, group_size=16),
        "cb4_g16": dict(mode=M.CB4, group_size=16),
        "codebook_g16": dict(mode=M.CODEBOOK, group_size=16,
                             advanced_parameters=nncf.AdvancedCompressionParameters(codebook=custom_codebook)),
        "adaptive_codebook_g16": dict(mode=M.ADAPTIVE_CODEBOOK, group_size=16, dataset=data),
        "fp8_e4m3_g16": dict(mode=M.FP8_E4M3, group_size=16),
        "mxfp8_e4m3": dict(mode=M.MXFP8_E4M3, group_size=32),
        "fp4_g16": dict(mode=M.FP4, group_size=16),
        "mxfp4": dict(mode=M.MXFP4, group_size=32),
        "nvfp4": dict(mode=M.NVFP4, group_size=16),
        "int4_sym_g16_lora": dict(mode=M.INT4_SYM, group_size=16, dataset=data, lora_correction=True),
    }


def build_compressed(mode: str) -> None:
    import nncf

    nncf.set_log_level(logging.WARNING)         # not the bit-width tables
    base = OUT / f"{COMPRESSION_BASE}.fp32.xml"
    compressed = nncf.compress_weights(_core.read_model(str(base)), **compression_modes()[mode])
    stem = f"{COMPRESSION_BASE}.{mode}"
    xml = save(compressed, stem, fp16=False)
    with np.load(OUT / f"{COMPRESSION_BASE}.fp32.npz") as npz:
        np.savez(OUT / f"{stem}.npz", **npz)
    got, logits = openvino_greedy(xml)
    want, base_logits = openvino_greedy(base)
    kinds = sorted({op.get_element_type().get_type_name() for op in compressed.get_ops()
                    if op.get_type_name() == "Constant"} - {"f32", "i64", "i32", "boolean"})
    print(f"{stem}: {size(xml, xml.with_suffix('.bin'))}, constants {', '.join(kinds)}; first logits "
          f"{np.abs(logits - base_logits).max():.3f} from fp32, {sum(a == b for a, b in zip(got, want))}"
          f"/{NEW_TOKENS} greedy ids as fp32's")


# ---------------------------------------------------------------- NNCF post-training int8 CNN
def build_fake_quantized_cnn() -> None:
    """build.py's ResNet, quantized post-training by nncf.quantize on 8 calibration images: int8
    FakeQuantize on activations, int8 weights (the POT/NNCF style), saved as ov.save_model does by default."""
    import nncf
    import build      # tests/models/build.py, beside this file

    nncf.set_log_level(logging.WARNING)
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    net = build.ResNet().eval()
    build.randomize_batchnorms(net, g)
    model = ov.convert_model(net, example_input=torch.randn(1, 3, 64, 64, generator=g), input=[1, 3, 64, 64])
    rng = np.random.default_rng(0)
    calibration = [rng.standard_normal((1, 3, 64, 64)).astype(np.float32) for _ in range(8)]
    quantized = nncf.quantize(model, nncf.Dataset(calibration), subset_size=len(calibration))
    xml = OUT / "resnet.int8_fq.xml"
    ov.save_model(quantized, str(xml))
    np.savez(OUT / "resnet.int8_fq.npz", x=rng.standard_normal((1, 3, 64, 64)).astype(np.float32))
    fq = sum(op.get_type_name() == "FakeQuantize" for op in quantized.get_ops())
    print(f"resnet.int8_fq: {size(xml, xml.with_suffix('.bin'))}, {fq} FakeQuantize")


# ---------------------------------------------------------------- driver
def targets() -> dict:
    jobs = {name: (lambda n=name: build_decoder(n)) for name in DECODERS}
    jobs["t5"] = build_t5
    jobs.update({f"{COMPRESSION_BASE}.{mode}": (lambda m=mode: build_compressed(m)) for mode in compression_modes()})
    jobs["resnet.int8_fq"] = build_fake_quantized_cnn
    return jobs


def main(names: list[str]) -> None:
    jobs = targets()
    unknown = [n for n in names if n not in jobs]
    if unknown:
        sys.exit(f"unknown fixture {', '.join(unknown)}; choose from {', '.join(jobs)}")
    if len(names) == 1:
        OUT.mkdir(exist_ok=True)
        jobs[names[0]]()
        return
    # One process per fixture: OpenVINO numbers auto-named nodes per process, so this keeps most
    # fixtures' files the same whichever others are rebuilt with them.  The compression base comes first.
    for name in names or jobs:
        subprocess.run([sys.executable, __file__, name], check=True)


if __name__ == "__main__":
    main(sys.argv[1:])
