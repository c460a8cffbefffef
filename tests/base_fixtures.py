"""The study's checkpoints at full size, without the hub: `bert-base-uncased` and `albert-base-v2` classifiers with
seeded random weights, laid out file for file as TextAttack's zoo repositories are (`config.json` with no
`id2label`, weights in `pytorch_model.bin`, `vocab.txt` or `spiece.model` with their tokenizer configs).

Built at test time (never committed) into a cache that outlives the run (`ALBERT_LENS_FIXTURES`, default
`~/.cache/albert-lens-fixtures`): ~500 MB, about a minute the first time. ALBERT's SentencePiece model is trained
here on the shared corpora, as many pieces as they support, while its config keeps the published 30,000.
`benchmarks/base_size.py` uses the same fixtures.
"""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

VERSION = "v1"  # bump when the recipe changes: a cached build of another recipe is rebuilt
BERT = "bert-base-uncased-SST-2"
ALBERT = "albert-base-v2-SST-2"
# the published architectures (bert-base-uncased, albert-base-v2 config.json)
BERT_BASE = dict(vocab_size=30522, hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                 intermediate_size=3072, hidden_act="gelu", max_position_embeddings=512, type_vocab_size=2)
ALBERT_BASE = dict(vocab_size=30000, embedding_size=128, hidden_size=768, num_hidden_layers=12, num_hidden_groups=1,
                   inner_group_num=1, num_attention_heads=12, intermediate_size=3072, hidden_act="gelu_new",
                   max_position_embeddings=512, type_vocab_size=2, hidden_dropout_prob=0.0,
                   attention_probs_dropout_prob=0.0)


def root() -> Path:
    return Path(os.environ.get("ALBERT_LENS_FIXTURES") or Path.home() / ".cache" / "albert-lens-fixtures")


def _zoo_config(model, path: Path) -> None:
    """config.json as the zoo has it: the architecture, no label names (TextAttack trained without them)."""
    cfg = model.config.to_dict()
    for key in ("id2label", "label2id"):
        cfg.pop(key, None)
    cfg["num_labels"] = 2
    (path / "config.json").write_text(json.dumps(cfg, indent=2, sort_keys=True))


def _corpus(shared: Path) -> list[str]:
    """The shared corpora's sentences, lower-cased as ALBERT's tokenizer reads them."""
    lines = [ln.split("\t")[0] for ln in (shared / "glue" / "sst2" / "train.tsv").read_text().splitlines()[1:]]
    lines += [ln.split('","', 1)[-1].replace('","', " ").strip('"')
              for ln in (shared / "ag_news" / "test.csv").read_text().splitlines()]
    lines += [ln.split("\t")[-1] for ln in (shared / "imdb" / "test_1000.tsv").read_text().splitlines()[1:]]
    lines += (shared / "snli" / "s1.dev").read_text().splitlines()
    return [ln.lower() for ln in lines if ln.strip()]


def build(shared: Path) -> dict[str, Path]:
    """The two model folders, built once per machine (a DONE marker says the build finished). Tokenizer files
    already in place are kept (ALBERT's SentencePiece training is most of a build): a machine given the folders
    without their weights, as the GPU benchmark's is, only writes the seeded weights."""
    out = root() / f"base-{VERSION}"
    dirs = {"bert": out / BERT, "albert": out / ALBERT}
    if all((d / "DONE").is_file() for d in dirs.values()):
        return dirs
    if not all((d / name).is_file() for d, name in ((dirs["bert"], "vocab.txt"), (dirs["albert"], "spiece.model"))):
        _tokenizers(shared, dirs)
    _weights(dirs)
    for d in dirs.values():
        (d / "DONE").write_text(VERSION)
    return dirs


def _tokenizers(shared: Path, dirs: dict[str, Path]) -> None:
    import sentencepiece as spm

    from app.core.models.offline import minilm_dir

    for d in dirs.values():
        shutil.rmtree(d, ignore_errors=True)
        d.mkdir(parents=True)
    bert = dirs["bert"]
    shutil.copy(minilm_dir() / "vocab.txt", bert / "vocab.txt")  # MiniLM's is bert-base-uncased's vocabulary
    (bert / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": True, "model_max_length": 512}))
    (bert / "special_tokens_map.json").write_text(json.dumps(
        {"unk_token": "[UNK]", "sep_token": "[SEP]", "pad_token": "[PAD]", "cls_token": "[CLS]",
         "mask_token": "[MASK]"}))

    albert = dirs["albert"]
    corpus = albert / "corpus.txt"
    corpus.write_text("\n".join(_corpus(shared)), encoding="utf-8")
    spm.SentencePieceTrainer.train(  # albert-base-v2's special pieces and ids; as many pieces as the text holds
        input=str(corpus), model_prefix=str(albert / "spiece"), vocab_size=30000, hard_vocab_limit=False,
        model_type="unigram", pad_id=0, unk_id=1, bos_id=2, eos_id=3, pad_piece="<pad>", unk_piece="<unk>",
        bos_piece="[CLS]", eos_piece="[SEP]", user_defined_symbols=["[MASK]"], character_coverage=0.9995,
        input_sentence_size=200_000, shuffle_input_sentence=True, minloglevel=2, num_threads=2)
    corpus.unlink()
    (albert / "spiece.vocab").unlink(missing_ok=True)
    (albert / "tokenizer_config.json").write_text(json.dumps(
        {"do_lower_case": True, "remove_space": True, "keep_accents": False, "model_max_length": 512}))
    (albert / "special_tokens_map.json").write_text(json.dumps(
        {"bos_token": "[CLS]", "eos_token": "[SEP]", "unk_token": "<unk>", "sep_token": "[SEP]",
         "pad_token": "<pad>", "cls_token": "[CLS]", "mask_token": "[MASK]"}))


def _weights(dirs: dict[str, Path]) -> None:
    import torch
    from transformers import AlbertConfig, AlbertForSequenceClassification, BertConfig, BertForSequenceClassification

    torch.manual_seed(0)
    model = BertForSequenceClassification(BertConfig(**BERT_BASE, num_labels=2)).eval()
    _zoo_config(model, dirs["bert"])
    torch.save(model.state_dict(), dirs["bert"] / "pytorch_model.bin")
    del model
    torch.manual_seed(1)
    model = AlbertForSequenceClassification(AlbertConfig(**ALBERT_BASE, num_labels=2)).eval()
    _zoo_config(model, dirs["albert"])
    torch.save(model.state_dict(), dirs["albert"] / "pytorch_model.bin")


def published_parameters(family: str, labels: int = 2) -> int:
    """Parameter count of the published architecture with a classification head, from its shape alone."""
    if family == "bert":
        c = BERT_BASE
        h, i, e = c["hidden_size"], c["intermediate_size"], c["hidden_size"]
        embeddings = (c["vocab_size"] + c["max_position_embeddings"] + c["type_vocab_size"]) * e + 2 * e
        projection, layers = 0, c["num_hidden_layers"]
    else:
        c = ALBERT_BASE
        h, i, e = c["hidden_size"], c["intermediate_size"], c["embedding_size"]
        embeddings = (c["vocab_size"] + c["max_position_embeddings"] + c["type_vocab_size"]) * e + 2 * e
        projection, layers = e * h + h, c["num_hidden_groups"]  # one set of layer weights, applied 12 times
    layer = 4 * (h * h + h) + 2 * h + (h * i + i) + (i * h + h) + 2 * h
    return embeddings + projection + layers * layer + (h * h + h) + (h * labels + labels)
