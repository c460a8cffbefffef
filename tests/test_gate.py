"""Issue 58: no LIT request can kill or jam the server. Every request that reaches a hosted LIT server goes
through one gate: settings checked against declared ranges before any memory is taken, projections keyed by what
decides them, every route that runs a model held to the caps, and hostile URLs answered in one line."""
from __future__ import annotations

import json
import urllib.error
import urllib.request

import numpy as np
import pytest
from lit_nlp.api.dataset import input_hash

from app.core.ground import jobs
from app.core.ground.errors import InputError
from lit_models import gate
from lit_models.server import make_server

from .conftest import stop_lit

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def hosted(tiny_pair, tmp_path_factory):
    """A hosted LIT server on the tiny pair: (url, app, {name: LensModel}, pair)."""
    mp = pytest.MonkeyPatch()
    mp.setenv("ALBERT_LENS_HOSTED", "1")
    folder = tmp_path_factory.mktemp("gate")
    data = folder / "rows.tsv"
    data.write_text("sentence\tlabel\n" + "".join(f"a {'fine' if i % 2 else 'dull'} film, take {i}\t{i % 2}\n"
                                                  for i in range(12)))
    srv = make_server(tiny_pair, [str(data)], port=None, server_type="notebook").serve()
    models = {m.clf.name: m for m in (srv.app._models[c.name].wrapped for c in tiny_pair.models)}
    try:
        yield f"http://127.0.0.1:{srv.port}", srv.app, models, tiny_pair
    finally:
        stop_lit(srv)
        mp.undo()


def _rows(texts, **extra):
    out = []
    for t in texts:
        data = {"sentence": t, "label": "positive", **extra}
        data["_id"] = input_hash(data)
        out.append({"id": data["_id"], "data": data, "meta": {}})
    return out


