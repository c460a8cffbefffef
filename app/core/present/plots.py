"""Figures shared by the app and the report (matplotlib without pyplot: no global figure list to leak in a
long-running app)."""
from __future__ import annotations

from collections.abc import Sequence

from .views import changes_in_order, edits_text, largest_score, own_delta, uncounted, unread_by_all


def grouped_bars(rows: Sequence[dict], x: str, y: str, group: str, ylabel: str, *, ax=None, title: str = "",
                 ylim: tuple[float, float] | None = None, interval: str | None = None):
    """Bars of each group side by side per x value, with a legend: two models' values must not stack.
    Draws on `ax` when given, else on a new Figure; returns the Figure. `ylim` fixes the axis for rates, which
    would otherwise span -0.04..0.04 when every bar is 0. `interval` names a row field holding [low, high]
    (a confidence interval), drawn as an error bar where present."""
    xs = list(dict.fromkeys(r[x] for r in rows))
    groups = list(dict.fromkeys(r[group] for r in rows))
    if ax is None:
        from matplotlib.figure import Figure  # deferred: matplotlib: only when a figure is drawn

        ax = Figure(figsize=(max(6.0, 0.55 * len(xs) + 2), 3.0), layout="tight").subplots()
    values = {(r[x], r[group]): r[y] for r in rows}
    width = 0.8 / max(1, len(groups))
    spans = {(r[x], r[group]): r.get(interval) for r in rows} if interval else {}
    for k, g in enumerate(groups):
        pos = [i + (k - (len(groups) - 1) / 2) * width for i in range(len(xs))]
        heights = [float(values.get((v, g)) or 0.0) for v in xs]
        ax.bar(pos, heights, width, label=str(g))
        marked = [(p, h, spans[(v, g)]) for p, h, v in zip(pos, heights, xs) if spans.get((v, g))]
        if marked:
            ax.errorbar([p for p, _, _ in marked], [h for _, h, _ in marked], fmt="none", ecolor="#333", capsize=4,
                        yerr=[[h - lo for _, h, (lo, _) in marked], [hi - h for _, h, (_, hi) in marked]])
    ax.axhline(0, color="#888", linewidth=0.6)
    tilt = len(xs) > 6 or sum(len(str(v)) for v in xs) > 9 * len(xs) + 20  # long labels overlap sooner
    ax.set_xticks(range(len(xs)), [str(v) for v in xs], rotation=30 if tilt else 0, ha="right" if tilt else "center",
                  fontsize=8)
    ax.set_ylabel(ylabel)
    if ylim is not None:
        ax.set_ylim(*ylim)
    if title:
        ax.set_title(title)
    if groups:
        ax.legend(fontsize=8)
    return ax.figure



SALIENCY_BARS = 60  # words per chart: a 512-token input's bars would draw a figure too wide to encode or read


def saliency_figure(res: dict, most: int = SALIENCY_BARS, shared: bool = False):
    """Both models' per-word scores of an `api.saliency` result, numbered words on x (a word can repeat): the
    words some model read, and of those, when there are more than `most`, the `most` with the largest |score|
    in either model, in text order. `shared`: both over the largest score of either (one scale), not each over
    its own."""
    def who(m: dict) -> str:  # the legend says which class each model's bars explain: they can differ
        if m.get("target_label") is None:
            return m["model"]
        return f"{m['model']}: {'logit of ' if m.get('output') == 'logit' else ''}{m['target_label']}"

    maps = res["maps"]
    words = maps[0]["words"] if maps else []
    unread = unread_by_all(maps)
    shown = [i for i in range(len(words)) if i not in unread]
    title = f"{res['method'].replace('_', ' ')}, per word"
    if len(shown) > most:
        size = {i: max(abs(m["scores"][i]) for m in maps) for i in shown}
        shown = sorted(sorted(shown, key=lambda i: -size[i])[:most])
        title += f": the {most} of {len(words)} words with the largest scores"
    elif unread:
        title += f": the {len(shown)} of {len(words)} words read"
    # each model's scores over its own largest |score|, as the highlight colours them: on one raw axis a model
    # with small scores (ALBERT's occlusion) had invisible bars beside a deep-red highlight
    top = [largest_score(maps if shared else [m]) for m in maps]  # `views.highlight`'s scale
    rows = [{"model": who(m), "word": f"{i + 1}:{words[i]}", "score": m["scores"][i] / t}
            for m, t in zip(maps, top) for i in shown]
    # two short lines: on one line the label was taller than the 3-inch figure and lost both ends
    whose = "both models' largest" if shared else "model's largest"
    ylabel = (f"score ÷ {whose}\n+ for the class, − against" if res.get("signed", True) else
              f"magnitude ÷ {whose}\n(how sensitive, no sign)")
    # a title above the axes also keeps the app's label badge off the top y tick
    fig = grouped_bars(rows, "word", "score", "model", ylabel, title=title,
                       ylim=(-1.05, 1.05) if res.get("signed", True) else (0, 1.05))
    mark_fields(fig.axes[0], res.get("fields") or [], [maps[0]["fields"][i] for i in shown] if maps and
                maps[0].get("fields") else [])
    # per model, the word of its largest bar (|score|; the first in text order on a tie), as drawn: the app says
    # it under the chart (`views.largest_bars`), where it can be read against the highlight
    fig.largest = [(m["model"], max(((r["word"].split(":", 1)[1], abs(r["score"])) for r in rows
                                     if r["model"] == who(m)), key=lambda wr: wr[1], default=("", 0.0))[0])
                   for m in maps]
    return fig


