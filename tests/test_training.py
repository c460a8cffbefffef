"""The offline pair's training pieces (`app/core/techniques/training.py`) and its model cards
(`app/core/techniques/model_cards.py`).
The end-to-end `train-offline` run (seeded, resumable) is in test_offline.py."""
import json

import numpy as np
import pytest
import torch

from app.core.execution.inference import predict
from app.core.ground.data import Example, load_dataset
from app.core.models import offline
from app.core.techniques import model_cards
from app.core.techniques.training import TrainSettings, bucketed_batches, collate, detokenise, logits_for, prepare_texts

from .conftest import shared


@pytest.mark.parametrize("sst,plain", [
    ("it 's a charming , funny film .", "It's a charming, funny film."),
    ("i did n't like it -lrb- at all -rrb- !", "I didn't like it (at all)!"),
    ("`` wow '' , she said ; that 's 100 % true", '"wow", she said; that\'s 100% true'),
    ("  the $ 5 ticket was worth it  ", "The $5 ticket was worth it"),
])
def test_detokenise_writes_sst_sentences_as_people_type_them(sst, plain):
    assert detokenise(sst) == plain


def test_prepare_texts_rewrites_the_set_share_reproducibly():
    dev = load_dataset(shared("glue", "sst2", "dev.tsv")).examples[:400]
    texts, labels = prepare_texts(dev, TrainSettings(detok_share=0.5))
    again, _ = prepare_texts(dev, TrainSettings(detok_share=0.5))
    assert texts == again
    rewritten = sum(t != e.text for t, e in zip(texts, dev))
    assert 150 < rewritten < 250  # about half (a few sentences read the same either way)
    assert labels.tolist() == [1 if e.label == "positive" else 0 for e in dev]
    assert prepare_texts(dev, TrainSettings(detok_share=0.0))[0] == [e.text for e in dev]


def test_bucketed_batches_cover_every_example_once_with_less_padding_than_random():
    rng = np.random.default_rng(1)
    lengths = rng.integers(3, 64, size=5000)
    batches = bucketed_batches(lengths, 32, seed=7)
    flat = np.concatenate(batches)
    assert sorted(flat.tolist()) == list(range(5000)) and max(map(len, batches)) == 32
    padded = sum(len(b) * lengths[b].max() for b in batches)
    shuffled = rng.permutation(5000)
    random_padded = sum(32 * lengths[shuffled[i:i + 32]].max() for i in range(0, 5000, 32))
    assert padded < 0.75 * random_padded
    assert [b.tolist() for b in bucketed_batches(lengths, 32, seed=7)] == [b.tolist() for b in batches]
    assert [b.tolist() for b in bucketed_batches(lengths, 32, seed=8)] != [b.tolist() for b in batches]


def test_collate_pads_and_masks():
    enc = {"input_ids": [[101, 7, 102], [101, 102], [101, 5, 6, 102]]}
    batch = collate(enc, np.array([1, 2]))
    assert batch["input_ids"].tolist() == [[101, 102, 0, 0], [101, 5, 6, 102]]
    assert batch["attention_mask"].tolist() == [[1, 1, 0, 0], [1, 1, 1, 1]]
    assert batch["token_type_ids"].abs().sum() == 0


def test_logits_for_keeps_the_input_order(offline_pair):
    """Batches are sorted by length inside; rows come back in the caller's order, equal to one-at-a-time."""
    clf = offline_pair.models[0]
    texts = ["a gorgeous , witty , seductive movie .", "bad.", "the plot dragged on and on and never went anywhere"]
    enc = clf.tokenizer(texts)
    got = logits_for(clf.model, dict(enc), batch_size=2)
    with torch.no_grad():
        one = [clf.model(**clf.tokenizer(t, return_tensors="pt")).logits[0].numpy() for t in texts]
    np.testing.assert_allclose(got, np.stack(one), atol=1e-4)


def test_model_cards_export_what_loads_back_and_state_measured_accuracy(offline_pair, tmp_path, monkeypatch):
    """write_offline_cards exports fp16 weights (the BERT's word embeddings left to the installed MiniLM) and a
    card per model; materialised again they predict as the models did, and the card's out-of-domain accuracy
    is the one the core's predict measures."""
    monkeypatch.setattr(model_cards, "IMDB_SAMPLE", tmp_path / "absent.tsv")  # keeps the test short
    bert, albert = (m.model for m in offline_pair.models)
    results = {"final": {"bert_dev_accuracy": 0.5, "albert_dev_accuracy": 0.25}, "albert_init": {"layer": 2},
               "bert": {"history": [{"epoch": 1}]}, "albert": {"history": []}}
    summary = model_cards.write_offline_cards(bert, albert, results, TrainSettings(train_limit=100), tmp_path,
                                              train_path="train.tsv", dev_path="dev.tsv")
    plain = load_dataset(model_cards.PLAIN_SENTIMENT, task="sst2").examples
    for name, clf in zip(("bert-sst2", "albert-sst2"), offline_pair.models):
        card = (tmp_path / name / "README.md").read_text()
        acc = float(np.mean([p == e.label for p, e in zip(predict(clf, plain).predicted, plain)]))
        assert summary[name]["out_of_domain"]["plain_reviews_and_tweets"]["accuracy"] == pytest.approx(acc)
        assert f"| {acc:.4f} |" in card and "training data | GLUE SST-2 train, 100 sentences" in card
        assert f"| parameters (unique) | {summary[name]['parameters']:,} |" in card
    assert "| 0.5000 |" in (tmp_path / "bert-sst2" / "README.md").read_text()
    assert "shared layer from MiniLM layer 2" in (tmp_path / "albert-sst2" / "README.md").read_text()
    assert json.loads((tmp_path / "summary.json").read_text())["albert_over_bert_parameters"] < 0.4

    from app.core.models.loading import load
    from app.core.models.registry import TASKS, ModelSpec

    monkeypatch.setattr(offline, "OFFLINE_ASSETS", tmp_path)
    sentences = [Example((e.text,)) for e in plain]
    for name, clf in zip(("bert-sst2", "albert-sst2"), offline_pair.models):
        config = json.loads((tmp_path / name / "config.json").read_text())
        assert config["albert_lens_frozen_from_minilm"] == (offline.FROZEN_FROM_MINILM if name == "bert-sst2" else {})
        back = load(ModelSpec(name, str(offline.materialise(name, root=tmp_path / "full")), clf.family,
                              TASKS["sst2"]))
        np.testing.assert_allclose(predict(back, sentences).probs, predict(clf, sentences).probs, atol=1e-6)


