"""Channel/space layout: DepthToSpace-1, SpaceToDepth-1, ShuffleChannels-1, BatchToSpace-2, SpaceToBatch-2.

Each is a reshape, a transpose and a reshape (plus a crop or a zero pad for
the batch ops), so the kernels are exact for every element type.  Shape
functions divide dims exactly: an interval keeps the multiples it contains
([ceil(lo / d), floor(hi / d)]) and a static dim that does not divide is an
error, as in OpenVINO.

What OpenVINO 2026.4.1 does beyond the specs (specs/errata/resampling.md):
BatchToSpace/SpaceToBatch with block_shape[0] != 1 or a crop/pad on the batch
give different shapes in its shape inference, CPU plugin and reference, and a
negative pad is accepted by shape inference but refused by the reference:
irrun refuses all three.
"""
from __future__ import annotations

from math import prod

import numpy as np

from .. import etypes
from ..errors import ShapeError
from ..registry import Op, TensorType, register
from ..shapes import ANY, DimLike, dim_bounds, dim_divide_exact, dim_map, format_shape, is_static_dim, make_dim, normalize_axis

# ---------------------------------------------------------------- shared helpers

def _divide_exact(d: DimLike, divisor: int, what: str) -> DimLike:
    """The values d / divisor takes over the multiples of `divisor` in `d`."""
    quotient = dim_divide_exact(d, divisor)
    if quotient is None:
        raise ShapeError(f"{what} {d} is not a multiple of {divisor}")
    return quotient


def _interleaved(first: list[int], second: list[int]) -> list[int]:
    return [axis for pair in zip(first, second) for axis in pair]


def _check_rank_at_least(data: TensorType, rank: int) -> None:
    if data.rank is not None and data.rank < rank:
        raise ShapeError(f"data must have rank >= {rank}, got {format_shape(data.shape)}")


# ---------------------------------------------------------------- DepthToSpace / SpaceToDepth

class _BlockRearrange(Op):
    """DepthToSpace and SpaceToDepth: channels <-> block_size^K spatial blocks."""

    def spatial_rank(self, inputs):
        return None

    def _block(self) -> int:
        if self.attrs.block_size < 1:
            raise ShapeError(f"block_size must be >= 1, got {self.attrs.block_size}")
        return self.attrs.block_size

    def _check(self, data: TensorType) -> int:
        _check_rank_at_least(data, 3)
        return self._block()


@register("DepthToSpace", 1)
class DepthToSpace(_BlockRearrange):
    def infer(self, inputs):
        data = inputs[0]
        bs = self._check(data)
        if data.shape is None:
            return [data.like()]
        k = data.rank - 2
        channels = _divide_exact(data.shape[1], bs ** k, "channel dim")
        spatial = [dim_map(lambda n: n * bs, d) for d in data.shape[2:]]
        notes = {1: f"{data.shape[1]} / {bs}^{k}"} if is_static_dim(data.shape[1]) else None
        return [TensorType((data.shape[0], channels, *spatial), data.etype, notes=notes)]

    def run(self, x):
        bs, (n, c, *spatial) = self.attrs.block_size, x.shape
        k = len(spatial)
        depth = c // bs ** k
        blocks, dims = list(range(2, 2 + k)), list(range(2 + k, 2 + 2 * k))
        if self.attrs.mode == "blocks_first":
            # [N, bs, ..., bs, C', D1, ...]: the block index is the slow part of the channel
            x = x.reshape(n, *[bs] * k, depth, *spatial)
            order = [0, k + 1] + _interleaved(dims, [b - 1 for b in blocks])
        else:
            x = x.reshape(n, depth, *[bs] * k, *spatial)
            order = [0, 1] + _interleaved(dims, blocks)
        return x.transpose(order).reshape(n, depth, *[d * bs for d in spatial])


