"""LIT dataset wrappers over the core's readers (GLUE files, the shipped examples, `datasets` ids online)."""
from __future__ import annotations

from lit_nlp.api import dataset as lit_dataset
from lit_nlp.api import types as lit_types

from app.core.api import Dataset, Task

from .models import LABEL

ROW = "row"  # the example's row in its dataset, from 1, as the app's tables and the CLI number it


class LensDataset(lit_dataset.Dataset):
    """Examples as {field: text, ..., label: name or score, row: its row in the dataset}, spec'd like the task the
    models answer. `row` is the app's number for the example (LIT's own datapoint index counts from 0 in the
    order LIT shows, a slice's rows included): the table's "row" column is what Benchmark, the projection and
    the CLI call the same sentence."""

    def __init__(self, dataset: Dataset, task: Task):
        self._task = task
        self._name = dataset.name
        examples = []
        for number, ex in zip(dataset.row_numbers(), dataset.examples):
            if len(ex.texts) != len(task.fields):
                raise ValueError(f"dataset {dataset.name}: has {len(ex.texts)} text field(s), task {task.name} "
                                 f"needs {len(task.fields)}")
            row = dict(zip(task.fields, ex.texts))
            if ex.label is not None:
                row[LABEL] = ex.label
            row[ROW] = int(number)
            examples.append(row)
        self._last_row = max((row[ROW] for row in examples), default=1)
        super().__init__(examples=examples, description=f"{dataset.name} ({len(examples)} examples)")

    def spec(self) -> lit_types.Spec:
        spec: lit_types.Spec = {f: lit_types.TextSegment() for f in self._task.fields}
        if self._task.is_regression:
            spec[LABEL] = lit_types.Scalar(required=False)
        else:
            spec[LABEL] = lit_types.CategoryLabel(vocab=list(self._task.labels), required=False)
        spec[ROW] = lit_types.Scalar(min_val=1, max_val=self._last_row, step=1, required=False)
        return spec
