"""CUDA graphs (app/core/execution/graphs.py): small batches, integrated gradients' rounds, and a dataset's batches when
asked. Everything but the recording runs here on the CPU: the tests record with `eager`, which runs the forward
again into the same output tensor at each replay, as a graph does. On a GPU, benchmarks/gpu.py and the device run of
this file record real graphs (the tests run "cuda" too)."""
import contextlib
import copy

import numpy as np
import pytest
import torch

from app.core.execution import cls_path, graphs
from app.core.execution.inference import length_batches, pad, predict, tokenize
from app.core.ground.data import Example

from .conftest import SENTENCES, shared


def eager(fn):
    """A stand-in for recording: the output tensor (or tuple of them) is kept, and each replay writes the
    forward's answer into it."""
    out = fn()

    def replay():
        new = fn()
        for kept, fresh in zip(out, new) if isinstance(out, tuple) else [(out, new)]:
            kept.copy_(fresh)

    return replay, out


def graphs_on_the_cpu(monkeypatch) -> None:
    """Graphs on for the CPU as if it were a CUDA device, recorded with `eager`."""
    monkeypatch.setattr(graphs, "enabled", lambda clf: True)
    monkeypatch.setattr(graphs, "cuda_capture", lambda fn, pool: (*eager(fn), None))


@contextlib.contextmanager
def graphs_off(monkeypatch):
    """Graphs off for the calls inside: the eager answers the replayed ones are held to."""
    with monkeypatch.context() as off:
        off.setattr(graphs, "enabled", lambda clf: False)
        yield


def _eager_logits(clf, exs) -> tuple[np.ndarray, np.ndarray]:
    """(the rows of `exs` in their one length-sorted batch, that batch's logits from the [CLS] path, eagerly)."""
    from app.core.ground.precision import autocast

    with torch.inference_mode(), autocast(clf):
        enc = tokenize(clf, exs)
        (idx,) = length_batches(enc, 256)
        return idx, cls_path.inputs_logits(clf, pad(clf, enc, idx)).float().cpu().numpy()


def _batch(clf, texts):
    enc = tokenize(clf, [Example(t if isinstance(t, tuple) else (t,)) for t in texts])
    return pad(clf, enc, np.arange(len(texts)))


def _expected_bucket(batch) -> tuple[int, int]:
    """The bucket a batch should land in, by the documented rule: rows up to 1/2/4/8, tokens up to 16/32/64/..."""
    rows, width = batch["input_ids"].shape
    return (next(r for r in (1, 2, 4, 8) if r >= rows), next(t for t in (16, 32, 64, 128) if t >= width))


def _own(clf):
    clf = copy.copy(clf)
    clf.graphs = None
    return clf


@torch.inference_mode()
@pytest.mark.parametrize("which", [0, 1])
def test_a_padded_bucket_gives_the_batchs_own_logits(tiny_pair, which):
    """Batches of 1, 2, 3 and 5 rows of mixed lengths, padded to their buckets (rows 1/2/4/8, tokens 16/32),
    against the [CLS] path on the unpadded batch; two batches in one bucket in turn each get their own answer
    (the static inputs are refilled, none of the longer batch's tokens are left), and a returned answer is not
    overwritten by the next replay."""
    clf = tiny_pair.models[which]
    rep = graphs.Replayer(clf, capture=eager)
    seen, buckets = [], set()
    for texts in ([SENTENCES[2]], SENTENCES[:2], SENTENCES[1:4], SENTENCES[:5], [SENTENCES[1]],
                  [SENTENCES[2] + " " + SENTENCES[0]]):
        batch = _batch(clf, texts)
        got = rep.logits(batch)
        want = cls_path.inputs_logits(clf, batch)
        assert got.shape == want.shape
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
        seen.append((got.clone(), got))
        buckets.add(_expected_bucket(batch))
    assert sorted(rep.graphs) == sorted(buckets) and len(buckets) >= 4
    for before, returned in seen:
        assert torch.equal(before, returned)


