"""Build the whole-model test IRs in tests/models/ (see README.md there).

Small real-architecture networks written with torch.nn, random but fixed-seed
weights, eval() mode, converted with openvino.convert_model and saved twice:
`<name>.f32.xml` (compress_to_fp16=False) and `<name>.f16.xml` (compressed).
`<name>.npz` holds an example input keyed by the IR's input names.  Two models
also go through torch.onnx.export + OpenVINO's ONNX frontend (`*_onnx`), and a
few are converted with dynamic dims (`*_dynamic`) for the dynamic-shape tests.

    pip install torch==2.13.0 && python tests/models/build.py

torch is needed only here: tests/test_models.py reads the committed files.
"""
from __future__ import annotations

import inspect
import math
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import openvino as ov
import torch
import torch.nn.functional as F
from torch import nn

HERE = Path(__file__).resolve().parent


# ---------------------------------------------------------------- helpers
def randomize_batchnorms(module: nn.Module, generator: torch.Generator) -> None:
    """Give every BatchNorm running stats and affine parameters far from the identity."""
    for m in module.modules():
        if isinstance(m, (nn.BatchNorm1d, nn.BatchNorm2d)):
            n = m.num_features
            m.running_mean.copy_(torch.randn(n, generator=generator) * 0.5)
            m.running_var.copy_(torch.rand(n, generator=generator) * 1.5 + 0.25)
            m.weight.data.copy_(torch.rand(n, generator=generator) + 0.5)
            m.bias.data.copy_(torch.randn(n, generator=generator) * 0.2)


