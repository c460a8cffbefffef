"""Batch functions on a local Ray instance give the same results, in the same order, as the in-process run."""
import numpy as np
import pytest

from app.core.execution import engine
from app.core.execution.inference import logits_batch
from app.core.execution.pair import Pair
from app.core.ground.data import Example
from app.core.techniques.attacks import attack_batch
from app.core.techniques.embeddings import embed_batch

from .conftest import SENTENCES

pytestmark = pytest.mark.usefixtures("textattack_loaded")  # see the fixture: an import under capsys


@pytest.fixture(scope="module")
def ray_local():
    import ray

    if ray.is_initialized():  # another file's test left one (its own CPU count): this file's needs four
        ray.shutdown()
    # four logical CPUs (each worker asks for one): the shared engine's two workers and a test's own two at once
    ray.init(num_cpus=4, include_dashboard=False, log_to_driver=False, ignore_reinit_error=True)
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def ray_engine(ray_local):
    """One Ray engine whose two workers serve every test that compares Ray with in-process answers: a worker
    process imports torch, transformers and (for attacks) TextAttack, ~4-11 s of CPU each, and a fresh engine per
    test started ~23 of them. The engine's own life (fresh workers, kept workers, a killed worker, the CLI's
    `--engine ray`) is tested with engines of their own."""
    with engine.Engine("ray", workers=2) as eng:
        yield eng


def _workers_now(besides: set[str]) -> list[str]:
    import ray

    return sorted(n for n in ray.util.list_named_actors() if n.startswith(engine.WORKER_PREFIX) and n not in besides)


def test_embed_and_predict_on_ray_equal_local(tiny_pair, ray_engine):
    exs = [Example((f"{s} {i}",)) for i in range(7) for s in SENTENCES]
    for fn in (embed_batch, logits_batch):
        local = engine.run(tiny_pair.spec, fn, exs, batch_size=10)
        remote = ray_engine.run(tiny_pair.spec, fn, exs, batch_size=10)
        for a, b in zip(local, remote):
            assert a.shape == b.shape == (len(exs), a.shape[1])
            np.testing.assert_allclose(a, b, atol=1e-5)


def test_attack_rows_on_ray_equal_local(tiny_pair, ray_engine):
    exs = [Example((s,), "positive") for s in SENTENCES[:4]]
    params = {"recipe": "deepwordbug", "query_budget": 50}
    local = engine.run(tiny_pair.spec, attack_batch, exs, params=params, batch_size=2)
    remote = ray_engine.run(tiny_pair.spec, attack_batch, exs, params=params, batch_size=2)
    assert [r["index"] for r in remote] == [0, 1, 2, 3]
    strip = lambda rows: [[(x["outcome"], x["adversarial"], x["queries"]) for x in r["results"]] for r in rows]
    assert strip(local) == strip(remote)


def test_unknown_engine_and_batch_function(tiny_pair):
    from app.core.ground.errors import InputError

    with pytest.raises(InputError, match="engine: 'spark'"):
        engine.run(tiny_pair.spec, embed_batch, [Example(("x",))], engine="spark")
    with pytest.raises(InputError, match="fn: 'train'"):
        engine.run(tiny_pair.spec, "train", [Example(("x",))])
    from app.core.techniques.embeddings import embed

    with pytest.raises(InputError, match="fn: 'embed' is not a batch function"):  # a function that declares no joining
        engine.run(tiny_pair.spec, embed, [Example(("x",))])


