"""Winograd convolution for 3x3 kernels at stride 1: F(2x2, 3x3) and F(4x4, 3x3).

Each m x m block of outputs ("tile") is computed from an a x a block of input (a = m + 2) as

    Y = A^T [ sum over input channels of (G g G^T) * (B^T d B) ] A

(Lavin & Gray, "Fast Algorithms for Convolutional Neural Networks", 2015): a^2 products per
tile and channel pair instead of 9 m^2, so F(2,3) does 16 where the direct method does 36 and
F(4,3) 36 where it does 144.  The filter transform U = G g G^T is made once, when the layer is
bound at load.  Per call:

  1. the input tiles (overlapping a x a windows, m apart) copied once as [a^2, C_in, tiles];
  2. V = (B^T kron B^T) @ tiles: one GEMM;
  3. M[k] = U[k] @ V[k] for each of the a^2 transform points: one batched GEMM (the bulk);
  4. Y = (A^T kron A^T) @ M: one GEMM, then the tiles put back in place (edges cropped).

Accuracy.  The transforms add and subtract values of different sizes, so the rounding error in
f32 grows with the tile: against float64 direct convolution, over random data and filters with
64-512 input channels, F(2,3) stays within 1.5x and F(4,3) within 4x of the direct f32 method's
own error (tests/test_kernels_parallel.py measures both, and compares with OpenVINO at rtol 1e-4,
atol 1e-4 x the output's scale).  Only float32 and float64 data take this path.
"""
from __future__ import annotations

import os
from math import prod

import numpy as np
from numpy.lib.stride_tricks import as_strided

from .. import threads

# Transform matrices, interpolation points 0, 1, -1 (F(2,3)) and 0, +-1, +-2, inf (F(4,3)),
# in float64; the filter transform is computed in float64 too.
_F23 = (
    np.array([[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]], np.float64),          # B^T
    np.array([[1, 0, 0], [.5, .5, .5], [.5, -.5, .5], [0, 0, 1]], np.float64),                  # G
    np.array([[1, 1, 1, 0], [0, 1, -1, -1]], np.float64),                                      # A^T
)
_F43 = (
    np.array([[4, 0, -5, 0, 1, 0], [0, -4, -4, 1, 1, 0], [0, 4, -4, -1, 1, 0], [0, -2, -1, 2, 1, 0],
              [0, 2, -1, -2, 1, 0], [0, 4, 0, -5, 0, 1]], np.float64),
    np.array([[1 / 4, 0, 0], [-1 / 6, -1 / 6, -1 / 6], [-1 / 6, 1 / 6, -1 / 6], [1 / 24, 1 / 12, 1 / 6],
              [1 / 24, -1 / 12, 1 / 6], [0, 0, 1]], np.float64),
    np.array([[1, 1, 1, 1, 1, 0], [0, 1, -1, 2, -2, 0], [0, 1, 1, 4, 4, 0], [0, 1, -1, 8, -8, 1]], np.float64),
)
TRANSFORMS = {2: _F23, 4: _F43}

# Largest transformed-input buffer (elements, a^2 x C_in x tiles) built at once; beyond it the
# tiles are taken a block of tile rows at a time.
TILE_BUFFER_ELEMENTS = 1 << 22


# Filter elements transformed at once (their float64 temporaries stay under 2 MiB)
WINOGRAD_TRANSFORM_ELEMENTS = 1 << 16


