"""Linear layers through oneDNN: the stock layer's numbers (to float32 rounding), chosen only when faster."""
import contextlib

import pytest
import torch

from app.core.execution.inference import predict
from app.core.ground import kernels
from app.core.ground.data import Example
from app.core.ground.errors import LensError


def _layer(inner=384, outer=400, bias=True, seed=0) -> torch.nn.Linear:
    torch.manual_seed(seed)
    layer = torch.nn.Linear(inner, outer, bias=bias)
    layer.requires_grad_(False)
    return layer


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
        mp.setattr(kernels, "_CHOSEN", {"backend": backend})
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
    monkeypatch.delenv("ALBERT_LENS_TIMING", raising=False)  # the suite's shared timing folder (conftest.py)
    monkeypatch.delenv(kernels.ENV, raising=False)
    return monkeypatch


def _batches(rows: int = 4, tokens: int = 12):
    return [{"input_ids": torch.randint(5, 100, (rows, tokens)),
             "attention_mask": torch.ones(rows, tokens, dtype=torch.long)}]


def test_tune_times_the_models_own_forward_and_checks_onednn_agrees(fresh_choice):
    """Which option wins depends on the CPU and its load, so no test asserts it: every option is timed on the
    model's forward, oneDNN's logits are checked against the stock ones, and the model is left as chosen."""
    model = _albert("gelu_new")
    choice = kernels.tune(model, "tiny albert", _batches())
    assert set(choice["timing"]) == {"stock", "fused", "onednn"} and all(t > 0 for t in choice["timing"].values())
    assert choice["agrees"] and choice["chosen_by"] == "timed on this model"
    assert bool(kernels.switched(model)) == choice["onednn"] and bool(kernels.fused(model)) == choice["fused"]
    assert kernels.chosen(model) == choice
    plain = _albert("gelu")  # nothing to fuse: not timed
    assert set(kernels.tune(plain, "tiny albert, gelu", _batches())["timing"]) == {"stock", "onednn"}


@pytest.mark.parametrize("times,onednn,fused", [
    ({"stock": 1.0, "fused": 0.95, "onednn": 0.5}, True, True),
    ({"stock": 1.0, "fused": 0.8, "onednn": 0.95}, False, True),
    ({"stock": 1.0, "fused": 0.95, "onednn": 0.95}, False, True),  # within noise: the default (fused) stays
    ({"stock": 0.8, "fused": 1.0, "onednn": 0.95}, False, False),  # the unfused GELU only where clearly faster
    ({"stock": 0.6, "fused": 1.0, "onednn": 0.5}, True, True),  # the fastest of those that clear the bar
])
def test_an_option_is_taken_only_with_a_margin_over_the_stock_layers(fresh_choice, times, onednn, fused):
    from app.core.ground import tuning

    fresh_choice.setattr(tuning, "alternated", lambda runs, **kw: {k: times[k] for k in runs})
    model = _albert("gelu_new")
    choice = kernels.tune(model, "tiny albert", _batches())
    assert (choice["onednn"], choice["fused"]) == (onednn, fused)
    assert (len(kernels.switched(model)) > 0, len(kernels.fused(model)) > 0) == (onednn, fused)


def test_onednn_is_never_taken_where_its_answer_differs(fresh_choice):
    from app.core.ground import tuning

    fresh_choice.setattr(tuning, "alternated", lambda runs, **kw: {k: {"onednn": 0.1}.get(k, 1.0) for k in runs})
    fresh_choice.setattr(kernels, "_onednn", lambda x, w, b: torch.nn.functional.linear(x, w, b) + 1.0)
    choice = kernels.tune(_albert("gelu_new"), "tiny albert", _batches(64, 40))  # products oneDNN runs
    assert not choice["agrees"] and not choice["onednn"] and "onednn" not in choice["timing"]


def test_the_first_processs_choice_is_every_later_ones_on_the_same_machine(fresh_choice):
    """Two processes timing one model could land either side of the bar (seen on an Intel Xeon): the first
    one's choice is kept per machine key (CPU, instruction-set caps, PyTorch, threads) and model."""
    from app.core.ground import tuning

    timings = iter([{"stock": 1.0, "fused": 1.0, "onednn": 0.5}, {"stock": 1.0, "fused": 1.0, "onednn": 0.95}])
    fresh_choice.setattr(tuning, "alternated", lambda runs, **kw: next(timings))
    assert kernels.tune(_albert("gelu_new"), "m", _batches())["onednn"]
    again = kernels.tune(_albert("gelu_new"), "m", _batches())  # a second process: its own timing would say no
    assert again["onednn"] and again["chosen_by"] == "timed on this model (kept for this machine)"
    assert kernels.describe(_albert_tuned := _albert("gelu_new")) == {
        "matmul": "PyTorch default (BLAS)", "fused_gelu": False, "chosen_by": "auto"}  # not tuned: as loaded
    kernels.tune(_albert_tuned, "m", _batches())
    assert kernels.describe(_albert_tuned)["onednn_speedup"] == 2.0  # the timing that decided
    fresh_choice.setattr(tuning, "machine_key", lambda: "another CPU | aten AVX2")
    assert not kernels.tune(_albert("gelu_new"), "m", _batches())["onednn"]  # another machine times for itself
    fresh_choice.setattr(tuning, "machine_key", lambda: "a third")
    (tuning._cache() / "kernel-choice.json").write_text("{not json")
    fresh_choice.setattr(tuning, "alternated", lambda runs, **kw: {"stock": 1.0, "fused": 1.0, "onednn": 0.5})
    assert kernels.tune(_albert("gelu_new"), "m", _batches())["onednn"]  # a damaged file is measured over


def test_the_environment_chooses_and_a_bad_value_is_named(fresh_choice):
    fresh_choice.setenv(kernels.ENV, "blas")
    model = _albert("gelu_new")
    assert kernels.tune(model, "m", _batches()) == {"onednn": False, "fused": True, "chosen_by": "blas",
                                                     "timing": {}}
    assert kernels.describe(model)["matmul"].startswith("PyTorch default") and not kernels.switched(model)
    fresh_choice.setenv(kernels.ENV, "onednn")  # read once: a later change does not rewrite what decided
    assert kernels.describe()["chosen_by"] == "blas"
    fresh_choice.setattr(kernels, "_CHOSEN", {})
    assert kernels.tune(model, "m", _batches())["onednn"] and kernels.switched(model)
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

    code = "import os; from app.core.ground import kernels; print(os.environ['ONEDNN_PRIMITIVE_CACHE_CAPACITY'])"
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