def test_a_killed_worker_is_reported(tiny_pair, ray_local):
    """Workers killed under a running engine: its next job fails naming the batch, and a new engine works. (The
    kill used to come from the progress callback mid-job, which raced the tiny model: on a quick run every batch
    had answered before the kill landed, and nothing failed.)"""
    import time

    import ray

    exs = [Example((f"{s} {i}",)) for i in range(6) for s in SENTENCES]
    others = set(_workers_now(set()))  # the shared engine's, when it has started
    with engine.Engine("ray", workers=2, batch_size=4) as eng:
        eng.run(tiny_pair.spec, logits_batch, exs[:8])  # its workers are up and answering
        mine = _workers_now(others)
        assert len(mine) == 2
        for name in mine:
            ray.kill(ray.get_actor(name))
        for _ in range(600):  # Ray drops a dead actor's name once the kill has landed
            if not _workers_now(others):
                break
            time.sleep(0.1)
        with pytest.raises(engine.WorkerFailed, match=r"a Ray worker died while processing batch \d+ of \d+"):
            eng.run(tiny_pair.spec, logits_batch, exs)
        assert not eng._actors  # a dead worker set is not reused
    # the engine still works afterwards
    out = engine.run(tiny_pair.spec, logits_batch, exs[:8], engine="ray", workers=1, batch_size=4)
    assert out[0].shape[0] == 8


def test_engine_keeps_its_workers_between_jobs(tiny_pair, ray_local):
    exs = [Example((s,)) for s in SENTENCES]
    others = set(_workers_now(set()))  # the shared engine's, when it has started
    with engine.Engine("ray", workers=2, batch_size=2) as eng:
        eng.run(tiny_pair.spec, logits_batch, exs)
        first = _workers_now(others)
        eng.run(tiny_pair.spec, embed_batch, exs)
        assert _workers_now(others) == first
        assert len(first) == 2
    assert not _workers_now(others)


def test_checklist_and_benchmark_on_ray_equal_local(tiny_pair, ray_engine, monkeypatch):
    from app.core import api
    from app.core.ground.data import load_dataset
    from app.core.models import loading
    from app.core.techniques.benchmark import benchmark

    from .conftest import shared

    suite = str(shared("checklist", "sentiment_suite.json.gz"))
    ds = load_dataset(shared("glue", "sst2", "dev.tsv")).head(50)
    local_cl = api.checklist(tiny_pair, suite=suite, sample=3)
    local_b = benchmark(tiny_pair, ds)
    driver = Pair(tiny_pair.spec)  # the driver reads labels from the configs; the workers hold the weights
    loading.clear_cache()
    monkeypatch.setattr(loading, "load", lambda spec: pytest.fail(f"the driver loaded {spec.source}"))
    remote_cl = api.checklist(driver, suite=suite, sample=3, engine=ray_engine)  # batches of 13 here: two per worker
    remote_b = benchmark(driver, ds, engine=ray_engine)
    monkeypatch.undo()
    strip = lambda res: [[(r["n"], r["failed"]) for r in t["results"]] for t in res["tests"]]
    assert strip(remote_cl) == strip(local_cl) and remote_cl["capabilities"] == local_cl["capabilities"]
    assert sum(n for t in strip(local_cl) for n, _ in t) > 0
    assert remote_b["engine"]["engine"] == "ray" and remote_b["engine"]["workers"] == 2
    assert local_b["engine"]["engine"] == "local" and local_b["engine"]["wall_seconds"] > 0
    for a, b in zip(local_b["models"], remote_b["models"]):
        assert a["accuracy"] == b["accuracy"] and a["parameters"] == b["parameters"] and a["n"] == b["n"] == 50
        assert b["throughput_per_s"] > 0 and b["latency_ms_median"] > 0
    # the paired test and the disagreements come from the workers' predictions, the same as in process
    assert remote_b["comparison"] == local_b["comparison"]
    assert [e["index"] for e in remote_b["disagreements"]["examples"]] == \
        [e["index"] for e in local_b["disagreements"]["examples"]]


