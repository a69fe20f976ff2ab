"""Long 1-D convolutions by FFT: overlap-save, the stride handled by phases.

An audio front end convolves one input channel (or a few) with filters hundreds of taps long:
a CREPE-style pitch tracker 1024 filters of 512 taps at stride 4, SincNet 80 of 251 at stride 1,
the benchmark's audio net 64 of 512 at stride 4 over a second at 16 kHz (127 M multiply-adds, half
of that network's time by im2col and BLAS, against OpenVINO's direct kernel at 215 GFLOP/s).
By FFT an output costs a few complex multiply-adds per input channel and stride phase and its
share of one inverse transform, whatever the kernel's length.

With stride S the kernel's taps k = S q + r and the input's positions S m + r fall into S phases,
and output j is a sum of stride-1 correlations of Q = ceil(K / S) taps (the kernel zero-padded to
S Q taps), one per input channel c and phase r:

    y[o, j] = sum_{c, r} sum_q w[o, c, S q + r] x[c, S (j + q) + r]

Over a block of N inputs of each phase, each correlation is the inverse transform of
X_{c,r}(f) conj(W_{o,c,r}(f)) (real transforms of length N); its first N - Q + 1 values are the
block's outputs, the last Q - 1 wrapped around and dropped (overlap-save).  The filters' transforms
are made once, when the layer is bound at load, for the block length chosen then (memory: C_in S
C_out (N / 2 + 1) complex values, 4 MiB for the audio net's layer against its 128 KiB filter).
Blocks of outputs, and the output channels within one, run in parts on every core.

Accuracy.  A transform's rounding error is relative to the block's whole energy, not to each
output: against float64 direct convolution, over random unit-scale inputs and filters of 250-512
taps, the largest f32 error is 0.2-0.4x the direct f32 method's (the audio layer 0.9e-6 against
2.5e-6: im2col's sums of 512 products round more than a transform of 4000 points does), and the
tests hold it to OpenVINO at the standard bound.  An output much smaller than its neighbourhood's scale (a filter that cancels the
input) keeps an absolute error of about 1e-7 of that scale where the direct sum's error shrinks
with it.  Only float32 and float64 data with a constant filter take this path (an integer
convolution's sums must be exact), and only data that `fft_suits`: a NaN or an infinity in the
input, or values large enough for a transform to overflow, run the direct kernels.
"""
from __future__ import annotations

import copy
import os

import numpy as np

from .. import threads
from .common import sum_of_squares
from .window import zero_extended

# Where the transforms pay, per output of one channel, one thread (min of 15 runs, 64 filters over
# 4k-16k outputs): the direct kernels about 0.03 ns a multiply-add, C_in K of them; the transforms
# about 2.5 ns plus 0.95 for each of the C_in S (input channel, stride phase) terms (its complex
# multiply-add and its share of the forward transforms).  With 20% to spare: C_in K at least
# FFT_FIXED_MACS + FFT_TERM_MACS C_in S.  Measured, direct against transforms: one channel, 64 taps
# at stride 1 2.9 against 3.5 ms; 160 at stride 4 1.2 / 1.5 (not taken); 128 at stride 1 4.4 / 3.8
# and at stride 2 2.6 / 2.3 (not taken); 256 at stride 4 1.9 / 1.7; 512 at stride 4 3.7 / 1.9;
# 251 at stride 1 (80 filters) 9.5 / 4.5; 4 channels of 64 taps 2.7 / 1.7; 16 of 64 4.5 / 2.2.
FFT_FIXED_MACS = 100
FFT_TERM_MACS = 38
# At most this many (input channel, stride phase) terms (each is 2 NumPy calls a block), and this
# many bytes of filter transforms
FFT_MAX_TERMS = 64
FFT_MAX_SPECTRA_BYTES = 64 << 20
# A block's transform length: at least this many times the taps per phase (the wrapped Q - 1
# outputs of each block are computed and dropped), at most FFT_BLOCK_LENGTH unless the taps need more
FFT_BLOCK_LENGTH = 8192
FFT_BLOCK_TAPS = 4


