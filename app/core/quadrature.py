"""Quadrature nodes on [0, 1] for path integrals (integrated gradients).

Gauss-Legendre is what Captum uses and is near-optimal when the integrand is smooth along the whole path. Along
a BERT's interpolation path it often is not: the class probability can jump within a few hundredths of the path
(measured on the offline pair: a logit going from -4 to +2 between alpha 0.48 and 0.53), which 50 Gauss-Legendre
nodes integrate to only 1e-2. The sinh map (Johnston & Elliott's transformation for nearly singular integrands)
crowds the nodes around such a spot, reaching 1e-4 with 24 nodes on the same paths (see benchmarks/README.md).
"""
from __future__ import annotations

import numpy as np


def gauss_legendre(n: int) -> tuple[np.ndarray, np.ndarray]:
    """(alphas, weights) of the n-point Gauss-Legendre rule on [0, 1]."""
    if n < 1:
        raise ValueError(f"n: {n} nodes; need at least 1")
    x, w = np.polynomial.legendre.leggauss(n)
    return (x + 1) / 2, w / 2


def sinh_mapped(n: int, centre: float, width: float) -> tuple[np.ndarray, np.ndarray]:
    """Gauss-Legendre in t, mapped by alpha = centre + width * sinh(mu t + eta): nodes dense within about
    `width` of `centre`, still covering [0, 1] exactly (alpha(-1) = 0, alpha(1) = 1)."""
    if not 0.0 <= centre <= 1.0:
        raise ValueError(f"centre: {centre} is outside [0, 1]")
    if width <= 0:
        raise ValueError(f"width: {width} must be positive")
    x, w = np.polynomial.legendre.leggauss(n)
    right, left = np.arcsinh((1 - centre) / width), np.arcsinh(centre / width)
    mu, eta = (right + left) / 2, (right - left) / 2
    alphas = centre + width * np.sinh(mu * x + eta)
    weights = w * width * mu * np.cosh(mu * x + eta)
    return np.clip(alphas, 0.0, 1.0), weights


def focus(alphas: np.ndarray, values: np.ndarray) -> tuple[float, float]:
    """(centre, width) for the next rule: the peak of |integrand|, located by a parabola through the largest
    node and its neighbours (a probability jump makes d/dalpha F a narrow bump), width a quarter of the span."""
    order = np.argsort(alphas)
    a, v = alphas[order], np.abs(values[order])
    if len(a) < 3:
        return 0.5, 0.25
    k = min(max(int(np.argmax(v)), 1), len(a) - 2)
    x, y = a[k - 1 : k + 2], v[k - 1 : k + 2]
    c2, c1, _ = np.polyfit(x, y, 2)
    centre = -c1 / (2 * c2) if c2 < 0 else a[k]
    centre = float(np.clip(centre, x[0], x[2]))
    return centre, float(max((x[2] - x[0]) / 4, 1e-3))

