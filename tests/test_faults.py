"""Faults: the app keeps serving other requests and says what failed."""
import shutil

import pytest

from app.core.models.loading import ModelLoadError, load
from app.core.models.registry import TASKS, ModelSpec


def test_attack_raising_midway_is_reported_and_the_app_keeps_serving(client, monkeypatch):
    from gradio_client.exceptions import AppError

    from app.core.techniques import attacks

    calls = {"n": 0}
    real = attacks.LensModelWrapper.__call__

    def flaky(self, inputs, **kw):
        calls["n"] += 1
        if calls["n"] > 3:
            raise RuntimeError("GPU fell off the bus")
        return real(self, inputs, **kw)

    monkeypatch.setattr(attacks.LensModelWrapper, "__call__", flaky)
    # the visitor learns what failed, not the exception's text (which can name server paths): that is logged
    with pytest.raises(AppError, match=r"something went wrong in attack \(RuntimeError\); the server logged it") as err:
        client.predict("a gorgeous , witty , seductive movie .", "", "deepwordbug", "positive", None, 1, 100, 10,
                       api_name="/attack")
    assert "GPU fell off the bus" not in str(err.value)
    res, *_ = client.predict("still here?", "", api_name="/predict")
    assert len(res["models"]) == 2


def test_unavailable_recipe_is_a_message(client):
    from gradio_client.exceptions import AppError

    with pytest.raises(AppError, match="textfooler: needs"):
        client.predict("a fine film", "", "textfooler", "positive", None, 1, 100, 10, api_name="/attack")


def test_missing_and_corrupt_model_directories(tiny_dirs, tmp_path):
    d = tmp_path / "m"
    shutil.copytree(tiny_dirs["albert"], d)
    (d / "model.safetensors").write_bytes(b"broken")
    with pytest.raises(ModelLoadError, match="corrupt or unreadable"):
        load(ModelSpec("M", str(d), "albert", TASKS["sst2"]))
    shutil.rmtree(d)
    with pytest.raises(ModelLoadError, match="no such directory"):
        load(ModelSpec("M", str(d), "albert", TASKS["sst2"]))
