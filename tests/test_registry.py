import pytest

from app.core.ground.errors import InputError
from app.core.models.registry import PRESETS, get_pair
from app.core.techniques import attacks

TASKS = ["sst2", "rte", "mrpc", "qqp", "cola", "wnli", "snli", "mnli", "qnli", "stsb", "ag_news", "imdb",
         "rotten_tomatoes", "yelp_polarity"]


def test_every_textattack_task_has_a_preset_with_exact_hub_ids():
    ids = {t: tuple(m.source for m in PRESETS[t].models) for t in TASKS}
    assert ids["sst2"] == ("textattack/bert-base-uncased-SST-2", "textattack/albert-base-v2-SST-2")
    assert ids["stsb"] == ("textattack/bert-base-uncased-STS-B", "textattack/albert-base-v2-STS-B")
    assert ids["cola"] == ("textattack/bert-base-uncased-CoLA", "textattack/albert-base-v2-CoLA")
    assert ids["ag_news"] == ("textattack/bert-base-uncased-ag-news", "textattack/albert-base-v2-ag-news")
    assert ids["rotten_tomatoes"][0] == "textattack/bert-base-uncased-rotten-tomatoes"
    assert ids["yelp_polarity"][1] == "textattack/albert-base-v2-yelp-polarity"
    assert ids["snli"] == ("textattack/bert-base-uncased-snli", "textattack/albert-base-v2-snli")
    for t in TASKS:
        assert PRESETS[t].task.max_length == 128


def test_textattack_ids_match_textattacks_own_zoo():
    """Where TextAttack lists the model, our id is the one it loads."""
    attacks._textattack()  # on transformers 5, through its one shim
    from textattack.model_args import HUGGINGFACE_MODELS

    zoo = set(HUGGINGFACE_MODELS.values())
    for t in TASKS:
        bert, albert = PRESETS[t].models
        assert bert.source in zoo, bert.source
        if t not in {"mrpc", "mnli", "qnli"}:
            assert albert.source in zoo, albert.source


@pytest.mark.parametrize("task,labels", [
    ("sst2", ("negative", "positive")),
    ("rte", ("entailment", "not_entailment")),
    ("qqp", ("not_duplicate", "duplicate")),
    ("ag_news", ("World", "Sports", "Business", "Sci/Tech")),
])
def test_label_order_matches_the_datasets(task, labels):
    for m in PRESETS[task].models:
        assert m.output_labels == labels


def test_bert_nli_models_are_remapped_albert_not():
    """TextAttack trained its BERT SNLI/MNLI with dataset labels remapped {0: 1, 1: 2, 2: 0}."""
    attacks._textattack()
    from textattack.dataset_args import HUGGINGFACE_DATASET_BY_MODEL

    remap = HUGGINGFACE_DATASET_BY_MODEL["bert-base-uncased-snli"][4]
    for task in ("snli", "mnli"):
        bert, albert = PRESETS[task].models
        assert albert.output_labels == ("entailment", "neutral", "contradiction")
        for ds_idx, model_idx in remap.items():
            assert bert.output_labels[model_idx] == albert.output_labels[ds_idx]


def test_pair_tasks_and_regression():
    assert PRESETS["rte"].task.fields == ("premise", "hypothesis")
    assert PRESETS["sst2"].task.fields == ("sentence",)
    assert PRESETS["stsb"].task.is_regression and PRESETS["stsb"].task.two_texts
    assert not PRESETS["mrpc"].task.is_regression


def test_unknown_pair_names_the_choices():
    with pytest.raises(InputError, match="unknown preset 'nope'.*offline"):
        get_pair("nope")
    assert get_pair("SST-2").name == "sst2"