def _post(url, path, body, raw: bytes | None = None):
    """(status, text) of a POST, errors included."""
    req = urllib.request.Request(url + path, data=raw if raw is not None else json.dumps(body).encode(),
                                 method="POST", headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def _get(url, path):
    import http.client
    from urllib.parse import urlparse

    u = urlparse(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
    conn.putrequest("GET", path, skip_accept_encoding=True)  # sent as written: no client-side normalising
    conn.endheaders()
    r = conn.getresponse()
    return r.status, r.read().decode(errors="replace")


@pytest.fixture
def counted(hosted, monkeypatch):
    """Every text a LensModel computes, recorded."""
    calls = []
    cls = type(next(iter(hosted[2].values())))
    one = cls._one
    monkeypatch.setattr(cls, "_one", lambda self, ex: calls.append(ex) or one(self, ex))
    return calls


def _interp(model, interpreter):
    from urllib.parse import quote

    return f"/get_interpretations?model={model}&dataset_name=rows&interpreter={quote(interpreter)}"


# ------------------------------------------------------------------ 1. settings before memory
def test_integrated_gradients_steps_past_the_declared_range_are_refused_before_any_work(hosted, counted):
    """100,000 interpolation steps on one text grew LIT to 18.8 GB and the OOM killer ended it."""
    url, _app, models, pair = hosted
    name = pair.models[0].name
    config = {"Class to explain": "", "Normalize": True, "Interpolation steps": 100000}
    body = {"inputs": _rows(["a film that is long " * 90]), "config": config}
    status, text = _post(url, _interp(name, "Integrated Gradients (LIT's)"), body)
    assert status == 400 and not counted
    assert text == ("Integrated Gradients (LIT's): Interpolation steps: 100000 is out of range; give a whole number "
                    "from 5 "
                    "to 100")
    del config["Normalize"]
    assert _post(url, _interp(name, "Integrated Gradients (LIT's)"), body) == (
        400, "Integrated Gradients (LIT's): missing settings ['Normalize']; LIT's page sends every one")
    body["config"] = {**config, "Normalize": True, "Interpolation steps": 8}
    status, text = _post(url, _interp(name, "Integrated Gradients (LIT's)"), body)
    assert status == 200 and len(json.loads(text)) == 1
    # the steps' outputs carry no attention (each ~60 MB at 2,000 characters); the text itself does
    with_embs = [ex for ex in counted if any(k.startswith("input_embs_") for k in ex)]
    assert len(with_embs) == 8
    model = models[name]
    out = model._one(with_embs[0])
    assert not any(k.endswith("/attention") for k in out) and "token_grad_sentence" in out
    assert any(k.endswith("/attention") for k in model._one(counted[0]))


@pytest.mark.parametrize("component, config, says", [
    ("LIME (LIT's)", {"Number of samples": "5000000"}, "LIME (LIT's): Number of samples: 5000000 is out of range; "
                                                       "give a whole number from 1 to 256"),
    ("LIME (LIT's)", {"Kernel width": "wide"},
     "LIME (LIT's): Kernel width: 'wide' is not a whole number from 1 to 1000000"),
    ("Salience Clustering", {"Number of clusters": 10**9}, "Salience Clustering: Number of clusters: 1000000000 is "
                                                           "out of range"),
    ("Integrated Gradients (LIT's)", {"Interpolation steps": float("nan")}, "Interpolation steps: nan is out of range"),
    ("Integrated Gradients (LIT's)", "steps", "Integrated Gradients (LIT's): its settings must be a JSON object"),
    ("Hotflip", {"Prediction key": "probas", "Max number of token flips": "50"},
     "Hotflip: Max number of token flips: 50 is out of range"),
    ("Ablation Flip", {"Prediction key": "probas", "Max number of token ablations": "99"},
     "Max number of token ablations: 99 is out of range"),
    ("Hotflip", {"Max number of token flips": "2"}, "Hotflip: missing settings ['Prediction key']"),
    ("Hotflip", {"Prediction key": "logits"}, "Hotflip: Prediction key: 'logits' is not one of the model's outputs "
                                              "['probas']"),
    ("Word Replacer", {"Substitutions": "a -> b, " * 1000}, "Word Replacer: Substitutions' is 8,000 characters"),
    ("no such thing", {}, "'no such thing': not served here"),
])
def test_settings_are_checked_against_their_declared_ranges(hosted, component, config, says):
    with pytest.raises(InputError) as err:
        gate.settings(component, config, outputs=["probas"])
    assert says in str(err.value)


def test_undeclared_settings_are_dropped_and_declared_ones_normalised():
    got = gate.settings("LIME (LIT's)", {"Number of samples": 64, "Seed": "", "evil": "x" * 10**6})
    assert got == {"Number of samples": "64", "Seed": ""}
    assert gate.settings("Grad L2 Norm (LIT's)", {"anything": 1}) == {} and gate.settings("LIME (LIT's)", None) is None


def test_every_served_component_declares_its_settings(hosted):
    """What is not declared in gate.SETTINGS is not served: a component LIT adds in an upgrade waits for its
    settings to be declared."""
    _url, app, _models, _pair = hosted
    assert set(app._interpreters) <= set(gate.SETTINGS) | set(gate.PROJECTORS)
    assert set(app._generators) <= set(gate.SETTINGS)
    for name in app._interpreters.keys() | app._generators.keys():
        comp = app._interpreters.get(name) or app._generators[name]
        declared = gate.PROJ_KW if name in gate.PROJECTORS else gate.SETTINGS[name]
        assert set(comp.config_spec()) <= set(declared) or name in gate.PROJECTORS, name
    served = app._interpreters.keys() | app._generators.keys()
    assert {"Integrated Gradients (LIT's)", "LIME (LIT's)", "umap", "pca", "Hotflip"} <= served


def test_lime_and_generator_probes_answer_their_prediction_alone(hosted, monkeypatch):
    """LIME's 256 samples were each answered with every layer's attention and the gradients (38 GB for one
    2,000-character text on a base-size model); a probe (a text without an id, inside an interpreter's or a
    generator's request) now gets its prediction, tokens and pooled embeddings; the datapoint itself, all."""
    from lit_models import models as lit_models_module

    url, _app, _models, pair = hosted
    asked = []
    real = lit_models_module.inspect
    monkeypatch.setattr(lit_models_module, "inspect", lambda *a, **k: asked.append(
        (k.get("attention", True), k.get("gradients", True))) or real(*a, **k))
    config = {"_salience_target": None, "Output field to explain": "probas", "Class index to explain": "-1",
              "Mask": "[MASK]", "Kernel width": "256", "Number of samples": "32", "Seed": "0"}
    rows = _rows(["a truly fine and moving film, take nine"])
    status, text = _post(url, _interp(pair.models[0].name, "LIME (LIT's)"), {"inputs": rows, "config": config})
    assert status == 200 and len(json.loads(text)) == 1, text
    assert asked[0] == (True, True) and len(asked) > 10  # the datapoint in full, then its probes
    assert set(asked[1:]) == {(False, False)}
    status, text = _post(url, _interp(pair.models[0].name, "LIME (LIT's)"), {"inputs": [
        {"id": None, "data": {"sentence": "no id"}, "meta": {}}], "config": config})
    assert (status, text) == (400, "inputs: datapoint 0 has no id; LIT's page gives every datapoint one "
                                   "(/annotate_new_data)")


@pytest.mark.parametrize("generator, config", [
    ("Hotflip", {"Prediction key": "probas", "Max number of counterfactuals to generate": "3",
                 "Max number of token flips": "2", "Fields to flip tokens in": ["tokens_sentence"],
                 "Comma-separated list of tokens to never flip": [], "Regression threshold": "0.0"}),
    ("Ablation Flip", {"Prediction key": "probas", "Max number of counterfacuals to generate": "3",
                       "Max number of token ablations": "2", "Fields to ablate": ["tokens_sentence"],
                       "Comma-separated list of tokens to never flip": [], "Regression threshold": "1.0"}),
    ("Word Replacer", {"Substitutions": "fine -> awful", "Fields to replace": ["sentence"]}),
])
def test_generators_answer_with_their_probes_answered_light(hosted, generator, config):
    """HotFlip needs the datapoint's gradients and its candidates' predictions alone: both paths hold."""
    from urllib.parse import quote

    url, _app, _models, pair = hosted
    path = f"/get_generated?model={pair.models[0].name}&dataset_name=rows&generator={quote(generator)}"
    status, text = _post(url, path, {"inputs": _rows(["a fine film, and a fine cast too"]), "config": config})
    assert status == 200, text
    generated = json.loads(text)
    assert len(generated) == 1 and all(g["data"]["sentence"] != "a fine film, and a fine cast too"
                                       for g in generated[0])
    if generator == "Word Replacer":
        assert [g["data"]["sentence"] for g in generated[0]] == ["a awful film, and a fine cast too",
                                                                 "a fine film, and a awful cast too"]


def test_the_word_replacer_is_bounded_by_what_it_would_make_before_it_makes_any(hosted):
    """One 999-word text with `a -> ` and 500 targets made 499,500 datapoints (a 1.13 GB answer); a 100,000-
    character text skipped the text cap; a lone surrogate in the substitutions came back inside a datapoint. Each
    is refused up front with its numbers (hosted: 500 datapoints, 2,000 characters); a small request still works."""
    from urllib.parse import quote

    url, _app, _models, pair = hosted
    path = f"/get_generated?model={pair.models[0].name}&dataset_name=rows&generator={quote('Word Replacer')}"

    def generate(text, subs):
        return _post(url, path, {"inputs": _rows([text]), "config": {"Substitutions": subs,
                                                                    "Fields to replace": ["sentence"]}})

    many = " ".join(["a"] * 999)
    assert generate(many, "a -> " + "|".join(["b"] * 500)) == (
        400, "Substitutions: these substitutions would make more than 500 datapoints; the limit here is 500")
    text = "a fine film " * 160  # 1,920 characters: under the cap; one "fine" made 1,500 long is not
    assert generate(text, "fine -> " + "x" * 1500) == (
        400, f"Substitutions: a made text would be {len(text) - 4 + 1500:,} characters long; the limit here is 2,000")
    status, body = generate("a fine film " * 9_000, "fine -> good")
    assert status == 400 and body.endswith("characters long; the limit here is 2,000"), body
    status, body = generate("a fine film", "fine -> \ud800")
    assert status == 400 and body.startswith("Substitutions: ") and "surrogate" in body, body
    status, body = generate("a fine film", "fine -> good|dull")
    assert status == 200 and [g["data"]["sentence"] for g in json.loads(body)[0]] == ["a good film", "a dull film"]


def test_a_request_whose_outputs_would_pass_the_memory_budget_is_refused_before_any_work(hosted, counted,
                                                                                            monkeypatch):
    url, _app, models, pair = hosted
    model = models[pair.models[0].name]
    assert model.max_output_bytes == 256 * 2**20  # hosted: 256 MB of JSON
    one = model.output_bytes(model.tokens(model.example({"sentence": "a fine film, take one"})))
    monkeypatch.setattr(model, "max_output_bytes", 2 * one + one // 2)
    path = f"/get_preds?model={model.clf.name}&dataset_name=rows"
    status, text = _post(url, path, {"inputs": _rows([f"a fine film, take {k}" for k in ("one", "two", "six")])})
    assert status == 400 and not counted
    assert text.startswith("inputs: these 3 texts' outputs would make about ") and text.endswith(
        "send fewer or shorter texts")
    assert _post(url, path, {"inputs": _rows(["a fine film, take one", "a fine film, take two"])})[0] == 200


def test_the_output_estimate_is_the_json_answers_size(hosted):
    """The output cap counted the arrays' bytes, 4 a number; LIT's JSON answer spends ~20 (40 texts estimated at
    195 MB were answered with 1.15 GB). The estimate of one text with every output is now the answer's size, to
    within a fifth (the answer also carries LIT's field names and the tokens)."""
    url, _app, models, pair = hosted
    model = models[pair.models[0].name]
    texts = ["a fine film, take one", "a long and winding film about " + "many things " * 40]
    for text in texts:
        status, body = _post(url, f"/get_preds?model={model.clf.name}&dataset_name=rows", {"inputs": _rows([text])})
        assert status == 200, body
        want = model.output_bytes(model.tokens(model.example({"sentence": text})))
        assert 0.8 <= want / len(body) <= 1.2, (want, len(body))


# ------------------------------------------------------------------ 2 and 4. projections
def _projection(model, dataset="rows", **kw):
    return {"inputs": [], "config": {"dataset_name": dataset, "model_name": model, "field_name": "cls_emb",
                                     "use_input": False, "proj_kw": {"n_components": 3, **kw}}}


def test_umap_settings_are_an_allow_list_and_bounded(hosted, counted):
    """Two requests with a huge n_epochs held both work slots for four minutes."""
    url, _app, _models, pair = hosted
    name = pair.models[0].name
    for kw, says in (({"n_epochs": 10**9}, "umap projection: proj_kw n_epochs: 1000000000 is out of range; give a "
                                           "whole number from 10 to 1000"),
                     ({"metric": "precomputed"}, "umap projection: proj_kw 'metric' is not allowed here"),
                     ({"n_neighbors": 1}, "proj_kw n_neighbors: 1 is out of range")):
        status, text = _post(url, _interp(name, "umap"), _projection(name, **kw))
        assert status == 400 and says in text, text
    body = _projection(name)
    body["config"]["low_memory"] = False
    assert _post(url, _interp(name, "umap"), body)[1] == ("umap projection: 'low_memory' is not a setting here; use "
                                                         "['dataset_name', 'field_name', 'model_name', 'proj_kw', "
                                                         "'use_input']")
    assert not counted


def test_a_umap_fit_stops_at_the_requests_deadline():
    """The fit itself checks the request's job between epochs (its progress bar's writes): a request's budget
    bounds it, whatever its settings."""
    rng = np.random.default_rng(0)
    inputs = [{"x": v} for v in rng.normal(size=(60, 8)).astype(np.float32)]
    model = gate.UmapWithDeadline(n_components=2, n_neighbors=5, n_epochs=10**7, random_state=0)
    job = jobs.Job(seconds=1.0, name="umap")
    with jobs.running(job, record=False), pytest.raises(jobs.Stopped, match="time budget"):
        list(model.fit_transform(inputs))
    # the stop came from inside tqdm's drawing, which holds its console lock: it is given back, so a bar in
    # another thread draws (it waited forever: a suite run hung on a model's loading in a server thread)
    import io
    import threading

    from tqdm import tqdm

    drawn = threading.Event()
    other = threading.Thread(target=lambda: (tqdm(range(3), file=io.StringIO(), mininterval=0).close(), drawn.set()),
                             daemon=True)
    other.start()
    assert drawn.wait(60), "tqdm's console lock is still held by the stopped fit's thread"
    assert len(list(gate.UmapWithDeadline(n_components=2, n_neighbors=5, n_epochs=20,
                                          random_state=0).fit_transform(inputs))) == 60  # no job: runs


def test_a_projection_names_the_requests_own_model_so_no_visitor_poisons_anothers(hosted):
    """One request for ALBERT with model_name BERT made every later visitor's BERT PCA show ALBERT's
    coordinates: LIT keyed the fitted projection by the config alone."""
    url, _app, _models, pair = hosted
    bert, albert = (m.name for m in pair.models)
    status, text = _post(url, _interp(albert, "pca"), _projection(bert))
    assert status == 400 and text == f"pca projection: model_name {bert!r} is not this request's model {albert!r}"
    status, text = _post(url, _interp(bert, "pca"), _projection(bert, dataset="other"))
    assert status == 400 and "dataset_name 'other' is not this request's dataset 'rows'" in text
    rows = _rows(["a fine film, take 1"])
    got = {}
    for name in (bert, albert):
        body = _projection(name)
        body["inputs"] = rows
        status, text = _post(url, _interp(name, "pca"), body)
        assert status == 200
        got[name] = np.asarray(json.loads(text)[0]["z"])
    # each model's own PCA of its own embeddings: fitted independently here, the same up to each axis' sign
    for name, model in zip((bert, albert), pair.models):
        from sklearn.decomposition import PCA

        from app.core.api import Example, inspect

        texts = [f"a {'fine' if i % 2 else 'dull'} film, take {i}" for i in range(12)]
        embs = np.stack([inspect(model, Example((t,)), gradients=False, attention=False)["cls_emb"] for t in texts])
        ref = PCA(n_components=3).fit(embs).transform(embs[1:2])[0]
        np.testing.assert_allclose(np.abs(got[name]), np.abs(ref), rtol=1e-3, atol=1e-3)


def test_projections_are_forgotten_least_recently_used_past_their_byte_budget(hosted):
    _url, app, _models, pair = hosted
    from lit_nlp.components import pca as lit_pca

    proj = gate.Projections(lit_pca.PCAModel, budget=12 * 8 * 1100)  # about one fitted projection of 12 points
    model = app._models[pair.models[0].name]
    dataset = app._datasets["rows"]
    for k in (2, 3, 2):
        config = _projection(pair.models[0].name, n_components=k)["config"]
        proj.run([], model, dataset, config=config)
    assert len(proj._instances) == 1 and next(iter(proj._instances))[0] == gate.lit_projection._key_from_dict(
        _projection(pair.models[0].name, n_components=2)["config"])


# ------------------------------------------------------------------ 5. routes that skipped the caps
def test_the_paired_metrics_path_holds_the_models_caps(hosted, counted, monkeypatch):
    """A metrics path predicted through the core directly: 30 texts of 1 MB each answered after 112 s."""
    from lit_models import metrics

    url, _app, _models, pair = hosted
    predicted = []
    real = metrics.predict
    monkeypatch.setattr(metrics, "predict", lambda clf, exs: predicted.append(exs) or real(clf, exs))
    path = (f"/get_metrics?model={pair.models[0].name}&dataset_name=rows&do_predict=0&"
            "metrics=vs%20the%20other%20model")
    status, text = _post(url, path, {"inputs": _rows(["x" * 1_000_000] * 3)})
    assert status == 400 and text == "field 'sentence' is 1,000,000 characters long; the limit here is 2,000"
    assert not predicted and not counted
    status, text = _post(url, path, {"inputs": _rows(["a fine film", "a dull film", "a fine film, really"])})
    assert status == 200 and json.loads(text)["vs the other model"][0]["metrics"]["n"] == 3.0


@pytest.mark.parametrize("text, says", [
    ("", "field 'sentence' is empty"),
    ("\u200b\u200d", "field 'sentence' has only invisible characters (U+200B, U+200D), nothing a model can read"),
    ("\u0301\u0308", "field 'sentence' has only invisible characters or combining marks (U+0301, U+0308), nothing a "
                     "model can read"),
    ("\u3164\u2800", "field 'sentence' reads as nothing but [UNK] to both models (U+2800, U+3164): nothing a model "
                     "can read"),  # a Hangul filler and a braille blank: letters and symbols to Unicode
])
def test_lit_refuses_texts_a_model_cannot_read(hosted, counted, text, says):
    url, _app, _models, pair = hosted
    status, body = _post(url, f"/get_preds?model={pair.models[0].name}&dataset_name=rows", {"inputs": _rows([text])})
    assert status == 400 and body == says and not counted


def test_given_embeddings_must_be_finite_numbers_of_their_tokens_shape(hosted):
    """A NaN in input_embs answered [NaN, NaN], which is not JSON. NaN and Infinity are not JSON either, and are
    refused with the body; 1e999 is JSON (an overflow to infinity), and is refused where the embeddings are read."""
    url, _app, models, pair = hosted
    model = models[pair.models[0].name]
    ok = model._one({"sentence": "a fine film"})
    embs = np.asarray(ok["input_embs_sentence"]).tolist()
    path = f"/get_preds?model={model.clf.name}&dataset_name=rows"
    for bad, says in ((float("nan"), "request body: not JSON (NaN is not JSON)"),
                      (float("inf"), "input_embs for field 0: holds NaN or infinity; give finite numbers"),
                      ("x", "input_embs for field 0: not a matrix of numbers")):
        hostile = [row[:] for row in embs]
        hostile[0][0] = bad
        body = json.dumps({"inputs": _rows(["a fine film"], input_embs_sentence=hostile)})
        # infinity as JSON has it: a number too large for a float (the id was hashed as the server will)
        assert _post(url, path, None, raw=body.replace("Infinity", "1e999").encode()) == (400, says)
    for bad in (float("nan"), float("inf")):  # the core's own check, whatever the front end
        hostile = np.asarray(embs)
        hostile[1, 2] = bad
        with pytest.raises(InputError, match="input_embs for field 0: holds NaN or infinity"):
            model._one({"sentence": "a fine film", "input_embs_sentence": hostile})


def test_new_datapoints_are_capped_like_a_prediction_and_kept_in_bounded_number(hosted, monkeypatch):
    """/post_new_data stored texts unbounded, for every later visitor who loads its link."""
    url, app, _models, _pair = hosted
    status, body = _post(url, "/post_new_data?dataset_name=rows", {"inputs": _rows(["\u3164\u3164"])})
    assert status == 400 and body == ("field 'sentence' reads as nothing but [UNK] to both models (U+3164): nothing "
                                      "a model can read")
    status, body = _post(url, "/post_new_data?dataset_name=rows", {"inputs": _rows(["y" * 5_000_000])})
    assert status == 400 and body == "field 'sentence' is 5,000,000 characters long; the limit here is 2,000"
    status, body = _post(url, "/post_new_data?dataset_name=rows", {"inputs": _rows(["a"]) * 10_000})
    assert status == 400 and body == "inputs: 10,000 datapoints in one request; the limit here is 2,000"
    monkeypatch.setattr(type(app), "SAVED_SETS", 3)
    links = [json.loads(_ok(_post(url, "/post_new_data?dataset_name=rows", {"inputs": _rows([f"text {i}"])})))
             for i in range(5)]
    assert len(app._saved_datapoints) == 3
    assert _post(url, links[-1]["load"].replace("?", "/fetch_new_data?"), {})[0] == 200
    assert _post(url, links[0]["load"].replace("?", "/fetch_new_data?"), {}) == (
        400, "saved_datapoints_id: no saved datapoints by that id here (the last 3 sets are kept)")  # oldest first


def test_a_body_over_the_cap_is_refused_before_it_is_read(hosted, monkeypatch):
    url, _app, _models, pair = hosted
    monkeypatch.setenv("ALBERT_LENS_LIT_BODY_MB", "1")
    status, body = _post(url, f"/get_preds?model={pair.models[0].name}&dataset_name=rows", None,
                         raw=b"[" + b" " * (2 * 2**20) + b"]")
    assert status == 413 and body == "request body: 2,097,154 bytes; the limit here is 1,048,576"


def test_lits_prediction_cache_is_bounded_in_bytes(hosted):
    url, app, _models, pair = hosted
    cache = app._models[pair.models[0].name]._cache._d
    assert isinstance(cache, gate.BoundedCache) and cache.budget == 256 * 2**20
    small = gate.BoundedCache(3000)
    for i in range(10):
        small[i] = np.zeros(100, dtype=np.float32)  # ~512 bytes each
    assert list(small) == [5, 6, 7, 8, 9] and small.used <= 3000
    assert small.get(5) is not None
    small[10] = np.zeros(100, dtype=np.float32)
    assert list(small) == [7, 8, 9, 5, 10]  # 5 was used last: 6 went


# ------------------------------------------------------------------ 6. hostile URLs
@pytest.mark.parametrize("path", ["/%00", "/static/%00index.html", "/get_info%00", "/%0a%0d"])
def test_a_control_character_in_the_url_is_a_one_line_400(hosted, path):
    url = hosted[0]
    status, body = _get(url, path)
    assert status == 400 and body == "bad path"


def test_a_sibling_folder_of_the_client_root_is_not_served(tmp_path):
    """LIT compared string prefixes: /root/default-old/x passed as inside /root/default."""
    from lit_nlp.lib import wsgi_app
    from werkzeug.test import Client

    root = tmp_path / "default"
    (root / "static").mkdir(parents=True)
    (root / "static" / "index.html").write_text("<html>page</html>")
    secret = tmp_path / "default-old"
    secret.mkdir()
    (secret / "key.txt").write_text("secret")
    assert wsgi_app.App({}, str(root))._PathIsSafe(str(secret / "key.txt"))  # LIT's own check lets it through
    app = gate.QuietStatic({}, str(root), index_file="static/index.html")
    client = Client(app)
    assert not app._PathIsSafe(str(secret / "key.txt")) and app._PathIsSafe(str(root / "static" / "index.html"))
    r = client.get("/../default-old/key.txt")
    assert r.status_code in (400, 404) and b"secret" not in r.data
    assert client.get("/").data == b"<html>page</html>"


def _ok(answer):
    status, text = answer
    assert status == 200, text
    return text


# ------------------------------------------------------------------ fuzzing the LIT routes
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

LEAKS = ("Traceback", "site-packages", "/work/", 'File "', "NaN", "Infinity")
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-10**6, 10**12), st.floats(allow_nan=True),
                    st.text(max_size=30), st.sampled_from(["a fine film", "", "\u200b", "\ud800", "x" * 3000]))
JSONISH = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
    st.sampled_from(["sentence", "label", "_id", "id", "data", "meta", "input_embs_sentence", "tokens_sentence",
                     "Interpolation steps", "Number of samples", "proj_kw", "n_epochs", "model_name", "field_name",
                     "dataset_name", "use_input", "n_components", "Substitutions", "tolerance", "output", "x"]), inner,
    max_size=4),
    max_leaves=10)
