"""`albert-lens report`: the study's tables and figures regenerated for any pair, in one go.

Sections: benchmark per dataset, CheckList tables, an attack summary, the UMAP figure, the layer similarity (CKA)
and attention statistics, saliency over examples, parameter and speed tables. Each section's result is cached as
JSON under `<out>/cache/` keyed by what it depends on (models, files, settings), so a re-run after a crash, or
with one more dataset, only computes what is new.
"""
from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from tqdm.auto import tqdm

from app.core import api
from app.core.api import Pair, default_suites
from app.core.ground.errors import LensError
from app.core.present import plots, views
from app.core.present.plots import grouped_bars, saliency_dataset_figure, transitions_figure
from app.core.present.views import checklist_types_legend, describe, format_mean, percent, slices_summary, verdict


def _slug(name: str) -> str:
    """A file name's part from a dataset's name ("sst2/dev" -> "sst2_dev")."""
    return "".join(c if c.isalnum() else "_" for c in name).strip("_")[:60] or "dataset"


@dataclass
class Section:
    key: str
    title: str
    run: object  # callable returning a JSON-able dict


def _fingerprint(pair: Pair, name: str, params: dict) -> str:
    """A section's cache key: its settings, its files and the models' identities (`ModelHead.identity`), so a
    pair retrained in place gets its sections computed again (the key named the models' sources only, and a
    retrained offline pair's report reused its stale sections)."""
    models = [[m.name, *h.identity] for m, h in zip(pair.spec.models, pair.heads)]
    h = hashlib.sha256(json.dumps({"section": name, "params": params, "models": models},
                                  sort_keys=True, default=str).encode())
    for v in params.values():
        p = Path(str(v))
        if p.is_file():
            st = p.stat()
            h.update(f"{p}:{st.st_size}:{st.st_mtime_ns}".encode())
    return f"{name}-{h.hexdigest()[:12]}"


