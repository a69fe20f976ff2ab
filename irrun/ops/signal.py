"""DFT-7, IDFT-7, RDFT-9, IRDFT-9, STFT-15 and ISTFT-16.

A complex tensor is a real tensor with a trailing dimension of 2 (real,
imaginary).  DFT, IDFT and IRDFT take complex data, so their axes count
against the complex rank (rank - 1); RDFT takes real data and its axes count
against the full rank.  `signal_size` crops or zero-pads each transformed axis
at its end before the transform; -1 keeps the input length.  IDFT and IRDFT
divide by the transform length (NumPy's "backward" norm).  The real-to-complex
transforms keep only the non-negative half of the last listed axis
(n // 2 + 1 bins); IRDFT rebuilds the other half by Hermitian symmetry, so the
imaginary parts of the DC (and, for an even length, Nyquist) bins drop out.

Kernels compute in complex128 and round to the output type once.

What OpenVINO 2026.4.1 does beyond the op specs (specs/errata/signal.md):

* RDFT and IRDFT on the CPU plugin do not implement a -1 in `signal_size` and
  RDFT refuses a signal size larger than the input; IRDFT reads past its input
  when the signal size needs more bins than it has.  irrun follows the spec
  and OpenVINO's shape inference (pad with zeros).
* ISTFT divides the overlap-added frames by the overlap-added squared window
  and gives 0 where that sum is exactly 0 (the ends of a Hann window).  A
  signal_length of 0 gives an empty signal, as shape inference says (the CPU
  plugin corrupts its heap); a negative one is an error when the op runs (as
  on the CPU plugin); OpenVINO's shape inference reads -1 as an unknown length.
"""
from __future__ import annotations

import math

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from ..errors import ShapeError
from ..registry import Op, TensorType, register
from ..shapes import ANY, DimLike, dim_bounds, dim_map, dims_compatible, format_shape

_INDEX_TYPES = ("i32", "i64")
_FFT_DATA_TYPES = ("f32", "f16", "bf16")


# ---------------------------------------------------------------- shared checks

def _etype_ok(t: TensorType, allowed) -> bool:
    return t.etype.name == "dynamic" or t.etype.name in allowed


def _check_index_input(t: TensorType, what: str) -> None:
    if not _etype_ok(t, _INDEX_TYPES):
        raise ShapeError(f"{what} must be i32 or i64, got {t.etype}")


def _check_rank(t: TensorType, ranks: tuple[int, ...], what: str) -> None:
    if t.rank is not None and t.rank not in ranks:
        wanted = " or ".join(f"{r}-D" for r in ranks)
        raise ShapeError(f"{what} must be {wanted}, got {format_shape(t.shape)}")


def _known_ints(t: TensorType) -> list[int] | None:
    return None if t.value is None else [int(v) for v in np.asarray(t.value).reshape(-1)]


def _known_scalar(t: TensorType, what: str) -> int | None:
    values = _known_ints(t)
    if values is None:
        return None
    if len(values) != 1:
        raise ShapeError(f"{what} must hold one value, got {len(values)}")
    return values[0]


def _as_complex(x: np.ndarray) -> np.ndarray:
    return x[..., 0].astype(np.float64) + 1j * x[..., 1].astype(np.float64)


def _as_pairs(z: np.ndarray, dtype) -> np.ndarray:
    return np.stack([z.real, z.imag], axis=-1).astype(dtype)


# ---------------------------------------------------------------- FFT family

def _normalize_fft_axes(values, rank: int, what: str) -> list[int]:
    """Axes in [-rank, rank) made non-negative; each at most once."""
    given = [int(v) for v in np.asarray(values).reshape(-1)]
    if not given:
        raise ShapeError("axes must list at least one axis")
    axes = []
    for a in given:
        if not -rank <= a < rank:
            raise ShapeError(f"axis {a} is out of range [{-rank}, {rank - 1}] for {what} of rank {rank}")
        axes.append(a + rank if a < 0 else a)
    if len(set(axes)) != len(axes):
        raise ShapeError(f"axes {given} are not unique")
    return axes


