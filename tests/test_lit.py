"""LIT wrappers validated with LIT's own validator, and a real LIT server queried over HTTP."""
import json
import urllib.request

import numpy as np
import pytest

from app.core.execution.inference import predict
from app.core.ground.data import Example
from app.core.present import views
from app.core.techniques.saliency import GradientXInput
from app.core.techniques.timing import TextCost
from lit_models.models import LensModel, models_for
from lit_models.server import GENERATORS, SALIENCE, datasets_for, make_server

from .conftest import shared, stop_lit


def _validate(pair, dataset_spec, limit=8):
    from lit_nlp.lib import validation

    for _name, ds in datasets_for(pair, [dataset_spec] if dataset_spec else None, limit).items():
        validation.validate_dataset(ds)
        for model in models_for(pair.models).values():
            validation.validate_model(model, ds)


def test_validation_tiny_single_text(tiny_pair):
    _validate(tiny_pair, None)


def test_validation_tiny_pairs(tiny_nli_pair):
    _validate(tiny_nli_pair, None)


def test_validation_offline_pair_on_sst2_dev(offline_pair):
    _validate(offline_pair, str(shared("glue", "sst2", "dev.tsv")), limit=6)


def test_flipped_tokens_are_fed_back(tiny_pair):
    m = models_for(tiny_pair.models)[tiny_pair.models[0].name]
    out = list(m.predict([{"sentence": "a good film"}]))[0]
    assert out["tokens_sentence"] == ["a", "good", "film"]
    flipped = list(m.predict([{"sentence": "a bad film", "tokens_sentence": ["a", "bad", "film"]}]))[0]
    direct = predict(tiny_pair.models[0], [Example(("a bad film",))]).probs[0]
    np.testing.assert_allclose(flipped["probas"], direct, atol=1e-5)


def test_embedding_table_is_the_models(tiny_pair):
    for clf in tiny_pair.models:
        vocab, table = LensModel.from_classifier(clf).get_embedding_table()
        assert len(vocab) == table.shape[0] == clf.model.get_input_embeddings().num_embeddings
        assert clf.tokenizer.convert_tokens_to_ids(vocab[100]) == 100


