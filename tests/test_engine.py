"""Batch jobs on a local Ray instance give the same results, in the same order, as the in-process run."""
import numpy as np
import pytest

from app.core import engine
from app.core.data import Example

from .conftest import SENTENCES


@pytest.fixture(scope="module")
def ray_local():
    import ray

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, ignore_reinit_error=True)
    yield
    ray.shutdown()


def test_embed_and_predict_on_ray_equal_local(tiny_pair, ray_local):
    exs = [Example((f"{s} {i}",)) for i in range(7) for s in SENTENCES]
    for job in ("embed", "predict"):
        local = engine.run(tiny_pair.spec, job, exs, batch_size=10)
        remote = engine.run(tiny_pair.spec, job, exs, engine="ray", workers=2, batch_size=10)
        for a, b in zip(local, remote):
            assert a.shape == b.shape == (len(exs), a.shape[1])
            np.testing.assert_allclose(a, b, atol=1e-5)


def test_attack_rows_on_ray_equal_local(tiny_pair, ray_local):
    exs = [Example((s,), "positive") for s in SENTENCES[:4]]
    params = {"recipe": "deepwordbug", "query_budget": 50}
    local = engine.run(tiny_pair.spec, "attack", exs, params=params, batch_size=2)
    remote = engine.run(tiny_pair.spec, "attack", exs, params=params, engine="ray", workers=2, batch_size=2)
    assert [r["index"] for r in remote] == [0, 1, 2, 3]
    strip = lambda rows: [[(x["outcome"], x["adversarial"], x["queries"]) for x in r["results"]] for r in rows]
    assert strip(local) == strip(remote)


def test_unknown_engine_and_job(tiny_pair):
    from app.core.errors import InputError

    with pytest.raises(InputError, match="engine: 'spark'"):
        engine.run(tiny_pair.spec, "embed", [Example(("x",))], engine="spark")
    with pytest.raises(InputError, match="job: 'train'"):
        engine.run(tiny_pair.spec, "train", [Example(("x",))])


def test_a_killed_worker_is_reported(tiny_pair, ray_local):
    import ray

    exs = [Example((f"{s} {i}",)) for i in range(6) for s in SENTENCES]

    def kill_all(done, total):
        if done == 1:
            for name in ray.util.list_named_actors():
                if name.startswith(engine.WORKER_PREFIX):
                    ray.kill(ray.get_actor(name))

    with pytest.raises(engine.WorkerFailed, match=r"a Ray worker died while processing batch \d+ of \d+"):
        engine.run(tiny_pair.spec, "predict", exs, engine="ray", workers=2, batch_size=4, progress=kill_all)
    # the engine still works afterwards
    out = engine.run(tiny_pair.spec, "predict", exs[:8], engine="ray", workers=1, batch_size=4)
    assert out[0].shape[0] == 8