@torch.inference_mode()
def test_pairs_with_segment_ids_fill_their_bucket(tiny_nli_pair):
    clf = tiny_nli_pair.models[0]
    rep = graphs.Replayer(clf, capture=eager)
    batch = _batch(clf, [(a, b) for a, b in zip(SENTENCES[:3], reversed(SENTENCES[:3]))])
    assert "token_type_ids" in batch
    torch.testing.assert_close(rep.logits(batch), cls_path.inputs_logits(clf, batch), atol=1e-5, rtol=1e-5)


@torch.inference_mode()
def test_batches_past_the_largest_bucket_run_eagerly(tiny_pair):
    clf = tiny_pair.models[0]
    rep = graphs.Replayer(clf, capture=eager)
    assert rep.logits(_batch(clf, SENTENCES * 3)) is None  # more than 8 rows
    assert rep.bucket({"input_ids": torch.zeros(1, clf.max_length + 1, dtype=torch.long)}) is None
    assert rep.bucket({"input_ids": torch.zeros(1, clf.max_length, dtype=torch.long)}) == (1, clf.max_length)
    assert rep.graphs == {}


@torch.inference_mode()
def test_large_batches_are_recorded_in_half_precision_or_when_asked(tiny_pair, monkeypatch):
    """A large batch (9 to 256 rows, up to 128 tokens) is padded to 256 rows and the next multiple of 8 tokens, and
    answers as the unpadded batch does; two batches of one bucket each get their own answer; a batch past either
    limit runs eagerly. By default only a half-precision model's are recorded; ALBERT_LENS_CUDA_GRAPHS=large
    records an fp32 model's too, =small none."""
    clf = tiny_pair.models[1]
    rep = graphs.Replayer(clf, capture=eager)
    twenty, nine = _batch(clf, (SENTENCES * 4)[:20]), _batch(clf, (SENTENCES * 2)[1:10])
    assert twenty["input_ids"].shape[0] == 20 and nine["input_ids"].shape[0] == 9
    assert rep.logits(twenty) is None and rep.graphs == {}  # the default for fp32: small batches only
    half = tiny_pair.with_precision("bf16").models[1]
    assert graphs.Replayer(half, capture=eager).bucket(twenty) == (256, -(-twenty["input_ids"].shape[1] // 8) * 8)
    monkeypatch.setenv(graphs.ENV, "small")
    assert graphs.Replayer(half, capture=eager).bucket(twenty) is None
    monkeypatch.setenv(graphs.ENV, "large")
    for batch in (twenty, nine):
        width = batch["input_ids"].shape[1]
        assert rep.bucket(batch) == (256, -(-width // 8) * 8)
        got = rep.logits(batch)
        torch.testing.assert_close(got, cls_path.inputs_logits(clf, batch), atol=1e-5, rtol=1e-5)
    assert rep.bucket(_batch(clf, SENTENCES[:1] * 257)) is None
    assert rep.bucket({"input_ids": torch.zeros(20, 129, dtype=torch.long)}) is None
    assert rep.bucket({"input_ids": torch.zeros(20, 121, dtype=torch.long)}) == (256, 128)
    assert rep.bucket({"input_ids": torch.zeros(3, 20, dtype=torch.long)}) == (4, 32)  # small batches as before


def test_predict_takes_large_graphs_when_asked(tiny_pair, monkeypatch):
    """Through `inference.predict` (the CPU standing in for CUDA): with the setting, a batch of 28 comes from
    a 256-row graph with graphs-off probabilities, and Model facts lists that bucket."""
    graphs_on_the_cpu(monkeypatch)
    monkeypatch.setenv(graphs.ENV, "large")
    clf = _own(tiny_pair.models[0])
    many = [Example((s,)) for s in SENTENCES * 4]
    with graphs_off(monkeypatch):
        want = predict(clf, many).probs
    np.testing.assert_allclose(predict(clf, many).probs, want, atol=1e-6)
    width = _batch(clf, SENTENCES * 4)["input_ids"].shape[1]
    assert graphs.status(clf)["cuda_graph_buckets"] == [(256, -(-width // 8) * 8)]


def test_half_precision_graphs_stay_on(offline_pair, tiny_pair, monkeypatch):
    """bf16 (autocast here, half weights on a GPU): a padded bucket sums in another order, so the offline BERT's
    logits for seven SST-2 sentences move by 0.02 from the unpadded batch's; the check allows bf16 rounding, so
    the graphs stay on (with fp32's 1e-3 they were turned off), and the answers match eager to that rounding."""
    graphs_on_the_cpu(monkeypatch)
    from app.core.ground.data import load_dataset

    exs = [Example(e.texts) for e in load_dataset(shared("glue", "sst2", "dev.tsv"), limit=7).examples]
    for clf in offline_pair.with_precision("bf16").models:
        clf = _own(clf)
        with graphs_off(monkeypatch):
            want = predict(clf, exs).logits
        got = predict(clf, exs).logits
        assert not clf.graphs.off, clf.graphs.why_off
        rtol, atol = graphs.check_tolerance(clf)
        assert rtol == atol == 8 * torch.finfo(torch.bfloat16).eps and graphs.check_tolerance(tiny_pair.models[0]) \
            == (1e-3, 1e-3)
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)


@torch.inference_mode()
def test_a_failed_recording_or_a_differing_replay_turns_graphs_off(tiny_pair):
    """Either way the model answers eagerly from then on, and Model facts can say why."""
    clf = tiny_pair.models[1]
    batch = _batch(clf, SENTENCES[:1])

    def broken(fn):
        raise RuntimeError("operation not permitted when stream is capturing")

    rep = graphs.Replayer(clf, capture=broken)
    assert rep.logits(batch) is None and rep.off and "capture failed" in rep.why_off
    assert rep.logits(batch) is None  # stays off

    def off_by_one(fn):
        replay, out = eager(fn)
        return (lambda: (replay(), out.add_(1.0))), out

    rep = graphs.Replayer(clf, capture=off_by_one)
    assert rep.logits(batch) is None and rep.off and "differed" in rep.why_off
    assert rep.graphs == {}


def test_predict_takes_the_graph_for_small_batches_only(tiny_pair, monkeypatch):
    """Through `inference.predict` with graphs on (the CPU standing in for CUDA, recording with `eager`): a one-
    input prediction and a batch of five come from graphs with the same probabilities as graphs off; a batch
    of twenty runs eagerly."""
    graphs_on_the_cpu(monkeypatch)
    for clf in tiny_pair.models:
        clf = _own(clf)
        one, five = [Example((SENTENCES[3],))], [Example((s,)) for s in SENTENCES[:5]]
        many = [Example((s,)) for s in SENTENCES * 4]
        with graphs_off(monkeypatch):
            want = [predict(clf, exs).probs for exs in (one, five, many)]
        got = [predict(clf, exs).probs for exs in (one, five, many)]
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, atol=1e-6)
        want_buckets = sorted({_expected_bucket(_batch(clf, [e.texts[0] for e in exs])) for exs in (one, five)})
        assert want_buckets[0][0] == 1 and want_buckets[1][0] == 8
        assert sorted(clf.graphs.graphs) == want_buckets
        assert graphs.status(clf) == {"cuda_graphs": True, "cuda_graph_buckets": want_buckets}


def _ig(clf, text, **kw):
    from app.core.techniques.saliency import IntegratedGradients

    return IntegratedGradients(clf, **kw).attribute(Example((text,)))


@pytest.mark.parametrize("which", [0, 1])
def test_integrated_gradients_rounds_replayed_give_the_eager_attributions(tiny_pair, monkeypatch, which):
    """With graphs on (the CPU standing in for CUDA, recording with `eager`): every round of integrated gradients
    comes from a graph of its (nodes, token bucket, class, score), padded to the bucket, with the eager
    attributions, delta and steps; a second input of another length in the same bucket refills it and gets its
    own answer; a tighter tolerance's larger rounds get graphs of their own."""
    graphs_on_the_cpu(monkeypatch)
    from app.core.techniques.saliency import IntegratedGradients

    clf = _own(tiny_pair.models[which])

    def width(text: str) -> int:
        return len(clf.tokenizer(text)["input_ids"])

    # a second input longer than the first in the first's bucket (the tiny ALBERT's pieces are trained where the
    # tests run, so the tail that keeps it there depends on the SentencePiece version)
    first_bucket = next(n for n in (16, 32, 64) if n >= width(SENTENCES[0]))
    texts = [SENTENCES[0], next(SENTENCES[0] + tail for tail in (" truly so .", " so .", " !")
                                if width(SENTENCES[0]) < width(SENTENCES[0] + tail) <= first_bucket)]
    with graphs_off(monkeypatch):
        want = [_ig(clf, t) for t in texts] + [_ig(clf, texts[0], tolerance=1e-7, max_steps=60)]
    got = [_ig(clf, t) for t in texts] + [_ig(clf, texts[0], tolerance=1e-7, max_steps=60)]
    for g, w in zip(got, want):
        np.testing.assert_allclose(g.scores, w.scores, rtol=1e-4, atol=1e-7)
        assert g.n_steps == w.n_steps and g.delta == pytest.approx(w.delta, abs=1e-6)
    widths = {len(clf.tokenizer(t)["input_ids"]) for t in texts}
    bucket = next(n for n in (16, 32, 64) if n >= max(widths))
    assert len(widths) == 2 and bucket == next(n for n in (16, 32, 64) if n >= min(widths))  # one bucket
    rounds = sorted({k[:2] for k in clf.graphs.paths})
    first = IntegratedGradients.first_round  # 16 nodes at the app's tolerance, 40 at 1e-7
    assert {(first(1e-3), bucket), (first(1e-7), bucket)} <= set(rounds) and {w for _, w in rounds} == {bucket}
    assert graphs.status(clf)["cuda_graph_ig_rounds"] == rounds
    assert (2, bucket) in clf.graphs.graphs  # the endpoints (input and baseline) from the model's own graph


def test_integrated_gradients_rounds_replayed_for_a_pair_task(tiny_nli_pair, monkeypatch):
    """Two texts with segment ids and three classes: every class's rounds from graphs of their own, with the
    eager attributions (the segments live in the embedding layer's output the rounds interpolate)."""
    from app.core.techniques.saliency import IntegratedGradients

    graphs_on_the_cpu(monkeypatch)
    clf = _own(tiny_nli_pair.models[0])
    ex = Example((SENTENCES[0], SENTENCES[3]))
    for target in range(len(clf.labels)):
        with graphs_off(monkeypatch):
            want = IntegratedGradients(clf).attribute(ex, target=target)
        got = IntegratedGradients(clf).attribute(ex, target=target)
        np.testing.assert_allclose(got.scores, want.scores, rtol=1e-4, atol=1e-7)
    assert {k[2] for k in clf.graphs.paths} == set(range(len(clf.labels)))


def test_an_integrated_gradients_round_too_large_or_failing_runs_eagerly(tiny_pair, monkeypatch):
    """A round past `PATH_ROW_TOKENS` is not recorded; a failed recording turns the rounds' graphs off (Model
    facts says why) and leaves the small-batch forwards' graphs on; the attributions are the eager ones."""
    monkeypatch.setattr(graphs, "enabled", lambda clf: True)
    clf = _own(tiny_pair.models[0])
    rep = graphs.Replayer(clf, capture=eager)
    x, b = torch.randn(1, 9, clf.model.config.hidden_size), torch.zeros(1, 9, clf.model.config.hidden_size)
    nodes = graphs.PATH_ROW_TOKENS // 16 + 1
    assert rep.path_round(x, b, None, torch.linspace(0, 1, nodes), torch.ones(nodes, dtype=torch.float64),
                          lambda lg: lg[:, 0], (0, "logit")) is None
    assert rep.paths == {} and not rep.paths_off

    recorded = []

    def broken(fn):  # the endpoints' forward (a small batch, recorded first) records; the round's fails
        recorded.append(fn)
        if len(recorded) > 1:
            raise RuntimeError("operation not permitted when stream is capturing")
        return eager(fn)

    want = _ig(clf, SENTENCES[1])
    clf.graphs = graphs.Replayer(clf, capture=broken)
    got = _ig(clf, SENTENCES[1])
    np.testing.assert_allclose(got.scores, want.scores, rtol=1e-6, atol=1e-9)
    assert clf.graphs.paths_off and "capture failed" in clf.graphs.why_paths_off and not clf.graphs.off
    assert len(recorded) == 2 and len(clf.graphs.graphs) == 1
    assert "capture failed" in graphs.status(clf)["cuda_graphs_ig_off"]


def test_graphs_are_for_cuda_devices_and_can_be_turned_off(tiny_pair, monkeypatch):
    from types import SimpleNamespace

    assert not graphs.enabled(tiny_pair.models[0])  # the CPU
    on_gpu = SimpleNamespace(device="cuda:0")
    assert graphs.enabled(on_gpu)
    monkeypatch.setenv(graphs.ENV, "0")
    assert not graphs.enabled(on_gpu)


ON_CUDA = pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(),
                                                         reason="records real CUDA graphs: a GPU machine only"))


def _recording_on(where: str, monkeypatch) -> None:
    """Real CUDA graphs on "cuda" (the device run); on "cpu", the same test with the stand-in recorder, so its
    own code runs in every suite and can't rot before a GPU comes."""
    if where == "cpu":
        graphs_on_the_cpu(monkeypatch)


@pytest.mark.parametrize("where", ["cpu", ON_CUDA])
def test_recorded_graphs_give_the_eager_logits(tiny_pair, monkeypatch, where):
    """Each bucket checked against the eager forward, and integrated gradients' rounds recorded too, with the
    eager attributions."""
    from app.core.execution.pair import Pair
    from app.core.techniques.saliency import IntegratedGradients

    _recording_on(where, monkeypatch)
    pair = Pair.resolve(models=[m.source for m in tiny_pair.spec.models], task="sst2", device=where)
    for clf in pair.models:
        for texts in ([SENTENCES[0]], SENTENCES[:3], [SENTENCES[2]] * 8):
            exs = [Example((t,)) for t in texts]
            got = predict(clf, exs).logits
            assert clf.graphs is not None and not clf.graphs.off, clf.graphs and clf.graphs.why_off
            idx, want = _eager_logits(clf, exs)
            np.testing.assert_allclose(got[idx], want, atol=1e-4, rtol=1e-4)
        replayed = IntegratedGradients(clf).attribute(Example((SENTENCES[0],)))
        assert clf.graphs.paths and not clf.graphs.paths_off, clf.graphs.why_paths_off
        with graphs_off(monkeypatch):
            eager_ig = IntegratedGradients(clf).attribute(Example((SENTENCES[0],)))
        np.testing.assert_allclose(replayed.scores, eager_ig.scores, rtol=1e-3, atol=1e-6)


@pytest.mark.parametrize("where,precision", [("cpu", "bf16"), pytest.param("cuda", "fp16", marks=ON_CUDA.marks),
                                             pytest.param("cuda", "bf16", marks=ON_CUDA.marks)])
def test_half_precision_and_large_graphs_stay_on(tiny_pair, monkeypatch, where, precision):
    """Half precision (weights on a GPU, autocast on the CPU), small buckets and, with
    ALBERT_LENS_CUDA_GRAPHS=large, a 256-row bucket: each passes its check and matches the eager forward to the
    check's tolerance."""
    from app.core.execution.pair import Pair

    _recording_on(where, monkeypatch)
    monkeypatch.setenv(graphs.ENV, "large")
    pair = Pair.resolve(models=[m.source for m in tiny_pair.spec.models], task="sst2", device=where)
    for clf in pair.with_precision(precision).models:
        rtol, atol = graphs.check_tolerance(clf)
        for texts in ([SENTENCES[0]], (SENTENCES * 4)[:20]):
            exs = [Example((t,)) for t in texts]
            got = predict(clf, exs).logits
            assert clf.graphs is not None and not clf.graphs.off, clf.graphs and clf.graphs.why_off
            idx, want = _eager_logits(clf, exs)
            np.testing.assert_allclose(got[idx], want, atol=atol, rtol=rtol)
        assert any(rows == graphs.LARGE_ROWS for rows, _ in clf.graphs.graphs)