def mark_fields(ax, names: Sequence[str], field_of: Sequence[int]) -> None:
    """A pair's bars run premise then hypothesis: a dashed line where the second text starts, each part named,
    so a reader knows which text a word came from."""
    if len(names) < 2 or not field_of or len(set(field_of)) < 2:
        return
    from matplotlib.transforms import blended_transform_factory  # deferred: matplotlib: only when a figure is drawn

    on_top = blended_transform_factory(ax.transData, ax.transAxes)
    starts = [j for j in range(len(field_of)) if j == 0 or field_of[j] != field_of[j - 1]]
    for j in starts:
        if j > 0:
            ax.axvline(j - 0.5, color="#555", linestyle="--", linewidth=0.8)
        ax.text(j - 0.4, 0.97, names[field_of[j]], transform=on_top, va="top", fontsize=8, color="#555",
                style="italic")


def counterfactual_figure(res: dict, names: Sequence[str]):
    """Flip rate per model over a dataset; else, per edit, how far each model's own prediction moved."""
    if "flip_rate" in res:  # over a dataset
        spans = (res.get("comparison") or {}).get("intervals") or [None] * len(names)
        rows = [{"x": "label flip rate", "model": n, "v": r, "ci": ci}
                for n, r, ci in zip(names, res["flip_rate"], spans)]
        rows += [{"x": "flips only this model", "model": n, "v": len(o) / res["changed"]}
                 for n, o in zip(names, res["only"])]
        # the axis fits the data: flip rates of 1-7% on a 0-1 axis were slivers
        top = max([r["v"] or 0.0 for r in rows] + [hi for r in rows if r.get("ci") for hi in r["ci"][1:]])
        return grouped_bars(rows, "x", "v", "model", "share of the edits",
                            title=f"{res['changed']} edits; flip rate with its 95% interval",
                            ylim=(0, min(1.0, max(0.05, 1.25 * top))), interval="ci")
    changes = changes_in_order(res, names)  # numbered as the table lists them, the counted edits first
    marks = [" †" if uncounted(c) else "" for c in changes]
    rows = [{"x": f"{i + 1}: {edits_text(c)}"[:38] + mark, "model": n, "v": own_delta(c, k)[1]}
            for i, (c, mark) in enumerate(zip(changes, marks)) for k, n in enumerate(names)]
    return grouped_bars(rows, "x", "v", "model", "Δ p (original label)",  # a longer label was clipped
                        title="† not counted: the edit fails the meaning check" if any(marks) else "")


def transition_labels(n: int) -> list[str]:
    """Axis labels "0→1" ... "(n-1)→n" for layer-to-layer values (hidden state 0 is the embedding output):
    whole transitions rather than ticks at 1.5, 2.5."""
    return [f"{i}→{i + 1}" for i in range(n)]