def test_similarity_on_ray_equals_local_and_only_statistics_leave_the_workers(tiny_pair, ray_engine, monkeypatch):
    from app.core import api
    from app.core.models import loading

    from .conftest import shared

    sst2 = str(shared("glue", "sst2", "dev.tsv"))
    local = {p: api.similarity(tiny_pair, sst2, limit=40, pooling=p, minibatch=8) for p in ("cls", "words")}
    driver = Pair(tiny_pair.spec)
    loading.clear_cache()
    monkeypatch.setattr(loading, "load", lambda spec: pytest.fail(f"the driver loaded {spec.source}"))
    remote = {p: api.similarity(driver, sst2, limit=40, pooling=p, minibatch=8, engine=ray_engine) for p in ("cls",
                                "words")}
    monkeypatch.undo()
    for p in local:  # the same minibatches; their embeddings padded alike or not (float32 rounding, ~1e-3 here)
        assert remote[p].n == local[p].n and remote[p].minibatches == local[p].minibatches
        for key in ("cross", "a", "b"):
            for part in ("cka", "low", "high"):
                np.testing.assert_allclose(np.array(getattr(remote[p], key)[part], dtype=float),
                                           np.array(getattr(local[p], key)[part], dtype=float), atol=5e-3)
    assert local["cls"].n == 40 and local["words"].n > 300  # SST-2 sentences: ~20 words each


def test_report_on_ray_equals_local(tiny_pair, ray_engine, tmp_path, monkeypatch):
    import json

    from app.core.techniques import projection
    from app.report import generate

    from .conftest import shared

    ds = str(shared("glue", "sst2", "dev.tsv"))
    suite = str(shared("checklist", "sentiment_suite.json.gz"))
    kw = dict(datasets=[ds], suites=[suite], limit=40, sample=3, attack_n=2, umap_n=30, saliency_n=3,
              progress_bar=False)
    sections = {}
    for name in ("local", "ray"):
        monkeypatch.setattr(projection, "cache_dir", lambda name=name: tmp_path / f"emb-{name}")  # no sharing
        pair = tiny_pair
        if name == "ray":  # the driver reads labels from the configs; the workers hold the weights
            from app.core.models import loading

            pair = Pair(tiny_pair.spec)
            loading.clear_cache()
            monkeypatch.setattr(loading, "load", lambda spec: pytest.fail(f"the driver loaded {spec.source}"))
        if name == "local":
            with engine.Engine(name, workers=2) as eng:
                res = generate(pair, tmp_path / name, engine=eng, **kw)
        else:
            res = generate(pair, tmp_path / name, engine=ray_engine, **kw)
        assert res["reused"] == []
        sections[name] = {p.stem: json.loads(p.read_text()) for p in (tmp_path / name / "cache").glob("*.json")}
        assert (tmp_path / name / "report.md").is_file() and (tmp_path / name / "umap.png").is_file()
    loc, rem = sections["local"], sections["ray"]
    assert sorted(loc) == sorted(rem) and len(loc) == 9  # same cache keys: either engine's cache serves the other
    for key, a in loc.items():
        b, kind = rem[key], key.split("-")[0]
        if kind == "benchmark":
            assert [m["accuracy"] for m in a["models"]] == [m["accuracy"] for m in b["models"]]
        elif kind == "checklist":
            assert a["capabilities"] == b["capabilities"]
        elif kind == "slices":  # predicted (and embedded, for the clusters) on the workers: the same answers
            assert a["overall"] == b["overall"] and a["candidates_tested"] == b["candidates_tested"]
            plain = lambda r: [(s["name"], s["size"], s["q"]) for s in r["slices"] if s["kind"] != "cluster"]
            assert plain(a) == plain(b)
        elif kind == "umap":  # embedded on the workers in their own batches: under a BLAS matrix product (the
            # AVX2 path) a batch's make-up moves a vector's last bits, and a near-tie between two neighbours can
            # flip: the overlaps agree to one neighbour of the n * k (it read 0.4367 against 0.44 there)
            assert a["knn_overlap"] == pytest.approx(b["knn_overlap"], abs=1.01 / (a["n"] * a["k"]))
            assert [p["prediction"] for p in a["points"]] == [p["prediction"] for p in b["points"]]
        elif kind == "facts":
            assert [m["parameters"] for m in a["models"]] == [m["parameters"] for m in b["models"]]
            assert a["latency_comparison"]["n"] == b["latency_comparison"]["n"] == 30  # timed on a worker too
        elif kind == "saliency":  # explained on a worker: the same maps, up to float rounding across processes
            for k in ("comprehensiveness", "sufficiency", "random_comprehensiveness"):
                assert [m["mean"] for m in a[k]] == pytest.approx([m["mean"] for m in b[k]], abs=1e-4)
            assert [e["top_words"] for e in a["examples"]] == [e["top_words"] for e in b["examples"]]
        elif kind == "inside":  # CKA from the workers' minibatch statistics; attention statistics from a worker
            np.testing.assert_allclose(np.array(a["similarity"]["cross"]["cka"], dtype=float),
                                       np.array(b["similarity"]["cross"]["cka"], dtype=float), atol=2e-3)
            for ma, mb in zip(a["attention"]["models"], b["attention"]["models"]):  # float32 across processes
                np.testing.assert_allclose(ma["entropy"], mb["entropy"], atol=2e-3)
        elif kind == "attack":
            pick = lambda s: {m: (v["successes"], v["attacked"], v["avg_queries"]) for m, v in s["summary"].items()}
            assert "summary" in a and "summary" in b, (a, b)  # deepwordbug runs offline: nothing to skip
            assert pick(a) == pick(b)


