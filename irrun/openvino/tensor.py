"""`Tensor`: an array with an element type, as OpenVINO's Python API has it.

`Tensor(array)` copies the array (`shared_memory=True` shares it, where its dtype and layout
allow); `Tensor(Type.f32, Shape([1, 3]))` allocates one.  `data` is the NumPy array itself, so
writing into it changes the tensor.  Types NumPy lacks (bf16, f8, nf4, i4, u4, u1 ...) hold
irrun's unpacked values (the dtype `irrun.etypes` carries them in), not OpenVINO's packed bytes.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .exceptions import OVRuntimeError
from .types import PartialShape, Shape, Strides, Type, as_type


def _shape_of(value: Any) -> tuple[int, ...]:
    if isinstance(value, PartialShape):
        if not value.is_static:
            raise OVRuntimeError(f"Cannot create a tensor of dynamic shape {value}")
        value = value.to_shape()
    try:
        return tuple(int(d) for d in value)
    except TypeError:
        raise TypeError(f"a tensor shape must be a list of ints, not {type(value).__name__}") from None


def _carrier(t: Type) -> np.dtype:
    if t.is_dynamic():
        raise OVRuntimeError("Cannot create a tensor of dynamic element type")
    return t.etype.carrier


class Tensor:
    """`Tensor(array, shared_memory=False)`, `Tensor(Type, shape)`, `Tensor(list)`."""

    __slots__ = ("_array", "_type", "__weakref__")

    def __init__(self, *args, shared_memory: bool = False, **kwargs):
        if "type" in kwargs or "shape" in kwargs or "array" in kwargs:
            args = tuple(kwargs.pop(k) for k in ("type", "shape") if k in kwargs) or (kwargs.pop("array"),)
        if kwargs:
            raise TypeError(f"Tensor got unexpected arguments: {', '.join(kwargs)}")
        if len(args) == 2 and isinstance(args[0], (Type, type, np.dtype, str)) and not isinstance(args[0], np.ndarray):
            t = as_type(args[0])
            self._type = t
            self._array = np.zeros(_shape_of(args[1]), _carrier(t))
            return
        if len(args) != 1:
            raise TypeError("Tensor takes an array, or an element type and a shape")
        value = args[0]
        if isinstance(value, Tensor):
            self._array, self._type = value._array, value._type
            return
        if isinstance(value, (list, tuple)):
            value = np.array(value)
        elif not isinstance(value, np.ndarray):
            if hasattr(value, "__array__") or isinstance(value, (int, float, bool, np.generic)):
                value = np.asarray(value)
            else:
                raise TypeError(f"Tensor cannot hold a {type(value).__name__}")
        if value.dtype.kind in "US":
            t = Type.string
            array = value.astype(object) if value.dtype.kind == "U" else \
                np.vectorize(lambda b: b.decode("utf-8", "surrogateescape"), otypes=[object])(value)
        else:
            t = Type(value.dtype)
            if shared_memory and value.flags.c_contiguous:
                array = value
            else:
                array = np.array(value, order="C", copy=True)
        self._array, self._type = array, t

    @classmethod
    def _wrap(cls, array: np.ndarray, t: Type) -> "Tensor":
        """A tensor viewing `array` (irrun's result or input), typed `t`."""
        self = object.__new__(cls)
        self._array, self._type = array, t
        return self

    # ------------------------------------------------------------ data
    @property
    def data(self) -> np.ndarray:
        return self._array

    @property
    def str_data(self) -> np.ndarray:
        if self._type != Type.string:
            raise OVRuntimeError("str_data is only for string tensors")
        return np.array(self._array.tolist(), dtype=str).reshape(self._array.shape)

    @property
    def bytes_data(self) -> np.ndarray:
        if self._type != Type.string:
            return np.frombuffer(np.ascontiguousarray(self._array).tobytes(), np.uint8)
        return np.array([s.encode("utf-8", "surrogateescape") for s in self._array.reshape(-1)],
                        dtype=bytes).reshape(self._array.shape)

    @bytes_data.setter
    def bytes_data(self, value) -> None:
        self.str_data = value

    @str_data.setter
    def str_data(self, value) -> None:
        array = np.asarray(value)
        if array.dtype.kind == "S":
            array = np.vectorize(lambda b: b.decode("utf-8", "surrogateescape"), otypes=[object])(array)
        self._array, self._type = array.astype(object), Type.string

    def copy_to(self, target: "Tensor") -> None:
        target.copy_from(self)

    def copy_from(self, source: Any) -> None:
        array = source.data if isinstance(source, Tensor) else np.asarray(source)
        if array.shape != self._array.shape:
            self.shape = array.shape
        self._array[...] = array

    # ------------------------------------------------------------ description
    @property
    def element_type(self) -> Type:
        return self._type

    def get_element_type(self) -> Type:
        return self._type

    @property
    def shape(self) -> Shape:
        return Shape(self._array.shape)

    @shape.setter
    def shape(self, value) -> None:
        self.set_shape(value)

    def get_shape(self) -> Shape:
        return self.shape

    def set_shape(self, value) -> None:
        """A new shape: the tensor keeps its memory when the new shape fits in it, else allocates."""
        shape = _shape_of(value)
        if shape == self._array.shape:
            return
        count = int(np.prod(shape, dtype=np.int64))
        base = self._array.reshape(-1) if self._array.flags.c_contiguous else None
        if base is not None and count <= base.size:
            self._array = base[:count].reshape(shape)
        else:
            self._array = np.zeros(shape, self._array.dtype)

    @property
    def size(self) -> int:
        return int(self._array.size)

    def get_size(self) -> int:
        return self.size

    @property
    def byte_size(self) -> int:
        if self._type == Type.string:
            return self.size * self._type.size
        return self._type.etype.nbytes(self.size)

    def get_byte_size(self) -> int:
        return self.byte_size

    @property
    def strides(self) -> Strides:
        return Strides(self._array.strides)

    def get_strides(self) -> Strides:
        return self.strides

    def is_continuous(self) -> bool:
        return bool(self._array.flags.c_contiguous)

    def __repr__(self) -> str:
        return f"<Tensor: shape{self.shape.to_string()} type: {self._type.get_type_name()}>"
