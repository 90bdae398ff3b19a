"""Mean SSIM with scikit-image's default semantics, computed from exact integer window sums.

``skimage.metrics.structural_similarity`` (defaults: 7x7 uniform window, sample covariance,
K1=0.01, K2=0.03, data range 255 for uint8, channel mean) filters the whole image with reflected
borders and then discards a ``(win-1)//2`` margin.  The pixels it keeps are exactly those whose window
lies inside the image, so the padding never matters: every statistic needed is a plain window sum.
For ``uint8`` inputs those sums are integers, computed exactly with cumulative sums in int64.

Against a *constant* image the reference terms vanish (mean = c, variance = covariance = 0), so
SSIM needs only the window sums of x and x**2.  ``uint8`` images go through single-pass numba
kernels (:mod:`._kernels`); other dtypes use the vectorised numpy path below.
"""

from __future__ import annotations

import numpy as np

K1 = 0.01
K2 = 0.03
DEFAULT_WIN = 7


def _validate(image: np.ndarray, win_size: int) -> None:
    if win_size < 3 or win_size % 2 == 0:
        raise ValueError(f"win_size must be an odd integer >= 3, got {win_size}")
    if image.ndim not in (2, 3):
        raise ValueError(f"expected an (H, W) or (H, W, C) image, got shape {image.shape}")
    if min(image.shape[0], image.shape[1]) < win_size:
        raise ValueError(f"image {image.shape[:2]} is smaller than the {win_size}x{win_size} SSIM window")


def _data_range(image: np.ndarray, data_range: float | None) -> float:
    if data_range is not None:
        if data_range <= 0:
            raise ValueError("data_range must be positive")
        return float(data_range)
    if image.dtype == np.uint8:
        return 255.0
    raise ValueError("data_range is required for non-uint8 images")


def _hwc(image: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(image[:, :, None] if image.ndim == 2 else image)


def window_sums(values: np.ndarray, win_size: int) -> np.ndarray:
    """Sums over every ``win x win`` window fully inside the image (axes 0 and 1); int64 or float64."""
    acc = np.int64 if np.issubdtype(values.dtype, np.integer) else np.float64
    rows = np.cumsum(values, axis=0, dtype=acc)
    rows = np.concatenate([rows[win_size - 1 : win_size], rows[win_size:] - rows[:-win_size]], axis=0)
    cols = np.cumsum(rows, axis=1, dtype=acc)
    return np.concatenate([cols[:, win_size - 1 : win_size], cols[:, win_size:] - cols[:, :-win_size]], axis=1)


def _ssim_map_mean(
    sum_x: np.ndarray,
    sum_y: np.ndarray | float,
    sum_xx: np.ndarray,
    sum_yy: np.ndarray | float,
    sum_xy: np.ndarray,
    n: int,
    data_range: float,
) -> float:
    c1 = (K1 * data_range) ** 2
    c2 = (K2 * data_range) ** 2
    cov_norm = n / (n - 1.0)
    ux = sum_x / n
    uy = sum_y / n
    vx = cov_norm * (sum_xx / n - ux * ux)
    vy = cov_norm * (sum_yy / n - uy * uy)
    vxy = cov_norm * (sum_xy / n - ux * uy)
    numerator = (2.0 * ux * uy + c1) * (2.0 * vxy + c2)
    denominator = (ux * ux + uy * uy + c1) * (vx + vy + c2)
    ratio = numerator / denominator
    # channel-wise means then their mean == overall mean (all channels have the same extent)
    return float(ratio.mean(dtype=np.float64))


def structural_similarity(
    image_a: np.ndarray, image_b: np.ndarray, *, win_size: int = DEFAULT_WIN, data_range: float | None = None
) -> float:
    """Mean SSIM of two same-shape images (channels last), equal to skimage's with ``channel_axis=-1``."""
    if image_a.shape != image_b.shape:
        raise ValueError(f"shapes differ: {image_a.shape} vs {image_b.shape}")
    _validate(image_a, win_size)
    rng = _data_range(image_a, data_range)
    if image_a.dtype == np.uint8 and image_b.dtype == np.uint8:
        from ._kernels import ssim_pair_mean

        c1, c2 = (K1 * rng) ** 2, (K2 * rng) ** 2
        return float(ssim_pair_mean(_hwc(image_a), _hwc(image_b), win_size, c1, c2))
    a = image_a.astype(np.float64)
    b = image_b.astype(np.float64)
    n = win_size * win_size
    return _ssim_map_mean(
        window_sums(a, win_size),
        window_sums(b, win_size),
        window_sums(a * a, win_size),
        window_sums(b * b, win_size),
        window_sums(a * b, win_size),
        n,
        rng,
    )


def ssim_to_constant(
    image: np.ndarray,
    value: float | tuple[float, ...] | np.ndarray,
    *,
    win_size: int = DEFAULT_WIN,
    data_range: float | None = None,
) -> float:
    """Mean SSIM of ``image`` against a flat image of ``value`` (one value, or one per channel)."""
    _validate(image, win_size)
    rng = _data_range(image, data_range)
    channels = 1 if image.ndim == 2 else image.shape[2]
    constant = np.broadcast_to(np.asarray(value, dtype=np.float64), (channels,))
    if image.dtype == np.uint8:
        from ._kernels import ssim_constant_mean

        c1, c2 = (K1 * rng) ** 2, (K2 * rng) ** 2
        return float(ssim_constant_mean(_hwc(image), np.ascontiguousarray(constant), win_size, c1, c2))
    if image.ndim == 2:
        constant = constant[0]
    x = image.astype(np.float64)
    n = win_size * win_size
    sum_x = window_sums(x, win_size)
    sum_xx = window_sums(x * x, win_size)
    sum_c = constant * n
    # with a constant reference: sum_y = n*c, sum_yy = n*c^2, sum_xy = c*sum_x (exact)
    return _ssim_map_mean(sum_x, sum_c, sum_xx, sum_c * constant, sum_x * constant, n, rng)
