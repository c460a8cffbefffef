"""Words, not word pieces: map each model's tokens back to the same words of the input.

BERT's WordPiece and ALBERT's SentencePiece cut text differently; comparing saliency or edits across the two
only makes sense per word. Words are found once on the raw text (so both models share them), tokens are placed
on words through the fast tokenizer's character offsets, and words the model never saw because the input was
cut at `max_length` are reported, not silently dropped.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import regex

# A word: letters/digits/marks (with inner apostrophes), or a run of other visible symbols (punctuation, emoji
# with their joiners and modifiers). Every non-space character of the input belongs to exactly one word.
WORD = regex.compile(
    r"[\p{L}\p{N}\p{M}_]+(?:['’][\p{L}\p{N}\p{M}_]+)*|[^\s\p{L}\p{N}\p{M}_][^\s\p{L}\p{N}_]*", regex.V1
)


@dataclass(frozen=True)
class Word:
    text: str
    field: int  # which input text (0, or 1 for the second of a pair)
    start: int  # character offsets into that text
    end: int


def split_words(text: str, field: int = 0) -> list[Word]:
    return [Word(m.group(), field, m.start(), m.end()) for m in WORD.finditer(text)]


@dataclass
class Alignment:
    words: list[Word]
    token_word: list[int | None]  # per token: index into `words`, None for special tokens
    word_tokens: list[list[int]]  # per word: the token positions that cover it
    cut: list[int] = field(default_factory=list)  # words beyond the model's max length
    unseen: list[int] = field(default_factory=list)  # words the tokenizer dropped (control characters, ...)

    @property
    def truncated(self) -> bool:
        return bool(self.cut)

    def cut_message(self, max_length: int) -> str:
        if not self.cut:
            return ""
        seen = len(self.words) - len(self.cut)
        return (f"input cut at {max_length} tokens: the model saw {seen} of {len(self.words)} words; "
                f"the last {len(self.cut)} have no score")

    @property
    def seen(self) -> list[int]:
        """The words the model read (they have tokens): the only ones whose removal or swap can change it."""
        return [i for i, toks in enumerate(self.word_tokens) if toks]

    def window(self, texts: tuple[str, ...], margin: int) -> tuple[str, ...]:
        """`texts` without the words far past the cut: each cut field keeps `margin` words beyond what the model
        read. Editing read words then gives the model the same input as editing the whole text would, as long
        as the edit removes at most `margin` tokens per field (each word is at least one token; the margin
        words refill the window), and a 100,000-character input costs each perturbed copy ~2 windows, not the
        whole text (occlusion of every word of such a text held tens of GB of token ids)."""
        if not self.cut:
            return tuple(texts)
        out = list(texts)
        for f, text in enumerate(texts):
            cut = [i for i in self.cut if self.words[i].field == f]
            if not cut:
                continue
            field_words = [i for i, w in enumerate(self.words) if w.field == f]
            last = min(field_words.index(cut[0]) + margin, len(field_words)) - 1
            if last >= 0 and field_words[last] != field_words[-1]:
                out[f] = text[: self.words[field_words[last]].end]
        return tuple(out)

    def pool(self, token_scores, reduce: str = "sum") -> list[float]:
        """Per-word score from per-token scores (sum for attributions, max for norms)."""
        out = []
        for toks in self.word_tokens:
            vals = [float(token_scores[t]) for t in toks]
            if not vals:
                out.append(0.0)
            elif reduce == "sum":
                out.append(sum(vals))
            elif reduce == "max":
                out.append(max(vals, key=abs))
            else:
                out.append(sum(vals) / len(vals))
        return out


def align(texts: tuple[str, ...] | list[str], offsets, sequence_ids, at_limit: bool = True) -> Alignment:
    """`offsets` and `sequence_ids` come from one fast-tokenizer encoding of `texts` (one or two fields);
    `at_limit` says the encoding filled the model's max length, so trailing words without tokens were cut."""
    words: list[Word] = []
    starts: list[int] = []
    for f, text in enumerate(texts):
        starts.append(len(words))
        words.extend(split_words(text, f))
    starts.append(len(words))
    word_tokens: list[list[int]] = [[] for _ in words]
    token_word: list[int | None] = []
    last_end = [-1] * len(texts)
    for t, ((s, e), seq) in enumerate(zip(offsets, sequence_ids)):
        if seq is None or e <= s:
            token_word.append(None)
            continue
        best, best_overlap = None, 0
        lo, hi = starts[seq], starts[seq + 1]
        # binary search for the first word ending after s
        while lo < hi:
            mid = (lo + hi) // 2
            if words[mid].end <= s:
                lo = mid + 1
            else:
                hi = mid
        w = lo
        while w < starts[seq + 1] and words[w].start < e:
            overlap = min(e, words[w].end) - max(s, words[w].start)
            if overlap > best_overlap:
                best, best_overlap = w, overlap
            w += 1
        if best is None and lo < starts[seq + 1]:
            # a piece covering only the space before a word (SentencePiece's lone "▁" before "c" "it" "ies")
            # belongs to that word: dropping it would lose its share of an attribution
            best = lo
        token_word.append(best)
        if best is not None:
            word_tokens[best].append(t)
        last_end[seq] = max(last_end[seq], e)
    cut, unseen = [], []
    for i, wd in enumerate(words):
        if word_tokens[i]:
            continue
        (cut if at_limit and wd.start >= last_end[wd.field] else unseen).append(i)
    return Alignment(words, token_word, word_tokens, cut, unseen)


def edit_texts(texts: tuple[str, ...], words: list[Word], replace: dict[int, str]) -> tuple[str, ...]:
    """Replace (or, with "", remove) words by index, keeping every other character of the input as it was.

    A removed word takes one neighbouring space with it, so "a very good film" minus "very" is "a good film".
    """
    out = []
    for f, text in enumerate(texts):
        edits = sorted((words[i].start, words[i].end, new) for i, new in replace.items() if words[i].field == f)
        pieces, pos = [], 0
        for start, end, new in edits:
            before = text[pos:start]
            if new == "":
                if before.endswith(" ") and (end >= len(text) or text[end] == " "):
                    before = before[:-1]
                elif start == 0 and end < len(text) and text[end] == " ":
                    end += 1
            pieces.append(before + new)
            pos = end
        pieces.append(text[pos:])
        out.append("".join(pieces))
    return tuple(out)