def transitions_figure(transitions: dict[str, dict]):
    """Per model, layer-to-layer L2 distance and cosine similarity of hidden states (the ALBERT paper's Figure 2)."""
    from matplotlib.figure import Figure  # deferred: matplotlib: only when a figure is drawn

    fig = Figure(figsize=(10, 3.4), layout="tight")
    axes = fig.subplots(1, 2)
    steps = transition_labels(max(len(t["l2"]) for t in transitions.values()))
    for m, t in transitions.items():
        axes[0].plot(steps[: len(t["l2"])], t["l2"], marker="o", label=m)
        axes[1].plot(steps[: len(t["cosine"])], t["cosine"], marker="o", label=m)
    axes[0].set_title("L2 distance between layer input and output")
    axes[1].set_title("cosine similarity between layer input and output")
    for ax in axes:
        ax.set_xlabel("layer transition (0 = embeddings)")
        ax.legend()
    return fig


def slices_figure(res: dict, rows: int = 10):
    """The top slices as bars beside the whole dataset's value (dashed): each model's accuracy on the slice, or
    with the agreement metric the two models' agreement on it; the slice's size and q at its end, and the slices
    that differ beyond chance in bold."""
    from matplotlib.figure import Figure  # deferred: matplotlib: only when a figure is drawn

    names = res["models"]
    shown = res["slices"][:rows][::-1]  # the strongest at the top
    fig = Figure(figsize=(9.5, 0.45 * max(len(shown), 2) + 1.6), layout="tight")
    ax = fig.subplots()
    y = list(range(len(shown)))
    if res["metric"] == "accuracy":
        for k, (name, colour) in enumerate(zip(names, ("#1f77b4", "#ff7f0e"))):
            ax.barh([i + (0.2 if k == 0 else -0.2) for i in y], [s["accuracy"][name] for s in shown], height=0.38,
                    color=colour, label=f"{name} (all: {res['overall']['accuracy'][name]:.3f})")
            ax.axvline(res["overall"]["accuracy"][name], color=colour, linestyle="--", linewidth=1)
        what = "accuracy"
    else:
        ax.barh(y, [s["agreement"] for s in shown], height=0.6, color="#2ca02c",
                label=f"agreement of the two (all: {res['overall']['agreement']:.3f})")
        ax.axvline(res["overall"]["agreement"], color="#2ca02c", linestyle="--", linewidth=1)
        what = "agreement"
    labels = [(s["name"] if len(s["name"]) <= 38 else s["name"][:37] + "…") for s in shown]
    ax.set_yticks(y, labels, fontsize=9)
    for tick, s in zip(ax.get_yticklabels(), shown):
        tick.set_fontweight("bold" if s["q"] < res["alpha"] else "normal")
    for i, s in enumerate(shown):
        ax.text(1.01, i, f"n={s['size']}, q={s['q']:.2g}", va="center", fontsize=8, transform=ax.get_yaxis_transform())
    ax.set_xlim(0, 1)
    ax.set_xlabel(f"{what} on the slice (dashed: on the whole dataset)")
    ax.set_title(f"Where they differ: {res['findings']} of {res['candidates_tested']} slices beyond chance "
                 f"(bold, q < {res['alpha']:g})", fontsize=10)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2, fontsize=8, frameon=False)
    return fig