def test_cli_benchmark_on_ray(tiny_dirs, ray_local, capsys):
    import json

    from app.cli import main

    from .conftest import shared

    base = ["benchmark", "--models", str(tiny_dirs["bert"]), str(tiny_dirs["albert"]), "--task", "sst2",
            "--dataset", str(shared("glue", "sst2", "dev.tsv")), "--limit", "20", "--json"]
    assert main(base + ["--engine", "ray", "--workers", "2"]) == 0
    remote = json.loads(capsys.readouterr().out)
    assert main(base) == 0
    local = json.loads(capsys.readouterr().out)
    assert remote["engine"]["engine"] == "ray" and remote["engine"]["wall_seconds"] > 0
    assert [m["accuracy"] for m in remote["models"]] == [m["accuracy"] for m in local["models"]]
    assert main(base + ["--engine", "ray", "--workers", "0"]) == 2
    assert "--workers: 0 is too small; give a whole number of 1 or more" in capsys.readouterr().err


def test_cli_attack_on_ray_equals_local_and_resumes(tiny_dirs, ray_local, tmp_path, capsys):
    import json

    from app.cli import main

    from .conftest import shared

    base = ["attack", "--models", str(tiny_dirs["bert"]), str(tiny_dirs["albert"]), "--task", "sst2",
            "--recipe", "deepwordbug", "--dataset", str(shared("glue", "sst2", "dev.tsv")), "--n", "3",
            "--query-budget", "40", "--json"]
    assert main(base + ["--out", str(tmp_path / "local.jsonl")]) == 0
    local = json.loads(capsys.readouterr().out)
    remote_out = tmp_path / "ray.jsonl"
    remote_out.write_text(json.dumps(local["examples"][0]) + "\n")  # an earlier run that stopped after one
    assert main(base + ["--out", str(remote_out), "--engine", "ray", "--workers", "2"]) == 0
    remote = json.loads(capsys.readouterr().out)
    strip = lambda res: [
        (r["index"], [(x["outcome"], x["adversarial"]) for x in r["results"]]) for r in res["examples"]
    ]
    assert strip(remote) == strip(local) and [r["index"] for r in remote["examples"]] == [0, 1, 2]
    # everything done: a re-run only reads the file
    assert main(base + ["--out", str(remote_out), "--engine", "ray", "--workers", "2"]) == 0
    again = json.loads(capsys.readouterr().out)
    assert strip(again) == strip(local) and len(remote_out.read_text().splitlines()) == 3
