"""int8 for forward-only batch work: what is quantised, how close its answers stay to fp32 on real data (the
bounds measured in benchmarks/README.md, int8), and that gradients never run on int8 weights."""
import numpy as np
import pytest

from app.core.errors import InputError

from .conftest import shared


@pytest.fixture(scope="module")
def int8_pair(offline_pair):
    return offline_pair.with_precision("int8")


def test_the_encoder_is_int8_and_the_head_fp32_and_the_pair_names_its_precision(offline_pair, int8_pair):
    import torch
    from torch.ao.nn.quantized.dynamic import Linear as DynamicLinear

    for clf, fp in zip(int8_pair.models, offline_pair.models):
        int8 = [n for n, m in clf.model.named_modules() if isinstance(m, DynamicLinear)]
        assert int8 and all("pooler" not in n and "classifier" not in n for n in int8)
        assert type(clf.model.classifier) is torch.nn.Linear
        assert clf.precision == "int8" and fp.precision == "fp32" and clf.model is not fp.model
        assert "int8 linear layers" in clf.describe() and "int8" not in fp.describe()
    # an ALBERT's one shared layer is quantised once, and still shared by every depth
    albert = int8_pair.models[1].model.albert.encoder.albert_layer_groups
    assert len(albert) == 1
    assert offline_pair.with_precision("fp32") is offline_pair
    assert [m.spec for m in int8_pair.fp32.models] == [m.spec for m in offline_pair.models]
    assert all(m.precision == "fp32" for m in int8_pair.fp32.models)
    with pytest.raises(InputError, match=r"precision: 'int4' is not one of \['fp32', 'int8', 'bf16', 'fp16'\]"):
        offline_pair.with_precision("int4")


def test_int8_answers_stay_close_to_fp32_on_real_data(offline_pair, int8_pair):
    """SST-2 dev predictions and AG News [CLS] embeddings, int8 against fp32 (independent: the fp32 models),
    held to the issue's bounds: agreement >= 99%, every vector at cosine >= 0.99."""
    from app.core.data import load_dataset
    from app.core.embeddings import embed
    from app.core.inference import predict

    sst2 = load_dataset(shared("glue", "sst2", "dev.tsv")).examples  # all 872: agreement is a rate near 1
    news = load_dataset(shared("ag_news", "test.csv")).head(300).examples
    for fp, q in zip(offline_pair.models, int8_pair.models):
        a, b = (predict(c, sst2).probs.argmax(1) for c in (fp, q))
        assert (a == b).mean() >= 0.99
        e, f = (embed(c, news) for c in (fp, q))
        cos = (e * f).sum(1) / np.linalg.norm(e, axis=1) / np.linalg.norm(f, axis=1)
        assert cos.min() >= 0.99
        assert not np.allclose(e, f, atol=1e-4)  # it is another computation, not the fp32 one under a new name


def test_each_token_gets_its_own_activation_range():
    """The core's int8 layer against an independent float reference of what it should compute (each row mapped
    onto [0, 1] by its own minimum and span, quantised to the int8 levels, the product with the dequantised int8
    weights, mapped back, bias added). One outlier row (50x the others) would coarsen every row in PyTorch's stock
    layer; here the other rows keep their precision, and a row's answer is the same alone as in any batch."""
    import torch

    from app.core import precision

    torch.manual_seed(0)
    stock = torch.nn.Sequential(torch.nn.Linear(64, 32)).requires_grad_(False)
    layer = torch.nn.Sequential(torch.nn.Linear(64, 32)).requires_grad_(False)
    layer.load_state_dict(stock.state_dict())
    x = torch.randn(6, 64)
    x[0] *= 50
    exact = stock(x)
    assert precision.quantize_int8(layer) == 1
    (q,) = precision.int8_layers(layer)
    lo, hi = x.amin(-1, keepdim=True), x.amax(-1, keepdim=True)
    levels = 255 if q.full_range else 127
    xq = torch.round((x - lo) / (hi - lo) * levels) / levels * (hi - lo) + lo
    reference = xq @ q.weight().dequantize().T + q.bias()
    got = layer(x)
    torch.testing.assert_close(got, reference, atol=1e-4 * float(exact.abs().max()), rtol=0)
    with torch.no_grad():
        plain = torch.ao.quantization.quantize_dynamic(stock, {torch.nn.Linear}, dtype=torch.qint8)(x)
    rest = slice(1, None)
    ours_err, stock_err = ((y[rest] - exact[rest]).abs().max() for y in (got, plain))
    assert ours_err * 5 < stock_err
    torch.testing.assert_close(layer(x[3:4]), got[3:4], atol=1e-6, rtol=0)  # alone as in the batch


def test_gradients_never_take_the_int8_path(offline_pair, int8_pair):
    from app.core import api
    from app.core.data import Example
    from app.core.gradients import input_gradients

    with pytest.raises(InputError, match="precision: BERT is loaded in int8; gradients run on its fp32 weights"):
        input_gradients(int8_pair.models[0], Example(("A warm, funny film.",)))
    text = "A warm, funny and surprisingly moving film."
    got = api.saliency(int8_pair, text, method="integrated_gradients")
    want = api.saliency(offline_pair, text, method="integrated_gradients")
    for g, w in zip(got.maps, want.maps):
        np.testing.assert_allclose(g["scores"], w["scores"], atol=1e-6)