ROUTES = st.sampled_from([
    "/get_preds?model={m}&dataset_name=rows&requested_types=MulticlassPreds",
    "/get_interpretations?model={m}&dataset_name=rows&interpreter=Integrated%20Gradients%20(LIT's)",
    "/get_interpretations?model={m}&dataset_name=rows&interpreter=LIME%20(LIT's)",
    "/get_interpretations?model={m}&dataset_name=rows&interpreter=integrated%20gradients",  # ours, its options
    "/get_interpretations?model={m}&dataset_name=rows&interpreter=LIME",
    "/get_interpretations?model={m}&dataset_name=rows&interpreter=pca",
    "/get_interpretations?model={m}&dataset_name=rows&interpreter=umap",
    "/get_interpretations?model={m}&dataset_name=nosuch&interpreter=nosuch",
    "/get_generated?model={m}&dataset_name=rows&generator=Hotflip",
    "/get_generated?model={m}&dataset_name=rows&generator=Word%20Replacer",
    "/get_metrics?model={m}&dataset_name=rows&do_predict=0",
    "/post_new_data?dataset_name=rows", "/annotate_new_data?dataset_name=rows",
    "/fetch_new_data?saved_datapoints_id={m}", "/get_preds?model=nosuch&dataset_name=rows",
])


