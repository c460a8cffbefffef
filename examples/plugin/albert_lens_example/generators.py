"""A counterfactual generator: the input's first word repeated `times` times, both models compared before and
after (does emphasis by repetition move either model?)."""
from __future__ import annotations

from app.core import extension as lens


def repeat_word(models, example: lens.Example, times: int) -> lens.CounterfactualResult:
    """The first word of the first text written `times` more times right after itself."""
    words = lens.split_words(example.texts[0])
    if not words:
        raise lens.InputError("text: repeat_word needs a word to repeat")
    first = words[0]
    text = example.texts[0]
    repeated = " ".join([first.text] * (times + 1))
    edited = lens.Example((text[:first.start] + repeated + text[first.end:], *example.texts[1:]))
    change = lens.compare(models, example, edited, [(first.text, repeated)], "repeat_word")
    return lens.CounterfactualResult("repeat_word", [m.name for m in models], [change.to_dict()])


REPEAT_WORD = lens.Part(repeat_word, options=(
    lens.Option("times", int, 2, "repeat_word: how many more times the first word is written", low=1, high=5),))