def test_cli_embeds_in_int8_and_says_so(tmp_path, capsys):
    from app.cli import main

    args = ["embed", "--pair", "offline", "--dataset", str(shared("ag_news", "test.csv")), "--limit", "40"]
    assert main(args + ["--out", str(tmp_path / "q.npz"), "--precision", "int8"]) == 0
    assert "precision: int8" in capsys.readouterr().err
    assert main(args + ["--out", str(tmp_path / "f.npz")]) == 0
    assert "precision" not in capsys.readouterr().err
    q, f = np.load(tmp_path / "q.npz"), np.load(tmp_path / "f.npz")
    for k in f.files:
        cos = (q[k] * f[k]).sum(1) / np.linalg.norm(q[k], axis=1) / np.linalg.norm(f[k], axis=1)
        assert q[k].shape == f[k].shape and cos.mean() > 0.95 and not np.allclose(q[k], f[k], atol=1e-4)


def test_int8_projections_are_cached_apart_from_fp32(offline_pair, int8_pair, tmp_path, monkeypatch):
    """The embedding cache is keyed by model and data: without the precision in the key an int8 projection
    would be drawn from the fp32 vectors."""
    from app.core import api

    monkeypatch.setenv("ALBERT_LENS_CACHE", str(tmp_path))
    fp = api.project(offline_pair, "sentiment_plain", "pca", limit=30)
    q = api.project(int8_pair, "sentiment_plain", "pca", limit=30)
    again = api.project(int8_pair, "sentiment_plain", "pca", limit=30)
    assert fp.embeddings_cached == [False, False] and q.embeddings_cached == [False, False]
    assert again.embeddings_cached == [True, True]
    assert [p["x"] for p in q.points] != [p["x"] for p in fp.points]


def test_the_report_and_the_banner_say_which_precision_answered(int8_pair, offline_pair, tmp_path):
    from app.report import _fingerprint, write
    from app.ui import banner

    assert ", int8" in banner(int8_pair) and "int8" not in banner(offline_pair)
    # an int8 report's sections are cached apart from the fp32 ones
    assert _fingerprint(int8_pair, "benchmark", {"limit": 5}) != _fingerprint(offline_pair, "benchmark", {"limit": 5})
    write(int8_pair, tmp_path, [], {})
    assert "Precision: **int8**" in (tmp_path / "report.md").read_text()


def test_int8_answers_in_fp32_and_says_so_where_this_cpu_gains_nothing(offline_pair, monkeypatch, tmp_path,
                                                                         capsys):
    """On a CPU whose int8 products are not faster (an Intel Xeon ran the offline pair's int8 batch work at
    2.4-3.3x fp32's time), asking for int8 gets fp32 answers and a sentence saying why, never a silent slowdown;
    the timing is taken once per CPU and kept for later processes."""
    from app.cli import main
    from app.core import precision

    monkeypatch.setenv("ALBERT_LENS_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("ALBERT_LENS_INT8")  # the suite's "always" (tests/conftest.py): here the CPU decides
    monkeypatch.setitem(precision._ONCE, "int8", {"fp32_s": 1.0, "int8_s": 2.5, "speedup": 0.4, "wins": False})
    pair = offline_pair.with_precision("int8")
    assert pair.precision == "fp32" and all(m.precision == "fp32" for m in pair.models)
    assert pair.precision_note == "int8 asked for, but on this CPU its products run at 0.4x fp32's (int8 pays " \
                                  "from 1.1x): fp32 answered"
    assert pair.hardware()["precision_note"] == pair.precision_note
    assert main(["benchmark", "--pair", "offline", "--dataset", str(shared("glue", "sst2", "dev.tsv")),
                 "--limit", "20", "--precision", "int8", "--json"]) == 0
    out = capsys.readouterr()
    assert "precision: int8 asked for, but on this CPU" in out.err
    assert '"precision": "fp32"' in out.out and "fidelity" not in out.out
    monkeypatch.setitem(precision._ONCE, "int8", {"fp32_s": 1.0, "int8_s": 0.5, "speedup": 2.0, "wins": True})
    assert offline_pair.with_precision("int8").precision == "int8"
    monkeypatch.setitem(precision._ONCE, "int8", {"fp32_s": 1.0, "int8_s": 2.5, "speedup": 0.4, "wins": False})
    monkeypatch.setenv("ALBERT_LENS_INT8", "always")  # an operator who wants int8 anyway (its memory, say)
    assert offline_pair.with_precision("int8").precision == "int8"
    monkeypatch.delenv("ALBERT_LENS_INT8")
    # measured once per CPU and kept: a later process reads the first one's timing
    monkeypatch.delitem(precision._ONCE, "int8")
    first = precision.int8_speed()
    assert (tmp_path / "cache" / "int8-speed.json").is_file() and first["fp32_s"] > 0 and first["int8_s"] > 0
    assert first["wins"] == (first["fp32_s"] >= precision.INT8_MARGIN * first["int8_s"])
    monkeypatch.delitem(precision._ONCE, "int8")
    monkeypatch.setattr(precision, "quantize_int8", lambda m: (_ for _ in ()).throw(AssertionError("timed again")))
    assert precision.int8_speed() == first