def _inputs(draw_rows, texts):
    return [{"id": r["id"], "data": r["data"], "meta": {}} for r in draw_rows(texts)]


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(route=ROUTES, body=st.one_of(
    st.fixed_dictionaries({"inputs": st.lists(st.fixed_dictionaries({"id": st.text(max_size=5), "data": JSONISH,
                                                                     "meta": st.just({})}), max_size=3)},
                          optional={"config": JSONISH}),
    st.fixed_dictionaries({"inputs": st.lists(st.sampled_from(["a fine film", "", "\u0301"]), max_size=2).map(
        lambda ts: _rows(ts))}, optional={"config": JSONISH}),
    JSONISH))
def test_fuzz_every_lit_route_answers_in_one_line_or_in_json(hosted, route, body):
    """Whatever a visitor posts to a LIT route: a 200 with strict JSON (no NaN, which is not JSON), or a 4xx/5xx
    whose one line names no server path and carries no traceback; and the server answers on."""
    from werkzeug.test import Client

    _url, app, _models, pair = hosted
    client = Client(app)
    path = route.format(m=pair.models[0].name)
    r = client.post(path, data=json.dumps(body), content_type="application/json")
    text = r.get_data(as_text=True)
    if r.status_code == 200:
        json.loads(text, parse_constant=lambda c: pytest.fail(f"{path}: {c} in the answer"))
    else:
        # a refusal of the request is a 400 naming what is wrong; a 500 ("failed") is LIT breaking on input we
        # let through, and the fuzz fails on it
        assert r.status_code in (400, 413, 503) and "\n" not in text.strip(), (path, text[:300])
    assert not any(leak in text for leak in LEAKS[:4]), (path, text[:300])
    assert client.get("/get_info").status_code == 200


