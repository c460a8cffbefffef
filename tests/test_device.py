"""The device plumbing, exercised on the CPU as CI has it: an explicit CPU device, bf16 autocast held to the
bounds int8 is held to, a device that isn't here refused with the list of those that are, and what a Ray worker
on a GPU cluster (or one without GPUs) is asked to load."""
import json

import numpy as np
import pytest
import torch

from app.core.ground import device as devices
from app.core.ground.errors import InputError

from .conftest import SENTENCES, shared


def test_device_words_resolve_and_a_missing_device_lists_those_here(monkeypatch):
    here = devices.available()
    assert here[-1] == "cpu"
    assert devices.resolve("CPU") == "cpu" and devices.resolve(" cpu ") == "cpu"
    assert devices.resolve("auto") == here[0]
    monkeypatch.setenv(devices.ENV, "cpu")
    assert devices.resolve(None) == "cpu" and devices.resolve("") == "cpu"
    monkeypatch.delenv(devices.ENV)
    assert devices.resolve(None) == here[0]  # no word anywhere: auto
    with pytest.raises(devices.DeviceError, match=r"device: cuda:99 is not available on this machine; "
                                                  rf"available: {', '.join(here)}$"):
        devices.resolve("cuda:99")
    if "mps" not in here:
        with pytest.raises(devices.DeviceError, match="device: mps is not available.*available: .*cpu"):
            devices.resolve("mps")
    for bad in ("tpu", "cpu:1", "cuda:-1", "cuda:x", "../../etc"):
        with pytest.raises(devices.DeviceError, match=r"is not one of auto, cpu, cuda, cuda:N or mps"):
            devices.resolve(bad)
    assert issubclass(devices.DeviceError, InputError)  # front ends show it as a message, not a traceback


def test_precisions_a_device_cannot_run_are_refused_with_what_to_use():
    from app.core.ground.precision import check_on

    with pytest.raises(InputError, match="int8 is a CPU path.*on cuda:0 use bf16 or fp16"):
        check_on("int8", "cuda:0")
    with pytest.raises(InputError, match="fp16 runs on a GPU; on the CPU use bf16"):
        check_on("fp16", "cpu")
    for ok in (("fp32", "cpu"), ("int8", "cpu"), ("bf16", "cpu"), ("fp16", "cuda:0"), ("bf16", "cuda:0")):
        check_on(*ok)