def build_sections(pair: Pair, datasets: Sequence[str], suites: Sequence[str], *, limit: int, sample: int,
                   attack_n: int, umap_n: int, saliency_n: int = 30, engine=None) -> list[Section]:
    """The report's sections; with a Ray `engine` each one's model work runs on the engine's workers (the cache
    keys don't depend on the engine: both give the same results)."""
    remote = engine  # the facade runs on it when it is a Ray engine, in process otherwise

    secs: list[Section] = []
    for ds in datasets:
        params = {"dataset": ds, "limit": limit}

        def run_bench(ds=ds):
            return api.benchmark(pair, ds, limit, engine=remote, visitor=False)

        secs.append(Section(_fingerprint(pair, "benchmark", params), f"Benchmark: {Path(ds).name}", run_bench))

        def run_slices(ds=ds):
            return api.slices(pair, ds, limit=limit, engine=remote, visitor=False)

        if not pair.task.is_regression:
            secs.append(Section(_fingerprint(pair, "slices", params), f"Where they differ: {Path(ds).name}",
                                run_slices))
    for suite in suites:
        params = {"suite": suite, "sample": sample}
        secs.append(Section(_fingerprint(pair, "checklist", params), f"CheckList: {Path(suite).name}",
                            lambda suite=suite: api.checklist(pair, suite=suite, sample=sample, engine=remote,
                                                                   visitor=False)))
    if datasets:
        first = datasets[0]
        for recipe in ("deepwordbug", api.OFFLINE_TEXTFOOLER):
            params = {"dataset": first, "recipe": recipe, "n": attack_n}

            def run_attack(recipe=recipe, first=first):
                ok, why = api.recipe_status(recipe)
                if not ok:
                    return {"recipe": recipe, "unavailable": why}
                res = api.attack(pair, recipe=recipe, dataset=first, n=attack_n, query_budget=200, time_limit=30,
                                 engine=remote, visitor=False)
                return {"recipe": recipe, "n": len(res["examples"]), "summary": res["summary"],
                        "comparison": res["comparison"]}

            secs.append(Section(_fingerprint(pair, "attack", params), f"Attack: {recipe}", run_attack))
        params = {"dataset": first, "n": umap_n}

        def run_umap(first=first):
            res = api.project(pair, first, projection="umap", layer=-1, pooling="cls", limit=umap_n, engine=remote,
                              visitor=False)
            # the section's own keys: reports cached by earlier versions read the same
            return {"dataset": res["dataset"], "n": res["n"], "knn_overlap": res["knn_overlap"], "k": res["k"],
                    "disparity": res["procrustes_disparity"], "points": res["points"]}

        secs.append(Section(_fingerprint(pair, "umap", params), "UMAP of sentence embeddings", run_umap))
        params = {"dataset": first, "n": umap_n}

        def run_inside(first=first):
            # at least 5 minibatches, so the bootstrap over them has something to resample
            cka = api.similarity(pair, first, limit=umap_n, pooling="cls", minibatch=max(8, min(128, umap_n // 5)),
                                 engine=remote,
                                 visitor=False)
            heads = api.attention(pair, dataset=first, limit=min(umap_n, 200), engine=remote, visitor=False)
            return {"similarity": cka.to_dict(), "attention": heads.to_dict()}

        secs.append(Section(_fingerprint(pair, "inside", params), "Inside: layer similarity and attention",
                            run_inside))
        params = {"dataset": first, "n": saliency_n, "method": SALIENCY_METHOD}

        def run_saliency(first=first):
            return api.saliency(pair, dataset=first, method=SALIENCY_METHOD, limit=saliency_n, engine=remote,
                                visitor=False)

        if saliency_n:
            secs.append(Section(_fingerprint(pair, "saliency", params), "Saliency: integrated gradients",
                                run_saliency))

    def run_facts():
        return api.facts(pair, engine=remote)

    secs.append(Section(_fingerprint(pair, "facts", {}), "Parameters and speed", run_facts))
    return secs


def generate(pair: Pair, out: str | Path, *, datasets: Sequence[str] = (), suites: Sequence[str] | None = None,
             limit: int = 1000, sample: int = 20, attack_n: int = 10, umap_n: int = 500, saliency_n: int = 30,
             progress_bar: bool = True, engine=None) -> dict:
    """Compute (or reuse) every section, then write report.md, report.html and the PNG figures. Sections run
    in process, or on a Ray `engine` (see `engine.Engine`). A section that fails on its input (`LensError`) is
    written as its message and not cached, so the next run tries it again; `failed` names them."""
    out = Path(out)
    cache = out / "cache"
    cache.mkdir(parents=True, exist_ok=True)
    no_suite = suites is None  # the models' own suite, if one fits; `--suites` with no path asks for none
    suites = default_suites(pair) if no_suite else list(suites)
    no_suite = no_suite and not suites
    sections = build_sections(pair, list(datasets), suites, limit=limit, sample=sample, attack_n=attack_n,
                              umap_n=umap_n, saliency_n=saliency_n, engine=engine)
    results, reused = {}, []
    for sec in tqdm(sections, desc="report", disable=not progress_bar):
        path = cache / f"{sec.key}.json"
        if path.is_file():
            try:
                results[sec.key] = json.loads(path.read_text(encoding="utf-8"))
                reused.append(sec.key)
                continue
            except json.JSONDecodeError:
                path.unlink()
        t0 = time.perf_counter()
        try:
            res = dict(sec.run())  # a declared result, or a section's own dict: cached as JSON
        except LensError as exc:  # one section's bad input (labels, a suite) leaves the others standing
            results[sec.key] = {"error": str(exc)}
            continue
        res["_seconds"] = time.perf_counter() - t0
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(res, default=float), encoding="utf-8")
        tmp.replace(path)
        results[sec.key] = res
    files = write(pair, out, sections, results, no_suite=no_suite)
    return {"out": str(out), "sections": [s.key for s in sections], "reused": reused, "files": files,
            "failed": {k: r["error"] for k, r in results.items() if "error" in r}}


NO_SUITE = ("No released CheckList suite fits these models ({task}, answering {labels}): the released suites test "
            "sentiment (one text, negative/positive) and duplicate questions (QQP). `--suites PATH` runs another.")


def write(pair: Pair, out: Path, sections: list[Section], results: dict, *, no_suite: bool = False) -> list[str]:
    md = [f"# albert-lens report: {pair.name}", "",
          "Models: " + "; ".join(f"**{m.name}** `{m.source}`" for m in pair.spec.models), ""]
    hw = pair.hardware()
    md += [f"Computed on **{hw['device']}** ({hw['device_name']}), {pair.precision}.", ""]
    if pair.precision_asked["asked"] != "fp32":
        line = views.precision_line(pair.precision_asked)
        md += [f"{line[:1].upper()}{line[1:]}.", ""]
    if pair.precision != "fp32":
        how = "dynamically quantised encoder layers" if pair.precision == "int8" else "half-precision forward passes"
        md += [f"Precision: **{pair.precision}** ({how}) for the forward-only sections; saliency ran in fp32 "
               "(gradients are taken on fp32 weights only).", ""]
    if no_suite:
        md += ["## CheckList", "", NO_SUITE.format(task=pair.task.name, labels=", ".join(pair.task.labels or
                                                                                          ("a score",))), ""]
    figs = []
    bench_rows = []
    for sec in sections:
        res = results[sec.key]
        md += [f"## {sec.title}", ""]
        kind = sec.key.split("-")[0]
        if "error" in res:
            md += [f"Not computed: {res['error']}", ""]
        elif kind == "benchmark":
            metric = "accuracy" if "accuracy" in res["models"][0] else "pearson"
            md += [
                f"| model | {metric} | parameters | throughput (ex/s) | latency p50 (ms) | n |",
                "|---|---|---|---|---|---|",
            ]
            for r in res["models"]:
                md.append(f"| {r['model']} | {r[metric]:.4f} | {r['parameters']:,} | {r['throughput_per_s']:.1f} | "
                          f"{r['latency_ms_median']:.1f} | {r['n']} |")
                ci = (res.get("comparison") or {}).get("intervals")
                bench_rows.append((res["dataset"], r["model"], r[metric], r["throughput_per_s"],
                                   ci[res["models"].index(r)] if ci else None))
            md.append("")
            cmp = res.get("comparison")
            if cmp:  # a section cached by an earlier version has none
                md += [" ".join(describe(cmp, [r["model"] for r in res["models"]])), ""]
        elif kind == "slices":
            md += [slices_summary(res), "",
                   "| slice | size | " + " | ".join(res["models"]) + " | agreement | gap | q |",
                   "|---|---|---|---|---|---|---|"]
            for sl in res["slices"][:10]:
                md.append(f"| {sl['name']} | {sl['size']} | " + " | ".join(f"{sl['accuracy'][m]:.3f}"
                                                                            for m in res["models"])
                          + f" | {sl['agreement']:.2f} | {sl['gap_examples']:+d} | {sl['q']:.2g} |")
            fig = out / f"slices_{_slug(res['dataset'])}.png"
            plots.slices_figure(res).savefig(fig, dpi=100)
            figs.append(fig)
            md += ["", f"![Where they differ]({fig.name})", ""]
        elif kind == "checklist":
            md += [f"Suite `{res['suite']}`, up to {res['sample']} cases per test; labels mapped by name.", "",
                   res["markdown"], "", checklist_types_legend(), ""]
            if res.get("summary"):  # a section cached by an earlier version has none
                md += [res["summary"], ""]
            fig = out / f"checklist_{res['kind']}.png"
            _bar_png(res["capabilities"], fig, "mean fail rate per capability", "fail rate")
            figs.append(fig)
            md += [f"![CheckList]({fig.name})", ""]
        elif kind == "attack":
            if "unavailable" in res:
                md += [f"Not run here: {res['unavailable']}", ""]
            else:
                md += [
                    f"{res['n']} examples, query budget 200.",
                    "",
                    "| model | success rate | attacked | skipped | avg queries | perturbed words % | s/example "
                    "| transfer rate |",
                    "|---|---|---|---|---|---|---|---|",
                ]
                for m, s in res["summary"].items():
                    md.append(f"| {m} | {percent(s['success_rate'])} | {s['attacked']} | {s['skipped']} | "
                              f"{_num(s['avg_queries'])} | {_num(s['avg_perturbed_words_pct'])} | "
                              f"{_num(s['avg_seconds'], 2)} | {percent(s['transfer_rate'])} |")
                md.append("")
                if res.get("comparison"):  # a section cached by an earlier version has none
                    md += [verdict(res["comparison"], list(res["summary"]),
                                   unit="examples attacked on both models") + ".", ""]
        elif kind == "umap":
            fig = out / "umap.png"
            plots.plot_png(res["points"], fig, "gold", title=f"UMAP (cosine) of CLS embeddings, {res['dataset']}")
            figs.append(fig)
            md += [
                f"{res['n']} examples of {res['dataset']}; shared {res['k']}-nearest neighbours between the two "
                f"embedding spaces: **{res['knn_overlap']:.2f}** (unrelated spaces would share "
                f"{api.knn_chance(res['n'], res['k']):.2f}); Procrustes disparity {res['disparity']:.3f}.",
                "",
                f"![UMAP]({fig.name})",
                "",
            ]
        elif kind == "inside":
            md += _inside(res, out, figs)
        elif kind == "saliency":
            fig = out / "saliency.png"
            saliency_dataset_figure(res).savefig(fig, dpi=110)
            figs.append(fig)
            md += [f"{res['n']} examples, each explained by both models; mean [95% bootstrap interval] of the "
                   "probability drop when the top-ranked words are removed (comprehensiveness; a random ranking of "
                   "the same words for comparison) or kept alone (sufficiency).", "",
                   "| model | comprehensiveness | random ranking | sufficiency |", "|---|---|---|---|"]
            md += [
                f"| {n} | "
                + " | ".join(
                    format_mean(res[k][i]) for k in ("comprehensiveness", "random_comprehensiveness", "sufficiency")
                )
                + " |"
                for i, n in enumerate(res["models"])
            ]
            md.append("")
            if "comprehensiveness_comparison" in res:
                md += [verdict(res["comprehensiveness_comparison"], res["models"]) + ".", ""]
            if res["agreement"]["mean"] is not None:
                md += [f"Rank agreement between the two models' word scores: {format_mean(res['agreement'])} over "
                       f"{res['agreement']['n']} examples.", ""]
            md += [f"![saliency]({fig.name})", ""]
        elif kind == "facts":
            md += [
                "| model | parameters | embeddings | encoder | head | shares layers | latency (ms) "
                "| throughput (ex/s) |",
                "|---|---|---|---|---|---|---|---|",
            ]
            for f in res["models"]:
                md.append(f"| {f['model']} | {f['parameters']:,} | {f['parameters_embeddings']:,} | "
                          f"{f['parameters_encoder']:,} | {f['parameters_head']:,} | {f['shares_layers']} | "
                          f"{f['latency_ms']:.1f} | {f['throughput_per_s']:.1f} |")
            md.append("")
            if res.get("latency_comparison"):  # a section cached by an earlier version has none
                md += ["One input at a time, both models in turns: " + verdict(
                    res["latency_comparison"], [f["model"] for f in res["models"]], unit="inputs") + ".", ""]
            fig = out / "layer_transitions.png"
            _lines_png({f["model"]: f["transitions"] for f in res["models"]}, fig)
            figs.append(fig)
            md += ["Layer-to-layer L2 distance and cosine similarity of hidden states (the ALBERT paper's Figure 2).",
                   "", f"![transitions]({fig.name})", ""]
    if bench_rows:
        fig = out / "benchmark.png"
        _bench_png(bench_rows, fig)
        figs.append(fig)
        md += ["## Benchmark figure", "", f"![benchmark]({fig.name})", ""]
    text = "\n".join(md)
    (out / "report.md").write_text(text, encoding="utf-8")
    from markdown_it import MarkdownIt  # deferred: only the report's HTML

    body = MarkdownIt("commonmark", {"html": False}).enable("table").render(text)
    (out / "report.html").write_text(
        "<!doctype html><html><head><meta charset='utf-8'><title>albert-lens report</title>"
        "<style>body{font-family:sans-serif;max-width:1100px;margin:auto}table{border-collapse:collapse}"
        "td,th{border:1px solid #ccc;padding:3px 6px}img{max-width:100%}</style></head><body>"
        + body + "</body></html>", encoding="utf-8")
    return ["report.md", "report.html"] + [f.name for f in figs]


SALIENCY_METHOD = "integrated_gradients"


def _inside(res: dict, out: Path, figs: list) -> list[str]:
    """The CKA heatmaps with each layer's best match, and what the heads attend to per layer."""
    import numpy as np

    cka, heads = res["similarity"], res["attention"]
    a, b = cka["models"]
    fig = out / "similarity.png"
    plots.similarity_figure(cka).savefig(fig, dpi=100)
    figs.append(fig)
    cross = cka["cross"]
    best = ", ".join(f"{i}→{j} ({cross['cka'][i][j]:.2f} [{_num(cross['low'][i][j], 2)}, "
                     f"{_num(cross['high'][i][j], 2)}])" for i, j in enumerate(cka["best_b_for_a"]) if j is not None)
    md = [f"Linear CKA between every layer of {a} and of {b} ([CLS] vectors of {cka['n']} examples of "
          f"{cka['dataset']}, {cka['minibatches']} minibatch{'es' if cka['minibatches'] != 1 else ''} of the unbiased "
          "estimator; 0 = the embedding output). "
          f"For each {a} layer, the {b} layer most like it, with its 95% bootstrap interval: {best}.", "",
          f"![layer similarity]({fig.name})", ""]
    fig = out / "attention_stats.png"
    plots.attention_stats_figure(heads).savefig(fig, dpi=100)
    figs.append(fig)
    md += [f"What the heads attend to over {heads['n']} examples (per layer, the mean over heads):", "",
           "| model | layer | entropy (nats) | on [CLS] | on [SEP] | on punctuation |", "|---|---|---|---|---|---|"]
    for m in heads["models"]:
        for layer, row in enumerate(np.asarray(m["entropy"], dtype=float), start=1):
            md.append(f"| {m['model']} | {layer} | {row.mean():.2f} | {np.mean(m['cls'][layer - 1]):.0%} | "
                      f"{np.mean(m['sep'][layer - 1]):.0%} | {np.mean(m['punct'][layer - 1]):.0%} |")
    md += ["", f"![attention statistics]({fig.name})", ""]
    return md


def _num(x, d: int = 1) -> str:
    return "n/a" if x is None else f"{x:.{d}f}"


def _bar_png(rates: dict, path: Path, title: str, ylabel: str) -> None:
    """Rates per capability, on a 0..1 axis like the app's, so two reports' figures compare at a glance."""
    rows = [{"capability": c, "model": m, "value": v} for c, per in rates.items() for m, v in per.items()]
    grouped_bars(rows, "capability", "value", "model", ylabel, title=title, ylim=(0, 1)).savefig(path, dpi=110)


def _lines_png(trans: dict, path: Path) -> None:
    transitions_figure(trans).savefig(path, dpi=110)


def _bench_png(rows, path: Path) -> None:
    from matplotlib.figure import Figure  # deferred: matplotlib: only when a figure is drawn

    fig = Figure(figsize=(10, 3.4), layout="tight")
    axes = fig.subplots(1, 2)
    records = [{"dataset": d, "model": m, "metric": v, "throughput": t, "ci": ci} for d, m, v, t, ci in rows]
    grouped_bars(records, "dataset", "metric", "model", "", ax=axes[0], interval="ci",
                 title="accuracy (Pearson for STS-B), 95% bootstrap interval")
    grouped_bars(records, "dataset", "throughput", "model", "", ax=axes[1], title="throughput (examples/s)")
    fig.savefig(path, dpi=110)
