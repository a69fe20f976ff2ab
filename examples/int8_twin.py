"""Write the int8-compressed twin of an IR: every Convolution and MatMul weight as int8 with an f32 scale.

    python examples/int8_twin.py MODEL.xml TWIN.xml [--per-tensor LAYER ...] [--int4 LAYER ...]

Each weight becomes the decompression chain OpenVINO's weight compression writes
(Constant i8 -> Convert f32 -> Multiply by a per-output-channel scale), so irrun and
OpenVINO run it as they run any compressed model.  The layers that read the weights keep
their names, which is what `irrun compare TWIN.xml --reference MODEL.xml` matches on.
`--per-tensor LAYER` quantizes that layer's weights with one scale for the whole tensor
instead, `--int4 LAYER` to 4 bits (an i4 Constant): the kind of choice `compare` is for
checking.  Needs openvino (`pip install "irrun[openvino]"`).
"""
from __future__ import annotations

import argparse

import numpy as np
import openvino as ov
import openvino.opset13 as ops


def quantize(weights: np.ndarray, per_tensor: bool, levels: int = 127) -> tuple[np.ndarray, np.ndarray]:
    """Symmetric: (q, scale) with weights ~ q * scale, q in [-levels, levels], scale per output
    channel (axis 0) or for the whole tensor."""
    axes = tuple(range(weights.ndim)) if per_tensor else tuple(range(1, weights.ndim))
    scale = np.max(np.abs(weights), axis=axes, keepdims=True) / levels
    scale = np.where(scale == 0, 1, scale).astype(np.float32)
    return np.clip(np.round(weights / scale), -levels, levels).astype(np.int8), scale


def compress(model: ov.Model, per_tensor: set[str], int4: set[str]) -> list[str]:
    done = []
    for op in model.get_ordered_ops():
        if op.get_type_name() not in ("Convolution", "MatMul"):
            continue
        source = op.input_value(1).get_node()
        if source.get_type_name() != "Constant" or source.get_element_type() != ov.Type.f32:
            continue
        weights = source.get_data()
        if op.get_type_name() == "MatMul" and not op.get_transpose_b():
            weights = weights.T                 # quantize along the output features
        four = op.get_friendly_name() in int4
        q, scale = quantize(weights, op.get_friendly_name() in per_tensor, 7 if four else 127)
        if op.get_type_name() == "MatMul" and not op.get_transpose_b():
            q, scale = q.T, scale.T
        name = source.get_friendly_name()
        if four:
            stored = ov.op.Constant(ov.Type.i4, ov.Shape(list(q.shape)), q.reshape(-1).tolist())
            stored.set_friendly_name(f"{name}/int4")
        else:
            stored = ops.constant(q, name=f"{name}/int8")
        converted = ops.convert(stored, ov.Type.f32)
        converted.set_friendly_name(f"{name}/convert")
        chain = ops.multiply(converted, ops.constant(scale, name=f"{name}/scale"))
        chain.set_friendly_name(f"{name}/dequantized")
        op.input(1).replace_source_output(chain.output(0))
        done.append(op.get_friendly_name())
    return done


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model")
    parser.add_argument("twin")
    parser.add_argument("--per-tensor", action="append", default=[], metavar="LAYER",
                        help="quantize this layer's weights per tensor, not per output channel")
    parser.add_argument("--int4", action="append", default=[], metavar="LAYER",
                        help="quantize this layer's weights to 4 bits")
    args = parser.parse_args()
    model = ov.Core().read_model(args.model)
    done = compress(model, set(args.per_tensor), set(args.int4))
    unknown = set(args.per_tensor + args.int4) - set(done)
    if unknown:
        parser.error(f"no Convolution or MatMul with f32 weights named {', '.join(sorted(unknown))}")
    ov.save_model(model, args.twin, compress_to_fp16=False)
    notes = [f"{', '.join(args.per_tensor)} per tensor"] if args.per_tensor else []
    notes += [f"{', '.join(args.int4)} in 4 bits"] if args.int4 else []
    print(f"{args.twin}: {len(done)} layers with compressed weights" + (f" ({'; '.join(notes)})" if notes else ""))


if __name__ == "__main__":
    main()
