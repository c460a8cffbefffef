"""How each model's tokenizer reads one input: its tokens, the words it splits into pieces and the ones it can't
read ([UNK]). BERT's WordPiece and ALBERT's SentencePiece cut the same sentence differently, and a word split into
five pieces or read as [UNK] explains many an odd saliency map or attack. A declared capability
(`capabilities.py`): the app's, the command line's and the facade's `tokens` come from its registration."""
from __future__ import annotations

from collections.abc import Sequence

from ..execution.inference import encode_one
from ..ground.data import Example


def tokens_batch(pair, batch: Sequence[Example], special: bool = False) -> list[dict]:
    """Batch function (one input, on one worker): per model its tokens (with [CLS]/[SEP] when `special`), how many
    it reads, each word's pieces and the words it reads as [UNK]."""
    out = []
    for clf in pair.models:
        (ex,) = batch
        enc, al = encode_one(clf, ex)
        ids = enc["input_ids"][0].tolist()
        toks = clf.tokenizer.convert_ids_to_tokens(ids)
        unk = clf.tokenizer.unk_token
        pieces: dict[int, list[str]] = {}
        for tok, w in zip(toks, al.token_word):
            if w is not None:
                pieces.setdefault(w, []).append(tok)
        words = [{"word": al.words[w].text, "pieces": p} for w, p in sorted(pieces.items())]
        shown = toks if special else [t for t, w in zip(toks, al.token_word) if w is not None]
        out.append({"model": clf.name, "tokens": shown, "n_tokens": len(ids), "max_length": clf.max_length,
                    "split_words": [w for w in words if len(w["pieces"]) > 1],
                    "unknown_words": [w["word"] for w in words if unk is not None and unk in w["pieces"]],
                    "words_cut": len(al.cut)})
    return out


tokens_batch.combine = "whole"
