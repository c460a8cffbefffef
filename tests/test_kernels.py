"""Linear layers through oneDNN: the stock layer's numbers (to float32 rounding), chosen only when faster."""
import contextlib

import pytest
import torch

from app.core import kernels
from app.core.data import Example
from app.core.errors import LensError
from app.core.inference import predict


def _layer(inner=384, outer=400, bias=True, seed=0) -> torch.nn.Linear:
    torch.manual_seed(seed)
    layer = torch.nn.Linear(inner, outer, bias=bias)
    layer.requires_grad_(False)
    return layer


def test_calibration_times_both_products_and_checks_they_agree():
    """Which one wins depends on the CPU (oneDNN on this AMD Zen 5, MKL on an Intel host) and on the load, so
    no test asserts it: the calibration must time both and compare their answers."""
    assert kernels._usable()
    timing = kernels.calibrate()
    assert timing["agrees"]
    assert timing["onednn_s"] > 0 and timing["blas_s"] > 0


@pytest.mark.parametrize("shape,bias,strided", [  # each above MIN_MACS, so oneDNN runs
    ((17, 384), True, False), ((3, 11, 384), True, False), ((3, 11, 384), False, False), ((4, 22, 384), True, True),
])
def test_forward_and_input_gradient_equal_the_stock_layer(shape, bias, strided):
    stock = _layer(bias=bias)
    fast = _layer(bias=bias)
    fast.__class__ = kernels.OneDNNLinear
    x = torch.randn(*shape, dtype=torch.float64)
    if strided:
        x = x[:, ::2]  # a non-contiguous view
    x32 = x.float().requires_grad_(True)
    xs = x.float().requires_grad_(True)
    y_fast, y_stock = fast(x32), stock(xs)
    ref = torch.nn.functional.linear(x, stock.weight.double(), None if stock.bias is None else stock.bias.double())
    # oneDNN's error against float64 is float32 rounding, of the stock layer's size
    err_fast = float((y_fast.detach().double() - ref).abs().max())
    err_stock = float((y_stock.detach().double() - ref).abs().max())
    assert err_fast <= 4 * err_stock + 1e-6
    assert not torch.equal(y_fast, torch.zeros_like(y_fast))
    g = torch.randn_like(y_fast)
    (gx_fast,) = torch.autograd.grad(y_fast, x32, g)
    (gx_stock,) = torch.autograd.grad(y_stock, xs, g)
    torch.testing.assert_close(gx_fast, gx_stock, atol=1e-5, rtol=1e-5)


def test_small_products_take_the_stock_path(monkeypatch):
    """A oneDNN call costs ~11 us whatever its size: below MIN_MACS multiply-adds the default product runs."""
    calls = []
    real = kernels._onednn
    monkeypatch.setattr(kernels, "_onednn", lambda *a: calls.append(a[0].shape) or real(*a))
    layer = _layer(inner=384, outer=384)
    layer.__class__ = kernels.OneDNNLinear
    small, large = torch.randn(1, 12, 384)[:, :10], torch.randn(1, 12, 384)  # 1.47M and 1.77M multiply-adds
    torch.testing.assert_close(layer(small), torch.nn.functional.linear(small, layer.weight, layer.bias))
    assert calls == []
    torch.testing.assert_close(layer(large), torch.nn.functional.linear(large, layer.weight, layer.bias),
                               atol=1e-5, rtol=1e-5)
    assert calls == [torch.Size([1, 12, 384])]


def test_weights_that_need_gradients_take_the_stock_path():
    """Training keeps working on a switched layer: the weight's gradient is computed, as by nn.Linear."""
    fast, stock = _layer(), _layer()
    fast.__class__ = kernels.OneDNNLinear
    for layer in (fast, stock):
        layer.requires_grad_(True)
    x = torch.randn(20, 384)
    fast(x).square().sum().backward()
    stock(x).square().sum().backward()
    torch.testing.assert_close(fast.weight.grad, stock.weight.grad)


