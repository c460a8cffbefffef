import numpy as np
import pytest

from app.core.ground.quadrature import focus, gauss_legendre, peaked, sinh_mapped, transplanted


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


def test_transplanted_rule_covers_the_interval_and_integrates_smooth_functions():
    a, w = transplanted(20)
    assert a.min() > 0 and a.max() < 1 and np.all(np.diff(a) > 0)
    assert np.allclose(a, 1 - a[::-1])  # symmetric, as the map is odd
    assert w.sum() == pytest.approx(1.0, abs=1e-12)
    assert (w * np.exp(a)).sum() == pytest.approx(np.e - 1, rel=1e-12)
    assert np.allclose(transplanted(12, degree=1)[0], gauss_legendre(12)[0])  # degree 1 is the identity map


@pytest.mark.parametrize("height", [0.05, 0.1])
def test_transplanted_beats_gauss_legendre_in_a_thin_strip(height):
    """Poles spread along the path at a small height above it (what rational fits of BERT's integrand show):
    the even node density of the transplanted rule wins at the same number of nodes."""
    centres = np.linspace(0.1, 0.9, 9)
    f = lambda x: sum(height / ((x - c) ** 2 + height**2) for c in centres)
    exact = sum(np.arctan((1 - c) / height) + np.arctan(c / height) for c in centres)
    for n in (32, 48, 64):
        errs = [abs((w * f(a)).sum() - exact) for a, w in (gauss_legendre(n), transplanted(n))]
        assert errs[1] < errs[0] / 5, (n, errs)


def test_peaked_tells_a_jump_from_a_smooth_path():
    a, w = transplanted(16)
    assert peaked(w, 0.01 / ((a - 0.5) ** 2 + 1e-4))
    assert not peaked(w, np.exp(a))
    assert not peaked(w, np.sin(3 * np.pi * a))
    assert not peaked(w, np.zeros_like(a))


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="centre"):
        sinh_mapped(8, 1.5, 0.1)
    with pytest.raises(ValueError, match="width"):
        sinh_mapped(8, 0.5, 0)
    with pytest.raises(ValueError, match="n: 0"):
        gauss_legendre(0)
    with pytest.raises(ValueError, match="degree: 4"):
        transplanted(8, degree=4)
