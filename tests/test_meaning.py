"""The WordNet edit filter (app/core/techniques/meaning.py) against 120 swaps judged by hand (tests/data/)."""
from pathlib import Path

import numpy as np
import pytest

from app.core.techniques import meaning

JUDGED = Path(__file__).parent / "data" / "wordnet_edits_judged.tsv"


def _judged() -> list[list[str]]:
    lines = [line for line in JUDGED.read_text(encoding="utf-8").splitlines() if not line.startswith("#")]
    return [line.split("\t") for line in lines[1:]]


@pytest.fixture(scope="module")
def checked():
    from app.core.ground import runtime

    runtime.prepare_nltk()
    rows = _judged()
    res = meaning.validity([(r[4],) for r in rows], [(r[5],) for r in rows], [[(r[1], r[2])] for r in rows])
    return rows, res


def test_the_filter_keeps_more_valid_edits_than_it_drops(checked):
    """Against the hand judgments: of the edits the filter keeps, at least 45% are valid (31% of all edits are),
    and it keeps at least 60% of the valid ones. The figures it gives are the ones benchmarks/README.md quotes."""
    rows, res = checked
    truth = np.asarray([r[3] == "1" for r in rows])
    keep = np.asarray([r["valid"] for r in res])
    assert len(rows) >= 100 and truth.mean() == pytest.approx(37 / 120)
    precision, recall = truth[keep].mean(), keep[truth].mean()
    assert precision >= 0.45 and recall >= 0.6, (precision, recall, keep.sum())
    assert precision > truth.mean() + 0.1  # better than taking every edit


def test_each_check_catches_what_it_names(checked):
    rows, res = checked
    by_edit = {(r[1], r[2]): v for r, v in zip(rows, res)}
    assert by_edit[("music", "medicine")]["usual_sense"] is False  # a rare sense of the word
    assert by_edit[("film", "movie")]["usual_sense"] is True and by_edit[("film", "movie")]["valid"]
    assert by_edit[("humor", "humour")]["valid"]
    assert meaning.part_of_speech_kept("it is a fine film .", "it is a fine finely .") is False
    assert meaning.part_of_speech_kept("it is a fine film .", "it is a fine movie .") is True
    assert meaning.part_of_speech_kept("same text", "same text") is None


def test_the_cosine_is_the_minilm_sentence_encoders():
    """Our MiniLM vectors against sentence-transformers' own encoding of the same shipped model."""
    from sentence_transformers import SentenceTransformer

    from app.core.models.offline import minilm_dir

    texts = ["a gorgeous , witty , seductive movie .", "a gorgeous , witty , seductive moving picture ."]
    ours = meaning.embed(texts)
    st = SentenceTransformer(str(minilm_dir()), device="cpu").encode(texts, normalize_embeddings=True)
    np.testing.assert_allclose(ours, st, atol=1e-5)
    assert float(ours[0] @ ours[1]) == pytest.approx(float(st[0] @ st[1]), abs=1e-5)


def test_sentence_vectors_come_back_in_order_each_text_encoded_once_and_as_alone():
    """Repeated texts are encoded once and texts of every length batched together by length: each vector is the
    one its text gets encoded alone, in the order asked."""
    import numpy as np

    texts = ["a fine film", "an awful , long , boring and pointless film about nothing much", "a fine film", "ok"]
    tok, model, _ = meaning._encoder()
    seen = []
    real = model.forward
    model.forward = lambda **kw: seen.append(kw["input_ids"].shape[0]) or real(**kw)
    try:
        vecs = meaning.embed(texts, batch_size=2)
    finally:
        del model.forward
    assert sum(seen) == 3  # three distinct texts
    alone = np.concatenate([meaning.embed([t]) for t in texts])
    assert np.allclose(vecs, alone, atol=1e-5) and np.allclose(vecs[0], vecs[2])
    assert meaning.embed([]).shape == (0, 384)
