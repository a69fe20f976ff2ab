"""The op interface and the registry keyed by (type, version).

An op implementation is a class registered with `@register("Type", versions...)`.
Its declarative half (inputs, outputs, attribute schema) comes from
`specs/<Type>.toml`; the class adds a shape/type function and a NumPy kernel:

    @register("Relu", 1)
    class Relu(Op):
        def infer(self, inputs):            # list[TensorType] -> list[TensorType]
            return [inputs[0].like()]
        def run(self, x):                   # arrays -> array or tuple of arrays
            return np.maximum(x, 0)

`self.attrs` holds the parsed attributes, `self.version` the op version.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Callable

import numpy as np

from .etypes import ElementType
from .shapes import Shape, format_shape, is_static
from .spec import Attrs, VersionSpec, all_specs


@dataclass
class TensorType:
    """What shape inference knows about one tensor."""

    shape: Shape
    etype: ElementType
    value: np.ndarray | None = None       # known before running (Const, folded shapes)
    notes: dict[int, str] | None = None   # per-dim arithmetic, quoted in diagnostics
    # Without a value, what is known of each element of a small integer tensor computed from
    # dynamic dims: an int, or a Dim interval (see irrun/partial_values.py).
    partial: tuple | None = None

    def like(self, shape: Shape | None = ..., etype: ElementType | None = None) -> "TensorType":
        return TensorType(self.shape if shape is ... else shape, etype or self.etype)

    @property
    def rank(self) -> int | None:
        return None if self.shape is None else len(self.shape)

    @property
    def is_static(self) -> bool:
        return is_static(self.shape)

    def __str__(self):
        return f"{format_shape(self.shape)} {self.etype}"


class Op:
    """Base of every op implementation."""

    spec: VersionSpec
    #: run the kernel at load time when every input is known and small
    foldable: bool = True

    # Binding (see irrun/executor.py).  An op may define `bind(step) -> callable | None` to give
    # the executor a kernel specialised for the types known at load (None: use `run`), and set
    # `outputs_are_new = True` when every output is an array of its own (no view of an input,
    # of another output or of anything the op keeps), which lets a later op overwrite it.
    outputs_are_new: bool = False
    #: its kernel works out its output's shape by the rule its shape inference follows (so it raises
    #: what inference would) and returns views of its inputs (or nothing new): a step of dynamic
    #: shapes needs no check before it runs (irrun/shape_check.py)
    checks_itself: bool = False

    def quick_shapes(self, args: tuple) -> tuple[tuple, tuple] | None:
        """(the output shapes, the positions of the inputs whose values it read) for these input
        arrays, where a short rule knows them (an elementwise op's broadcast, a Broadcast's target),
        else None: shape inference decides, and says what is wrong.  Run-time checks of dynamic
        shapes ask it first (irrun/shape_check.py): a decoding step's shapes change with its
        cache at every call, and inference took 10-60 us of a layer's step there."""
        return None

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        cls._run_as_defined = cls.run

    def run_replaced(self) -> bool:
        """`run` was replaced after the class was made (a test, a debugger): a bound kernel,
        which would bypass it, must give way to it."""
        return "run" in self.__dict__ or type(self).run is not type(self)._run_as_defined

    def __init__(self, spec: VersionSpec, attrs: Attrs):
        self.spec = spec
        self.attrs = attrs
        self.version = spec.version

    def infer(self, inputs: list[TensorType]) -> list[TensorType]:
        raise NotImplementedError

    def run(self, *inputs: np.ndarray) -> Any:
        raise NotImplementedError

    def spatial_rank(self, inputs: list[TensorType]) -> int | None:
        """Rank that `length = "spatial"` attributes must match (None: no rule)."""
        rank = inputs[0].rank if inputs else None
        return None if rank is None else rank - 2


_REGISTRY: dict[tuple[str, int], type[Op]] = {}


def register(type_name: str, *versions: int) -> Callable[[type[Op]], type[Op]]:
    def decorate(cls: type[Op]) -> type[Op]:
        for v in versions:
            key = (type_name, v)
            if key in _REGISTRY:
                raise RuntimeError(f"{type_name}-{v} registered twice")
            _REGISTRY[key] = cls
        return cls
    return decorate


def implementation(type_name: str, version: int) -> type[Op] | None:
    found = _REGISTRY.get((type_name, version))
    if found is None and not _all_loaded:
        family = _families().get(type_name)
        if family is not None:
            from .ops import import_family
            import_family(family)
            found = _REGISTRY.get((type_name, version))
        if found is None:
            _load_ops()
            found = _REGISTRY.get((type_name, version))
    return found


def supported() -> dict[tuple[str, int], VersionSpec]:
    """(type, version) -> spec, for every op that has both a spec and a kernel."""
    _load_ops()
    specs = all_specs()
    return {key: specs[key] for key in sorted(_REGISTRY) if key in specs}


def registered_keys() -> set[tuple[str, int]]:
    _load_ops()
    return set(_REGISTRY)


_all_loaded = False
_REGISTER_LINE = re.compile(rb'\n@register\("(\w+)"')    # (a str pattern with ^ and MULTILINE: 9x the time)


@cache
def _families() -> dict[str, str]:
    """Op type -> the module of `irrun.ops` that registers it, read off the `@register("Type"`
    lines of the sources: importing every family takes 45 ms, a model needs a handful (a test
    checks the index against the registry; a type it misses makes every family load).  Read as
    bytes: 2.5 ms for the 50 modules, where decoding them and a line-anchored search took 8.5."""
    from .ops import families
    here = Path(__file__).with_name("ops")
    found: dict[str, str] = {}
    for family in families():
        try:
            text = (here / f"{family}.py").read_bytes()
        except OSError:
            continue
        for type_name in _REGISTER_LINE.findall(text):
            found.setdefault(type_name.decode("ascii"), family)
    return found


def _load_ops() -> None:
    global _all_loaded
    if not _all_loaded:
        from .ops import import_all
        import_all()
        _all_loaded = True
