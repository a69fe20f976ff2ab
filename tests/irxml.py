"""Writing small IR files by hand, for parser and validator tests."""
from __future__ import annotations

from pathlib import Path

import numpy as np


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
