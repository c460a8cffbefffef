"""Many threads on one classifier at once, as the app's queue does: every call succeeds and agrees with a
sequential run (a shared fast tokenizer used to fail with "Already borrowed")."""
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from app.core.data import Example
from app.core.inference import predict
from app.core.saliency import GradientXInput

from .conftest import SENTENCES


def test_concurrent_predictions_and_saliency(tiny_pair):
    clf = tiny_pair.models[1]
    exs = [Example((s * (1 + i % 3),)) for i, s in enumerate(SENTENCES * 4)]
    expected = [predict(clf, [e]).probs[0] for e in exs]

    def work(i):
        e = exs[i]
        p = predict(clf, [e], batch_size=1 + i % 4).probs[0]
        GradientXInput(clf).attribute(e)
        return p

    with ThreadPoolExecutor(max_workers=8) as pool:
        got = list(pool.map(work, range(len(exs))))
    for a, b in zip(got, expected):
        np.testing.assert_allclose(a, b, atol=1e-5)