def _half_spectrum(n: DimLike) -> DimLike:
    """n // 2 + 1 bins of a real signal of length n (a bound of 0 stays 0, as in OpenVINO)."""
    return dim_map(lambda b: b // 2 + 1 if b > 0 else 0, n)


def _full_length(bins: DimLike) -> DimLike:
    """2 * (bins - 1): the real length IRDFT rebuilds from a half spectrum (bounds clamp at 0)."""
    return dim_map(lambda b: 2 * max(b - 1, 0), bins)


class _FFTBase(Op):
    """Input checks shared by the four FFT ops (OpenVINO's fft_common_validation)."""

    #: RDFT: real data, axes over the full rank; the others: complex data, trailing 2
    real_input = False

    def _transform_rank(self, data_rank: int) -> int:
        return data_rank if self.real_input else data_rank - 1

    @property
    def _data_kind(self) -> str:
        return "real data" if self.real_input else "complex data"

    def validate(self, inputs) -> list[int] | None:
        """Check operands; the normalized axes when they are known at load."""
        data, axes_t = inputs[0], inputs[1]
        if not _etype_ok(data, _FFT_DATA_TYPES):
            raise ShapeError(f"data must be f32, f16 or bf16, got {data.etype}")
        _check_index_input(axes_t, "axes")
        if len(inputs) == 3:
            _check_index_input(inputs[2], "signal_size")
        _check_rank(axes_t, (1,), "axes")
        axes_count = axes_t.shape[0] if axes_t.rank == 1 and isinstance(axes_t.shape[0], int) else None
        if len(inputs) == 3:
            size_t = inputs[2]
            _check_rank(size_t, (1,), "signal_size")
            if axes_count is not None and size_t.rank == 1 and isinstance(size_t.shape[0], int) \
                    and size_t.shape[0] != axes_count:
                raise ShapeError(f"axes {format_shape(axes_t.shape)} and signal_size {format_shape(size_t.shape)} "
                                 "must have the same length")
        if data.rank is None:
            return None
        min_rank = 1 if self.real_input else 2
        if data.rank < min_rank:
            raise ShapeError(f"data must have rank {min_rank} or more, got {format_shape(data.shape)}")
        if not self.real_input and not dims_compatible(data.shape[-1], 2):
            raise ShapeError(f"the last dimension of complex data must be 2, got {format_shape(data.shape)}")
        rank = self._transform_rank(data.rank)
        if axes_count is not None and axes_count > rank:
            raise ShapeError(f"{axes_count} axes for {self._data_kind} {format_shape(data.shape)} of rank {rank}")
        if axes_t.value is None:
            return None
        return _normalize_fft_axes(axes_t.value, rank, self._data_kind)

    @staticmethod
    def known_sizes(inputs, axes: list[int]) -> list[int] | None:
        if len(inputs) < 3:
            return None
        sizes = _known_ints(inputs[2])
        if sizes is None:
            return None
        if len(sizes) != len(axes):
            raise ShapeError(f"signal_size {sizes} and axes {axes} must have the same length")
        if any(s < -1 for s in sizes):
            raise ShapeError(f"signal_size {sizes}: each value must be -1 or >= 0")
        return sizes

    def runtime_axes(self, data: np.ndarray, axes: np.ndarray) -> list[int]:
        return _normalize_fft_axes(axes, self._transform_rank(data.ndim), self._data_kind)


def _sizes_at_run(signal_size, axes: list[int], dims: tuple[int, ...]) -> list[int]:
    """signal_size with -1 (or no input) replaced by the input's length on that axis."""
    if signal_size is None:
        return [dims[a] for a in axes]
    sizes = [int(s) for s in np.asarray(signal_size).reshape(-1)]
    if len(sizes) != len(axes) or any(s < -1 for s in sizes):
        raise ShapeError(f"signal_size {sizes} does not fit axes {axes} (one value per axis, each -1 or >= 0)")
    return [dims[a] if s == -1 else s for a, s in zip(axes, sizes)]


def _output_dims(dims: tuple[int, ...], axes: list[int], sizes: list[int]) -> list[int]:
    out = list(dims)
    for a, s in zip(axes, sizes):
        out[a] = s
    return out


@register("DFT", 7)
@register("IDFT", 7)
class ComplexDFT(_FFTBase):
    """DFT / IDFT of complex data over `axes`; IDFT divides by the transform lengths."""

    @property
    def inverse(self) -> bool:
        return self.spec.type == "IDFT"

    def infer(self, inputs):
        data = inputs[0]
        axes = self.validate(inputs)
        if data.shape is None:
            return [TensorType(None, data.etype)]
        shape, notes = list(data.shape), {}
        if len(inputs) == 3:
            if axes is None:
                shape[:-1] = [ANY] * (len(shape) - 1)
            else:
                sizes = self.known_sizes(inputs, axes)
                for i, a in enumerate(axes):
                    if sizes is None:
                        shape[a] = ANY
                    elif sizes[i] != -1:
                        shape[a], notes[a] = sizes[i], f"signal_size[{i}] = {sizes[i]}"
        return [TensorType(tuple(shape), data.etype, notes=notes or None)]

    def run(self, data, axes, signal_size=None):
        z = _as_complex(data)
        axes = self.runtime_axes(data, axes)
        sizes = _sizes_at_run(signal_size, axes, z.shape)
        if 0 in sizes or 0 in z.shape:            # NumPy refuses empty transforms
            result = np.zeros(_output_dims(z.shape, axes, sizes), np.complex128)
        else:
            transform = np.fft.ifftn if self.inverse else np.fft.fftn
            result = transform(z, s=sizes, axes=axes)
        return _as_pairs(result, data.dtype)


@register("RDFT", 9)
class RDFT(_FFTBase):
    """Real-to-complex DFT; the last listed axis keeps n // 2 + 1 bins."""

    real_input = True

    def infer(self, inputs):
        data = inputs[0]
        axes = self.validate(inputs)
        if data.shape is None:
            return [TensorType(None, data.etype)]
        shape = list(data.shape) + [2]
        if axes is None:
            shape[:-1] = [ANY] * data.rank
            return [TensorType(tuple(shape), data.etype)]
        last = axes[-1]
        if len(inputs) == 3:
            sizes = self.known_sizes(inputs, axes)
            if sizes is None:
                shape[last] = ANY
                return [TensorType(tuple(shape), data.etype)]
            for a, s in zip(axes, sizes):
                if s != -1:
                    shape[a] = s
        shape[last] = _half_spectrum(shape[last])
        return [TensorType(tuple(shape), data.etype,
                           notes={last: f"{shape[last]} = n // 2 + 1 bins of the length-n axis {last}"})]

    def run(self, data, axes, signal_size=None):
        x = data.astype(np.float64)
        axes = self.runtime_axes(data, axes)
        sizes = _sizes_at_run(signal_size, axes, x.shape)
        out_dims = _output_dims(x.shape, axes, sizes)
        out_dims[axes[-1]] = _half_spectrum(sizes[-1])
        if 0 in sizes or 0 in x.shape:            # NumPy refuses empty transforms
            return _as_pairs(np.zeros(out_dims, np.complex128), data.dtype)
        return _as_pairs(np.fft.rfftn(x, s=sizes, axes=axes), data.dtype)


@register("IRDFT", 9)
class IRDFT(_FFTBase):
    """Complex-to-real inverse DFT; the last listed axis holds a half spectrum."""

    def infer(self, inputs):
        data = inputs[0]
        axes = self.validate(inputs)
        if data.shape is None:
            return [TensorType(None, data.etype)]
        shape = list(data.shape[:-1])
        if axes is None:
            return [TensorType((ANY,) * len(shape), data.etype)]
        last = axes[-1]
        sizes = self.known_sizes(inputs, axes) if len(inputs) == 3 else [-1] * len(axes)
        if sizes is None:
            shape[last] = ANY
            return [TensorType(tuple(shape), data.etype)]
        for a, s in zip(axes, sizes):
            if s != -1:
                shape[a] = s
        notes = None
        if sizes[-1] == -1:
            shape[last] = _full_length(data.shape[last])
            notes = {last: f"2 * ({data.shape[last]} - 1) samples from a half spectrum on axis {last}"}
        return [TensorType(tuple(shape), data.etype, notes=notes)]

    def run(self, data, axes, signal_size=None):
        z = _as_complex(data)
        axes = self.runtime_axes(data, axes)
        sizes = _sizes_at_run(signal_size, axes, z.shape)
        if signal_size is None or int(np.asarray(signal_size).reshape(-1)[-1]) == -1:
            sizes[-1] = 2 * max(z.shape[axes[-1]] - 1, 0)
        if 0 in sizes or 0 in z.shape:
            return np.zeros(_output_dims(z.shape, axes, sizes), data.dtype)
        return np.fft.irfftn(z, s=sizes, axes=axes).astype(data.dtype)


# ---------------------------------------------------------------- STFT / ISTFT

def _check_stft_types(inputs, what: str) -> None:
    data, window = inputs[0], inputs[1]
    if data.etype.name != "dynamic" and not data.etype.is_float:
        raise ShapeError(f"{what} must be a floating-point type, got {data.etype}")
    if window.etype.name != "dynamic" and data.etype.name != "dynamic" and window.etype != data.etype:
        raise ShapeError(f"window must have the element type of {what} ({data.etype}), got {window.etype}")
    for port, t in enumerate(inputs[2:], start=2):
        _check_index_input(t, f"input {port}")


def _check_frame_args(window: TensorType, frame_size: int | None, frame_step: int | None) -> None:
    if frame_size is not None:
        if frame_size <= 0:
            raise ShapeError(f"frame_size must be > 0, got {frame_size}")
        w = window.shape[0] if window.rank == 1 else None
        if isinstance(w, int) and not 0 < w <= frame_size:
            raise ShapeError(f"window {format_shape(window.shape)} must have 1 to frame_size={frame_size} values")
    if frame_step is not None and frame_step <= 0:
        raise ShapeError(f"frame_step must be > 0, got {frame_step}")


def _padded_window(window: np.ndarray, frame_size: int) -> np.ndarray:
    """The window centred in frame_size samples with zeros on both sides (left gets the floor)."""
    if not 0 < window.size <= frame_size:
        raise ShapeError(f"window has {window.size} values; it needs 1 to frame_size={frame_size}")
    padded = np.zeros(frame_size, np.float64)
    start = (frame_size - window.size) // 2
    padded[start:start + window.size] = window
    return padded


def _frame_args_at_run(frame_size, frame_step) -> tuple[int, int]:
    fs, step = int(np.asarray(frame_size).reshape(-1)[0]), int(np.asarray(frame_step).reshape(-1)[0])
    if fs <= 0 or step <= 0:
        raise ShapeError(f"frame_size ({fs}) and frame_step ({step}) must be > 0")
    return fs, step


@register("STFT", 15)
class STFT(Op):
    """Short-time Fourier transform of [signal] or [batch, signal] frames times a centred window."""

    def infer(self, inputs):
        signal, window, size_t, step_t = inputs
        _check_stft_types(inputs, "signal")
        _check_rank(signal, (1, 2), "signal")
        _check_rank(window, (1,), "window")
        _check_rank(size_t, (0,), "frame_size")
        _check_rank(step_t, (0,), "frame_step")
        if signal.shape is None:
            return [TensorType(None, signal.etype)]
        batch = signal.shape[:-1]
        frame_size, frame_step = _known_scalar(size_t, "frame_size"), _known_scalar(step_t, "frame_step")
        if frame_size is None or frame_step is None:
            return [TensorType(batch + (ANY, ANY, 2), signal.etype)]
        length = signal.shape[-1]
        hi = dim_bounds(length)[1]
        if frame_size <= 0 or (hi is not None and frame_size > hi):
            raise ShapeError(f"frame_size {frame_size} must be in [1, {length}] (signal {format_shape(signal.shape)})")
        _check_frame_args(window, frame_size, frame_step)
        frames = dim_map(lambda n: max(n - frame_size, 0) // frame_step + 1, length)
        bins = frame_size // 2 + 1
        dims = (bins, frames) if self.attrs.transpose_frames else (frames, bins)
        frames_axis, bins_axis = len(batch), len(batch) + 1
        if self.attrs.transpose_frames:
            frames_axis, bins_axis = bins_axis, frames_axis
        notes = {frames_axis: f"({length} - frame_size {frame_size}) // frame_step {frame_step} + 1 frames",
                 bins_axis: f"frame_size {frame_size} // 2 + 1 bins"}
        return [TensorType(batch + dims + (2,), signal.etype, notes=notes)]

    def run(self, signal, window, frame_size, frame_step):
        fs, step = _frame_args_at_run(frame_size, frame_step)
        if fs > signal.shape[-1]:
            raise ShapeError(f"frame_size {fs} is longer than the signal {list(signal.shape)}")
        frames = sliding_window_view(signal.astype(np.float64), fs, axis=-1)[..., ::step, :]
        spectrum = np.fft.rfft(frames * _padded_window(window, fs), axis=-1)     # [..., frames, bins]
        if self.attrs.transpose_frames:
            spectrum = np.swapaxes(spectrum, -1, -2)
        return _as_pairs(spectrum, signal.dtype)


@register("ISTFT", 16)
class ISTFT(Op):
    """Inverse STFT: per-frame inverse real DFT, windowed overlap-add, divided by the summed squared window."""

    def infer(self, inputs):
        data, window, size_t, step_t = inputs[:4]
        _check_stft_types(inputs, "data")
        _check_rank(data, (3, 4), "data")
        _check_rank(window, (1,), "window")
        _check_rank(size_t, (0,), "frame_size")
        _check_rank(step_t, (0,), "frame_step")
        frame_size, frame_step = _known_scalar(size_t, "frame_size"), _known_scalar(step_t, "frame_step")
        _check_frame_args(window, frame_size, frame_step)
        if frame_size is not None and data.is_static and data.shape[-3] != frame_size // 2 + 1:
            raise ShapeError(f"data {format_shape(data.shape)}: dimension -3 must be frame_size // 2 + 1 = "
                             f"{frame_size // 2 + 1}")
        if data.shape is None:
            return [TensorType(None, data.etype)]
        batch = data.shape[:-3]
        length: DimLike = ANY
        note = None
        if len(inputs) == 5:
            length_t = inputs[4]
            if length_t.rank not in (None, 0) and not (length_t.rank == 1 and dims_compatible(length_t.shape[0], 1)):
                raise ShapeError(f"signal_length must be a scalar or hold one value, got "
                                 f"{format_shape(length_t.shape)}")
            value = _known_scalar(length_t, "signal_length")
            if value is not None and value < -1:
                raise ShapeError(f"signal_length must be >= 0, got {value}")
            if value is not None and value >= 0:      # -1 leaves the length unknown, as in OpenVINO
                length, note = value, f"signal_length = {value}"
        elif frame_size is not None and frame_step is not None:
            trim = frame_size & ~1 if self.attrs.center else 0
            length = dim_map(lambda f: max(max(f - 1, 0) * frame_step + frame_size - trim, 0), data.shape[-2])
            note = (f"({data.shape[-2]} frames - 1) * frame_step {frame_step} + frame_size {frame_size}"
                    + (f" - {trim} (center)" if trim else ""))
        return [TensorType(batch + (length,), data.etype, notes={len(batch): note} if note else None)]

    def run(self, data, window, frame_size, frame_step, signal_length=None):
        fs, step = _frame_args_at_run(frame_size, frame_step)
        if data.shape[-3] != fs // 2 + 1:
            raise ShapeError(f"data {list(data.shape)}: dimension -3 must be frame_size // 2 + 1 = {fs // 2 + 1}")
        batched = data.reshape((-1,) + data.shape[-3:])                      # [batch, bins, frames, 2]
        batch, _, n_frames, _ = batched.shape
        frames = np.fft.irfft(_as_complex(batched), n=fs, axis=1).transpose(0, 2, 1)   # [batch, frames, fs]
        win = _padded_window(window, fs)
        full = (n_frames - 1) * step + fs
        positions = (np.arange(n_frames)[:, None] * step + np.arange(fs)).reshape(-1)
        # Overlap-add as one weighted histogram over (batch, position).
        flat = (np.arange(batch)[:, None] * full + positions).reshape(-1)
        summed = np.bincount(flat, weights=(frames * win).reshape(-1), minlength=batch * full).reshape(batch, full)
        win_sum = np.bincount(positions, weights=np.tile(win * win, n_frames), minlength=full)
        scale = math.sqrt(fs) if self.attrs.normalized else 1.0
        with np.errstate(divide="ignore", invalid="ignore"):
            signal = np.where(win_sum != 0, summed * scale / win_sum, 0.0)
        margin = fs // 2 if self.attrs.center else 0
        if signal_length is None:
            length = full - (fs & ~1) if self.attrs.center else full
        else:
            length = int(np.asarray(signal_length).reshape(-1)[0])
            if length < 0:
                raise ShapeError(f"signal_length must be >= 0, got {length}")
        out = np.zeros((batch, length), np.float64)
        kept = max(min(length, full - margin), 0)
        out[:, :kept] = signal[:, margin:margin + kept]
        return out.reshape(data.shape[:-3] + (length,)).astype(data.dtype)