@contextlib.contextmanager
def forced(model, backend: str):
    """`model` switched as `backend` would switch it, whatever this process chose; restored after."""
    with kernels.stock(model), pytest.MonkeyPatch.context() as mp:
        mp.setattr(kernels, "_CHOSEN", {"backend": backend, "chosen_by": "test"})
        n = kernels.accelerate(model)
        try:
            yield n
        finally:
            for m in kernels.switched(model):
                m.__class__ = torch.nn.Linear


@pytest.mark.parametrize("backend", ["onednn", "blas"])
def test_loaded_models_answer_alike_on_every_backend(offline_pair, backend):
    examples = [Example("The cities were beautiful but the hotel was dreadful."), Example("What a lovely film")]
    for clf in offline_pair.models:
        assert not any(p.requires_grad for p in clf.model.parameters())
        with kernels.stock(clf.model):
            assert not kernels.switched(clf.model)
            reference = predict(clf, examples).probs
        with forced(clf.model, backend) as n:
            # BERT: 6 per layer; ALBERT: its shared layer's 6 and the projection
            assert (n >= 7) if backend == "onednn" else n == 0
            assert len(kernels.switched(clf.model)) == n
            probs = predict(clf, examples).probs
        assert abs(probs - reference).max() < 1e-5
        assert abs(probs[0] - probs[1]).max() > 1e-3  # two different answers, not one broadcast


@pytest.fixture
def fresh_choice(monkeypatch, tmp_path):
    """A process that has chosen nothing yet, on a machine that has cached no choice."""
    monkeypatch.setattr(kernels, "_CHOSEN", {})
    monkeypatch.setenv("ALBERT_LENS_CACHE", str(tmp_path / "cache"))
    return monkeypatch


@pytest.mark.parametrize("timing,chosen", [
    ({"blas_s": 1.0, "onednn_s": 0.5, "agrees": True}, "onednn"),
    ({"blas_s": 1.0, "onednn_s": 0.95, "agrees": True}, "blas"),  # within noise: stock layers stay
    ({"blas_s": 1.0, "onednn_s": 0.5, "agrees": False}, "blas"),  # faster but wrong: never
    ({"blas_s": 1.0, "onednn_s": None, "agrees": False}, "blas"),  # the op failed on this build
])
def test_auto_takes_onednn_only_when_clearly_faster_and_equal(fresh_choice, timing, chosen):
    fresh_choice.delenv(kernels.ENV, raising=False)
    fresh_choice.setattr(kernels, "calibrate", lambda: timing)
    assert kernels.backend() == chosen
    model = torch.nn.Sequential(torch.nn.Linear(4, 4))
    assert kernels.accelerate(model) == (1 if chosen == "onednn" else 0)


def test_the_first_processs_choice_is_every_later_ones_on_the_same_cpu(fresh_choice):
    """Two processes timing the products on one CPU could land either side of the bar (seen on an Intel Xeon):
    the first one's choice is cached per CPU model, PyTorch version and thread count, and later ones take it."""
    fresh_choice.delenv(kernels.ENV, raising=False)
    timings = iter([{"blas_s": 1.0, "onednn_s": 0.5, "agrees": True},
                    {"blas_s": 1.0, "onednn_s": 0.95, "agrees": True}])
    fresh_choice.setattr(kernels, "calibrate", lambda: next(timings))
    assert kernels.backend() == "onednn" and kernels.describe()["chosen_by"] == "auto"
    fresh_choice.setattr(kernels, "_CHOSEN", {})  # a second process: its own timing would say blas
    assert kernels.backend() == "onednn" and kernels.describe()["chosen_by"] == "auto (cached for this CPU)"
    assert kernels.describe()["onednn_speedup"] == 2.0  # the timing that decided, shown as before
    fresh_choice.setattr(kernels, "_CHOSEN", {})
    fresh_choice.setattr(kernels, "_choice_key", lambda: "another CPU | torch x | 2 threads")
    assert kernels.backend() == "blas"  # another CPU times for itself (the second timing)
    fresh_choice.setattr(kernels, "_CHOSEN", {})
    (kernels.runtime_cache() / "matmul-choice.json").write_text("{not json")
    fresh_choice.setattr(kernels, "calibrate", lambda: {"blas_s": 1.0, "onednn_s": 0.5, "agrees": True})
    assert kernels.backend() == "onednn"  # a damaged cache file is measured over, not trusted