@register("SpaceToDepth", 1)
class SpaceToDepth(_BlockRearrange):
    def infer(self, inputs):
        data = inputs[0]
        bs = self._check(data)
        if data.shape is None:
            return [data.like()]
        k = data.rank - 2
        channels = dim_map(lambda n: n * bs ** k, data.shape[1])
        spatial = [_divide_exact(d, bs, f"spatial dim {i + 2}") for i, d in enumerate(data.shape[2:])]
        return [TensorType((data.shape[0], channels, *spatial), data.etype)]

    def run(self, x):
        bs, (n, c, *spatial) = self.attrs.block_size, x.shape
        k = len(spatial)
        x = x.reshape(n, c, *[part for d in spatial for part in (d // bs, bs)])
        outer, inner = [2 + 2 * i for i in range(k)], [3 + 2 * i for i in range(k)]
        if self.attrs.mode == "blocks_first":
            order = [0] + inner + [1] + outer
        else:
            order = [0, 1] + inner + outer
        return x.transpose(order).reshape(n, c * bs ** k, *[d // bs for d in spatial])


# ---------------------------------------------------------------- ShuffleChannels

@register("ShuffleChannels", 1)
class ShuffleChannels(Op):
    def spatial_rank(self, inputs):
        return None

    def _axis_and_group(self, rank: int) -> tuple[int, int]:
        if self.attrs.group < 1:
            raise ShapeError(f"group must be >= 1, got {self.attrs.group}")
        if rank < 1:
            raise ShapeError("data must be at least 1-D")
        return normalize_axis(self.attrs.axis, rank), self.attrs.group

    def infer(self, inputs):
        data = inputs[0]
        if data.shape is None:
            return [data.like()]
        axis, group = self._axis_and_group(data.rank)
        channels = data.shape[axis]
        if is_static_dim(channels) and channels % group:
            raise ShapeError(f"dim {axis} of data {format_shape(data.shape)} is not a multiple of group {group}")
        return [data.like()]

    def run(self, x):
        axis, group = self._axis_and_group(x.ndim)
        split = x.shape[:axis] + (group, x.shape[axis] // group) + x.shape[axis + 1:]
        return np.swapaxes(x.reshape(split), axis, axis + 1).reshape(x.shape)


# ---------------------------------------------------------------- BatchToSpace / SpaceToBatch

class _BatchSpace(Op):
    """Shared checks of the three 1-D [rank] integer inputs of BatchToSpace and SpaceToBatch."""

    edges = ("begin", "end")      # names of inputs 2 and 3, for messages

    def spatial_rank(self, inputs):
        return None

    def _check_inputs(self, inputs: list[TensorType]) -> list[list[int]] | None:
        """block_shape, begin, end as ints (None when not all known); checks shapes and types."""
        data, rest = inputs[0], inputs[1:]
        names = ("block_shape",) + self.edges
        _check_rank_at_least(data, 2)
        for t, name in zip(rest, names):
            if not (t.etype.is_integral or t.etype is etypes.dynamic):
                raise ShapeError(f"{name} must be an integer tensor, got {t.etype}")
            if t.rank is not None and t.rank != 1:
                raise ShapeError(f"{name} must be 1-D, got {format_shape(t.shape)}")
            length = None if t.shape is None else t.shape[0]
            if data.rank is not None and is_static_dim(length) and length != data.rank:
                raise ShapeError(f"{name} has {length} values for data of rank {data.rank}")
        if any(t.value is None for t in rest):
            return None
        values = [[int(v) for v in np.asarray(t.value).reshape(-1)] for t in rest]
        self._check_values(*values)
        return values

    def _check_values(self, block, begin, end) -> None:
        if any(b < 1 for b in block):
            raise ShapeError(f"block_shape {block} must be >= 1")
        if any(v < 0 for v in begin + end):
            raise ShapeError(f"{self.edges[0]} {begin} and {self.edges[1]} {end} must be >= 0")
        if block[0] != 1 or begin[0] or end[0]:
            raise ShapeError(f"block_shape[0] must be 1 and {self.edges[0]}[0], {self.edges[1]}[0] must be 0 "
                             f"(got {block[0]}, {begin[0]}, {end[0]}); OpenVINO's shape inference, CPU plugin "
                             f"and reference disagree otherwise")

    def _values(self, arrays) -> list[list[int]]:
        values = [[int(v) for v in np.asarray(a).reshape(-1)] for a in arrays]
        self._check_values(*values)
        return values


@register("BatchToSpace", 2)
class BatchToSpace(_BatchSpace):
    edges = ("crops_begin", "crops_end")

    def infer(self, inputs):
        data = inputs[0]
        values = self._check_inputs(inputs)
        if data.shape is None:
            return [data.like()]
        if values is None:
            crops = [None] * data.rank
            if inputs[2].value is not None and inputs[3].value is not None:
                crops = [int(b) + int(e) for b, e in zip(inputs[2].value, inputs[3].value)]
            # block >= 1: each spatial dim is at least its size minus the crops
            spatial = [ANY if c is None else make_dim(dim_bounds(d)[0] - c, None)
                       for d, c in zip(data.shape[1:], crops[1:])]
            return [TensorType((ANY, *spatial), data.etype)]
        block, begin, end = values
        out = [_divide_exact(data.shape[0], prod(block), "batch dim")]
        for i in range(1, data.rank):
            grown = dim_map(lambda n, b=block[i]: n * b, data.shape[i])
            crop = begin[i] + end[i]
            if is_static_dim(grown) and crop > grown:
                raise ShapeError(f"crops {begin[i]} + {end[i]} exceed dim {i}: {data.shape[i]} * {block[i]}")
            out.append(dim_map(lambda n, c=crop: n - c, grown) if crop else grown)
        return [TensorType(tuple(out), data.etype)]

    def run(self, x, *rest):
        block, begin, end = self._values(rest)
        blocks, spatial = block[1:], x.shape[1:]
        k, batch = len(spatial), x.shape[0] // prod(block)
        # [B1, ..., Bk, batch', D1, ..., Dk] -> [batch', D1, B1, ..., Dk, Bk]
        y = x.reshape(*blocks, batch, *spatial)
        y = y.transpose([k] + _interleaved(list(range(k + 1, 2 * k + 1)), list(range(k))))
        y = y.reshape(batch, *[d * b for d, b in zip(spatial, blocks)])
        crop = tuple(slice(b, n - e) for b, e, n in zip(begin, end, y.shape))
        return y[crop]


@register("SpaceToBatch", 2)
class SpaceToBatch(_BatchSpace):
    edges = ("pads_begin", "pads_end")

    def infer(self, inputs):
        data = inputs[0]
        values = self._check_inputs(inputs)
        if data.shape is None:
            return [data.like()]
        if values is None:
            return [TensorType((ANY,) * data.rank, data.etype)]
        block, begin, end = values
        out = [dim_map(lambda n: n * prod(block), data.shape[0])]
        for i in range(1, data.rank):
            padded = dim_map(lambda n, p=begin[i] + end[i]: n + p, data.shape[i])
            out.append(_divide_exact(padded, block[i], f"padded dim {i}"))
        return [TensorType(tuple(out), data.etype)]

    def run(self, x, *rest):
        block, begin, end = self._values(rest)
        x = np.pad(x, list(zip(begin, end)))
        blocks, spatial = block[1:], x.shape[1:]
        k, batch = len(spatial), x.shape[0]
        # [batch, D1/B1, B1, ..., Dk/Bk, Bk] -> [B1, ..., Bk, batch, D1/B1, ..., Dk/Bk]
        y = x.reshape(batch, *[part for d, b in zip(spatial, blocks) for part in (d // b, b)])
        y = y.transpose([2 + 2 * i for i in range(k)] + [0] + [1 + 2 * i for i in range(k)])
        return y.reshape(batch * prod(blocks), *[d // b for d, b in zip(spatial, blocks)])
