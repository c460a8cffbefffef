"""The study's workloads on a GPU (issue 40), at base size, each beside the stock tool its users would run:

- embeddings of AG News test x16 (121,600 texts, mean pooling, 128 tokens): sentence-transformers `encode` as the
  study ran it (fp32, batch 32) and in fp16 (batch 256), against `albert-lens embed` (the facade's `embed`) in
  fp32 and in half precision, with every half-precision vector's cosine to our fp32 one;
- integrated gradients: Captum's BERT tutorial (LayerIntegratedGradients, 50 steps) against ours at the app's
  tolerance, per model, median over SST-2 sentences;
- Compare: the facade's `predict` for both models, p50 over single inputs, with CUDA graphs and eagerly;
- CUDA graphs against the eager forward (largest logit difference), and each model's vocabulary;
- deepwordbug per example against TextAttack's stock HuggingFaceModelWrapper (where TextAttack is installed);
- a projection of AG News test (UMAP where umap-learn is installed, else PCA) from a cold cache;
- the released CheckList sentiment suite, every case, both models, in fp32 and in half precision, each with and
  without its batches replayed from CUDA graphs;
- two probes for the targets still missed: a CheckList batch's forward unmasked, masked, as the model's own and
  replayed from a CUDA graph, the host's time to issue it, under each attention backend forced in turn and in
  TF32, with its costliest kernels (`batches`); one integrated-gradients call's kernels,
  host waits, device time and phases (`ig_anatomy`);
- the GPU's peak memory.

Targets (issue 40): embeddings >= 1.5x sentence-transformers fp16 with every vector at cosine >= 0.999 to fp32;
integrated gradients <= 15 ms a model; Compare p50 <= 5 ms for both models; the whole suite <= 20 s for both.

    python benchmarks/gpu.py [--device auto] [--json out.json]       # base size, on the GPU
    python benchmarks/gpu.py --tiny --device cpu --json out.json     # the smoke test: tiny models, few texts

The base-size models are the tests' fixtures (tests/base_fixtures.py: exact architectures, seeded weights).
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("ALBERT_LENS_CACHE", tempfile.mkdtemp(prefix="albert-lens-gpu-"))  # projections start cold

import numpy as np  # noqa: E402
import torch  # noqa: E402
from saliency_speed import captum_tutorial_ig as tutorial_ig  # noqa: E402  (this folder: the recipe, one copy)

from app.core import api  # noqa: E402
from app.core.execution import graphs  # noqa: E402
from app.core.execution.pair import Pair  # noqa: E402
from app.core.ground import device as devices  # noqa: E402
from app.core.ground import policy  # noqa: E402
from app.core.ground.data import Example, load_dataset  # noqa: E402
from app.core.ground.runtime import SHARED_DATA as SHARED  # noqa: E402
from app.core.techniques.saliency import IntegratedGradients  # noqa: E402

AG_NEWS = SHARED / "ag_news" / "test.csv"
SST2_DEV = SHARED / "glue" / "sst2" / "dev.tsv"
SUITE = SHARED / "checklist" / "sentiment_suite.json.gz"
TARGETS = {"embed_vs_st_fp16": 1.5, "min_cosine": 0.999, "integrated_gradients_ms": 15.0, "compare_p50_ms": 5.0,
           "checklist_s": 20.0}


def sync_timed(dev: str, fn, *a, **k):
    """(result, seconds) with the device's queue drained before both clock reads."""
    devices.synchronize(dev)
    t0 = time.perf_counter()
    out = fn(*a, **k)
    devices.synchronize(dev)
    return out, time.perf_counter() - t0


def tiny_models(out: Path) -> dict[str, Path]:
    """A 2-layer BERT and ALBERT with the fixtures' tokenizers' kinds: BERT's WordPiece vocabulary from the
    MiniLM, a SentencePiece model trained on SST-2 for ALBERT (the smoke test's models)."""
    from tests.conftest import _tiny_albert, _tiny_bert

    return {"bert": _tiny_bert(out / "bert"), "albert": _tiny_albert(out / "albert")}


def st_encode(path: Path, texts: list[str], dev: str, half: bool, batch: int) -> tuple[np.ndarray, float]:
    """The study's method: sentence-transformers over the classifier's encoder (mean pooling), 128 tokens."""
    from sentence_transformers import SentenceTransformer

    st = SentenceTransformer(str(path), device=dev)  # a plain encoder folder: mean pooling is its default
    st.max_seq_length = 128
    if half:
        st.half()
    st.encode(texts[:batch], batch_size=batch)  # warm-up: kernels chosen, memory pooled
    vecs, s = sync_timed(dev, st.encode, texts, batch_size=batch, convert_to_numpy=True, show_progress_bar=False)
    del st
    return vecs.astype(np.float32), s


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(1) / np.maximum(np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1), 1e-12)