def test_kept_datapoints_hold_only_declared_fields_need_an_id_and_fit_a_byte_cap(hosted, monkeypatch):
    """/post_new_data kept a field no dataset declares whole (eight 30 MB `junk` fields: +480 MB, all 200), and
    answered a datapoint without an id with a 500 (KeyError); the sets it keeps are held to a byte cap in all."""
    url, app, _models, _pair = hosted
    row = _rows(["a fine film"], junk="J" * 100_000)
    status, body = _post(url, "/post_new_data?dataset_name=rows", {"inputs": row})
    assert status == 200, body
    link = json.loads(body)["load"]
    kept = json.loads(_ok(_post(url, link.replace("?", "/fetch_new_data?"), {})))
    assert "junk" not in json.dumps(kept) and "a fine film" in json.dumps(kept)
    no_id = [{"data": {"sentence": "a fine film", "label": "positive"}, "meta": {}}]
    status, body = _post(url, "/post_new_data?dataset_name=rows", {"inputs": no_id})
    assert status == 400 and body.startswith("inputs: datapoint 0 has no id;"), body
    # the byte cap: with room for about two sets of 20 datapoints, the oldest go; one set over it alone is refused
    one = gate.size_of(_rows([f"a fine film number {i}" for i in range(20)]))
    from lit_models import server

    real = server.limits
    monkeypatch.setattr(server, "limits", lambda: {**real(), "lit_saved_bytes": int(one * 2.5)})
    links = [json.loads(_ok(_post(url, "/post_new_data?dataset_name=rows",
                                  {"inputs": _rows([f"a fine film number {i} of set {s}" for i in range(20)])})))
             for s in range(4)]
    fetched = [_post(url, ln["load"].replace("?", "/fetch_new_data?"), {})[0] for ln in links]
    assert fetched == [400, 400, 200, 200], fetched  # the two newest kept
    status, body = _post(url, "/post_new_data?dataset_name=rows",
                         {"inputs": _rows([f"a long kept film number {i}" for i in range(80)])})
    assert status == 400 and "bytes of datapoints to keep; the limit here is" in body, body


