import pytest

from app.core.execution.inference import encode_one
from app.core.ground.alignment import split_words
from app.core.ground.data import Example

TRICKY = [
    "Café crème, naïve résumé — déjà vu!",
    "e\u0301te\u0301 (decomposed accents)",
    "I ❤️ it 👩‍💻👍🏽 soooo much!!! :-)",
    "Don't stop... it's 100% <b>great</b> & fun?!",
    "日本語のテキストも大丈夫",
    "مرحبا بالعالم hello",
    "tab\tseparated\nnew line",
]


def words_of(text):
    return [w.text for w in split_words(text)]


def test_words_cover_every_visible_character():
    for text in TRICKY:
        covered = "".join(words_of(text))
        assert covered == "".join(text.split())


@pytest.mark.parametrize("which", [0, 1])
@pytest.mark.parametrize("text", TRICKY)
def test_alignment_keeps_every_word(tiny_pair, which, text):
    clf = tiny_pair.models[which]
    _, al = encode_one(clf, Example((text,)))
    assert [w.text for w in al.words] == words_of(text)
    assert not al.cut
    assert not al.unseen, [al.words[i].text for i in al.unseen]
    assert all(al.word_tokens)
    # token -> word and word -> token maps agree, and only special tokens are on no word: a word's score is
    # the sum of all its pieces, so the words' scores add up to the tokens'
    seq = encode_one(clf, Example((text,)))[0].sequence_ids(0)  # None for [CLS], [SEP]
    for t, w in enumerate(al.token_word):
        assert (w is None) == (seq[t] is None), (t, w)
        if w is not None:
            assert t in al.word_tokens[w]


def test_a_lone_sentencepiece_space_belongs_to_the_next_word(tiny_pair):
    """ALBERT cuts " cities" as "▁" "c" "it" "ies" (this small vocabulary has no "▁c"): the "▁" covers only the
    space, and its share of an attribution goes to "cities"."""
    clf = tiny_pair.models[1]
    enc, al = encode_one(clf, Example(("about cities.",)))
    tokens = clf.tokenizer.convert_ids_to_tokens(enc["input_ids"][0])
    assert tokens[1:8] == ["▁ab", "out", "▁", "c", "it", "ies", "."]
    assert [tokens[t] for t in al.word_tokens[1]] == ["▁", "c", "it", "ies"]


def test_bert_and_albert_give_the_same_words(tiny_pair):
    text = "A deeply unsatisfying, overlong film; Mr. Smith's best? No."
    a = encode_one(tiny_pair.models[0], Example((text,)))[1]
    b = encode_one(tiny_pair.models[1], Example((text,)))[1]
    assert [w.text for w in a.words] == [w.text for w in b.words]
    assert all(a.word_tokens) and all(b.word_tokens)


@pytest.mark.parametrize("which", [0, 1])
def test_5000_words_are_cut_with_a_stated_cut(tiny_pair, which):
    clf = tiny_pair.models[which]
    text = " ".join(f"w{i}" for i in range(5000))
    enc, al = encode_one(clf, Example((text,)))
    assert len(al.words) == 5000
    assert enc["input_ids"].shape[1] == 128
    assert al.truncated and al.cut == list(range(al.cut[0], 5000))
    seen = 5000 - len(al.cut)
    assert 20 < seen < 127
    assert f"saw {seen} of 5000 words" in al.cut_message(128)


def test_sentence_pairs_align_per_field(tiny_nli_pair):
    for clf in tiny_nli_pair.models:
        _, al = encode_one(clf, Example(("The cat sat.", "A cat is sitting!")))
        assert [(w.field, w.text) for w in al.words] == [
            (0, "The"), (0, "cat"), (0, "sat"), (0, "."), (1, "A"), (1, "cat"), (1, "is"), (1, "sitting"), (1, "!")]
        assert all(al.word_tokens)


def test_pair_truncation_reports_cut_words(tiny_nli_pair):
    clf = tiny_nli_pair.models[0]
    long = " ".join(["premise"] * 300)
    _, al = encode_one(clf, Example((long, "short hypothesis")))
    assert al.cut and all(al.words[i].field == 0 for i in al.cut)
    assert all(al.word_tokens[i] for i, w in enumerate(al.words) if w.field == 1)


def test_window_keeps_a_margin_of_words_past_the_cut():
    """Perturbing methods edit the window, not a 100,000-character text: each cut field keeps `margin` words
    past what the model read; fields the model read whole, and inputs without a cut, stay as they are."""
    from app.core.ground.alignment import Alignment

    first, second = "keep this whole", " ".join(f"w{i}" for i in range(50))
    words = split_words(first) + split_words(second, 1)
    seen = 3 + 10
    al = Alignment(words, [], [[k] for k in range(seen)] + [[]] * 40, cut=list(range(seen, len(words))))
    assert al.seen == list(range(seen))
    assert al.window((first, second), margin=5) == (first, " ".join(f"w{i}" for i in range(15)))
    assert al.window((first, second), margin=40) == (first, second)  # the margin reaches the end
    uncut = Alignment(words, [], [[k] for k in range(len(words))])
    assert uncut.window((first, second), margin=5) == (first, second)