def confusion_figure(res: dict, most: int = 6):
    """Both models' confusion matrices side by side, one row per facet part (the first `most`): counts in the
    cells, each cell's colour its share of the gold label's row, so the parts' sizes don't decide the colours;
    each row titled with the part, its size and each model's accuracy."""
    from matplotlib.figure import Figure  # deferred: matplotlib: only when a figure is drawn

    parts, labels = res["facets"][:most], [str(lab) for lab in res["labels"]]
    k = len(labels)
    size = 1.6 + 0.5 * k
    fig = Figure(figsize=(2 * size + 1.6, (size + 1.3) * len(parts) + 0.4), layout="constrained")
    for sub, part in zip(fig.subfigures(len(parts), 1, squeeze=False)[:, 0], parts):
        for m, (ax, name) in enumerate(zip(sub.subplots(1, 2), res["models"])):
            counts = part["matrices"][m]
            totals = [max(sum(r), 1) for r in counts]
            share = [[c / t for c in r] for r, t in zip(counts, totals)]
            ax.imshow(share, cmap="Blues", vmin=0, vmax=1)
            for i in range(k):
                for j in range(k):
                    ax.text(j, i, f"{counts[i][j]:,}", ha="center", va="center", fontsize=10,
                            color="white" if share[i][j] > 0.6 else "black")
            ax.set_xticks(range(k), labels, fontsize=9, rotation=30, ha="right", rotation_mode="anchor")
            ax.set_yticks(range(k), labels, fontsize=9)
            ax.set_xlabel("predicted", fontsize=9)
            ax.set_ylabel("gold", fontsize=9)
            ax.set_title(f"{name}: {part['accuracy'][m]:.1%} right", fontsize=10)
        sub.suptitle(f"{part['name']} (n={part['n']:,}; McNemar p = {part['comparison']['p_value']:.3g})",
                     fontsize=10, fontweight="bold", wrap=True)
    fig.suptitle(f"Confusion matrices, {res['dataset']}: colour = share of the gold label's row", fontsize=10)
    return fig


def curves_figure(res: dict):
    """Both models' ROC curve (with the chance diagonal) and precision-recall curve (with the share of the class,
    what a random ranking scores) on one plot each, the legend giving each area and its interval."""
    from matplotlib.figure import Figure  # deferred: matplotlib: only when a figure is drawn

    fig = Figure(figsize=(9.5, 4.2), layout="constrained")
    roc, pr = fig.subplots(1, 2)
    colours = ("#1f77b4", "#ff7f0e")

    def area(cmp: dict, k: int) -> str:
        lo, hi = cmp["intervals"][k]
        return f"{cmp['values'][k]:.3f}" + ("" if lo is None else f" ({lo:.3f}-{hi:.3f})")

    for k, (r, q, colour) in enumerate(zip(res["roc"], res["pr"], colours)):
        roc.plot(r["x"], r["y"], color=colour, linewidth=1.6, label=f"{r['model']}: AUC {area(res['auc'], k)}")
        pr.step(q["x"], q["y"], where="post", color=colour, linewidth=1.6,
                label=f"{q['model']}: AP {area(res['average_precision'], k)}")
    roc.plot([0, 1], [0, 1], color="#888", linestyle="--", linewidth=0.8)
    share = res["positives"] / res["n"]
    pr.axhline(share, color="#888", linestyle="--", linewidth=0.8)
    roc.set(xlabel="false-positive rate", ylabel="true-positive rate", xlim=(0, 1), ylim=(0, 1.01))
    pr.set(xlabel="recall", ylabel="precision", xlim=(0, 1), ylim=(0, 1.01))
    roc.set_title(f"ROC, «{res['positive']}»: DeLong p = {res['auc']['p_value']:.3g}", fontsize=10)
    pr.set_title(f"precision-recall: bootstrap p = {res['average_precision']['p_value']:.3g}", fontsize=10)
    for ax in (roc, pr):
        ax.legend(fontsize=8, loc="lower left" if ax is pr else "lower right")
    return fig