def _post(url, path, body):
    req = urllib.request.Request(url + path, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as r:
        return json.loads(r.read())


@pytest.fixture(scope="module")
def lit_server(offline_pair):
    server = make_server(offline_pair, [str(shared("glue", "sst2", "dev.tsv"))], limit=20, port=None,
                         server_type="notebook")
    srv = server.serve()
    try:
        yield f"http://localhost:{srv.port}", offline_pair
    finally:
        stop_lit(srv)


def test_server_info_lists_models_datasets_and_components(lit_server):
    url, pair = lit_server
    info = _post(url, "/get_info", {})
    names = [m.name for m in pair.models]
    assert set(info["models"]) == set(names)
    assert "sst2/dev" in info["datasets"]
    for n in names:
        m = info["models"][n]
        assert "sst2/dev" in m["datasets"]
        for interp in (*SALIENCE, "occlusion", "integrated gradients", "umap", "pca"):  # LIT's, ours, projections
            assert interp in m["interpreters"], (n, interp)
        for gen in GENERATORS:
            assert gen in m["generators"], (n, gen)
    # generated from the declarations: the word replacer's default is the counterfactual capability's
    from app.core.api import capabilities

    assert SALIENCE == ("Grad L2 Norm (LIT's)", "Grad ⋅ Input (LIT's)", "Integrated Gradients (LIT's)",
                        "LIME (LIT's)")
    assert GENERATORS == ("Word Replacer", "Ablation Flip", "Hotflip", "Scrambler")
    declared = capabilities.get("counterfactual").option("replacements").default
    assert info["generators"]["Word Replacer"]["configSpec"]["Substitutions"]["default"] == declared
    assert "LensModel" in info["initSpecs"]["models"]
    # the page reads layouts[defaultLayout]: with none set, LIT's front end threw and showed no module
    assert info["defaultLayout"] in info["layouts"]


def test_server_preds_and_salience_equal_the_core(lit_server):
    url, pair = lit_server
    text = "a gorgeous , witty , seductive movie ."
    from lit_nlp.api.dataset import input_hash

    data = {"sentence": text}
    data["_id"] = input_hash(data)
    inputs = [{"id": data["_id"], "data": data}]
    for clf in pair.models:
        preds = _post(
            url,
            f"/get_preds?model={clf.name}&dataset_name=sst2/dev&requested_types=MulticlassPreds",
            {"inputs": inputs},
        )
        core = predict(clf, [Example((text,))]).probs[0]
        np.testing.assert_allclose(preds[0]["probas"], core, atol=1e-5)
        sal = _post(
            url,
            f"/get_interpretations?model={clf.name}&dataset_name=sst2/dev&interpreter=Grad ⋅ Input (LIT's)".replace(
                " ", "%20"
            ).replace("⋅", "%E2%8B%85"),
            {"inputs": inputs},
        )
        lit_scores = np.asarray(sal[0]["token_grad_sentence"]["salience"])
        ours = GradientXInput(clf).attribute(Example((text,)))
        tok = np.asarray(ours.token_scores[1:-1])  # word tokens, [CLS]/[SEP] excluded as in LIT's field tokens
        tok = tok + np.finfo(np.float32).eps  # LIT's normalize_scores: add eps, then make |scores| sum to 1
        np.testing.assert_allclose(lit_scores, tok / np.abs(tok).sum(), atol=1e-4)


def test_a_visitor_cannot_put_another_text_in_the_cache_under_an_examples_id(lit_server):
    """LIT caches predictions by the `_id` a request carries: another text sent under dataset example 0's id had
    every later request for example 0 answered with that text's prediction. The id must now be its content's."""
    import urllib.error

    url, pair = lit_server
    clf = pair.models[0]
    first = _post(url, "/get_dataset?dataset_name=sst2/dev", {})[0]
    fake = {"sentence": "terrible , awful , a waste of time .", "_id": first["id"]}
    preds = f"/get_preds?model={clf.name}&dataset_name=sst2/dev&requested_types=MulticlassPreds"
    with pytest.raises(urllib.error.HTTPError) as err:
        _post(url, preds, {"inputs": [{"id": first["id"], "data": fake, "meta": {}}]})
    assert err.value.code == 400
    assert err.value.read().decode() == "inputs: datapoint 0: its _id is not its content's (LIT's input_hash)"
    answered = _post(url, preds, {"inputs": [first["id"]]})[0]["probas"]  # example 0, by reference
    truth = predict(clf, [Example((first["data"]["sentence"],))]).probs[0]
    np.testing.assert_allclose(answered, truth, atol=1e-5)
    real = predict(clf, [Example((fake["sentence"],))]).probs[0]
    assert np.abs(np.asarray(answered) - real).max() > 1e-3  # the fake text answers otherwise: a poisoned cache shows


def test_metrics_table_has_the_paired_test_of_the_selection(lit_server):
    """LIT's metrics, on any selection, say whether the two models' accuracies differ beyond chance: the same
    gap, interval and McNemar p as the core's `compare_accuracy`, from each model's side (the sign flips, the
    p-value does not); examples without a gold label are left out."""
    from urllib.parse import quote

    from app.core.ground.significance import compare_accuracy
    from lit_models.server import PAIRED

    url, pair = lit_server
    info = _post(url, "/get_info", {})
    assert all(PAIRED in info["models"][m.name]["metrics"] for m in pair.models)
    rows = _post(url, "/get_dataset?dataset_name=sst2/dev", {})
    inputs = [{"id": r["id"], "data": r["data"]} for r in rows]
    from lit_nlp.api.dataset import input_hash

    unlabelled = {k: v for k, v in inputs[0]["data"].items() if not k.startswith("_")}
    unlabelled.update(label=None, sentence="an unlabelled , dull film .")
    unlabelled["_id"] = input_hash(unlabelled)  # LIT's cache takes an example's id only if it is its content's
    inputs.append({"id": unlabelled["_id"], "data": unlabelled})
    exs = [Example((r["data"]["sentence"],)) for r in rows]
    gold = [r["data"]["label"] for r in rows]
    first, second = (predict(clf, exs).predicted for clf in pair.models)
    core = compare_accuracy(gold, first, second)
    got = []
    for clf in pair.models:
        res = _post(url, f"/get_metrics?model={quote(clf.name)}&dataset_name=sst2/dev&metrics={quote(PAIRED)}"
                         "&do_predict=1", {"inputs": inputs})
        (entry,) = res[PAIRED]
        got.append(entry["metrics"])
        assert entry["pred_key"] == "probas" and entry["label_key"] == "label"
    assert got[0]["n"] == got[1]["n"] == len(rows)
    assert got[0]["other − this"] == pytest.approx(core["difference"])
    assert [got[0]["95% low"], got[0]["95% high"]] == pytest.approx(core["difference_interval"])
    assert got[1]["other − this"] == pytest.approx(-core["difference"])
    # the two rows are one test, mirrored: the second's interval is the first's negated end for end
    assert [got[1]["95% low"], got[1]["95% high"]] == pytest.approx([-got[0]["95% high"], -got[0]["95% low"]])
    assert got[0]["p"] == got[1]["p"] == views.p_text(core["p_value"])
    assert float(got[0]["p"]) == pytest.approx(core["p_value"], rel=1e-2)


def test_paired_metrics_on_a_regression_pair_and_a_model_from_the_page(tiny_dirs, tmp_path, tiny_pair):
    """STS-B: the gap is in Pearson's r with the core's paired bootstrap; a model loaded from the LIT page is
    compared with the pair's first; a selection without gold scores gives only n = 0."""
    from app.core.execution.pair import Pair
    from app.core.ground.data import load_dataset
    from app.core.ground.significance import compare_correlation
    from lit_models.datasets import LensDataset
    from lit_models.metrics import PairedComparison

    from .conftest import _tiny_albert, _tiny_bert

    pair = Pair.resolve(models=[str(_tiny_bert(tmp_path / "b", num_labels=1)),
                                str(_tiny_albert(tmp_path / "a", num_labels=1))], task="stsb")
    ds = load_dataset(shared("glue", "stsb", "dev.tsv"), task="stsb").head(30)
    lit_ds = LensDataset(ds, pair.task)
    models = list(models_for(pair.models).values())
    paired = PairedComparison(models)
    (res,) = paired.run(lit_ds.examples, models[1], lit_ds)
    a, b = (p.scores for p in pair.predict(ds.examples))
    core = compare_correlation([e.label for e in ds.examples], b, a)
    assert res["pred_key"] == "score" and res["metrics"]["n"] == 30
    assert res["metrics"]["other − this"] == pytest.approx(core["difference"], abs=1e-9)
    assert float(res["metrics"]["p"]) == pytest.approx(core["p_value"], rel=1e-2)
    (none,) = paired.run([{**ex, "label": None} for ex in lit_ds.examples], models[0], lit_ds)
    assert none["metrics"] == {"n": 0.0}

    sst = LensDataset(load_dataset(shared("glue", "sst2", "dev.tsv")).head(12), tiny_pair.task)
    # each datapoint carries the app's row number (LIT's own index is 0-based): one name for one sentence
    assert [e["row"] for e in sst.examples] == list(range(1, 13)) and "row" in sst.spec()
    from app.core import api

    picked = LensDataset(api.resolve_dataset(tiny_pair, f"{shared('glue', 'sst2', 'dev.tsv')} @rows:6,28,1",
                                             visitor=False), tiny_pair.task)
    assert [e["row"] for e in picked.examples] == [6, 28, 1]  # a slice's rows keep the dataset's numbers
    pair_models = list(models_for(tiny_pair.models).values())
    visitor = LensModel.from_classifier(tiny_pair.models[1])  # another instance, as the page would load
    (res,) = PairedComparison(pair_models).run(sst.examples, visitor, sst)
    exs = [Example((e["sentence"],)) for e in sst.examples]
    first, second = (predict(clf, exs).predicted for clf in tiny_pair.models)
    from app.core.ground.significance import compare_accuracy

    expected = compare_accuracy([e["label"] for e in sst.examples], second, first)  # vs the pair's first
    assert res["metrics"]["other − this"] == pytest.approx(expected["difference"])


def test_lit_page_links_its_icon_fonts_from_its_own_server(tmp_path):
    """LIT's index.html asks fonts.googleapis.com for its icons; the page we serve links the shipped fonts instead,
    and every other file is LIT's own, unchanged."""
    from lit_models.client import FONTS, GOOGLE_ICONS, ICON_FONTS, LOCAL_CSS, client_root, lit_build

    root = client_root(tmp_path / "client")
    html = (root / "static" / "index.html").read_text()
    assert GOOGLE_ICONS not in html and f'href="static/{LOCAL_CSS}"' in html
    assert html.replace(f'<link href="static/{LOCAL_CSS}" rel="stylesheet">', GOOGLE_ICONS) == \
        (lit_build() / "static" / "index.html").read_text()
    css = (root / "static" / LOCAL_CSS).read_text()
    for family, name in ICON_FONTS.items():
        assert f'font-family: "{family}"' in css and f'url("{name}")' in css
        assert (root / "static" / name).read_bytes() == (FONTS / name).read_bytes()
        assert (root / "static" / name).read_bytes()[:4] == b"wOF2"
    src = lit_build()
    for f in src.rglob("*"):
        if f.is_file() and f.name != "index.html":
            assert (root / f.relative_to(src)).read_bytes() == f.read_bytes(), f
    # a second server starting later finds it built and leaves it as it is
    assert client_root(tmp_path / "client") == root and (root / "main.js").is_symlink()


def test_lit_page_unchanged_if_lit_links_its_fonts_differently(tmp_path, monkeypatch):
    from lit_models import client

    fake = tmp_path / "lit"
    (fake / "static").mkdir(parents=True)
    (fake / "static" / "index.html").write_text("<html><head></head></html>")
    monkeypatch.setattr(client, "lit_build", lambda: fake)
    assert client.client_root(tmp_path / "out") == fake
    with pytest.raises(ValueError, match="no longer links the Material Icons"):
        client.patch_index("<html></html>")


def test_lit_page_unchanged_if_the_cache_cannot_be_written(tmp_path, caplog):
    from lit_models import client

    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the cache folder would go")
    assert client.client_root(blocker / "client") == client.lit_build()
    assert "could not write" in caplog.text


@pytest.mark.parametrize("fixture", ["tiny_pair", "tiny_nli_pair"])
def test_lits_attention_module_gets_every_layer_as_the_models_own_attention(request, fixture):
    """LIT's attention module reads `AttentionHeads` aligned to a `Tokens` field: one per layer, each the model's
    own `output_attentions` (computed here straight from transformers), and LIT's validator accepts them."""
    import torch
    from lit_nlp.api import types as lit_types

    pair = request.getfixturevalue(fixture)
    texts = {"sentence": "a good , warm film"} if len(pair.task.fields) == 1 else {
        pair.task.fields[0]: "a man sleeps .", pair.task.fields[1]: "a person rests ."}
    for clf, model in zip(pair.models, models_for(pair.models).values()):
        spec = model.output_spec()
        layers = [k for k, v in spec.items() if isinstance(v, lit_types.AttentionHeads)]
        assert layers == [f"layer_{i + 1}/attention" for i in range(clf.model.config.num_hidden_layers)]
        assert all(isinstance(spec[spec[k].align_in], lit_types.Tokens) for k in layers)
        out = list(model.predict([texts]))[0]
        cols = [texts[f] for f in pair.task.fields]
        enc = clf.tokenizer(*cols, return_tensors="pt")
        with torch.no_grad():
            ref = clf.model(**enc, output_attentions=True).attentions
        assert len(out["tokens"]) == enc["input_ids"].shape[1]
        for k, want in zip(layers, ref):
            np.testing.assert_allclose(out[k], want[0].numpy(), atol=1e-5)
    _validate(pair, None, limit=3)


# ------------------------------------------------------------------ no visitor can jam the server (issue 41)
def _hosted_lit(tiny_pair, tmp_path, monkeypatch, **env):
    """A hosted LIT server on the tiny pair in a thread of its own: (its url, its app, the first model)."""
    monkeypatch.setenv("ALBERT_LENS_HOSTED", "1")
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    data = tmp_path / "rows.tsv"
    data.write_text("sentence\tlabel\na fine film\t1\na dull film\t0\n")
    srv = make_server(tiny_pair, [str(data)], port=None, server_type="notebook").serve()
    return srv, f"http://127.0.0.1:{srv.port}", srv.app, srv.app._models[tiny_pair.models[0].name].wrapped


def _rows(texts):
    from lit_nlp.api.dataset import input_hash

    out = []
    for t in texts:
        data = {"sentence": t, "label": "positive"}
        data["_id"] = input_hash(data)
        out.append({"id": data["_id"], "data": data, "meta": {}})
    return out


def _post_raw(url, path, body):
    """(status, text) of a POST, errors included."""
    import urllib.error

    req = urllib.request.Request(url + path, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def _preds_path(model):
    return f"/get_preds?model={model.clf.name}&dataset_name=rows&requested_types=MulticlassPreds"


def _held(model, monkeypatch):
    """Make `model`'s texts wait for a release: (started, release, calls)."""
    import threading

    started, release, calls = threading.Event(), threading.Event(), []
    one = type(model)._one

    def held(self, ex):
        calls.append(ex)
        started.set()
        assert release.wait(120), "the test never released the prediction"
        return one(self, ex)

    monkeypatch.setattr(type(model), "_one", held)
    return started, release, calls


def test_the_page_and_info_answer_while_a_visitors_prediction_runs(tiny_pair, tmp_path, monkeypatch):
    """LIT's own server answered one request at a time: one visitor's 2,000 texts left /get_info and every other
    visitor without an answer for 16 minutes. Now each request has a thread, and the page's own requests don't
    wait for a work slot."""
    import threading

    srv, url, _app, model = _hosted_lit(tiny_pair, tmp_path, monkeypatch)
    try:
        started, release, _calls = _held(model, monkeypatch)
        answer = {}
        long_job = threading.Thread(target=lambda: answer.update(
            r=_post_raw(url, _preds_path(model), {"inputs": _rows(["held text one", "held text two"])})))
        long_job.start()
        assert started.wait(60)
        info = _post(url, "/get_info", {})  # while the prediction is held
        assert tiny_pair.models[0].name in info["models"]
        with urllib.request.urlopen(url + "/", timeout=60) as page:
            assert page.status == 200 and b"<html" in page.read().lower()
        assert long_job.is_alive() and "r" not in answer  # it was still running when both answered
        release.set()
        long_job.join(120)
        status, body = answer["r"]
        assert status == 200 and len(json.loads(body)) == 2
    finally:
        stop_lit(srv)


def test_a_request_beyond_the_work_slots_hears_busy_and_the_next_one_runs(tiny_pair, tmp_path, monkeypatch):
    import threading

    from lit_models.server import WorkGate

    srv, url, app, model = _hosted_lit(tiny_pair, tmp_path, monkeypatch, ALBERT_LENS_LIT_SLOTS="1")
    try:
        assert app.gate.slots == 1 and app.gate.wait_s == 30  # hosted: one slot here, 30 s of waiting
        app.gate = WorkGate(1, 0.2)  # the same gate, a short wait
        started, release, _calls = _held(model, monkeypatch)
        first = threading.Thread(target=_post_raw, args=(url, _preds_path(model), {"inputs": _rows(["slot one"])}))
        first.start()
        assert started.wait(60)
        status, body = _post_raw(url, _preds_path(model), {"inputs": _rows(["slot two"])})
        assert status == 503
        assert body == "get_preds: the server's 1 work slot(s) stayed busy for 0.2 s; try again in a moment"
        release.set()
        first.join(120)
        status, body = _post_raw(url, _preds_path(model), {"inputs": _rows(["slot two"])})
        assert status == 200 and len(json.loads(body)) == 1
    finally:
        stop_lit(srv)


def test_hosted_lit_refuses_up_front_what_its_time_budget_cant_cover(tiny_pair, tmp_path, monkeypatch):
    """The cap on a request is its work: its new texts (LIT's cache holds the rest) times what one costs here,
    measured when the server starts, against the request's time budget. Refused before any text is computed."""
    srv, url, _app, model = _hosted_lit(tiny_pair, tmp_path, monkeypatch, ALBERT_LENS_REQUEST_SECONDS="120")
    try:
        a, b = model.cost.line()  # measured at start, by length
        assert a + b > 0 and len(model.cost) == 2
        assert models_for(tiny_pair.models)[tiny_pair.models[0].name].cost is None  # hosted only
        cached = _rows(["already asked once", "and this one too"])
        assert _post_raw(url, _preds_path(model), {"inputs": cached})[0] == 200
        assert len(model.cost) == 4  # what they really cost joined the estimate
        model.cost = TextCost.fixed(1.0)  # as if each text took a second here
        calls = []
        one = type(model)._one
        monkeypatch.setattr(type(model), "_one", lambda self, ex: calls.append(ex) or one(self, ex))
        many = _rows([f"new text number {i}" for i in range(200)])
        status, body = _post_raw(url, _preds_path(model), {"inputs": many + cached})
        assert status == 400 and not calls  # nothing computed
        import re

        assert re.fullmatch(r"inputs: 200 new texts would take \S+ about 200 s here \(1,000 ms each\), and this "
                            r"request has 1[12]\d s left of the server's budget; send at most 1[12]\d", body), body
        status, body = _post_raw(url, _preds_path(model), {"inputs": many[:100] + cached})  # within it
        assert status == 200 and len(json.loads(body)) == 102 and len(calls) == 100  # the cached two not again
        # the 100 texts' real cost (milliseconds here) outvoted the second each: the estimate follows the texts
        assert model.cost.seconds(20) < 0.5
    finally:
        stop_lit(srv)


def test_a_lit_request_past_its_time_budget_stops_within_one_text(tiny_pair, tmp_path, monkeypatch):
    import time

    srv, url, _app, model = _hosted_lit(tiny_pair, tmp_path, monkeypatch, ALBERT_LENS_REQUEST_SECONDS="1")
    try:
        model.cost = None  # no estimate: only the deadline
        calls = []
        one = type(model)._one

        def slow(self, ex):
            calls.append(ex)
            time.sleep(1.2)  # past the one-second budget
            return one(self, ex)

        monkeypatch.setattr(type(model), "_one", slow)
        status, body = _post_raw(url, _preds_path(model), {"inputs": _rows([f"text {i}" for i in range(5)])})
        assert status == 503 and len(calls) == 1
        assert body == ("get_preds: stopped: the request's 1 s time budget on this server ran out; ask for fewer "
                        "examples")
        info = _post(url, "/get_info", {})  # and the server answers on
        assert info["models"]
    finally:
        stop_lit(srv)


def test_stopping_the_threaded_server_closes_it_inside_its_loop_without_a_traceback(monkeypatch):
    """`stop()` closed the server's sockets from the caller's thread while its event loop sat in select(): now and
    then (1 stop in ~30 here) the loop failed with EBADF, an unhandled exception in the server's thread. Its
    sockets are now closed inside the loop: no stop leaves an exception, and each leaves its port closed."""
    import socket
    import threading

    from lit_models.server import ThreadedServer

    raised = []
    monkeypatch.setattr(threading, "excepthook", lambda args: raised.append(f"{args.exc_type.__name__}: "
                                                                            f"{args.exc_value}"))

    def app(environ, start_response):
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [b"ok"]

    for _ in range(40):
        srv = ThreadedServer(app, port=0)
        srv.serve(block=False)
        port, thread = srv.port, srv._thread
        srv.stop()
        assert not thread.is_alive()
        with pytest.raises(ConnectionRefusedError), socket.create_connection(("127.0.0.1", port), timeout=5):
            pass
    assert raised == []
