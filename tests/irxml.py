"""Writing small IR files by hand, for parser and validator tests."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from irrun.etypes import from_precision


def port(pid, dims=(), precision="FP32", names=None):
    n = f' names="{names}"' if names is not None else ""
    p = f' precision="{precision}"' if precision is not None else ""
    d = "".join(f"<dim>{x}</dim>" for x in dims)
    return f'<port id="{pid}"{p}{n}>{d}</port>'


def layer(lid, name, type_, version="opset1", data=None, inputs=(), outputs=(), extra=""):
    attrs = "" if data is None else "<data " + " ".join(f'{k}="{v}"' for k, v in data.items()) + "/>"
    ins = f"<input>{''.join(inputs)}</input>" if inputs else ""
    outs = f"<output>{''.join(outputs)}</output>" if outputs else ""
    ver = f' version="{version}"' if version is not None else ""
    return f'<layer id="{lid}" name="{name}" type="{type_}"{ver}{extra}>\n{attrs}{ins}{outs}\n</layer>'


def edge(a, ap, b, bp):
    return f'<edge from-layer="{a}" from-port="{ap}" to-layer="{b}" to-port="{bp}"/>'


def net(layers, edges, version=11, name="m"):
    body = "\n".join(layers)
    e = "\n".join(edges)
    return f'<?xml version="1.0"?>\n<net name="{name}" version="{version}">\n<layers>\n{body}\n</layers>\n<edges>\n{e}\n</edges>\n</net>\n'


def write(tmp_path: Path, xml: str, weights: bytes | None = None, name="model") -> Path:
    path = Path(tmp_path) / f"{name}.xml"
    path.write_text(xml)
    if weights is not None:
        path.with_suffix(".bin").write_bytes(weights)
    return path


def relu_model(shape="1,3", dims=(1, 3), **kw) -> str:
    """Parameter -> ReLU -> Result, the smallest runnable IR."""
    return net([
        layer(0, "x", "Parameter", data={"shape": shape, "element_type": "f32"},
              outputs=[port(0, dims, names="x")]),
        layer(1, "relu", "ReLU", inputs=[port(0, dims)], outputs=[port(1, dims, names="y")]),
        layer(2, "out", "Result", inputs=[port(0, dims)]),
    ], [edge(0, 0, 1, 0), edge(1, 1, 2, 0)], **kw)


def f32_bytes(values) -> bytes:
    return np.asarray(values, np.float32).tobytes()


def hand_ir(tmp_path: Path, op_type: str, inputs: list[tuple[list[int], str]], output: list[int],
            attrs: dict[str, str] | None = None, version: str = "opset1", name: str = "the_op") -> Path:
    """A Parameter per input -> one `op_type` layer named `name` -> Result, written by hand.

    `inputs` are (dims, precision); `output` the dims the op's port declares.
    """
    n = len(inputs)
    layers = [layer(i, f"in{i}", "Parameter",
                    data={"shape": ",".join(map(str, dims)), "element_type": from_precision(precision).name},
                    outputs=[port(0, dims, precision)])
              for i, (dims, precision) in enumerate(inputs)]
    layers.append(layer(n, name, op_type, version, data=attrs or {},
                        inputs=[port(i, dims, precision) for i, (dims, precision) in enumerate(inputs)],
                        outputs=[port(n, output, inputs[0][1])]))
    layers.append(layer(n + 1, "out", "Result", inputs=[port(0, output, inputs[0][1])]))
    edges = [edge(i, 0, n, i) for i in range(n)] + [edge(n, n, n + 1, 0)]
    return write(tmp_path, net(layers, edges), name="hand")