def test_an_explicit_cpu_device_answers_as_the_model_itself(tiny_dirs):
    """The core's device path (batches moved to the model's device, results brought back) on an explicit CPU,
    against the transformers model run by hand on the same tokens."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from app.core.execution.inference import predict
    from app.core.execution.pair import Pair

    pair = Pair.resolve(models=[str(tiny_dirs["bert"]), str(tiny_dirs["albert"])], task="sst2", device="cpu")
    assert pair.device == "cpu" and all(m.device == "cpu" for m in pair.spec.models)
    assert pair.with_device("cpu") is pair
    for clf, key in zip(pair.models, ("bert", "albert")):
        assert next(clf.model.parameters()).device.type == "cpu"
        tok = AutoTokenizer.from_pretrained(tiny_dirs[key])
        ref = AutoModelForSequenceClassification.from_pretrained(tiny_dirs[key]).eval()
        with torch.no_grad():
            want = torch.cat([ref(**tok(s, return_tensors="pt")).logits for s in SENTENCES]).numpy()
        got = predict(clf, SENTENCES).logits
        np.testing.assert_allclose(got, want, atol=2e-5)


def test_bf16_autocast_on_the_cpu_stays_close_to_fp32_and_says_how_close(offline_pair, offline_sst2_dev,
                                                                        offline_news_cls):
    """bf16 on the CPU (fp32 weights, products under autocast) held to int8's bounds on real data, with the
    embed and benchmark results carrying the same check: agreement of predictions, minimum cosine of embeddings
    (the fp32 answers: the run's shared reference, the fp32 models' own)."""
    from app.core import api
    from app.core.execution.inference import predict

    bf16 = offline_pair.with_precision("bf16")
    assert bf16.precision == "bf16" and bf16.fp32.precision == "fp32"
    (dev, fp32_predictions), (_, fp32_cls) = offline_sst2_dev, offline_news_cls
    sst2 = dev[:200]
    # the bf16 embeddings of the 64 news texts through the facade, held to each model's fp32 ones computed here
    res = api.embed(bf16, str(shared("ag_news", "test.csv")), 64, visitor=False)
    fid = res.fidelity
    assert fid["against"] == "fp32" and fid["precision"] == "bf16" and fid["n"] == 64
    for fp, half, fp_pred, fp_cls in zip(offline_pair.models, bf16.models, fp32_predictions, fp32_cls):
        assert half.model is not fp.model and next(half.model.parameters()).dtype == torch.float32
        assert ", bf16" in half.describe()
        a, b = fp_pred.probs[:200].argmax(1), predict(half, sst2).probs.argmax(1)
        assert (a == b).mean() >= 0.99
        e, f = fp_cls[:64], res.embeddings[half.name][:64]
        cos = (e * f).sum(1) / np.linalg.norm(e, axis=1) / np.linalg.norm(f, axis=1)
        assert cos.min() >= 0.99
        assert not np.allclose(e, f, atol=1e-4)  # bf16 products, not the fp32 ones under a new name
        assert fid["min_cosine"][half.name] == pytest.approx(cos.min(), abs=1e-5)
        assert 0.99 <= fid["min_cosine"][half.name] < 1.0
    bench = api.benchmark(bf16, str(shared("glue", "sst2", "dev.tsv")), 64, visitor=False)
    assert set(bench.fidelity["agreement"]) == {"BERT", "ALBERT"}
    assert all(v >= 0.95 for v in bench.fidelity["agreement"].values())
    assert "fidelity" not in api.benchmark(offline_pair, str(shared("glue", "sst2", "dev.tsv")), 20,
                                           visitor=False).to_dict()


def test_gradients_run_on_fp32_weights_whatever_the_batch_precision(offline_pair):
    from app.core import api

    bf16 = offline_pair.with_precision("bf16")
    text = "a gorgeous , witty , seductive movie ."
    a = api.saliency(bf16, text, method="integrated_gradients").to_dict()
    b = api.saliency(offline_pair, text, method="integrated_gradients").to_dict()
    assert [m["scores"] for m in a["maps"]] == [m["scores"] for m in b["maps"]]


def test_the_command_line_names_the_device_in_its_json_and_refuses_a_missing_one(capsys):
    from app.cli import main

    assert main(["predict", "--pair", "offline", "--device", "cpu", "--json", "a charming journey"]) == 0
    out = json.loads(capsys.readouterr().out)
    fp32 = {"asked": "fp32", "used": "fp32", "why": "fp32, the default"}
    assert out["hardware"] == {"device": "cpu", "device_name": devices.cpu_name(), "precision": fp32}
    assert main(["predict", "--pair", "offline", "--device", "cuda:99", "a charming journey"]) == 2
    err = capsys.readouterr().err
    assert "device: cuda:99 is not available on this machine; available:" in err and "cpu" in err
    assert "Traceback" not in err


def test_facts_say_which_device_answered(offline_pair):
    """(The banner's device: tests/test_ui_handlers.py.)"""
    from app.core import api

    res = api.facts(offline_pair, ["a charming journey", "bleak and desperate"])
    for m in res["models"]:
        assert m["device"] == "cpu" and m["device_name"] == devices.cpu_name()
        assert m["linear_layers"] != "" and "gpu_memory_mb" not in m  # a CPU holds no GPU memory to report


def test_ray_workers_ask_for_gpus_only_where_the_cluster_has_them():
    import dataclasses

    from app.core.execution.engine import worker_device
    from app.core.models.registry import PRESETS

    spec = PRESETS["offline"]
    on_gpu = dataclasses.replace(spec, models=tuple(dataclasses.replace(m, device="cuda:1", precision="fp16")
                                                    for m in spec.models))
    assert worker_device(spec, 4.0, 2) == (spec, 0.0)  # a CPU pair asks for none, whatever the cluster has
    got, share = worker_device(on_gpu, 1.0, 2)
    assert share == 0.5 and {m.device for m in got.models} == {"cuda:0"}  # Ray's GPU is the worker's cuda:0
    assert {m.precision for m in got.models} == {"fp16"}
    assert worker_device(on_gpu, 4.0, 2)[1] == 1.0  # one whole GPU each: a worker runs on one device
    got, share = worker_device(on_gpu, 0.0, 2)
    assert share == 0.0 and {(m.device, m.precision) for m in got.models} == {("cpu", "fp32")}


class _Float64Watch(torch.overrides.TorchFunctionMode):
    """Records every torch call that makes a float64 tensor out of a float32 one, or from nothing, outside
    `devices.wide` / `devices.wide_tensor`: on Apple's MPS, which has no float64, each such call would fail
    (sums over tensors already in float64, at their home, are fine)."""

    def __init__(self):
        super().__init__()
        self.outside, self.inside = [], 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if self.inside:
            return out
        outs = out if isinstance(out, tuple | list) else [out]
        if any(isinstance(o, torch.Tensor) and o.dtype == torch.float64 for o in outs):
            ins = [a for a in torch.utils._pytree.tree_leaves((args, kwargs or {})) if isinstance(a, torch.Tensor)]
            if not ins or any(a.is_floating_point() and a.dtype != torch.float64 for a in ins):
                self.outside.append(getattr(func, "__name__", str(func)))
        return out


def test_float64_sums_go_where_the_device_has_float64(tiny_pair, monkeypatch):
    """Integrated gradients' attributions and the attention statistics are summed in float64; on MPS (no
    float64) that happens on the CPU. Here on the CPU: every float64 tensor of both techniques is made through
    `devices.wide` (which sends it to `float64_home`), none by a cast or factory of its own, and the answers
    are the same."""
    from app.core.ground.data import Example
    from app.core.techniques.attention import attention_stats
    from app.core.techniques.saliency import IntegratedGradients

    assert devices.float64_home("mps") == torch.device("cpu")
    assert devices.float64_home("cuda:1") == torch.device("cuda:1") and devices.float64_home("cpu").type == "cpu"
    clf = tiny_pair.models[1]
    exs = [Example((s,)) for s in SENTENCES[:4]]
    want_ig = IntegratedGradients(clf).attribute(exs[0])
    want_att = attention_stats(clf, exs)
    watch = _Float64Watch()
    for name in ("wide", "wide_tensor"):
        real = getattr(devices, name)

        def counted(*a, real=real, **k):
            watch.inside += 1
            try:
                return real(*a, **k)
            finally:
                watch.inside -= 1

        monkeypatch.setattr(devices, name, counted)
    with watch:
        got_ig = IntegratedGradients(clf).attribute(exs[0])
        got_att = attention_stats(clf, exs)
    assert watch.outside == []
    np.testing.assert_array_equal(got_ig.scores, want_ig.scores)
    assert got_att == want_att


def test_gpu_memory_is_reported_for_cuda_and_mps_only(monkeypatch):
    """Model facts' GPU memory: none on the CPU; MPS's allocated bytes (its own counter, no peak) in MB."""
    assert devices.memory("cpu") == {}
    monkeypatch.setattr(torch.mps, "current_allocated_memory", lambda: 3 * 2**20 + 2**19)
    assert devices.memory("mps") == {"gpu_memory_mb": 3.5}


def test_the_attention_backend_a_cuda_model_prefers_is_pinned_first_and_a_wrong_word_is_named(monkeypatch):
    """ALBERT_LENS_ATTENTION puts its backend first in PyTorch's order (the others kept after it, so a call it
    cannot serve falls back), on CUDA only; a word that isn't a backend is refused naming the variable."""
    from torch.nn.attention import SDPBackend

    before = torch._C._get_sdp_priority_order()
    try:
        monkeypatch.setenv(devices.ATTENTION_ENV, "cudnn")
        assert devices.pin_attention("cpu") == "auto"
        assert torch._C._get_sdp_priority_order() == before  # a CPU model changes nothing
        assert devices.pin_attention("cuda:0") == "cudnn"
        order = torch._C._get_sdp_priority_order()
        assert order[0] == int(SDPBackend.CUDNN_ATTENTION) and int(SDPBackend.MATH) in order
        assert torch.backends.cuda.math_sdp_enabled() and torch.backends.cuda.flash_sdp_enabled()
        monkeypatch.setenv(devices.ATTENTION_ENV, "efficient")
        devices.pin_attention("cuda:0")  # a second pin replaces the first
        assert torch._C._get_sdp_priority_order()[0] == int(SDPBackend.EFFICIENT_ATTENTION)
        monkeypatch.setenv(devices.ATTENTION_ENV, "auto")
        assert devices.pin_attention("cuda:0") == "auto" and torch._C._get_sdp_priority_order() == before
        monkeypatch.delenv(devices.ATTENTION_ENV)  # none named: the measured default, the memory-efficient kernel
        assert devices.pin_attention("cuda:0") == devices.CUDA_ATTENTION == "efficient"
        assert torch._C._get_sdp_priority_order()[0] == int(SDPBackend.EFFICIENT_ATTENTION)
        monkeypatch.setenv(devices.ATTENTION_ENV, "fastest")
        with pytest.raises(devices.DeviceError, match="ALBERT_LENS_ATTENTION: 'fastest' is not one of auto, math"):
            devices.pin_attention("cuda:0")
    finally:
        while devices._held:
            devices._held.pop().__exit__(None, None, None)
    assert torch._C._get_sdp_priority_order() == before


_NOT_ANSWERS = ("latency", "seconds", "throughput", "_ms", "per_s", "device", "hardware", "cached")  # how, not what


def _same_answers(got, want, tol: float, where: str = "") -> None:
    """`got` equals `want` key by key, floats and arrays to `tol` (relative, with an absolute floor), timings and
    how they were made (the device, a cache hit) left out."""
    if isinstance(want, dict):
        assert got.keys() == want.keys(), where
        for k in want:
            if not any(c in str(k) for c in _NOT_ANSWERS):
                _same_answers(got[k], want[k], tol, f"{where}.{k}")
    elif isinstance(want, list | tuple):
        assert len(got) == len(want), where
        for i, (g, w) in enumerate(zip(got, want)):
            _same_answers(g, w, tol, f"{where}[{i}]")
    elif isinstance(want, np.ndarray):
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol, err_msg=where)
    elif isinstance(want, float):
        assert abs(got - want) <= tol * (1 + abs(want)), (where, got, want)
    else:
        assert got == want, (where, got, want)