WORDS = st.sampled_from(["a", "fine", "film", "A", "FILM", ".", "é", "\u3164", "\ud800", "x" * 400, "->", "|", ","])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.lists(WORDS, min_size=1, max_size=60).map(" ".join),
       sources=st.lists(WORDS, min_size=1, max_size=3), targets=st.lists(WORDS, min_size=0, max_size=300),
       ignore=st.booleans())
def test_fuzz_the_word_replacer_answers_within_the_caps_or_refuses_in_one_line(hosted, text, sources, targets,
                                                                               ignore):
    """Hostile substitutions (many targets, long ones, surrogates, separators) on hostile texts: a 200 holds at
    most `max_examples` datapoints, each within the text cap, or a one-line 400 says which cap."""
    from werkzeug.test import Client

    from app.core.ground import policy

    _url, app, _models, pair = hosted
    caps = policy.limits()
    subs = ", ".join(f"{s} -> {'|'.join(targets)}" for s in sources)
    body = {"inputs": _rows([text[:1990]]), "config": {"Substitutions": subs, "Fields to replace": ["sentence"],
                                                         "ignore_casing": ignore}}
    r = Client(app).post(f"/get_generated?model={pair.models[0].name}&dataset_name=rows&generator=Word%20Replacer",
                         data=json.dumps(body), content_type="application/json")
    answer = r.get_data(as_text=True)
    if r.status_code == 200:
        made = json.loads(answer)[0]
        assert len(made) <= caps["max_examples"]
        assert all(len(g["data"]["sentence"]) <= caps["max_chars"] for g in made)
    else:
        assert r.status_code == 400 and "\n" not in answer.strip(), answer[:300]
        assert not any(leak in answer for leak in LEAKS[:4]), answer[:300]