def embeddings(pair: Pair, half: str, texts: list[str], path: Path, dev: str, tmp: Path, study_n: int = 0) -> dict:
    """Stock against ours on the same texts, as `albert-lens embed` runs them (the facade, a dataset file)."""
    data = tmp / "texts.tsv"
    data.write_text("sentence\n" + "\n".join(t.replace("\t", " ").replace("\n", " ") for t in texts) + "\n",
                    encoding="utf-8")
    row: dict = {"texts": len(texts)}
    on_device = not devices.is_cpu(dev)
    st = {m.name: {} for m in pair.spec.models}
    for clf, folder in zip(pair.spec.models, path):
        st[clf.name]["fp32_b32"] = st_encode(folder, texts[: study_n or None], dev, False, 32)
        if on_device:
            st[clf.name]["fp16_b256"] = st_encode(folder, texts, dev, True, 256)
    api.embed(pair, str(data), 64, pooling="mean", visitor=False)  # warm-up (loads the models)
    ours32, s32 = sync_timed(dev, api.embed, pair, str(data), None, pooling="mean", visitor=False)
    low = pair.with_precision(half)
    api.embed(low, str(data), 64, pooling="mean", visitor=False)
    ours16, s16 = sync_timed(dev, api.embed, low, str(data), None, pooling="mean", visitor=False)
    for m in pair.spec.models:
        r = row[m.name] = {}
        (v_st32, t_st32) = st[m.name]["fp32_b32"]
        r["st_fp32_b32_s"] = t_st32
        r["ours_fp32_s"] = s32 / 2  # both models in one call: each model's share, read as the issue's table
        r[f"ours_{half}_s"] = s16 / 2
        r["st_fp32_b32_texts"] = len(v_st32)
        r["ours_vs_st_fp32_cosine_min"] = float(cosines(ours32.embeddings[m.name][: len(v_st32)], v_st32).min())
        r[f"{half}_vs_fp32_cosine_min"] = float(cosines(ours16.embeddings[m.name], ours32.embeddings[m.name]).min())
        if "fp16_b256" in st[m.name]:
            r["st_fp16_b256_s"] = st[m.name]["fp16_b256"][1]
            r["speedup_vs_st_fp16"] = r["st_fp16_b256_s"] / r[f"ours_{half}_s"]
    row["both_models_ours_fp32_s"], row[f"both_models_ours_{half}_s"] = s32, s16
    row["fidelity_sample"] = ours16.fidelity
    return row


def captum_tutorial_ig(clf, text: str, target: int, dev: str) -> float:
    """Captum's BERT tutorial recipe (LayerIntegratedGradients, 50 steps; benchmarks/saliency_speed.py) on the
    model's device."""
    return tutorial_ig(clf, Example((text,)), target)[1]


def integrated_gradients(pair: Pair, sentences: list[str], dev: str) -> dict:
    """Ours at the app's tolerance, each round replayed from a CUDA graph (the default on a GPU) and, in the same
    process, eagerly (ALBERT_LENS_CUDA_GRAPHS=0), against Captum's tutorial; every sentence's attributions
    from the graphs against the eager ones; and with each attention backend preferred in turn."""
    row = {}
    for clf in pair.models:
        ig = IntegratedGradients(clf)  # the app's tolerance (1e-3)
        os.environ[graphs.ENV] = "0"
        ig.attribute(Example((sentences[0],)))
        eager = [sync_timed(dev, ig.attribute, Example((s,))) for s in sentences]
        os.environ.pop(graphs.ENV, None)
        ig.attribute(Example((sentences[0],)))
        ours = [sync_timed(dev, ig.attribute, Example((s,))) for s in sentences]
        apart = max(float(np.max(np.abs(np.subtract(r.scores, e.scores)))) for (r, _), (e, _) in zip(ours, eager))
        try:
            captum_tutorial_ig(clf, sentences[0], 1, dev)
            stock = [sync_timed(dev, captum_tutorial_ig, clf, s, 1, dev)[1] for s in sentences]
            stock_ms = 1000 * statistics.median(stock)
        except ImportError:
            stock_ms = None
        status = graphs.status(clf)  # before the backends' runs drop the graphs
        by_backend = {}
        for name in SDPA:  # each attention backend preferred in turn, graphs recorded afresh under it (a CPU
            with pinned(pair, dev, name):  # keeps its own kernel: there the smoke test runs this code)
                ig.attribute(Example((sentences[0],)))
                timed = [sync_timed(dev, ig.attribute, Example((s,))) for s in sentences]
            by_backend[name] = {"ms": 1000 * statistics.median(t for _, t in timed),
                                "delta_max": max(r.delta for r, _ in timed),
                                "max_score_diff": max(float(np.max(np.abs(np.subtract(r.scores, e.scores))))
                                                      for (r, _), (e, _) in zip(timed, eager))}
        row[clf.name] = {"ours_ms": 1000 * statistics.median(s for _, s in ours), "ours_by_backend": by_backend,
                         "ours_eager_ms": 1000 * statistics.median(s for _, s in eager),
                         "graphs_vs_eager_max_score_diff": apart, **status,
                         "ours_delta_max": max(r.delta for r, _ in ours),
                         "ours_steps_median": statistics.median(r.n_steps for r, _ in ours),
                         "captum_tutorial_ms": stock_ms}
    return row