@pytest.mark.parametrize("where", ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(
    not torch.cuda.is_available(), reason="the device run: every capability on a GPU against the CPU's answers"))])
def test_every_capability_on_the_device_answers_as_on_the_cpu(tiny_pair, where):
    """The facade's capabilities with the tiny pair loaded on `where`, against the same pair on the CPU: the
    device run (a GPU) finds any path that only breaks there (a tensor left on the device, a dtype it lacks);
    here, on the CPU, the sweep's own code runs in every suite, and each answer repeats to float32 rounding (two
    loads of one model agree exactly alone, but 3e-8 apart once the modern stack's earlier tests had run in the
    same worker)."""
    from app.core import api
    from app.core.execution.pair import Pair

    data, text = str(shared("glue", "sst2", "dev.tsv")), SENTENCES[2]
    calls = {
        "predict": lambda p: api.predict(p, text),
        "saliency_methods": lambda p: api.saliency_methods(p, text),
        "hotflip": lambda p: api.counterfactual(p, text, generator="hotflip").to_dict()["changes"][0]["before"],
        "attention": lambda p: api.attention(p, text),
        "attention_stats": lambda p: api.attention(p, dataset=data, limit=16),
        "similarity": lambda p: api.similarity(p, data, limit=16),
        "embed": lambda p: api.embed(p, data, limit=16),
        "project": lambda p: api.project(p, data, projection="pca", limit=16),
        "benchmark": lambda p: api.benchmark(p, data, limit=32),
    }
    # rank statistics of numbers compared here jump where two of them nearly tie: the numbers are held, not these
    ranks = {"saliency_methods": ("agreement",), "similarity": ("best_a_for_b", "best_b_for_a")}
    on_device = Pair.resolve(models=[m.source for m in tiny_pair.spec.models], task="sst2", device=where)
    assert {m.device for m in on_device.models} == {where if where == "cpu" else "cuda:0"}
    for name, call in calls.items():
        got, want = call(on_device), call(tiny_pair)
        got, want = (r.to_dict() if hasattr(r, "to_dict") else r for r in (got, want))
        for key in ranks.get(name, ()):
            got.pop(key), want.pop(key)
        _same_answers(got, want, 1e-6 if where == "cpu" else 1e-3, name)
