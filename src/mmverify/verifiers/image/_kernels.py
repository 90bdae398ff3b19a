"""Single-pass numba kernels behind :mod:`ssim` and :mod:`fill`.

Numpy versions of these computations are memory-bound (every step writes a full-size temporary);
these loops keep running integer window sums instead, so an image is read once.  Window sums of
``uint8`` values are exact in int64, so results equal the reference formulas up to the order of
the final float accumulation (~1e-12).  Compiled on first use and cached on disk.
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def ssim_constant_mean(image, constant, win, c1, c2):  # pragma: no cover - compiled
    """Mean SSIM of a uint8 (H, W, C) image against a flat image with per-channel ``constant``."""
    height, width, channels = image.shape
    n = win * win
    cov_norm = n / (n - 1.0)
    col_sum = np.zeros((channels, width), np.int64)
    col_sq = np.zeros((channels, width), np.int64)
    for r in range(win):
        for x in range(width):
            for ch in range(channels):
                v = np.int64(image[r, x, ch])
                col_sum[ch, x] += v
                col_sq[ch, x] += v * v
    total = 0.0
    for top in range(height - win + 1):
        if top > 0:
            for x in range(width):
                for ch in range(channels):
                    old = np.int64(image[top - 1, x, ch])
                    new = np.int64(image[top + win - 1, x, ch])
                    col_sum[ch, x] += new - old
                    col_sq[ch, x] += new * new - old * old
        for ch in range(channels):
            c = constant[ch]
            cc = c * c
            s = np.int64(0)
            q = np.int64(0)
            for x in range(win):
                s += col_sum[ch, x]
                q += col_sq[ch, x]
            for left in range(width - win + 1):
                if left > 0:
                    s += col_sum[ch, left + win - 1] - col_sum[ch, left - 1]
                    q += col_sq[ch, left + win - 1] - col_sq[ch, left - 1]
                ux = s / n
                vx = cov_norm * (q / n - ux * ux)
                total += (2.0 * ux * c + c1) * c2 / ((ux * ux + cc + c1) * (vx + c2))
    count = (height - win + 1) * (width - win + 1) * channels
    return total / count


@njit(cache=True, nogil=True)
def ssim_pair_mean(image_a, image_b, win, c1, c2):  # pragma: no cover - compiled
    """Mean SSIM of two uint8 (H, W, C) images (uniform window, sample covariance)."""
    height, width, channels = image_a.shape
    n = win * win
    cov_norm = n / (n - 1.0)
    cols = np.zeros((5, channels, width), np.int64)  # sums of a, b, a*a, b*b, a*b per column
    for r in range(win):
        for x in range(width):
            for ch in range(channels):
                a = np.int64(image_a[r, x, ch])
                b = np.int64(image_b[r, x, ch])
                cols[0, ch, x] += a
                cols[1, ch, x] += b
                cols[2, ch, x] += a * a
                cols[3, ch, x] += b * b
                cols[4, ch, x] += a * b
    total = 0.0
    for top in range(height - win + 1):
        if top > 0:
            for x in range(width):
                for ch in range(channels):
                    a0 = np.int64(image_a[top - 1, x, ch])
                    b0 = np.int64(image_b[top - 1, x, ch])
                    a1 = np.int64(image_a[top + win - 1, x, ch])
                    b1 = np.int64(image_b[top + win - 1, x, ch])
                    cols[0, ch, x] += a1 - a0
                    cols[1, ch, x] += b1 - b0
                    cols[2, ch, x] += a1 * a1 - a0 * a0
                    cols[3, ch, x] += b1 * b1 - b0 * b0
                    cols[4, ch, x] += a1 * b1 - a0 * b0
        for ch in range(channels):
            sa = np.int64(0)
            sb = np.int64(0)
            saa = np.int64(0)
            sbb = np.int64(0)
            sab = np.int64(0)
            for x in range(win):
                sa += cols[0, ch, x]
                sb += cols[1, ch, x]
                saa += cols[2, ch, x]
                sbb += cols[3, ch, x]
                sab += cols[4, ch, x]
            for left in range(width - win + 1):
                if left > 0:
                    new = left + win - 1
                    old = left - 1
                    sa += cols[0, ch, new] - cols[0, ch, old]
                    sb += cols[1, ch, new] - cols[1, ch, old]
                    saa += cols[2, ch, new] - cols[2, ch, old]
                    sbb += cols[3, ch, new] - cols[3, ch, old]
                    sab += cols[4, ch, new] - cols[4, ch, old]
                ux = sa / n
                uy = sb / n
                vx = cov_norm * (saa / n - ux * ux)
                vy = cov_norm * (sbb / n - uy * uy)
                vxy = cov_norm * (sab / n - ux * uy)
                total += ((2.0 * ux * uy + c1) * (2.0 * vxy + c2)) / ((ux * ux + uy * uy + c1) * (vx + vy + c2))
    count = (height - win + 1) * (width - win + 1) * channels
    return total / count


@njit(cache=True, nogil=True)
def channel_sums(image):  # pragma: no cover - compiled
    """Exact per-channel sums of a uint8 (H, W, C) image."""
    height, width, channels = image.shape
    sums = np.zeros(channels, np.int64)
    for y in range(height):
        for x in range(width):
            for ch in range(channels):
                sums[ch] += image[y, x, ch]
    return sums


@njit(cache=True, nogil=True)
def count_near(image, color, max_sq_distance):  # pragma: no cover - compiled
    """Number of pixels whose squared RGB distance to ``color`` is <= ``max_sq_distance``."""
    height, width, channels = image.shape
    count = 0
    for y in range(height):
        for x in range(width):
            d = np.int64(0)
            for ch in range(channels):
                diff = np.int64(image[y, x, ch]) - color[ch]
                d += diff * diff
            if d <= max_sq_distance:
                count += 1
    return count
