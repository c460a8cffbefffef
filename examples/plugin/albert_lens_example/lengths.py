"""A capability over a dataset: each model's accuracy on short, medium and long inputs (by words), with the paired
test of the gap in each, as its own result type with its own text and figure."""
from __future__ import annotations

from app.core import extension as lens

BUCKETS = ("short", "medium", "long")


@lens.result
class LengthsResult(lens.Result):
    """Accuracy by input length: one row per bucket, each model's accuracy and the paired test of the gap."""

    dataset: str
    n: int
    models: list[str]
    short: int  # an input of at most this many words is short
    long: int  # of more than this many, long; medium between
    buckets: list[dict]  # {bucket, words, n, accuracy: [per model], comparison: paired test or None}

    def as_text(self, show: int = 5) -> str:
        a, b = self.models
        lines = [f"accuracy by length · {self.dataset} ({self.n} labelled examples)",
                 f"{'bucket':<8} {'words':<9} {'n':>5} {a:>9} {b:>9} {'gap':>8}  p (McNemar)"]
        for row in self.buckets:
            acc = [f"{x:.1%}" if x is not None else "-" for x in row["accuracy"]]
            cmp = row["comparison"]
            gap = f"{cmp['difference']:+.1%}" if cmp else "-"
            p = f"{cmp['p_value']:.3g}" if cmp else "no examples"
            lines.append(f"{row['bucket']:<8} {row['words']:<9} {row['n']:>5} {acc[0]:>9} {acc[1]:>9} {gap:>8}  {p}")
        return "\n".join(lines)

    def as_figure(self):
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(6, 3.4))
        width = 0.38
        for k, model in enumerate(self.models):
            xs = [i + (k - 0.5) * width for i in range(len(self.buckets))]
            ys = [r["accuracy"][k] or 0.0 for r in self.buckets]
            lows = [max(0.0, y - (r["comparison"]["intervals"][k][0] if r["comparison"] else y))
                    for y, r in zip(ys, self.buckets)]
            highs = [max(0.0, (r["comparison"]["intervals"][k][1] if r["comparison"] else y) - y)
                     for y, r in zip(ys, self.buckets)]
            ax.bar(xs, ys, width, yerr=[lows, highs], capsize=3, label=model)
        for i, r in enumerate(self.buckets):  # the paired test of the gap, above each bucket
            said = f"p = {r['comparison']['p_value']:.2g}" if r["comparison"] else "no inputs"
            ax.text(i, 1.02, said, ha="center", va="bottom", fontsize=8)
        ax.set_xticks(range(len(self.buckets)),
                      [f"{r['bucket']}\n{r['words']} words\nn={r['n']}" for r in self.buckets])
        ax.set_ylim(0, 1.12)
        ax.set_ylabel("accuracy (95% interval)")
        ax.set_title(f"Accuracy by input length · {self.dataset} (p: McNemar's test of the gap)", fontsize=9)
        ax.legend(loc="lower right", fontsize=8)
        fig.tight_layout()
        return fig


def run_lengths(pair, *, short: int, long: int, dataset=None, limit=None, progress=None,
                visitor: bool = True) -> LengthsResult:
    """Both models on the dataset's labelled examples, bucketed by words: short (<= `short`), long (> `long`),
    medium between; per bucket each model's accuracy and McNemar's test of the gap."""
    if long <= short:
        raise lens.InputError(f"long: {long} words must be above short ({short})")
    ds = lens.dataset_of(pair, dataset, limit, default=1000 if visitor else None, visitor=visitor)
    labelled = [ex for ex in ds.examples if ex.label is not None]
    if not labelled or pair.task.is_regression:
        raise lens.InputError(f"dataset: {ds.name} has no labelled examples of a classification task")
    preds = lens.predict_both(pair, labelled, progress=progress)
    answers = [p.predicted for p in preds]
    gold = [ex.label for ex in labelled]
    words = [sum(len(lens.split_words(t)) for t in ex.texts) for ex in labelled]
    spans = {"short": f"1-{short}", "medium": f"{short + 1}-{long}", "long": f">{long}"}
    rows = []
    for bucket in BUCKETS:
        idx = [i for i, w in enumerate(words)
               if (bucket == "short" and w <= short) or (bucket == "long" and w > long)
               or (bucket == "medium" and short < w <= long)]
        if not idx:
            rows.append({"bucket": bucket, "words": spans[bucket], "n": 0, "accuracy": [None, None],
                         "comparison": None})
            continue
        cmp = lens.compare_accuracy([gold[i] for i in idx], *([a[i] for i in idx] for a in answers))
        rows.append({"bucket": bucket, "words": spans[bucket], "n": len(idx), "accuracy": cmp["values"],
                     "comparison": cmp})
    return LengthsResult(dataset=ds.name, n=len(labelled), models=[m.name for m in pair.models], short=short,
                         long=long, buckets=rows)


LENGTHS = lens.Capability(
    "lengths", "Each model's accuracy on short, medium and long inputs (by words), with the paired test of the gap "
    "in each length bucket.", runner=run_lengths, result=LengthsResult, inputs="dataset", options=(
        lens.Option("short", int, 10, "an input of at most this many words is short", low=1, high=1000),
        lens.Option("long", int, 25, "an input of more than this many words is long", low=2, high=1000)))