def conv_bn(cin, cout, kernel=3, stride=1, groups=1, act: type[nn.Module] | None = nn.ReLU):
    layers = [nn.Conv2d(cin, cout, kernel, stride, kernel // 2, groups=groups, bias=False), nn.BatchNorm2d(cout)]
    return nn.Sequential(*layers, act()) if act else nn.Sequential(*layers)


# ---------------------------------------------------------------- ResNet
class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = conv_bn(cin, cout, stride=stride)
        self.conv2 = conv_bn(cout, cout, act=None)
        self.downsample = conv_bn(cin, cout, 1, stride, act=None) if stride != 1 or cin != cout else nn.Identity()

    def forward(self, x):
        return F.relu(self.conv2(self.conv1(x)) + self.downsample(x))


class ResNet(nn.Module):
    def __init__(self, classes=10):
        super().__init__()
        self.stem = nn.Sequential(conv_bn(3, 16, 3, 2), nn.MaxPool2d(3, 2, 1))
        self.layers = nn.Sequential(BasicBlock(16, 16, 1), BasicBlock(16, 32, 2), BasicBlock(32, 64, 2))
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(64, classes)

    def forward(self, x):
        return self.fc(torch.flatten(self.pool(self.layers(self.stem(x))), 1))


# ---------------------------------------------------------------- MobileNetV3
class SqueezeExcite(nn.Module):
    def __init__(self, channels, squeezed):
        super().__init__()
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc1 = nn.Conv2d(channels, squeezed, 1)
        self.fc2 = nn.Conv2d(squeezed, channels, 1)

    def forward(self, x):
        return x * F.hardsigmoid(self.fc2(F.relu(self.fc1(self.pool(x)))))


class InvertedResidual(nn.Module):
    def __init__(self, cin, expanded, cout, kernel, stride, se, act):
        super().__init__()
        self.expand = conv_bn(cin, expanded, 1, act=act) if expanded != cin else nn.Identity()
        self.depthwise = conv_bn(expanded, expanded, kernel, stride, groups=expanded, act=act)
        self.se = SqueezeExcite(expanded, max(8, expanded // 4)) if se else nn.Identity()
        self.project = conv_bn(expanded, cout, 1, act=None)
        self.residual = stride == 1 and cin == cout

    def forward(self, x):
        y = self.project(self.se(self.depthwise(self.expand(x))))
        return x + y if self.residual else y


class MobileNetV3(nn.Module):
    def __init__(self, classes=10):
        super().__init__()
        self.stem = conv_bn(3, 16, 3, 2, act=nn.Hardswish)
        self.blocks = nn.Sequential(
            InvertedResidual(16, 16, 16, 3, 2, True, nn.ReLU),
            InvertedResidual(16, 48, 24, 3, 2, False, nn.ReLU),
            InvertedResidual(24, 64, 24, 3, 1, False, nn.ReLU),
            InvertedResidual(24, 72, 40, 5, 2, True, nn.Hardswish),
            InvertedResidual(40, 96, 40, 5, 1, True, nn.Hardswish),
        )
        self.last = conv_bn(40, 96, 1, act=nn.Hardswish)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Sequential(nn.Linear(96, 128), nn.Hardswish(), nn.Dropout(0.2), nn.Linear(128, classes))

    def forward(self, x):
        return self.classifier(torch.flatten(self.pool(self.last(self.blocks(self.stem(x)))), 1))


# ---------------------------------------------------------------- U-Net / FPN detector
class UNetDetector(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc1 = conv_bn(3, 16)                 # 64x64
        self.enc2 = conv_bn(16, 32, stride=2)      # 32x32
        self.enc3 = conv_bn(32, 64, stride=2)      # 16x16
        self.up3 = nn.Upsample(scale_factor=2, mode="nearest")
        self.dec2 = conv_bn(64 + 32, 32)
        self.up2 = nn.ConvTranspose2d(32, 16, 2, stride=2)
        self.dec1 = conv_bn(16 + 16, 16)
        self.lateral = nn.Conv2d(64, 16, 1)
        self.heatmap = nn.Conv2d(32, 3, 3, padding=1)
        self.boxes = nn.Conv2d(32, 4, 1)

    def forward(self, x):
        e1 = self.enc1(x)
        e2 = self.enc2(e1)
        e3 = self.enc3(e2)
        d2 = self.dec2(torch.cat([self.up3(e3), e2], 1))
        d1 = self.dec1(torch.cat([self.up2(d2), e1], 1))
        # FPN-style lateral path: the coarsest map resized straight to full resolution.
        coarse = F.interpolate(self.lateral(e3), scale_factor=4, mode="bilinear", align_corners=False)
        features = torch.cat([d1, coarse], 1)
        return torch.sigmoid(self.heatmap(features)), torch.sigmoid(self.boxes(features)) * 64.0


# ---------------------------------------------------------------- BERT
class BertLayer(nn.Module):
    def __init__(self, hidden, heads, ffn):
        super().__init__()
        self.heads = heads
        self.query, self.key, self.value = (nn.Linear(hidden, hidden) for _ in range(3))
        self.attn_out = nn.Linear(hidden, hidden)
        self.attn_norm = nn.LayerNorm(hidden, eps=1e-12)
        self.ffn = nn.Sequential(nn.Linear(hidden, ffn), nn.GELU(), nn.Linear(ffn, hidden))
        self.ffn_norm = nn.LayerNorm(hidden, eps=1e-12)

    def split_heads(self, x):
        b, s, h = x.shape
        return x.view(b, s, self.heads, h // self.heads).transpose(1, 2)

    def forward(self, x, additive_mask):
        q, k, v = self.split_heads(self.query(x)), self.split_heads(self.key(x)), self.split_heads(self.value(x))
        scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1]) + additive_mask
        context = (scores.softmax(-1) @ v).transpose(1, 2).reshape(x.shape)
        x = self.attn_norm(x + self.attn_out(context))
        return self.ffn_norm(x + self.ffn(x))


class Bert(nn.Module):
    def __init__(self, vocab=100, hidden=64, heads=4, layers=2, max_len=16, classes=3):
        super().__init__()
        self.tokens = nn.Embedding(vocab, hidden, padding_idx=0)
        self.positions = nn.Embedding(max_len, hidden)
        self.norm = nn.LayerNorm(hidden, eps=1e-12)
        self.layers = nn.ModuleList(BertLayer(hidden, heads, 2 * hidden) for _ in range(layers))
        self.pooler = nn.Linear(hidden, hidden)
        self.classifier = nn.Linear(hidden, classes)

    def forward(self, input_ids, attention_mask):
        positions = torch.arange(input_ids.shape[1], device=input_ids.device).unsqueeze(0)
        x = self.norm(self.tokens(input_ids) + self.positions(positions))
        # HF-style additive mask: 0 where attended, float32 min where padded.
        additive = (1.0 - attention_mask[:, None, None, :].to(x.dtype)) * torch.finfo(x.dtype).min
        for layer in self.layers:
            x = layer(x, additive)
        logits = self.classifier(torch.tanh(self.pooler(x[:, 0])))
        return x, logits


# ---------------------------------------------------------------- GPT
class GptBlock(nn.Module):
    def __init__(self, hidden, heads, explicit_mask):
        super().__init__()
        self.heads = heads
        self.explicit_mask = explicit_mask
        self.norm1 = nn.LayerNorm(hidden)
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.proj = nn.Linear(hidden, hidden)
        self.norm2 = nn.LayerNorm(hidden)
        self.mlp = nn.Sequential(nn.Linear(hidden, 4 * hidden), nn.GELU(approximate="tanh"),
                                 nn.Linear(4 * hidden, hidden))

    def forward(self, x):
        b, t, h = x.shape
        q, k, v = (y.view(b, t, self.heads, h // self.heads).transpose(1, 2)
                   for y in self.qkv(self.norm1(x)).split(h, dim=-1))
        if self.explicit_mask:
            causal = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=causal)
        else:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, h))
        return x + self.mlp(self.norm2(x))


class Gpt(nn.Module):
    def __init__(self, vocab=128, hidden=64, heads=4, max_len=16):
        super().__init__()
        self.wte = nn.Embedding(vocab, hidden)
        self.wpe = nn.Embedding(max_len, hidden)
        self.blocks = nn.ModuleList([GptBlock(hidden, heads, False), GptBlock(hidden, heads, True)])
        self.norm = nn.LayerNorm(hidden)

    def forward(self, input_ids):
        positions = torch.arange(input_ids.shape[1], device=input_ids.device)
        x = self.wte(input_ids) + self.wpe(positions)
        for block in self.blocks:
            x = block(x)
        return F.linear(self.norm(x), self.wte.weight)      # tied embeddings


# ---------------------------------------------------------------- ViT
class VitBlock(nn.Module):
    def __init__(self, hidden, heads):
        super().__init__()
        self.norm1 = nn.LayerNorm(hidden, eps=1e-6)
        self.attention = nn.MultiheadAttention(hidden, heads, batch_first=True)
        self.norm2 = nn.LayerNorm(hidden, eps=1e-6)
        self.mlp = nn.Sequential(nn.Linear(hidden, 2 * hidden), nn.GELU(), nn.Linear(2 * hidden, hidden))

    def forward(self, x):
        y = self.norm1(x)
        x = x + self.attention(y, y, y, need_weights=False)[0]
        return x + self.mlp(self.norm2(x))


class Vit(nn.Module):
    def __init__(self, image=32, patch=4, hidden=64, heads=4, depth=2, classes=10):
        super().__init__()
        self.patch_embed = nn.Conv2d(3, hidden, patch, patch)
        self.cls_token = nn.Parameter(torch.randn(1, 1, hidden) * 0.02)
        self.pos_embed = nn.Parameter(torch.randn(1, (image // patch) ** 2 + 1, hidden) * 0.02)
        self.blocks = nn.Sequential(*(VitBlock(hidden, heads) for _ in range(depth)))
        self.norm = nn.LayerNorm(hidden, eps=1e-6)
        self.head = nn.Linear(hidden, classes)

    def forward(self, x):
        x = self.patch_embed(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], 1) + self.pos_embed
        return self.head(self.norm(self.blocks(x))[:, 0])


# ---------------------------------------------------------------- LSTM / GRU
class Recurrent(nn.Module):
    def __init__(self, vocab=50, embed=16, classes=5):
        super().__init__()
        self.embed = nn.Embedding(vocab, embed)
        self.lstm = nn.LSTM(embed, 24, num_layers=2, bidirectional=True, batch_first=True)
        self.gru = nn.GRU(48, 32, batch_first=True)
        self.out = nn.Linear(32, classes)

    def forward(self, tokens):
        y, _ = self.lstm(self.embed(tokens))
        y, last = self.gru(y)
        return self.out(y), last[0]


# ---------------------------------------------------------------- audio
class AudioCnn(nn.Module):
    def __init__(self, classes=8):
        super().__init__()

        def block(cin, cout, kernel, stride=1, pool=None):
            layers = [nn.Conv1d(cin, cout, kernel, stride, bias=False), nn.BatchNorm1d(cout), nn.ReLU()]
            return nn.Sequential(*layers, nn.MaxPool1d(pool)) if pool else nn.Sequential(*layers)

        self.features = nn.Sequential(block(1, 16, 80, 4, 4), block(16, 32, 3, pool=4), block(32, 64, 3))
        self.pool = nn.AdaptiveAvgPool1d(1)
        self.fc = nn.Linear(64, classes)

    def forward(self, audio):
        return self.fc(self.pool(self.features(audio)).flatten(1))


def mel_filterbank(n_freqs, n_mels, sample_rate):
    """Triangular filters evenly spaced on the mel scale (HTK formula), shape (n_freqs, n_mels)."""
    def hz_to_mel(f):
        return 2595.0 * np.log10(1.0 + f / 700.0)
    mels = np.linspace(hz_to_mel(0.0), hz_to_mel(sample_rate / 2), n_mels + 2)
    hz = 700.0 * (10 ** (mels / 2595.0) - 1.0)
    freqs = np.linspace(0, sample_rate / 2, n_freqs)
    lower, centre, upper = hz[:-2, None], hz[1:-1, None], hz[2:, None]
    weights = np.maximum(0, np.minimum((freqs - lower) / (centre - lower), (upper - freqs) / (upper - centre)))
    return torch.tensor(weights.T, dtype=torch.float32)


class LogMelCnn(nn.Module):
    """Log-mel front end from supported ops: windowed DFT as a strided Conv1d, |.|^2, mel MatMul, log."""

    def __init__(self, n_fft=128, hop=64, n_mels=20, classes=8):
        super().__init__()
        n = torch.arange(n_fft, dtype=torch.float64)
        k = torch.arange(n_fft // 2 + 1, dtype=torch.float64)[:, None]
        window = torch.hann_window(n_fft, periodic=True, dtype=torch.float64)
        angle = 2 * math.pi * k * n / n_fft
        basis = torch.cat([torch.cos(angle) * window, -torch.sin(angle) * window])[:, None, :]
        self.register_buffer("dft", basis.float())
        self.register_buffer("window", window.float())
        self.register_buffer("mel", mel_filterbank(n_fft // 2 + 1, n_mels, 16000))
        self.n_fft, self.n_freqs, self.hop = n_fft, n_fft // 2 + 1, hop
        self.body = nn.Sequential(conv_bn(1, 16), nn.MaxPool2d(2), conv_bn(16, 32), nn.AdaptiveAvgPool2d(1))
        self.fc = nn.Linear(32, classes)

    def power_spectrum(self, audio):
        """(batch, 1, samples) -> (batch, freqs, frames)."""
        spectrum = F.conv1d(audio, self.dft, stride=self.hop)
        return spectrum[:, :self.n_freqs] ** 2 + spectrum[:, self.n_freqs:] ** 2

    def forward(self, audio):
        power = self.power_spectrum(audio)
        log_mel = torch.log(torch.matmul(power.transpose(1, 2), self.mel) + 1e-6)     # (batch, frames, mels)
        return self.fc(self.body(log_mel.unsqueeze(1)).flatten(1)), log_mel


class StftLogMelCnn(LogMelCnn):
    """The same network with torch.stft (centred, reflect-padded) as the front end: OpenVINO's STFT-15."""

    def power_spectrum(self, audio):
        spectrum = torch.stft(audio.squeeze(1), self.n_fft, self.hop, window=self.window, center=True,
                              pad_mode="reflect", return_complex=True)
        return spectrum.abs() ** 2


# ---------------------------------------------------------------- LLaMA
class RmsNorm(nn.Module):
    def __init__(self, hidden, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(hidden))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rotate_half(x):
    first, second = x.chunk(2, dim=-1)
    return torch.cat([-second, first], dim=-1)


class LlamaBlock(nn.Module):
    """Pre-norm block: RMSNorm, rotary embeddings, grouped-query causal attention, SwiGLU MLP."""

    def __init__(self, hidden, heads, kv_heads, ffn):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, hidden // heads
        self.norm1, self.norm2 = RmsNorm(hidden), RmsNorm(hidden)
        self.q_proj = nn.Linear(hidden, hidden, bias=False)
        self.k_proj = nn.Linear(hidden, kv_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(hidden, kv_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(hidden, hidden, bias=False)
        self.gate, self.up = nn.Linear(hidden, ffn, bias=False), nn.Linear(hidden, ffn, bias=False)
        self.down = nn.Linear(ffn, hidden, bias=False)

    def forward(self, x, cos, sin):
        b, t, _ = x.shape
        h = self.norm1(x)
        q = self.q_proj(h).view(b, t, self.heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(h).view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(h).view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        repeat = self.heads // self.kv_heads
        k, v = k.repeat_interleave(repeat, dim=1), v.repeat_interleave(repeat, dim=1)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.o_proj(y.transpose(1, 2).reshape(b, t, -1))
        h = self.norm2(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


class Llama(nn.Module):
    def __init__(self, vocab=128, hidden=64, heads=4, kv_heads=2, layers=2):
        super().__init__()
        self.embed = nn.Embedding(vocab, hidden)
        head_dim = hidden // heads
        self.register_buffer("inv_freq", 1.0 / 10000 ** (torch.arange(0, head_dim, 2).float() / head_dim))
        self.blocks = nn.ModuleList(LlamaBlock(hidden, heads, kv_heads, 3 * hidden) for _ in range(layers))
        self.norm = RmsNorm(hidden)
        self.lm_head = nn.Linear(hidden, vocab, bias=False)

    def forward(self, input_ids):
        positions = torch.arange(input_ids.shape[1], dtype=torch.float32, device=input_ids.device)
        angles = torch.outer(positions, self.inv_freq)
        angles = torch.cat([angles, angles], dim=-1)
        cos, sin = angles.cos()[None, None], angles.sin()[None, None]
        x = self.embed(input_ids)
        for block in self.blocks:
            x = block(x, cos, sin)
        return self.lm_head(self.norm(x))


# ---------------------------------------------------------------- building
def example_inputs(name: str, generator: torch.Generator) -> tuple[torch.Tensor, ...]:
    if name in ("resnet", "mobilenetv3", "unet_detector"):
        return (torch.randn(1, 3, 64, 64, generator=generator),)
    if name == "vit":
        return (torch.randn(1, 3, 32, 32, generator=generator),)
    if name == "bert":
        ids = torch.randint(1, 100, (2, 16), generator=generator)
        mask = torch.ones(2, 16, dtype=torch.int64)
        mask[1, 11:] = 0                                   # second sequence padded after 11 tokens
        ids[1, 11:] = 0
        return ids, mask
    if name in ("gpt", "llama"):
        return (torch.randint(0, 128, (1, 16), generator=generator),)
    if name == "lstm_gru":
        return (torch.randint(0, 50, (2, 12), generator=generator),)
    if name.startswith("audio"):
        t = torch.arange(1600) / 16000.0
        tone = torch.sin(2 * math.pi * 440.0 * t) + 0.5 * torch.sin(2 * math.pi * 1250.0 * t)
        return ((tone + 0.1 * torch.randn(1600, generator=generator)).reshape(1, 1, 1600),)
    raise KeyError(name)


MODELS = {
    "resnet": ResNet, "mobilenetv3": MobileNetV3, "unet_detector": UNetDetector, "bert": Bert, "gpt": Gpt,
    "vit": Vit, "lstm_gru": Recurrent, "audio_cnn": AudioCnn, "audio_logmel": LogMelCnn,
    "audio_stft": StftLogMelCnn, "llama": Llama,
}
ONNX_MODELS = ("resnet", "bert")
# Models also converted with dynamic dims (`*_dynamic`): name -> the dynamic shape of each input.
DYNAMIC = {
    "resnet": [([-1, 3, -1, -1], ov.Type.f32)],
    "bert": [([-1, -1], ov.Type.i64), ([-1, -1], ov.Type.i64)],
    "gpt": [([1, -1], ov.Type.i64)],
    "llama": [([1, -1], ov.Type.i64)],
    "lstm_gru": [([-1, -1], ov.Type.i64)],
}


def make(name: str) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    torch.manual_seed(0)
    generator = torch.Generator().manual_seed(1234)
    module = MODELS[name]()
    randomize_batchnorms(module, generator)
    return module.eval(), example_inputs(name, generator)


def save_pair(model: ov.Model, stem: str) -> None:
    model.set_friendly_name(stem)
    for suffix, compress in (("f32", False), ("f16", True)):
        ov.save_model(model, str(HERE / f"{stem}.{suffix}.xml"), compress_to_fp16=compress)


def save_inputs(model: ov.Model, inputs: tuple[torch.Tensor, ...], stem: str) -> None:
    names = [port.get_any_name() for port in model.inputs]
    np.savez(HERE / f"{stem}.npz", **{n: t.numpy() for n, t in zip(names, inputs)})


def name_outputs(model: ov.Model, names: list[str]) -> None:
    for port, n in zip(model.outputs, names):
        port.get_tensor().set_names({n})


OUTPUT_NAMES = {
    "unet_detector": ["heatmap", "boxes"], "bert": ["hidden_states", "logits"],
    "lstm_gru": ["logits", "last_hidden"], "audio_logmel": ["logits", "log_mel"],
    "audio_stft": ["logits", "log_mel"],
}


def convert(module, inputs, **kwargs) -> ov.Model:
    with torch.no_grad():
        model = ov.convert_model(module, example_input=inputs, **kwargs)
    # The frontend may add a traced value's number as an extra name ("32,attention_mask"); keep the argument's.
    for port, argument in zip(model.inputs, inspect.signature(module.forward).parameters):
        port.get_tensor().set_names({argument})
    return model


def static_shapes(inputs: tuple[torch.Tensor, ...]) -> list[tuple[list[int], ov.Type]]:
    """The PyTorch frontend makes every dim dynamic unless told the shapes."""
    types = {torch.float32: ov.Type.f32, torch.int64: ov.Type.i64}
    return [(list(t.shape), types[t.dtype]) for t in inputs]


def build(name: str) -> None:
    module, inputs = make(name)
    model = convert(module, inputs, input=static_shapes(inputs))
    name_outputs(model, OUTPUT_NAMES.get(name, ["logits"]))
    save_pair(model, name)
    save_inputs(model, inputs, name)
    if name in DYNAMIC:
        dynamic = convert(module, inputs, input=DYNAMIC[name])
        name_outputs(dynamic, OUTPUT_NAMES.get(name, ["logits"]))
        save_pair(dynamic, f"{name}_dynamic")     # tests/test_models.py makes its inputs
    if name in ONNX_MODELS:
        with tempfile.TemporaryDirectory() as tmp, torch.no_grad():
            onnx_path = Path(tmp) / f"{name}.onnx"
            torch.onnx.export(module, inputs, str(onnx_path),
                              input_names=list(inspect.signature(module.forward).parameters),
                              output_names=OUTPUT_NAMES.get(name, ["logits"]), opset_version=17, dynamo=False)
            model = ov.convert_model(str(onnx_path))
        save_pair(model, f"{name}_onnx")
        save_inputs(model, inputs, f"{name}_onnx")
    report(name, module, inputs)


def report(name: str, module: nn.Module, inputs: tuple[torch.Tensor, ...]) -> None:
    """Print the model's size and how far OpenVINO's CPU result is from PyTorch's (a conversion check)."""
    with torch.no_grad():
        expected = module(*inputs)
    expected = expected if isinstance(expected, tuple) else (expected,)
    compiled = ov.compile_model(str(HERE / f"{name}.f32.xml"), "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    got = compiled([t.numpy() for t in inputs])
    errors = [float(np.max(np.abs(got[out] - e.numpy())) / max(1e-12, float(e.abs().max())))
              for out, e in zip(compiled.outputs, expected)]
    params = sum(p.numel() for p in module.parameters())
    print(f"{name}: {params} parameters, outputs {[list(e.shape) for e in expected]}, "
          f"OpenVINO vs PyTorch max error / max|value| {max(errors):.1e}")


def main(names: list[str]) -> None:
    if len(names) == 1:
        build(names[0])
        return
    # One process per model: OpenVINO numbers auto-named nodes ("Constant_7851") per process, so this keeps
    # each model's files the same whichever models are rebuilt with it.
    for name in names or MODELS:
        subprocess.run([sys.executable, __file__, name], check=True)


if __name__ == "__main__":
    main(sys.argv[1:])