def fft_pays(filter_shape, geo, counts, itemsize: int = 4) -> bool:
    """Whether a forward convolution of this filter [G, Og, Cg, K...] takes `fft_conv`: 1-D, one
    group, no dilation, taps enough for their input channels and stride phases (FFT_FIXED_MACS,
    FFT_TERM_MACS), and filter transforms within FFT_MAX_TERMS and FFT_MAX_SPECTRA_BYTES.
    `IRRUN_FFT=off` turns the transforms off (then the direct kernels run every layer)."""
    groups, og, cg, *kernel = filter_shape
    if os.environ.get("IRRUN_FFT", "auto").strip().lower() in ("off", "0", "no"):
        return False
    if len(kernel) != 1 or groups != 1 or geo.dilations[0] != 1 or min(counts, default=0) <= 0:
        return False
    terms = cg * geo.strides[0]
    if terms > FFT_MAX_TERMS or cg * kernel[0] < FFT_FIXED_MACS + FFT_TERM_MACS * terms:
        return False
    length = block_length(-(-kernel[0] // geo.strides[0]), counts[0])
    return terms * og * (length // 2 + 1) * 2 * itemsize <= FFT_MAX_SPECTRA_BYTES


def _smooth_length(n: int) -> int:
    """The least 2^a 3^b 5^c at or above n: pocketfft's fastest lengths (3969 = 3^4 7^2 took 1.5x
    the time of 4000 = 2^5 5^3 for 64 inverse transforms)."""
    best = 1 << max(n - 1, 0).bit_length()
    five = 1
    while five < best:
        three = five
        while three < best:
            two = three
            while two < n:
                two *= 2
            best = min(best, two)
            three *= 3
        five *= 5
    return best


def block_length(phase_taps: int, outputs: int) -> int:
    """The transform length for outputs in blocks: one block for all where it is short enough."""
    return _smooth_length(min(outputs + phase_taps - 1, max(FFT_BLOCK_LENGTH, FFT_BLOCK_TAPS * phase_taps)))


class SpectralFilter:
    """A filter [C_out, C_in, K] as `fft_conv` multiplies it at stride S and transform length N:
    conj(rfft) of each (input channel, phase) term's taps, [C_in * S, C_out, N / 2 + 1]."""

    def __init__(self, w: np.ndarray, stride: int, length: int):
        c_out, c_in, taps = w.shape
        self.stride, self.length, self.c_out, self.c_in = stride, length, c_out, c_in
        self.phase_taps = -(-taps // stride)
        padded = np.zeros((c_out, c_in, self.phase_taps * stride), w.dtype)
        padded[..., :taps] = w
        # w_r[q] = w[S q + r]: [C_out, C_in, Q, S] -> [C_in, S, C_out, Q]
        phases = padded.reshape(c_out, c_in, self.phase_taps, stride).transpose(1, 3, 0, 2)
        spectra = np.fft.rfft(phases.reshape(c_in * stride, c_out, self.phase_taps), length, axis=-1)
        self.spectra = np.ascontiguousarray(np.conj(spectra))
        self.dtype = w.dtype
        # The largest input magnitude whose transforms stay finite, with room to spare: a block's
        # forward transform grows it up to N times, each of the terms' products by the filter's
        # largest transform, the inverse transform's sums N times more before its 1 / N
        growth = c_in * stride * float(length) ** 2 * max(float(np.abs(self.spectra).max(initial=0)), 1.0)
        self.input_limit = float(np.finfo(w.dtype).max) / 16 / growth

    @property
    def outputs_per_block(self) -> int:
        return self.length - self.phase_taps + 1

    def output_channels(self, first: int, stop: int) -> SpectralFilter:
        """Output channels [first, stop) as a filter of their own, a view of this one's transforms
        (a paired run's half of a layer cut along its channels: no second copy of its filter)."""
        part = copy.copy(self)
        part.spectra = self.spectra[:, first:stop]
        part.c_out = stop - first
        return part


def fft_suits(x: np.ndarray, f: SpectralFilter) -> bool:
    """Whether x's values suit the transforms: all finite (a NaN or an infinity would spread over
    every output of its block, where the direct sums keep it to the windows that read it) and
    within `f.input_limit` (no transform overflows where the direct sums would not); by x's sum of
    squares, which bounds its largest magnitude."""
    squares = sum_of_squares(x)
    return bool(np.isfinite(squares) and squares <= f.input_limit * f.input_limit)


def fft_conv(x: np.ndarray, f: SpectralFilter, whole, counts) -> np.ndarray:
    """x [N, C_in, L] convolved by `f` (its stride, the input padded to `whole` = [(lo, hi)]) into
    [N, C_out, counts[0]]."""
    n, stride, outputs = x.shape[0], f.stride, counts[0]
    block, length = f.outputs_per_block, f.length
    blocks = -(-outputs // block)
    # every phase's samples the blocks read, zero past the padded input: phase r of input position
    # lo + S m + r, for m < (blocks - 1) * block + length
    span = (blocks - 1) * block + length
    padded = zero_extended(x, [(whole[0][0], whole[0][0] + span * stride)])
    phases = padded.reshape(n, f.c_in, span, stride).transpose(0, 1, 3, 2).reshape(n, f.c_in * stride, span)
    out = np.empty((n, f.c_out, outputs), f.dtype)
    jobs = [(i, b) for i in range(n) for b in range(blocks)]
    work = f.c_out * length * (4 + f.spectra.shape[0])         # a block's, in adds (threads.parts_for)
    channel_parts = 1 if len(jobs) > 1 else threads.parts_for(work, most=f.c_out)

    def run_block(i, b, o0, o1):
        first = b * block
        spectra = np.fft.rfft(phases[i, :, first:first + length], length, axis=-1)    # [terms, F]
        total = np.multiply(f.spectra[0, o0:o1], spectra[0])
        product = np.empty_like(total)
        for term in range(1, spectra.shape[0]):
            np.multiply(f.spectra[term, o0:o1], spectra[term], out=product)
            total += product
        count = min(block, outputs - first)
        out[i, o0:o1, first:first + count] = np.fft.irfft(total, length, axis=-1)[:, :count]

    if channel_parts > 1:
        i, b = jobs[0]
        threads.run_parts(lambda o0, o1: run_block(i, b, o0, o1), threads.bounds(f.c_out, channel_parts))
    else:
        def run_jobs(a, b):
            for i, k in jobs[a:b]:
                run_block(i, k, 0, f.c_out)
        threads.run_parts(run_jobs, threads.bounds(len(jobs), threads.parts_for(work * len(jobs), most=len(jobs))))
    return out