class WinogradFilter:
    """A 3x3 filter [C_out, C_in, 3, 3] transformed for F(m x m, 3 x 3)."""

    def __init__(self, w: np.ndarray, m: int, dtype: np.dtype):
        bt, g, at = TRANSFORMS[m]
        self.m, self.a = m, m + 2
        self.c_out, self.c_in = w.shape[:2]
        # G w G^T in float64 as one GEMM, kron(G, G) [a^2, 9] times the 3x3 taps of every channel
        # pair (8x faster than einsums: a 512 x 512 filter in 8 ms), a few output channels at a time:
        # the float64 temporaries of a whole 512-channel filter (40 MiB) would stay in the heap
        self.u = np.empty((self.a * self.a, self.c_out, self.c_in), dtype)
        both = np.kron(g, g)
        step = max(1, WINOGRAD_TRANSFORM_ELEMENTS // max(self.c_in * 9, 1))
        for first in range(0, self.c_out, step):
            taps = w[first:first + step].reshape(-1, 9).astype(np.float64)
            self.u[:, first:first + step] = (both @ taps.T).reshape(self.a * self.a, -1, self.c_in)
        self.input_transform = np.kron(bt, bt).astype(dtype)       # [a^2, a^2]
        self.output_transform = np.kron(at, at).astype(dtype)      # [m^2, a^2]
        self.dtype = np.dtype(dtype)


def winograd_conv(x: np.ndarray, f: WinogradFilter, whole, counts) -> np.ndarray:
    """x [N, C_in, H, W] (any float type, computed in f.dtype); `whole`: the padded (lo, hi) range
    of each spatial axis; `counts`: output size.  Returns [N, C_out, *counts] in f.dtype."""
    from .convolution import _zero_extended    # (imported here: convolution imports this module)
    m, a = f.m, f.a
    n = x.shape[0]
    tiles_h, tiles_w = -(-counts[0] // m), -(-counts[1] // m)
    out = np.empty((n, f.c_out, counts[0], counts[1]), f.dtype)
    per_row = a * a * f.c_in * n * tiles_w
    rows = max(1, min(tiles_h, TILE_BUFFER_ELEMENTS // max(per_row, 1)))
    for first in range(0, tiles_h, rows):
        last = min(first + rows, tiles_h)
        lo_h = whole[0][0] + first * m
        region = [(lo_h, lo_h + (last - first) * m + 2), (whole[1][0], whole[1][0] + tiles_w * m + 2)]
        xp = np.ascontiguousarray(_zero_extended(x, region), dtype=f.dtype)
        _tile_rows(xp, f, last - first, tiles_w, out[:, :, first * m:last * m])
    return out


def _tile_rows(xp, f: WinogradFilter, th: int, tw: int, out) -> None:
    m, a = f.m, f.a
    n, c = xp.shape[:2]
    s_n, s_c, s_h, s_w = xp.strides
    tiles = as_strided(xp, (a, a, c, n, th, tw), (s_h, s_w, s_c, s_n, m * s_h, m * s_w), writeable=False)
    d = np.ascontiguousarray(tiles).reshape(a * a, -1)                  # [a^2, C_in * tiles]
    # (threads.matmul: on every core while irrun's pool owns them, the batched GEMM by transform point)
    v = threads.matmul(f.input_transform, d).reshape(a * a, c, n * th * tw)
    product = threads.matmul(f.u, v)                                    # [a^2, C_out, tiles]
    y = threads.matmul(f.output_transform, product.reshape(a * a, -1)).reshape(m, m, f.c_out, n, th, tw)
    # [m, m, C_out, N, th, tw] -> [N, C_out, th, m, tw, m], cropped to the outputs that exist
    full = y.transpose(3, 2, 4, 0, 5, 1).reshape(n, f.c_out, th * m, tw * m)
    out[...] = full[:, :, :out.shape[2], :out.shape[3]]


def winograd_tile(c_in: int, c_out: int, counts) -> int | None:
    """The tile size m for a 3x3 stride-1 convolution of these sizes, None where the direct kernels
    are used.  `IRRUN_WINOGRAD`: "auto" (the default) F(2,3) when irrun runs on one thread, "2"
    F(2,3) on any number, "4" F(4,3) (faster, less accurate), "off" never.

    On two threads F(2,3) does not pay: inside ResNet-18, with the pool owning both cores, its
    128-channel layers at 28x28 took 2.0-2.15 ms against 1.7-1.9 for the direct kernels, the
    256-channel ones at 14x14 as long (1.8-1.95 ms), the network 35.4 against 34.6 ms; and its
    filters cost 16/9 of the originals' memory (ResNet-18: 16 MiB).

    Measured against the direct kernels (one thread, min of 9, one process):
      channels  map      F(2,3)  F(4,3)
      16        160x320  0.21x   0.33x
      32        80x160   0.69x   1.20x
      64        56x56    0.93x   1.47x
      128       28x28    1.25x   1.80x
      256       14x14    1.51x   1.41x
      512       7x7      1.65x   0.93x
    F(2,3) pays from 128 channels; below 14x14 outputs it is left out all the same, because its
    transformed filter is 16/9 the size of the filter it keeps beside it (ResNet-18's 512-channel
    layers would add 58 MiB for 1.65x on a sixth of the network's time)."""
    choice = os.environ.get("IRRUN_WINOGRAD", "auto").strip().lower()
    positions = prod(counts)
    if choice in ("off", "0", "no") or positions < WINOGRAD_MIN_POSITIONS \
            or (choice == "auto" and threads.threads() > 1):
        return None
    if choice == "4":
        return 4 if min(c_in, c_out) >= F43_MIN_CHANNELS else None
    return 2 if min(c_in, c_out) >= F23_MIN_CHANNELS else None


F23_MIN_CHANNELS = 128
F43_MIN_CHANNELS = 32
WINOGRAD_MIN_POSITIONS = 14 * 14