def benchmark_figure(res: dict):
    """A benchmark result: each model's accuracy (Pearson for regression) with its interval, and for
    classifiers the 2x2 table of who is right, whose off-diagonal cells are what McNemar's test weighs."""
    from matplotlib.figure import Figure  # deferred: matplotlib: only when a figure is drawn

    names = [r["model"] for r in res["models"]]
    cmp = res.get("comparison") or {}
    metric = "accuracy" if "accuracy" in res["models"][0] else "pearson"
    values = [r[metric] for r in res["models"]]
    table = cmp.get("metric") == "accuracy"
    fig = Figure(figsize=(9.5 if table else 5.0, 3.2), layout="tight")
    axes = fig.subplots(1, 2 if table else 1, squeeze=False)[0]
    ax = axes[0]
    colours = ["#1f77b4", "#ff7f0e"]
    if "intervals" in cmp:
        err = [[v - lo for v, (lo, _) in zip(values, cmp["intervals"])],
               [hi - v for v, (_, hi) in zip(values, cmp["intervals"])]]
        ax.bar(names, values, color=colours[: len(names)], yerr=err, capsize=8)
        kind = "exact" if cmp.get("test", "").startswith("McNemar") else "bootstrap"  # the interval its test gives
        ax.set_title(f"{metric}, {int(round(100 * cmp['confidence']))}% {kind} interval (n={res['n']:,})",
                     fontsize=10)
    else:
        ax.bar(names, values, color=colours[: len(names)])
        ax.set_title(f"{metric} (n={res['n']:,})", fontsize=10)
    for i, v in enumerate(values):
        ax.annotate(f"{v:.3f}", (i, v), textcoords="offset points", xytext=(14, 3), fontsize=9)
    lo = min(values + [lo for lo, _ in cmp.get("intervals", [])])
    ax.set_ylim(min(0.0, lo - 0.05), 1.0)  # bars from zero: an axis from 0.70 made a 2-point gap look like half
    ax.set_ylabel(metric)
    if table:
        cells = [[cmp["both_right"], cmp["only_right"][0]], [cmp["only_right"][1], cmp["both_wrong"]]]
        t = axes[1]
        t.imshow(cells, cmap="Blues")
        for i in range(2):
            for j in range(2):
                t.text(j, i, f"{cells[i][j]:,}", ha="center", va="center", fontsize=12,
                       color="white" if cells[i][j] > 0.6 * max(map(max, cells)) else "black")
        t.set_xticks([0, 1], [f"{names[1]} right", f"{names[1]} wrong"])
        t.set_yticks([0, 1], [f"{names[0]} right", f"{names[0]} wrong"])
        t.set_title(f"{cmp['test']}: p = {cmp['p_value']:.3g}", fontsize=10)
    return fig


def saliency_dataset_figure(res: dict):
    """Saliency over a dataset: each model's comprehensiveness, that of a random ranking and sufficiency, with
    bootstrap intervals; and how the two models' per-example rank agreement is spread."""
    from matplotlib.figure import Figure  # deferred: matplotlib: only when a figure is drawn

    fig = Figure(figsize=(10, 3.4), layout="tight")
    bars, hist = fig.subplots(1, 2)
    labels = {"comprehensiveness": "comprehensiveness", "random_comprehensiveness": "… of a random ranking",
              "sufficiency": "sufficiency"}
    rows = [{"x": label, "model": m, "v": res[key][k]["mean"], "ci": res[key][k]["interval"]}
            for key, label in labels.items() for k, m in enumerate(res["models"])]
    grouped_bars(rows, "x", "v", "model", "probability drop", ax=bars, interval="ci",
                 title=f"{res['method'].replace('_', ' ')}, {res['n']} examples, 95% intervals")
    agree = [e["agreement"] for e in res["examples"] if e["agreement"] is not None]
    hist.hist(agree, bins=20, range=(-1, 1), color="#888")
    if agree:
        hist.axvline(float(sum(agree) / len(agree)), color="#d62728", label="mean")
        hist.legend(fontsize=8)
    hist.set_xlabel("Spearman rank agreement of the two models' word scores")
    hist.set_ylabel("examples")
    hist.set_title(f"agreement per example ({len(agree)} defined)", fontsize=10)
    return fig


def plot_png(rows: list[dict], path, color: str = "gold", title: str = "") -> None:
    projection_figure(rows, color, title).savefig(path, dpi=110)


def projection_figure(rows: list[dict], color: str = "gold", title: str = ""):
    """Side-by-side and overlaid scatter plots (a Figure without pyplot: the app draws two at once, and
    pyplot's global state is not thread-safe)."""
    from matplotlib import colormaps  # deferred: matplotlib: only when a figure is drawn
    from matplotlib.figure import Figure  # deferred: matplotlib: only when a figure is drawn

    models = list(dict.fromkeys(r["model"] for r in rows))
    cats = sorted({r[color] for r in rows})
    cmap = colormaps["tab10"]
    fig = Figure(figsize=(15, 4.8), layout="tight")
    axes = fig.subplots(1, 3)
    for ax, model in zip(axes, models):
        for c, cat in enumerate(cats):
            pts = [(r["x"], r["y"]) for r in rows if r["model"] == model and r[color] == cat]
            if pts:
                ax.scatter(*zip(*pts), s=8, color=cmap(c % 10), label=cat or "no gold label", alpha=0.7)
        ax.set_title(f"{model} ({color})")
        ax.legend(fontsize=7, markerscale=2)
    for m, (model, marker) in enumerate(zip(models, ("o", "x"))):
        pts = [(r["x"], r["y"]) for r in rows if r["model"] == model]
        axes[2].scatter(*zip(*pts), s=8, marker=marker, color=cmap(m), label=model, alpha=0.6)
    axes[2].set_title("overlay (second aligned to first)")
    axes[2].legend(fontsize=7)
    if title:
        fig.suptitle(title)
    return fig


