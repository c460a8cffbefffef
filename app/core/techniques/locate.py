"""Where is my sentence: one input placed in a dataset, for each model. A researcher reading one example in LIT
sees it among the dataset's points and score distributions; here, for each model: the dataset's examples nearest
to it in that model's own embedding space, its place in the dataset's projection (the mean of those neighbours'
places, as UMAP starts a new point) and where its score falls among the dataset's scores."""
from __future__ import annotations

import numpy as np

from ..declare.results import LocateResult
from ..execution.engine import Engine
from ..execution.inference import from_logits
from ..execution.inputs import dataset_of, example_from
from ..execution.pair import Pair
from .projection import projected, projection_result, vectors_batch


def share_below(values: np.ndarray, x: float) -> float:
    """The share of `values` below `x`, ties counted half (a percentile rank that is 0.5 for the median)."""
    values = np.asarray(values, dtype=float)
    if not len(values):
        return float("nan")
    return float(((values < x).sum() + 0.5 * (values == x).sum()) / len(values))


def nearest(vectors: np.ndarray, vector: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The `k` rows of `vectors` nearest to `vector` by cosine, nearest first, and their cosines."""
    a = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    b = vector / max(float(np.linalg.norm(vector)), 1e-12)
    cos = a @ b
    order = np.argsort(-cos, kind="stable")[: max(1, min(k, len(cos)))]
    return order, cos[order]


def run_locate(pair: Pair, text: str | None = None, text2: str | None = None, *, projection: str, layer: int,
               pooling: str, k: int, dataset: str | None = None, limit: int | str | None = None, progress=None,
               engine: Engine | None = None, visitor: bool = True) -> LocateResult:
    """The input among the dataset's first `limit` examples, for each model: its `k` nearest examples (cosine,
    at `layer` and `pooling`), its place in the dataset's projection (`projection`, as the Projection tab draws it)
    and the share of the dataset's examples the model gives a lower probability of the input's label (a lower
    score, for regression)."""
    example = example_from(pair, text, text2)
    ds = dataset_of(pair, dataset, limit, default=500, visitor=visitor)
    heads = pair.heads
    arrays, preds, proj = projected(pair, ds, projection=projection, layer=layer, pooling=pooling, progress=progress,
                                    engine=engine)
    mine = (engine or Engine()).run(pair, vectors_batch, [example], params={"layer": layer, "pooling": pooling})
    rows, located = ds.row_numbers(), []
    for m, (head, pred) in enumerate(zip(heads, preds)):
        own = from_logits(head, mine[m])
        if own.labels is None:  # regression: the score itself, among the dataset's scores
            answer, score, scores = float(own.scores[0]), float(own.scores[0]), pred.scores
        else:
            c = int(own.probs[0].argmax())
            answer, score, scores = own.labels[c], float(own.probs[0, c]), pred.probs[:, c]
        order, cos = nearest(np.asarray(arrays[2 + m]), np.asarray(mine[2 + m])[0], k)
        answers = pred.predicted
        located.append({
            "model": head.name, "answer": answer, "score": score, "share_below": share_below(scores, score),
            "scores": [float(s) for s in scores],
            "neighbours": [{"index": int(i), "row": rows[i], "text": " / ".join(ds.examples[i].texts),
                            "gold": "" if ds.examples[i].label is None else str(ds.examples[i].label),
                            "prediction": answers[i], "cosine": float(c)} for i, c in zip(order, cos)],
            "position": [float(v) for v in proj.coords[m][order].mean(0)]})
    return LocateResult(input=list(example.texts), dataset=ds.name, n=len(ds), k=len(located[0]["neighbours"]),
                        models=located, projection=projection_result(heads, ds, proj, preds).to_dict())
