import numpy as np
import pytest

from app.core.quadrature import gauss_legendre, sinh_mapped, focus


def test_gauss_legendre_is_exact_for_polynomials():
    a, w = gauss_legendre(8)
    for k in range(16):  # exact up to degree 2n - 1
        assert (w * a**k).sum() == pytest.approx(1 / (k + 1), rel=1e-12)


def test_sinh_map_covers_the_interval_and_integrates_smooth_functions():
    a, w = sinh_mapped(24, 0.3, 0.05)
    assert a.min() >= 0 and a.max() <= 1 and np.all(np.diff(a) > 0)
    assert w.sum() == pytest.approx(1.0, abs=1e-10)
    assert (w * np.exp(a)).sum() == pytest.approx(np.e - 1, rel=1e-8)


@pytest.mark.parametrize("centre", [0.02, 0.5, 0.93])
def test_sinh_map_beats_gauss_legendre_on_a_sharp_peak(centre):
    eps = 0.01  # a Lorentzian peak, the shape of a probability jumping along the path
    f = lambda x: eps / ((x - centre) ** 2 + eps**2)
    exact = np.arctan((1 - centre) / eps) + np.arctan(centre / eps)
    a, w = gauss_legendre(24)
    plain = abs((w * f(a)).sum() - exact)
    c, width = focus(a, f(a))
    assert abs(c - centre) < 0.05
    a, w = sinh_mapped(24, c, width)
    mapped = abs((w * f(a)).sum() - exact)
    assert mapped < plain / 10


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="centre"):
        sinh_mapped(8, 1.5, 0.1)
    with pytest.raises(ValueError, match="width"):
        sinh_mapped(8, 0.5, 0)
    with pytest.raises(ValueError, match="n: 0"):
        gauss_legendre(0)