def test_the_environment_chooses_and_a_bad_value_is_named(fresh_choice):
    fresh_choice.setenv(kernels.ENV, "blas")
    assert kernels.backend() == "blas"
    assert kernels.describe()["matmul"].startswith("PyTorch default")
    fresh_choice.setenv(kernels.ENV, "onednn")  # read once: a later change does not rewrite what decided
    assert kernels.describe()["chosen_by"] == "blas"
    fresh_choice.setattr(kernels, "_CHOSEN", {})
    fresh_choice.setenv(kernels.ENV, "cuda")
    with pytest.raises(LensError, match="ALBERT_LENS_MATMUL: 'cuda' is not one of auto, onednn, blas"):
        kernels.backend()


def test_onednn_primitive_cache_is_capped_unless_the_operator_set_it():
    """oneDNN's cache of compiled shapes grew a process by 480 MB (benchmarks/kernel_memory.py); the core caps it
    at 64 on import, before any model runs, and keeps a value the operator gave."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    code = "import os; from app.core import kernels; print(os.environ['ONEDNN_PRIMITIVE_CACHE_CAPACITY'])"
    env = {k: v for k, v in os.environ.items() if k != kernels.PRIMITIVE_CACHE}

    def capacity() -> str:
        return subprocess.run([sys.executable, "-c", code], env=env, cwd=Path(__file__).resolve().parents[1],
                              capture_output=True, text=True, check=True).stdout.strip()

    assert capacity() == "64"
    env[kernels.PRIMITIVE_CACHE] = "300"
    assert capacity() == "300"


def _albert(hidden_act: str):
    from transformers import AlbertConfig, AlbertForSequenceClassification

    torch.manual_seed(0)
    cfg = AlbertConfig(vocab_size=100, embedding_size=32, hidden_size=64, num_hidden_layers=3, num_attention_heads=4,
                       intermediate_size=128, hidden_act=hidden_act, num_labels=2)
    return AlbertForSequenceClassification(cfg).eval().requires_grad_(False)


def test_gelu_new_is_fused_with_the_same_values_and_gradients():
    """albert-base-v2's `gelu_new` (seven Python-level operations) becomes one fused operator: logits and the
    input embeddings' gradients equal transformers' own to float32 rounding, and `stock` gives its class back."""
    from transformers.activations import NewGELUActivation

    model = _albert("gelu_new")
    embeds = torch.randn(5, 9, 32) * 3  # a wide range of pre-activations, tanh's saturation included

    def run():
        x = embeds.clone().requires_grad_(True)
        logits = model(inputs_embeds=x).logits
        torch.softmax(logits, -1)[:, 1].sum().backward()
        return logits.detach(), x.grad

    ref_logits, ref_grad = run()
    assert kernels.fuse_activations(model) == 1  # one shared layer's activation
    (act,) = kernels.fused(model)
    calls = []
    real = torch.nn.functional.gelu
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(torch.nn.functional, "gelu", lambda x, approximate="none": calls.append(approximate)
                   or real(x, approximate=approximate))
        logits, grad = run()
    assert calls == ["tanh"] * 3  # the fused operator ran, once per application of the shared layer
    torch.testing.assert_close(logits, ref_logits, atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(grad, ref_grad, atol=1e-7, rtol=1e-4)
    with kernels.stock(model):
        assert type(act) is NewGELUActivation and not kernels.fused(model)
    assert kernels.fused(model) == [act]


def test_other_activations_are_left_alone():
    model = _albert("gelu")
    assert kernels.fuse_activations(model) == 0 and not kernels.fused(model)
