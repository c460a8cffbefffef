"""LIT dataset wrappers over the core's readers (GLUE files, the shipped examples, `datasets` ids online)."""
from __future__ import annotations

from lit_nlp.api import dataset as lit_dataset
from lit_nlp.api import types as lit_types

from app.core.api import Dataset, Task

from .models import LABEL


class LensDataset(lit_dataset.Dataset):
    """Examples as {field: text, ..., label: name or score}, spec'd like the task the models answer."""

    def __init__(self, dataset: Dataset, task: Task):
        self._task = task
        self._name = dataset.name
        examples = []
        for ex in dataset.examples:
            if len(ex.texts) != len(task.fields):
                raise ValueError(f"dataset {dataset.name}: has {len(ex.texts)} text field(s), task {task.name} "
                                 f"needs {len(task.fields)}")
            row = dict(zip(task.fields, ex.texts))
            if ex.label is not None:
                row[LABEL] = ex.label
            examples.append(row)
        super().__init__(examples=examples, description=f"{dataset.name} ({len(examples)} examples)")

    def spec(self) -> lit_types.Spec:
        spec: lit_types.Spec = {f: lit_types.TextSegment() for f in self._task.fields}
        if self._task.is_regression:
            spec[LABEL] = lit_types.Scalar(required=False)
        else:
            spec[LABEL] = lit_types.CategoryLabel(vocab=list(self._task.labels), required=False)
        return spec