def compare(pair: Pair, sentences: list[str], dev: str, calls: int) -> dict:
    """The facade's `predict` for both models, one input at a time: with each model's forward replayed from a
    CUDA graph (the default on a GPU) and, in the same process, eagerly (ALBERT_LENS_CUDA_GRAPHS=0)."""
    row = {"calls": calls}
    for label, flag in (("eager", "0"), ("graphs", "1")):
        os.environ[graphs.ENV] = flag
        api.predict(pair, sentences[0])
        times = [sync_timed(dev, api.predict, pair, sentences[i % len(sentences)])[1] * 1000 for i in range(calls)]
        times.sort()
        row[label] = {"p50_ms": statistics.median(times), "p95_ms": times[int(0.95 * (len(times) - 1))]}
    os.environ.pop(graphs.ENV, None)
    row["p50_ms"], row["p95_ms"] = row["graphs"]["p50_ms"], row["graphs"]["p95_ms"]
    return row


def replayed(pair: Pair, sentences: list[str]) -> dict:
    """Graphs against the eager forward on the device: every SST-2 sentence alone and in batches of 3 and 8,
    the largest logit difference per model, and the buckets recorded."""
    from app.core.execution.inference import predict

    row = {}
    for clf in pair.models:
        exs = [Example((s,)) for s in sentences]
        groups = [exs[i : i + k] for k in (1, 3, 8) for i in range(0, min(len(exs), 8 * k), k)]
        os.environ[graphs.ENV] = "0"
        eager = [predict(clf, g).logits for g in groups]
        os.environ[graphs.ENV] = "1"
        replay = [predict(clf, g).logits for g in groups]
        row[clf.name] = {"batches": len(groups), "max_abs_logit_diff": float(max(np.abs(a - b).max()
                                                                                 for a, b in zip(eager, replay))),
                         "same_labels": all((a.argmax(1) == b.argmax(1)).all() for a, b in zip(eager, replay)),
                         **graphs.status(clf)}
    os.environ.pop(graphs.ENV, None)
    return row


def tokenizers(pair: Pair, texts: list[str]) -> dict:
    """Each model's vocabulary, and ALBERT's ids against its SentencePiece model read directly (transformers 5
    reads a zoo-layout folder differently from 4.x: this says the ids are the trained model's)."""
    row = {}
    for clf in pair.models:
        r = row[clf.name] = {"tokenizer": type(clf.tokenizer).__name__, "vocabulary": len(clf.tokenizer)}
        piece = Path(clf.spec.source) / "spiece.model"
        if piece.is_file():
            import sentencepiece as spm

            sp = spm.SentencePieceProcessor(model_file=str(piece))
            ours = [clf.tokenizer(t.lower(), truncation=True, max_length=128)["input_ids"] for t in texts]
            same = sum(o[1:-1] == sp.encode(" ".join(t.lower().split()))[: len(o) - 2] for o, t in zip(ours, texts))
            r.update(spiece_pieces=sp.get_piece_size(), ids_as_spiece=f"{same}/{len(texts)}")
    return row