def test_half_open_connections_from_one_client_leave_other_visitors_served(hosted, caplog):
    """1,200 connections that never finished their headers took werkzeug's development server to 1,033 threads and
    dropped every other visitor's request. On waitress they hold sockets, not threads, and one address holds at most
    `lit_per_address` (hosted: 16): the rest are closed as they arrive, and another visitor's /get_info answers."""
    import select
    import socket
    import threading

    from app.core.ground import policy

    url, _app, _models, _pair = hosted
    port = int(url.rsplit(":", 1)[1])
    most = policy.limits()["lit_per_address"]
    threads_before = threading.active_count()
    caplog.set_level("WARNING", logger="albert_lens.lit")
    held = []
    try:
        for _ in range(300):
            s = socket.socket()
            s.bind(("127.0.0.2", 0))  # another loopback address: another client than the visitor below
            s.connect(("127.0.0.1", port))
            s.sendall(b"GET /get_info HTTP/1.1\r\nHost: lit\r\nX-Slow: ")  # headers never finished
            held.append(s)
        assert _post(url, "/get_info", {})[0] == 200  # the visitor, from 127.0.0.1
        assert threading.active_count() <= threads_before + 2  # no thread per connection
        open_now = 0
        for s in held:  # a connection the server closed reads as end of file
            ready, _, _ = select.select([s], [], [], 0.5 if open_now == 0 else 0)
            if not ready:
                open_now += 1
            else:
                try:
                    open_now += bool(s.recv(1, socket.MSG_PEEK))
                except OSError:
                    pass
        assert open_now <= most, (open_now, most)
        said = [r.getMessage() for r in caplog.records if "the most one address may" in r.getMessage()]
        assert len(said) == 1 and said[0].startswith("LIT: 127.0.0.2 holds 16 connections"), said  # not 284 lines
    finally:
        for s in held:
            s.close()
    assert _post(url, "/get_info", {})[0] == 200
