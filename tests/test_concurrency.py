"""Many threads on one classifier at once, as the app's queue does: every call succeeds and agrees with a
sequential run (a shared fast tokenizer used to fail with "Already borrowed")."""
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from app.core.execution.inference import predict
from app.core.ground.data import Example
from app.core.techniques.saliency import GradientXInput

from .conftest import SENTENCES


def test_concurrent_predictions_and_saliency(tiny_pair):
    clf = tiny_pair.models[1]
    exs = [Example((s * (1 + i % 3),)) for i, s in enumerate(SENTENCES * 4)]
    expected = [predict(clf, [e]).probs[0] for e in exs]
    expected_maps = [GradientXInput(clf).attribute(e).scores for e in exs]

    def work(i):
        e = exs[i]
        return predict(clf, [e], batch_size=1 + i % 4).probs[0], GradientXInput(clf).attribute(e).scores

    with ThreadPoolExecutor(max_workers=8) as pool:
        got = list(pool.map(work, range(len(exs))))
    for (probs, scores), want, want_map in zip(got, expected, expected_maps):
        np.testing.assert_allclose(probs, want, atol=1e-5)
        assert len(scores) == len(want_map) and any(abs(s) > 0 for s in want_map)
        np.testing.assert_allclose(scores, want_map, atol=1e-5)  # no thread saw another's tokens or gradients


def test_tokenizer_copies_are_per_live_thread_and_outlive_their_threads(tiny_dirs):
    """Live threads never share a copy (the "Already borrowed" failure); a new thread takes over the copy of an
    ended one instead of paying ~25 ms for its own (the app's worker threads are retired when idle)."""
    import threading

    from app.core.models.loading import load
    from app.core.models.registry import TASKS, ModelSpec

    clf = load(ModelSpec("M", str(tiny_dirs["bert"]), "bert", TASKS["sst2"]))
    assert clf.tokenizer is clf.base_tokenizer  # the main thread's own
    assert not clf._spare  # a CLI run on the main thread pays for no copy
    clf.reserve_tokenizer()  # what the app and LIT do before serving
    spare = clf._spare[0]
    seen, both_alive = {}, threading.Barrier(2)

    def grab(key, wait=False):
        seen[key] = clf.tokenizer
        if wait:
            both_alive.wait()

    first = threading.Thread(target=grab, args=("first",))
    first.start()
    first.join()
    assert seen["first"] is spare
    pair = [threading.Thread(target=grab, args=(k, True)) for k in ("a", "b")]
    for t in pair:
        t.start()
    for t in pair:
        t.join()
    assert seen["a"] is not seen["b"]
    assert spare in (seen["a"], seen["b"])  # the ended thread's copy went to one of them
    assert all(t is not clf.base_tokenizer for t in seen.values())
    assert predict(clf, [Example(("a fine film",))]).probs.shape == (1, 2)