def stand_ins() -> list[str]:
    """TextAttack imports flair and jieba when imported: flair for part-of-speech tagging (its strings helpers
    subclass flair's tokenizer), jieba for Chinese word segmentation, neither of which deepwordbug does. flair
    pins transformers < 5, which the GPU image's 5.x breaks, and jieba's wheel is 19 MB, past what a call may
    carry (64 MiB) beside the rest. Each that can't be imported is replaced by a stand-in module whose functions
    and classes refuse to run: a recipe that tags or segments fails loudly. Returns the ones replaced."""
    import importlib.util
    import types

    def missing(*a, **k):
        raise ImportError("not installed here: a stand-in for TextAttack's import (benchmarks/gpu.py)")

    replaced = []
    for name, parts in (("flair", {"data": ("Sentence", "Tokenizer"), "models": ("SequenceTagger",),
                                   "embeddings": ()}), ("jieba", {})):
        if importlib.util.find_spec(name) is not None:
            continue
        top = types.ModuleType(name)
        top.__getattr__ = lambda attr: missing  # jieba.cut, jieba.lcut, ...: refuse when called
        sys.modules[name] = top
        for sub, classes in parts.items():
            mod = types.ModuleType(f"{name}.{sub}")
            for cls in classes:
                setattr(mod, cls, type(cls, (), {"__init__": missing}))
            setattr(top, sub, mod)
            sys.modules[f"{name}.{sub}"] = mod
        replaced.append(name)
    return replaced


def deepwordbug(pair: Pair, n: int, dev: str, budget: int = 200) -> dict:
    """The deepwordbug recipe on the first `n` SST-2 dev sentences, per model: TextAttack's stock
    HuggingFaceModelWrapper against ours (benchmarks/attack_speed.py: same recipe, examples and seeds), the
    seconds per example and the share with the same adversarial text."""
    from app.core.ground.runtime import prepare_nltk, prepare_textattack
    from app.core.techniques import attacks

    stand_in = stand_ins()
    prepare_nltk(), prepare_textattack()
    try:
        from app.core.ground.compat import import_textattack

        import_textattack()
    except ImportError as exc:
        return {"skipped": f"TextAttack does not import here ({type(exc).__name__}: {str(exc)[:200]})"}
    ok, why = api.recipe_status("deepwordbug")
    if not ok:
        return {"skipped": why}
    from attack_speed import run
    from textattack.models.wrappers import HuggingFaceModelWrapper

    examples = load_dataset(SST2_DEV).examples[:n]
    row: dict = {"examples": n, "query_budget": budget, "stand_ins": stand_in}
    for clf in pair.models:
        stock = HuggingFaceModelWrapper(clf.model, clf.tokenizer)
        t_stock, out_stock = run(attacks.build_attack("deepwordbug", stock, budget), examples, clf)
        t_ours, out_ours = run(attacks.build_attack("deepwordbug", attacks.make_wrapper(clf), budget), examples, clf)
        row[clf.name] = {"stock_per_example_s": t_stock / n, "ours_per_example_s": t_ours / n,
                         "speedup": t_stock / t_ours,
                         "same_adversarial_text": sum(a == b for a, b in zip(out_stock, out_ours)) / n,
                         "outcomes_ours": {k: [o[0] for o in out_ours].count(k) for k in {o[0] for o in out_ours}}}
    return row


def projection(pair: Pair, n: int, dev: str) -> dict:
    try:
        import umap  # noqa: F401

        chosen = "umap"
    except ImportError:
        chosen = "pca"
    res, s = sync_timed(dev, api.project, pair, str(AG_NEWS), projection=chosen, layer=-1, pooling="cls", limit=n,
                        visitor=False)
    return {"projection": chosen, "n": n, "cold_s": s}


def checklist(pair: Pair, dev: str, sample: int | None, half: str, backend: str | None = None) -> dict:
    """The whole suite in fp32 and in half precision (forward-only batch work), each as the app runs it (on CUDA,
    a half-precision model's batches replayed from graphs, an fp32 model's launched) and the other way
    (ALBERT_LENS_CUDA_GRAPHS=large for fp32, =small for half precision; `graphs` says which buckets were
    recorded), and with `backend` (an attention backend: by default the `batches` probe's fastest) preferred in
    half precision; how far each run's fail rates move from fp32's."""
    row = {}
    rates = {}
    halved = pair.with_precision(half)
    runs = [("fp32", pair, "1", None), ("fp32_large_graphs", pair, "large", None),  # (a CPU has no graphs: it
            (half, halved, "1", None), (f"{half}_small_graphs", halved, "small", None)]  # runs each twice)
    if backend is not None:
        runs.append((f"{half}_{backend}", halved, "1", backend))
    for label, p, flag, pin in runs:
        _ = p.models  # loaded (or found loaded) before the clock starts: each run times the suite alone
        os.environ[graphs.ENV] = flag
        try:
            with pinned(p, dev, pin) if pin else contextlib.nullcontext():
                res, s = sync_timed(dev, api.checklist, p, suite=str(SUITE), sample=sample or policy.OPERATOR_CAP,
                                    visitor=False)
                status = {clf.name: graphs.status(clf) for clf in p.models}
        finally:
            os.environ.pop(graphs.ENV, None)
        rates[label] = [r["fail_rate"] or 0.0 for t in res["tests"] for r in t["results"]]
        row[label] = {"both_models_s": s, "graphs": status}
    row["tests"], row["cases"] = len(res["tests"]), sum(t["results"][0]["n"] for t in res["tests"])
    # tests whose every case expects a label the pair does not predict ("neutral", for a binary pair): no case run
    from app.core.techniques.checklist import left_out_whole

    row["left_out"] = len(left_out_whole(res["tests"]))
    row["sample"], row["both_models_s"] = sample, row["fp32"]["both_models_s"]
    if sample is None:  # where the time goes: tokenising every distinct input (the CPU's share, both models)
        from app.core.execution.inference import tokenize

        exs = [Example((x,)) for x in suite_inputs()]
        t0 = time.perf_counter()
        for clf in pair.models:
            tokenize(clf, exs)
        row["distinct_inputs"], row["tokenize_both_models_s"] = len(exs), time.perf_counter() - t0
    for label in rates:
        if label != "fp32":
            row[f"{label}_max_fail_rate_change"] = float(max(abs(a - b) for a, b in zip(rates["fp32"], rates[label])))
    return row


