"""A saliency method: each word scores its length to the power `power` (a toy that shows how a method declares an
option of its own)."""
from __future__ import annotations

from app.core import extension as lens


class WordLength(lens.Method):
    """Each word scores its length in characters to the power `power` (a toy: no model is asked)."""

    name = "word_length"  # the entry point's name too
    label = "word length"  # its name for people: menus, tables, LIT's interpreter
    signed = False  # a magnitude: drawn in one colour's shades
    options = (lens.Option("power", int, 1, "word length: each word scores its length to this power", low=1,
                           high=3),)

    def __init__(self, clf, power: int = 1, output: str = "prob"):
        super().__init__(clf, output)
        self.power = power

    def _attribute(self, example, enc, al, tgt, ctx=None):
        return self._result(al, tgt, [float(len(w.text) ** self.power) for w in al.words])
