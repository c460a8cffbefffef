"""Quadrature nodes on [0, 1] for path integrals (integrated gradients).

Gauss-Legendre is what Captum uses and is near-optimal when the integrand is smooth along the whole path. Along
a BERT's interpolation path it often is not: the class probability can jump within a few hundredths of the path
(measured on the offline pair: a logit going from -4 to +2 between alpha 0.48 and 0.53), which 50 Gauss-Legendre
nodes integrate to only 1e-2. The sinh map (Johnston & Elliott's transformation for nearly singular integrands)
crowds the nodes around such a spot, reaching 1e-4 with 24 nodes on the same paths (see benchmarks/README.md).
Where the path is smooth but its integrand is analytic only in a thin strip around [0, 1] (rational fits of
BERT's put the nearest poles 0.02-0.06 off the real axis, spread along the path), Gauss-Legendre wastes nodes
crowding the ends; Hale & Trefethen's transplanted rule (`transplanted`) spreads them evenly and needs fewer.
"""
from __future__ import annotations

import numpy as np


def _legendre(n: int) -> tuple[np.ndarray, np.ndarray]:
    """Gauss-Legendre nodes and weights on [-1, 1], the rule every map below starts from."""
    if n < 1:
        raise ValueError(f"n: {n} nodes; need at least 1")
    return np.polynomial.legendre.leggauss(n)


def gauss_legendre(n: int) -> tuple[np.ndarray, np.ndarray]:
    """(alphas, weights) of the n-point Gauss-Legendre rule on [0, 1]."""
    x, w = _legendre(n)
    return (x + 1) / 2, w / 2


def transplanted(n: int, degree: int = 9) -> tuple[np.ndarray, np.ndarray]:
    """Gauss-Legendre transplanted by the "sausage" map of Hale & Trefethen (SIAM J. Numer. Anal. 46, 2008): the
    map is arcsin's Taylor polynomial of odd `degree`, normalised to fix the ends. It trades the exactness for
    polynomials for a uniform node density; on the offline pair's paths 20 nodes do as well as 24 (BERT) to 28
    (ALBERT) Gauss-Legendre nodes (benchmarks/README.md)."""
    if degree < 1 or degree % 2 == 0:
        raise ValueError(f"degree: {degree}; the map needs an odd degree >= 1")
    x, w = _legendre(n)
    powers = np.arange(1, degree + 1, 2)
    coef = np.ones(len(powers))
    for k in range(1, len(powers)):  # arcsin s = sum (2k)! / (4^k k!^2 (2k + 1)) s^(2k+1)
        coef[k] = coef[k - 1] * (2 * k - 1) / (2 * k) * (2 * k - 1) / (2 * k + 1)
    coef /= coef.sum()
    s = (coef * x[:, None] ** powers).sum(1)
    ds = (coef * powers * x[:, None] ** (powers - 1)).sum(1)
    return (s + 1) / 2, w * ds / 2


def sinh_mapped(n: int, centre: float, width: float) -> tuple[np.ndarray, np.ndarray]:
    """Gauss-Legendre in t, mapped by alpha = centre + width * sinh(mu t + eta): nodes dense within about
    `width` of `centre`, still covering [0, 1] exactly (alpha(-1) = 0, alpha(1) = 1)."""
    if not 0.0 <= centre <= 1.0:
        raise ValueError(f"centre: {centre} is outside [0, 1]")
    if width <= 0:
        raise ValueError(f"width: {width} must be positive")
    x, w = _legendre(n)
    right, left = np.arcsinh((1 - centre) / width), np.arcsinh(centre / width)
    mu, eta = (right + left) / 2, (right - left) / 2
    alphas = centre + width * np.sinh(mu * x + eta)
    weights = w * width * mu * np.cosh(mu * x + eta)
    return np.clip(alphas, 0.0, 1.0), weights


def peaked(weights: np.ndarray, values: np.ndarray, ratio: float = 5.0) -> bool:
    """True when |integrand| has a narrow peak (max over mean above `ratio`): a probability jump, which a
    sinh-mapped rule resolves, rather than a smooth path, which a larger even rule does."""
    v = np.abs(values)
    mean = float((weights * v).sum() / max(weights.sum(), 1e-300))
    return bool(v.max() > ratio * mean) if mean > 0 else False


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