def fastest_backend(batches: dict, precision: str) -> str | None:
    """The attention backend whose forced runs of the `batches` probe's unmasked batch took least time summed over
    both models in `precision`, or None where the probe did not run (or no backend ran for every model)."""
    rows = (batches or {}).get(precision) or {}
    sums = {}
    for name in SDPA:
        ms = [r.get("sdpa_backends", {}).get(f"{name}_unmasked_ms") for r in rows.values()]
        if ms and all(isinstance(m, float) for m in ms):
            sums[name] = sum(ms)
    return min(sums, key=sums.get) if sums else None


@contextlib.contextmanager
def pinned(pair: Pair, dev: str, backend: str | None):
    """The pair's CUDA models preferring `backend` (ALBERT_LENS_ATTENTION, as the app reads it), their graphs
    dropped so that the next calls record them under it; put back after."""
    before = os.environ.get(devices.ATTENTION_ENV)
    for clf in pair.models:
        clf.graphs = None
    os.environ[devices.ATTENTION_ENV] = backend or "auto"
    try:
        devices.pin_attention(dev)
        yield
    finally:
        if before is None:
            os.environ.pop(devices.ATTENTION_ENV, None)
        else:
            os.environ[devices.ATTENTION_ENV] = before
        devices.pin_attention(dev)
        for clf in pair.models:
            clf.graphs = None


def _median_ms(dev: str, fn, reps: int) -> float:
    fn()
    return 1000 * statistics.median(sync_timed(dev, fn)[1] for _ in range(reps))


def suite_inputs() -> list[str]:
    """Every distinct input of the released CheckList sentiment suite, sorted."""
    from app.core.techniques import checklist as cl

    suite = cl.load_suite(SUITE)
    return sorted({x for t in suite.tests for i in range(len(t.data)) for x in cl.case_inputs(t, i, suite.kind)})