def test_a_pair_task_trains_on_both_texts_as_inference_reads_them(offline_pair):
    """RTE examples stay (premise, hypothesis) pairs, labels index the task's order, nothing is rewritten, and
    the training tokens (token types included) are the ones the core feeds the model at inference."""
    from app.core.execution.inference import tokenize
    from app.core.models.registry import TASKS
    from app.core.techniques.training import encode

    rte = TASKS["rte"]
    dev = load_dataset(shared("glue", "rte", "dev.tsv"), task="rte").examples[:40]
    texts, labels = prepare_texts(dev, TrainSettings(detok_share=1.0), rte)
    assert texts == [e.texts for e in dev]
    assert labels.tolist() == [rte.labels.index(e.label) for e in dev] and 0 < labels.mean() < 1
    clf = offline_pair.models[0]
    enc = encode(clf.tokenizer, texts, 128)
    core = tokenize(clf, dev, max_length=128)
    for name in ("input_ids", "token_type_ids"):
        assert enc[name] == [row.tolist() for row in core[name]], name
    assert any(1 in row for row in enc["token_type_ids"])  # the hypothesis is segment 1
    batch = collate(enc, np.array([3, 0]))
    assert batch["token_type_ids"][0, : len(enc["input_ids"][3])].tolist() == enc["token_type_ids"][3]
    assert batch["token_type_ids"][0, len(enc["input_ids"][3]):].abs().sum() == 0  # padding stays segment 0


def test_training_refuses_data_that_does_not_fit_the_task():
    from app.core.ground.errors import InputError
    from app.core.models.registry import TASKS
    from app.core.techniques.training import training_task

    with pytest.raises(InputError, match="task: 'stsb' is a regression task"):
        training_task("stsb")
    with pytest.raises(InputError, match="task: unknown task 'nope'"):
        training_task("nope")
    assert training_task("RTE") is TASKS["rte"]
    assert training_task("SST-2") is TASKS["sst2"]  # spelt as --pair takes it
    single = [Example(("a sentence",), "entailment")]
    with pytest.raises(InputError, match=r"train: example 1 has 1 text\(s\); rte needs 2 \(premise, hypothesis\)"):
        prepare_texts(single, TrainSettings(), TASKS["rte"])
    wrong = [Example(("a", "b"), "entailment"), Example(("c", "d"), "neutral")]
    with pytest.raises(InputError, match="train: example 2 has label 'neutral'; rte labels are"):
        prepare_texts(wrong, TrainSettings(), TASKS["rte"])


def test_epochs_left_out_fit_the_training_set_size():
    """SST-2's 67,349 sentences keep the shipped recipe's 1.5 / 2 epochs; RTE's 2,490 pairs (78 batches) get 4 / 6,
    what it needed to move off chance (1.5 epochs would be 117 steps); given epochs are kept."""
    from app.core.techniques.training import resolve_epochs

    sst2 = resolve_epochs(TrainSettings(), 67349)
    assert (sst2.bert_epochs, sst2.albert_epochs) == (1.5, 2.0)
    rte = resolve_epochs(TrainSettings(), 2490)
    assert (rte.bert_epochs, rte.albert_epochs) == (4.0, 6.0)
    given = resolve_epochs(TrainSettings(bert_epochs=1.0, albert_epochs=0.5), 2490)
    assert (given.bert_epochs, given.albert_epochs) == (1.0, 0.5)


def test_the_final_dev_accuracy_is_the_last_epochs_own_not_a_second_prediction(tmp_path, monkeypatch):
    """Training ends with dev evaluated on its last step, and the final results take those numbers instead of
    predicting dev twice more. (A resumed run that trains nothing predicts dev itself and must find the same:
    test_offline's seeded, resumable run checks that.)"""
    from app.core.techniques import training

    calls, real = [], training.accuracy
    monkeypatch.setattr(training, "accuracy", lambda model, enc, labels: calls.append(type(model).__name__)
                        or real(model, enc, labels))
    dev = tmp_path / "dev.tsv"
    dev.write_text("".join(shared("glue", "sst2", "dev.tsv").read_text().splitlines(keepends=True)[:25]))
    res = training.train_offline(shared("glue", "sst2", "train.tsv"), tmp_path / "run", dev_path=dev,
                                 settings=TrainSettings(train_limit=32, max_len=16, batch_size=16, bert_epochs=1,
                                                        albert_epochs=2, layer_probe=8))
    # one evaluation per epoch, none after: BERT's one epoch, ALBERT's two
    assert calls == ["BertForSequenceClassification"] + ["AlbertForSequenceClassification"] * 2, calls
    assert res["final"]["bert_dev_accuracy"] == res["bert"]["history"][-1]["dev_accuracy"]
    assert res["final"]["albert_dev_accuracy"] == res["albert"]["history"][-1]["dev_accuracy"]
    assert res["final"]["dev_n"] == 24