def similarity_figure(res: dict):
    """CKA heatmaps side by side (first × second, first × first, second × second), the best-matching layer of
    the second model marked in each row of the first panel."""
    import numpy as np
    from matplotlib.figure import Figure  # deferred: matplotlib: only when a figure is drawn

    a, b = res["models"]
    panels = [("cross", f"{a} (rows) × {b}"), ("a", f"{a} × {a}"), ("b", f"{b} × {b}")]
    import matplotlib

    fig = Figure(figsize=(13, 4.2), layout="constrained")
    axes = fig.subplots(1, 3)
    cmap = matplotlib.colormaps["magma"].copy()
    cmap.set_bad("#d9d9d9")  # no CKA (a layer constant over the inputs, the [CLS] embedding): grey, not blank
    for ax, (key, title) in zip(axes, panels):
        m = np.array(res[key]["cka"], dtype=float)
        im = ax.imshow(np.ma.masked_invalid(m), vmin=0, vmax=1, cmap=cmap, origin="lower")
        ax.set_title(f"linear CKA: {title}", fontsize=10)
        for axis, n in ((ax.xaxis, m.shape[1]), (ax.yaxis, m.shape[0])):  # layer 0 is the embedding output
            axis.set_ticks(range(n), ["emb", *map(str, range(1, n))], fontsize=9)
        ax.set_xlabel("layer")
        ax.set_ylabel("layer")
        if key == "cross":
            for i, j in enumerate(res["best_b_for_a"]):
                if j is not None:
                    ax.plot(j, i, marker="o", markersize=11, markerfacecolor="none", markeredgecolor="#00e5ff",
                            markeredgewidth=2.2)
    fig.colorbar(im, ax=axes.tolist(), shrink=0.8, label="linear CKA (grey: undefined)")
    return fig


def attention_figure(res: dict):
    """Both models' word-to-word attention at one layer, side by side (rows attend to columns), on one colour
    scale."""
    import numpy as np
    from matplotlib.figure import Figure  # deferred: matplotlib: only when a figure is drawn

    models = res["models"]
    size = max(len(m["units"]) for m in models)
    side = min(7.0, 2.5 + 0.28 * size)
    fig = Figure(figsize=(2 * side + 1, side), layout="constrained")
    axes = fig.subplots(1, len(models))
    head = "mean of the heads" if res["head"] is None else f"head {res['head']}"
    # one scale for both models, up to the larger map's largest weight: on a scale each, ALBERT's nearly uniform
    # attention (0-0.06) looked as intense as BERT's (0-0.45); on this one it shows as the flat map it is
    top = max((float(np.nanmax(np.array(m["map"], dtype=float))) for m in models if m["map"]), default=1.0)
    for ax, m in zip(np.atleast_1d(axes), models):
        weights = np.array(m["map"], dtype=float)
        im = ax.imshow(weights, vmin=0, vmax=max(top, 1e-6), cmap="Blues")
        ax.set_xticks(range(len(m["units"])), m["units"], rotation=90, fontsize=9)
        ax.set_yticks(range(len(m["units"])), m["units"], fontsize=9)
        ax.set_title(f"{m['model']}: layer {m['layer']}, {head}", fontsize=10)
        fig.colorbar(im, ax=ax, shrink=0.8, label="attention (row attends to column)")
    return fig