def _profiled(dev: str, fn, calls: int) -> list:
    """torch.profiler's averages over `calls` calls of `fn` (the host's operations, and on a GPU its kernels),
    the device's queue drained before the profile closes."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU] + ([] if devices.is_cpu(dev) else [ProfilerActivity.CUDA])) as p:
        for _ in range(calls):
            fn()
        devices.synchronize(dev)
    return p.key_averages()


def _on_device(event) -> bool:
    return "CUDA" in str(getattr(event, "device_type", ""))


def _costliest(dev: str, fn, top: int = 10) -> list[dict]:
    """The device's (the CPU's, on a CPU) costliest operations of three calls of `fn` by self time, from
    torch.profiler: on a GPU the kernel names say which attention kernel SDPA chose."""
    gpu = not devices.is_cpu(dev)
    rows = []
    for e in _profiled(dev, fn, 3):
        us = getattr(e, "self_device_time_total", 0) if gpu else e.self_cpu_time_total
        if us > 0 and (not gpu or _on_device(e)):
            rows.append({"name": e.key[:90], "calls": e.count // 3, "us_per_call": round(us / e.count, 1)})
    return sorted(rows, key=lambda r: -r["us_per_call"] * r["calls"])[:top]


def batch_anatomy(pair: Pair, dev: str, half: str, rows: int, reps: int) -> dict:
    """Where a CheckList batch's time goes: `rows` of the suite's inputs of its commonest length (no padding,
    as 594 of its 644 batches of 256 are), per model and precision, the median milliseconds of one forward
    through the [CLS] path unmasked (as `predict` runs such a batch since the batch says it is unpadded), the
    same with the all-zero mask it built before, the model's own forward, and on CUDA one recorded graph of
    the masked path; the host's time to issue the unmasked batch; both batches under each attention backend
    forced in turn, and on CUDA fp32 with TF32 products; and the costliest kernels of the first two. The
    questions the twenty-fifth session's profile left (benchmarks/README.md): which attention kernel SDPA takes
    for these batches, whether another would be faster, and whether the batch is launch-bound (then a graph
    would gain) or bound by its kernels."""
    from app.core.execution import cls_path
    from app.core.execution.inference import pad, tokenize
    from app.core.ground.precision import autocast

    texts = suite_inputs()
    out: dict = {"rows": rows}
    for label, p in (("fp32", pair), (half, pair.with_precision(half))):
        for clf in p.models:
            enc = tokenize(clf, [Example((x,)) for x in texts[: 40 * rows]])
            lengths, counts = np.unique(enc.lengths, return_counts=True)
            width = int(lengths[counts.argmax()])
            idx = np.flatnonzero(enc.lengths == width)[:rows]
            unmasked = pad(clf, enc, idx)
            masked = unmasked.like(dict(unmasked))
            masked.padded = True  # the mask built and applied, as every GPU batch had it before
            found = cls_path.supported(clf)

            def run(batch, clf=clf):
                with torch.inference_mode(), autocast(clf):
                    return cls_path.inputs_logits(clf, batch)

            def full(clf=clf, batch=unmasked):
                with torch.inference_mode(), autocast(clf):
                    return clf.model(**batch).logits

            diff = (run(unmasked).float() - run(masked).float()).abs().max()
            row = {"tokens": width, "rows": int(len(idx)), "unmasked_vs_masked_max_diff": float(diff),
                   "unmasked_ms": _median_ms(dev, lambda b=unmasked: run(b), reps),
                   "masked_ms": _median_ms(dev, lambda b=masked: run(b), reps),
                   "model_forward_ms": _median_ms(dev, full, reps)}
            if dev.startswith("cuda") and found is not None:
                static = {k: v.clone() for k, v in unmasked.items()}

                def forward(clf=clf, found=found, static=static):
                    with autocast(clf):
                        return cls_path.padded_logits(clf, found, static)

                with torch.inference_mode():
                    replay, _, _ = graphs.cuda_capture(forward)
                row["graph_ms"] = _median_ms(dev, replay, reps)
            row["issue_unmasked_ms"] = _issue_ms(dev, lambda b=unmasked: run(b), reps)
            row["sdpa_backends"] = _sdpa_backends(dev, run, {"unmasked": unmasked, "masked": masked}, reps, label)
            if dev.startswith("cuda") and label == "fp32":
                row["tf32_unmasked_ms"] = _tf32_ms(dev, lambda b=unmasked: run(b), reps)
            row["kernels_unmasked"] = _costliest(dev, lambda b=unmasked: run(b))
            row["kernels_masked"] = _costliest(dev, lambda b=masked: run(b))
            out.setdefault(label, {})[clf.name] = row
    return out


def _issue_ms(dev: str, fn, reps: int) -> float:
    """Median host milliseconds to issue `fn`'s work onto an idle device (the queue drained before each call,
    not after): near the device time when the call is launch-bound, far below it when kernels bind. On a CPU,
    its wall time."""
    fn()
    times = []
    for _ in range(reps):
        devices.synchronize(dev)
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    devices.synchronize(dev)
    return 1000 * statistics.median(times)


SDPA = ("math", "efficient", "flash", "cudnn")  # torch.nn.attention.SDPBackend's members, by their short names
_FIRST_SEEN: set = set()  # (precision, tokens) of the first-call timings so far: each times a new shape


def _sdpa_backends(dev: str, run, batches: dict, reps: int, precision: str) -> dict:
    """The batch's median milliseconds with each of PyTorch's attention backends forced in turn
    (`torch.nn.attention.sdpa_kernel`), or why one can't take it ("unavailable: ..."), and each one's first call
    at a token count not run before (`*_first_ms`, the unmasked batch cut shorter: a backend that builds a plan
    per shape, as cuDNN's does, pays for it there, and a length-sorted suite meets dozens of shapes); with
    PyTorch's own order of preference. Which backend SDPA picks by itself is in the kernel names."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    members = devices.sdpa_backends()
    out: dict = {"priority": [SDPBackend(i).name.lower().removesuffix("_attention")
                              for i in torch._C._get_sdp_priority_order()]}
    unmasked = batches["unmasked"]
    width = unmasked["input_ids"].shape[1]

    def first() -> float | None:
        """One call on the batch cut to the longest length no earlier call in this precision has run."""
        tokens = next((t for t in range(width - 1, 1, -1) if (precision, t) not in _FIRST_SEEN), None)
        if tokens is None:
            return None
        _FIRST_SEEN.add((precision, tokens))
        return 1000 * sync_timed(dev, run, unmasked.like({k: v[:, :tokens] for k, v in unmasked.items()}))[1]

    out["default_first_ms"] = first()
    for name in SDPA:
        for label, batch in batches.items():
            try:
                with sdpa_kernel(members[name]):
                    out[f"{name}_{label}_ms"] = _median_ms(dev, lambda b=batch: run(b), reps)
            except RuntimeError as exc:  # "No available kernel": this backend can't serve the call here
                out[f"{name}_{label}_ms"] = f"unavailable: {str(exc).strip().splitlines()[0][:160]}"
        if isinstance(out[f"{name}_unmasked_ms"], float):
            with sdpa_kernel(members[name]):
                out[f"{name}_first_ms"] = first()
    return out


def _tf32_ms(dev: str, fn, reps: int) -> float:
    """`fn`'s median milliseconds with fp32 products on TF32 tensor cores (`torch.backends.cuda.matmul`), the
    flag put back after: what an fp32 batch would gain from giving up 13 bits of its products' inputs."""
    before = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = True
    try:
        return _median_ms(dev, fn, reps)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = before


def _ig_phases(dev: str, ig: IntegratedGradients, ex: Example) -> dict:
    """One call's milliseconds by phase, the device drained at each border: tokenising and aligning the input
    (`encode_one`), the forward over input and baseline (`_prepare`), the quadrature rounds (`path_integral`, with
    their count), and the rest (host copies, the delta check, words from tokens)."""
    from app.core.techniques import saliency

    spent = {"encode": 0.0, "prepare": 0.0, "rounds": 0.0}
    calls = {"rounds": 0}

    def timed(name: str, fn):
        def run(*a, **k):
            devices.synchronize(dev)
            t0 = time.perf_counter()
            out = fn(*a, **k)
            devices.synchronize(dev)
            spent[name] += 1000 * (time.perf_counter() - t0)
            calls[name] = calls.get(name, 0) + 1
            return out

        return run

    real_encode = saliency.encode_one
    saliency.encode_one = timed("encode", real_encode)
    ig._prepare, ig.path_integral = timed("prepare", ig._prepare), timed("rounds", ig.path_integral)
    try:
        total = 1000 * sync_timed(dev, ig.attribute, ex)[1]
    finally:
        saliency.encode_one = real_encode
        del ig._prepare, ig.path_integral  # the class's own methods again
    return {**{k: round(v, 3) for k, v in spent.items()}, "round_count": calls["rounds"],
            "rest": round(total - sum(spent.values()), 3), "total": round(total, 3)}


def ig_anatomy(pair: Pair, sentence: str, dev: str) -> dict:
    """One integrated-gradients call per model (the app's tolerance) taken apart: wall milliseconds, the
    operations and device kernels it launched, the host waits (synchronisations and copies back), and how much
    of the wall the device spent computing: a launch-bound call has many kernels and little device time; and
    one call's time by phase (`_ig_phases`). Each model eagerly (ALBERT_LENS_CUDA_GRAPHS=0) and with its rounds
    replayed from graphs (the default on a GPU; the same on a CPU)."""
    gpu = not devices.is_cpu(dev)
    out: dict = {}
    for mode, flag in (("eager", "0"), ("graphs", "1")):
        os.environ[graphs.ENV] = flag
        for clf in pair.models:
            ig = IntegratedGradients(clf)
            ex = Example((sentence,))
            wall = _median_ms(dev, lambda ig=ig, ex=ex: ig.attribute(ex), 5)
            events = _profiled(dev, lambda ig=ig, ex=ex: ig.attribute(ex), 1)
            count = {e.key: e.count for e in events}
            row = {"wall_ms": wall, "aten_ops": sum(n for k, n in count.items() if k.startswith("aten::")),
                   "steps": ig.attribute(ex).n_steps, "phases_ms": _ig_phases(dev, ig, ex)}
            if gpu:
                row["kernels"] = sum(n for k, n in count.items()  # cudaLaunchKernel, cudaLaunchKernelExC, ...
                                     if k.startswith(("cudaLaunchKernel", "cuLaunchKernel")))
                row["graph_launches"] = count.get("cudaGraphLaunch", 0)  # a replayed round is one of these
                row["syncs"] = sum(n for k, n in count.items() if "Synchronize" in k)
                row["copies"] = sum(n for k, n in count.items() if k.startswith("cudaMemcpy"))
                row["device_busy_ms"] = sum(e.self_device_time_total for e in events if _on_device(e)) / 1000
            out.setdefault(mode, {})[clf.name] = row
    os.environ.pop(graphs.ENV, None)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="auto")
    ap.add_argument("--tiny", action="store_true", help="the smoke test: tiny models and few texts")
    ap.add_argument("--half", choices=["fp16", "bf16"], help="our half precision (default: fp16 on a GPU, bf16 "
                                                             "on a CPU)")
    ap.add_argument("--repeat", type=int, help="AG News test repeated (default 16; tiny: 256 texts)")
    ap.add_argument("--skip", nargs="*", default=[], help="sections to leave out")
    ap.add_argument("--sentences", type=int, default=20, help="SST-2 sentences for integrated gradients")
    ap.add_argument("--study-texts", type=int, default=0, help="texts for the study's fp32 batch-32 baseline "
                                                                  "(default: all)")
    ap.add_argument("--checklist-backend", choices=["auto", "math", "efficient", "flash", "cudnn"],
                    help="an attention backend to rerun CheckList's half-precision runs with (default: the `batches` "
                         "probe's fastest; auto: PyTorch's own order)")
    ap.add_argument("--json")
    args = ap.parse_args()
    dev = devices.resolve(args.device)
    half = args.half or ("bf16" if devices.is_cpu(dev) else "fp16")
    tmp = Path(tempfile.mkdtemp(prefix="albert-lens-gpu-run-"))
    if args.tiny:
        dirs = tiny_models(tmp / "models")
    else:
        from tests import base_fixtures

        dirs = base_fixtures.build(SHARED)
    pair = Pair.resolve(models=[str(dirs["bert"]), str(dirs["albert"])], task="sst2", device=dev)
    news = [ex.texts[0] for ex in load_dataset(AG_NEWS).examples]
    texts = news[:256] if args.tiny else news * (args.repeat or 16)
    sst2 = [ex.texts[0] for ex in load_dataset(SST2_DEV).examples]
    res: dict = {"device": {**devices.describe(dev), "torch": torch.__version__, "python": platform.python_version(),
                            "cpu": devices.cpu_name()}, "half": half, "tiny": args.tiny, "targets": TARGETS}
    try:
        import transformers

        res["device"]["transformers"] = transformers.__version__
    except ImportError:
        pass
    steps = {  # the longest last: a run cut short keeps the others
        "batches": lambda: batch_anatomy(pair, dev, half, 8 if args.tiny else 256, 3 if args.tiny else 20),
        "ig_anatomy": lambda: ig_anatomy(pair, sst2[0], dev),
        "integrated_gradients": lambda: integrated_gradients(pair, sst2[:3 if args.tiny else args.sentences], dev),
        "tokenizers": lambda: tokenizers(pair, news[:200]),
        "graphs": lambda: replayed(pair, sst2[:64]),
        "compare": lambda: compare(pair, sst2, dev, 10 if args.tiny else 200),
        "checklist": lambda: checklist(pair, dev, 2 if args.tiny else None, half,
                                       args.checklist_backend or fastest_backend(res.get("batches"), half)),
        "projection": lambda: projection(pair, 200 if args.tiny else 7600, dev),
        "deepwordbug": lambda: deepwordbug(pair, 2 if args.tiny else 10, dev),
        "embeddings": lambda: embeddings(pair, half, texts, [dirs["bert"], dirs["albert"]], dev, tmp, args.study_texts),
    }
    if not devices.is_cpu(dev):
        torch.cuda.reset_peak_memory_stats(dev) if dev.startswith("cuda") else None
    for name, step in steps.items():
        if name in args.skip:
            continue
        t0 = time.perf_counter()
        try:
            res[name] = step()
        except Exception as exc:  # noqa: BLE001 - one section's failure is reported, the others still run
            res[name] = {"error": f"{type(exc).__name__}: {str(exc)[:300]}"}
        print(f"{name} ({time.perf_counter() - t0:.1f} s): {json.dumps(res[name], default=str)}", flush=True)
        res["memory"] = devices.memory(dev)
        if args.json:  # after every section: a run stopped part-way keeps what it measured
            Path(args.json).write_text(json.dumps(res, indent=2, default=str), encoding="utf-8")
    print(json.dumps(res["memory"]))


if __name__ == "__main__":
    main()