def locate_figure(res: dict):
    """Where the input's score falls among the dataset's, per model: the distribution of the dataset's
    probability of the input's label (its score, for regression) with the input's own as a line."""
    import numpy as np
    from matplotlib.figure import Figure  # deferred: matplotlib: only when a figure is drawn

    models = res["models"]
    fig = Figure(figsize=(4.2 * len(models), 3.2), layout="constrained")
    axes = np.atleast_1d(fig.subplots(1, len(models), sharey=True))
    for ax, m in zip(axes, models):
        regression = not isinstance(m["answer"], str)
        ax.hist(m["scores"], bins=20, range=None if regression else (0, 1), color="#93c5fd", edgecolor="white")
        ax.axvline(m["score"], color="#b91c1c", linewidth=2)
        what = "score" if regression else f"P({m['answer']})"
        ax.set_title(f"{m['model']}: the input's {what} {m['score']:.2f}, above {100 * m['share_below']:.0f}% "
                     f"of {res['n']:,}", fontsize=9)
        ax.set_xlabel(f"{what} over {res['dataset']}"[:60], fontsize=9)
    axes[0].set_ylabel("examples")
    return fig


def attention_stats_figure(res: dict):
    """Per model (rows) a layer × head heatmap of each statistic (columns): what the heads look at."""
    import numpy as np
    from matplotlib.figure import Figure  # deferred: matplotlib: only when a figure is drawn

    keys = [("entropy", "entropy (nats)"), ("cls", "share on [CLS]"), ("sep", "share on [SEP]"),
            ("punct", "share on punctuation"), ("neighbour_js", "change from the layer before (JS)")]
    fig = Figure(figsize=(16, 3.2 * len(res["models"])), layout="constrained")
    axes = np.atleast_2d(fig.subplots(len(res["models"]), len(keys)))
    for row, m in zip(axes, res["models"]):
        for ax, (key, title) in zip(row, keys):
            data = np.array(m[key])
            im = ax.imshow(data, cmap="viridis", origin="lower", aspect="auto",
                           vmin=0, vmax=None if key in ("entropy", "neighbour_js") else 1)
            ax.set_title(f"{m['model']}: {title}", fontsize=9)
            ax.set_xlabel("head")
            ax.set_xticks(range(data.shape[1]), [str(h) for h in range(data.shape[1])], fontsize=7)
            ax.set_ylabel("layer" if key != "neighbour_js" else "layer (from the one below)")
            ax.set_yticks(range(data.shape[0]), [str(i + (2 if key == "neighbour_js" else 1))
                                                 for i in range(data.shape[0])])
            fig.colorbar(im, ax=ax, shrink=0.8)
    return fig


def figure_of(res):
    """The figure of a capability's result (the command line's --png, the app's generated panel): the result's own
    `as_figure()` where its type has one (a plugin's), else the built-in figure of its type; None where it has
    none."""
    from ..declare import results as r  # deferred: plots stays importable without the results' imports

    if callable(getattr(type(res), "as_figure", None)):
        return res.as_figure()
    if isinstance(res, r.CounterfactualResult):
        return counterfactual_figure(res, res["models"])
    drawn = {r.SaliencyResult: saliency_figure, r.SaliencyDatasetResult: saliency_dataset_figure,
             r.SimilarityResult: similarity_figure, r.AttentionResult: attention_figure,
             r.AttentionStatsResult: attention_stats_figure, r.LocateResult: locate_figure,
             r.ConfusionResult: confusion_figure, r.CurvesResult: curves_figure}
    return next((draw(res) for kind, draw in drawn.items() if isinstance(res, kind)), None)


def export(res, out, colour: str = "gold") -> list:
    """A projection's files in the folder `out`: every point (projection.csv), its figure coloured by `colour`
    (projection.png) and its numbers (projection.json). Returns the paths written."""
    import json

    import pandas as pd  # deferred: the figures' callers need no pandas

    from ..declare.results import ProjectionResult

    if not isinstance(res, ProjectionResult):
        raise ValueError(f"export: a {type(res).__name__} writes no files")
    out.mkdir(parents=True, exist_ok=True)
    written = [out / "projection.csv", out / "projection.png", out / "projection.json"]
    pd.DataFrame(res["points"]).to_csv(written[0], index=False)
    plot_png(res["points"], written[1], colour, title=f"{res['dataset']} ({res['projection']})")
    summary = {k: v for k, v in res.to_dict().items() if k not in ("points", "texts")}
    written[2].write_text(json.dumps(summary, indent=2), encoding="utf-8")
    return written
