import pickle
import shutil
from pathlib import Path

import pytest
import torch

from app.core.execution.inference import predict
from app.core.ground.data import Example
from app.core.models.loading import ModelLoadError, get_classifier, load, read_head
from app.core.models.registry import TASKS, ModelSpec, custom_pair

from .conftest import _tiny_family, copy_tokenizer


def spec(source, task="sst2"):
    return ModelSpec("M", str(source), "bert", TASKS[task])


def test_missing_directory(tmp_path):
    with pytest.raises(ModelLoadError, match=r"no such directory"):
        load(spec(tmp_path / "nope" / "model"))


def test_directory_without_config(tmp_path):
    with pytest.raises(ModelLoadError, match=r"no config\.json"):
        load(spec(tmp_path))


def test_directory_without_weights(tiny_dirs, tmp_path):
    d = tmp_path / "m"
    shutil.copytree(tiny_dirs["bert"], d)
    (d / "model.safetensors").unlink()
    with pytest.raises(ModelLoadError, match=r"no weights file"):
        load(spec(d))


def test_corrupt_weights(tiny_dirs, tmp_path):
    d = tmp_path / "m"
    shutil.copytree(tiny_dirs["bert"], d)
    (d / "model.safetensors").write_bytes(b"\x00garbage" * 10)
    with pytest.raises(ModelLoadError, match=r"model\.safetensors is corrupt or unreadable"):
        load(spec(d))


def test_invalid_id():
    with pytest.raises(ModelLoadError, match=r"neither an existing directory nor a valid Hugging Face hub id"):
        load(spec("not a model id!"))


def test_hub_unreachable_fails_fast_with_a_clear_message(monkeypatch):
    """Offline (the suite pins the hub off), loading a hub id touches no network: it can't hang."""
    import socket

    monkeypatch.setattr(socket, "create_connection", lambda *a, **k: pytest.fail("tried the network"))
    with pytest.raises(ModelLoadError) as err:
        load(spec("textattack/bert-base-uncased-SST-2"))
    msg = str(err.value)
    assert "textattack/bert-base-uncased-SST-2" in msg and "hub can't be reached" in msg


def test_label_count_mismatch(tiny_dirs):
    with pytest.raises(ModelLoadError, match=r"has 2 outputs but task 'snli' expects 3"):
        load(spec(tiny_dirs["bert"], "snli"))


def _mapped_ranges(path) -> list[tuple[int, int]]:
    """Address ranges at which this process maps `path` (Linux's /proc/self/maps)."""
    out = []
    for line in open("/proc/self/maps"):
        if line.rstrip().endswith(str(path)):
            lo, hi = line.split()[0].split("-")
            out.append((int(lo, 16), int(hi, 16)))
    return out


@pytest.mark.parametrize("fmt", ["zip", "legacy", "half"])
def test_bin_checkpoint_loads_with_weights_only_and_same_outputs(tiny_dirs, tmp_path, fmt):
    """A zip-format .bin is mapped, not read: the model's weights are the file's pages (which the app's worker
    processes then share); a legacy-format one is read whole; a half-precision one is computed in float32."""
    d = tmp_path / "bin"
    shutil.copytree(tiny_dirs["bert"], d)
    ref = load(spec(tiny_dirs["bert"]))
    state = ref.model.state_dict()
    if fmt == "half":
        state = {k: v.half() if v.is_floating_point() else v for k, v in state.items()}
    torch.save(state, d / "pytorch_model.bin", _use_new_zipfile_serialization=fmt != "legacy")
    (d / "model.safetensors").unlink()
    clf = load(spec(d))
    ex = [Example(("a fine film",))]
    assert abs(predict(clf, ex).probs - predict(ref, ex).probs).max() < (1e-2 if fmt == "half" else 1e-6)
    assert all(p.dtype == torch.float32 for p in clf.model.parameters())
    ranges = _mapped_ranges((d / "pytorch_model.bin").resolve())
    layer = clf.model.bert.encoder.layer[0].intermediate.dense.weight
    inside = any(lo <= layer.data_ptr() < hi for lo, hi in ranges)
    assert inside == (fmt == "zip"), (fmt, ranges)


class Evil:
    def __reduce__(self):
        return (print, ("pwned",))


def test_pickled_code_in_bin_is_refused(tiny_dirs, tmp_path):
    d = tmp_path / "evil"
    shutil.copytree(tiny_dirs["bert"], d)
    (d / "model.safetensors").unlink()
    with open(d / "pytorch_model.bin", "wb") as f:
        pickle.dump({"x": Evil()}, f)
    with pytest.raises(ModelLoadError, match=r"corrupt or unreadable"):
        load(spec(d))


def test_models_are_loaded_once(tiny_dirs):
    a = get_classifier(spec(tiny_dirs["bert"]))
    b = get_classifier(spec(tiny_dirs["bert"]))
    assert a is b
    assert not a.model.training


def test_custom_pair_takes_labels_from_config(tiny_dirs):
    from app.core.execution.pair import Pair, PairError

    pair = Pair.resolve(models=[str(tiny_dirs["bert"]), str(tiny_dirs["albert"])])
    assert [m.labels for m in pair.models] == [("LABEL_0", "LABEL_1")] * 2 and pair.task.name == "custom"
    three = load(custom_pair(str(tiny_dirs["albert3"]), str(tiny_dirs["bert"])).models[0])
    assert three.labels == ("LABEL_0", "LABEL_1", "LABEL_2") and three.family == "albert"
    with pytest.raises(PairError, match=r"with labels \['LABEL_0', 'LABEL_1'\] and albert3 with labels "
                                        r"\['LABEL_0', 'LABEL_1', 'LABEL_2'\]"):
        _ = Pair.resolve(models=[str(tiny_dirs["bert"]), str(tiny_dirs["albert3"])]).models


def test_head_from_the_config_alone_answers_as_the_loaded_model(tiny_dirs, tmp_path):
    """A Ray driver reads labels from the config: the same labels, task and cache path as a full load, and it
    never reads the weights (here corrupt, which only the full load notices)."""
    d = tmp_path / "m"
    shutil.copytree(tiny_dirs["albert3"], d)
    cfg = (d / "config.json").read_text().replace('"LABEL_2"', '"maybe"')
    (d / "config.json").write_text(cfg)
    user = custom_pair(str(d), str(tiny_dirs["bert"])).models[0]  # task unknown until the config is read
    loaded = load(user)
    head = read_head(user)
    assert head.labels == loaded.labels and head.labels[2] == "maybe"
    assert (head.task, head.path, head.origin, head.name) == (loaded.task, loaded.path, loaded.origin, loaded.name)
    (d / "model.safetensors").write_bytes(b"\x00garbage" * 10)
    assert read_head(user).labels == loaded.labels
    with pytest.raises(ModelLoadError, match=r"corrupt or unreadable"):
        load(user)
    with pytest.raises(ModelLoadError, match=r"has 2 outputs but task 'snli' expects 3"):
        read_head(spec(tiny_dirs["bert"], "snli"))


def test_kept_heads_and_models_follow_where_the_source_sits_now(tiny_dirs, tmp_path, monkeypatch):
    """A process keeps heads and models by where their source sits now: a local model retrained in place is read
    and loaded again, and an offline model is read where the cache folder now builds it (one model where a cache's
    built folder links to another's). A head kept from before answered with the old place while the model loaded
    from the new one, so a report's second run in one process keyed its sections otherwise and reused none."""
    from safetensors.torch import load_file, save_file

    from app.core.models.loading import get_head
    from app.core.models.offline import OFFLINE_ASSETS
    from app.core.models.registry import get_pair

    d = tmp_path / "m"
    shutil.copytree(tiny_dirs["bert"], d)
    user = spec(d)
    before = get_head(user)
    clf = get_classifier(user)
    assert clf.identity == before.identity and get_head(user) is clf
    enc = clf.tokenizer(["a fine film"], return_tensors="pt")
    old = clf.model(**enc).logits
    state = load_file(str(d / "model.safetensors"))
    state["classifier.bias"] = state["classifier.bias"] + torch.tensor([5.0, -5.0])
    save_file(state, str(d / "model.safetensors"), metadata={"format": "pt"})  # retrained in place
    after = get_head(user)
    assert after.identity != before.identity
    again = get_classifier(user)
    assert again is not clf and again.identity == after.identity
    torch.testing.assert_close(again.model(**enc).logits, old + torch.tensor([5.0, -5.0]))

    offline = get_pair("offline").models[0]
    monkeypatch.setenv("ALBERT_LENS_CACHE", str(tmp_path / "a"))
    assert Path(get_head(offline).path).is_relative_to(tmp_path / "a")
    monkeypatch.setenv("ALBERT_LENS_CACHE", str(tmp_path / "b"))
    in_b = get_head(offline)
    assert Path(in_b.path).is_relative_to(tmp_path / "b")
    (tmp_path / "c").mkdir()  # a cache whose built models are another's (the suite's `checkout` fixture)
    (tmp_path / "c" / "offline").symlink_to(tmp_path / "b" / "offline")
    monkeypatch.setenv("ALBERT_LENS_CACHE", str(tmp_path / "c"))
    assert get_head(offline) is in_b
    export = spec(OFFLINE_ASSETS / "bert-sst2")  # a folder `train-offline --export` wrote: built in the cache too
    in_c = get_head(export)
    assert Path(in_c.path).is_relative_to(tmp_path / "b")  # built through c's link
    monkeypatch.setenv("ALBERT_LENS_CACHE", str(tmp_path / "a"))
    assert Path(get_head(export).path).is_relative_to(tmp_path / "a")


def test_a_load_draws_no_bar_and_waits_on_no_console_lock(tiny_dirs, tmp_path, capfd):
    """transformers 5 draws a "Loading weights" bar for every model; the core leaves it out by making none at all:
    even a disabled tqdm bar takes tqdm's console lock, and a load in a server's thread waited forever where
    another thread had left that lock held (seen once in a test run, a model loading for /slices)."""
    import threading

    from tqdm.std import TqdmDefaultWriteLock

    d = tmp_path / "m"
    shutil.copytree(tiny_dirs["bert"], d)
    held, done = threading.Event(), threading.Event()
    console = TqdmDefaultWriteLock.th_lock  # every bar's lock is held while this thread's one is

    def holder():
        # not taken within 10 s: another thread holds it already, which is what this test needs too (seen in
        # whole runs before LIT's UMAP gave back the lock a deadline left held: tests/test_gate.py)
        got = console.acquire(timeout=10)
        held.set()
        done.wait(300)
        if got:
            console.release()

    threading.Thread(target=holder, daemon=True).start()
    assert held.wait(60)
    loaded = []
    loader = threading.Thread(target=lambda: loaded.append(load(spec(d))), daemon=True)
    try:
        loader.start()
        loader.join(120)  # a hang guard, not a speed bound: the load takes well under a second
        assert loaded, "the load waited on tqdm's console lock"
    finally:
        done.set()
        loader.join(120)
    assert "Loading weights" not in capfd.readouterr().err


def test_a_tokenizer_from_another_family_drops_inputs_the_model_has_no_argument_for(tiny_dirs, tmp_path):
    """A DistilBERT saved with BERT's tokenizer: segment ids would be a TypeError in every forward pass."""
    d = _tiny_family("distilbert", tmp_path / "distil", tiny_dirs["bert"], own_inputs=False)
    clf = load(spec(d, "rte"))
    ex = Example(("A man is sleeping.", "A person rests."))
    enc = clf.tokenizer(*ex.texts, return_tensors="pt")
    assert "token_type_ids" not in enc
    want = torch.softmax(clf.model(**enc).logits, -1).detach().numpy()
    assert abs(predict(clf, [ex]).probs - want).max() < 1e-6


def test_a_model_its_tokenizer_cannot_feed_is_a_load_error(tiny_dirs, tmp_path):
    """ALBERT's 800-piece embedding under BERT's 30,522-word tokenizer: an index error at the first forward pass,
    reported at load with the model named rather than on a user's first click."""
    d = tmp_path / "m"
    shutil.copytree(tiny_dirs["albert"], d)
    copy_tokenizer(tiny_dirs["bert"], d)
    with pytest.raises(ModelLoadError, match=r"m': a test forward pass on its tokenizer's output failed \(IndexError"):
        load(spec(d))


def test_max_length_fits_the_models_position_table(tmp_path):
    """A model trained on 16 positions reads at most 16 tokens: inputs are cut there (and the cut is said), not
    passed on to fail with an index error in the position embeddings."""
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizerFast

    from app.core.models.offline import minilm_dir
    from app.core.techniques.explanation import explain

    d = tmp_path / "short"
    config = BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=37, max_position_embeddings=16)
    BertForSequenceClassification(config).save_pretrained(d)
    BertTokenizerFast.from_pretrained(minilm_dir()).save_pretrained(d)
    clf = load(spec(d))
    assert clf.max_length == 16 and read_head(spec(d)).max_length == 16
    long = Example((" ".join(["wonderful"] * 40),))
    assert predict(clf, [long]).probs.shape == (1, 2)
    (sal,) = explain([clf], long, "gradient_x_input")["maps"]
    assert "input cut at 16 tokens: the model saw 14 of 40 words" in sal.note


def test_positions_numbered_from_ids_are_seen_in_the_loaded_model(family_dirs, tmp_path, monkeypatch):
    """A RoBERTa with an 18-row position table holds 16 tokens (its positions start after the pad id). The family
    list decides that for a head read from the config alone; a loaded model's embedding module decides it for
    itself, so a RoBERTa-style family missing from the list still gets 16 and long inputs don't overrun."""
    from transformers import RobertaConfig, RobertaForSequenceClassification

    import app.core.models.loading as loading

    d = tmp_path / "short-roberta"
    config = RobertaConfig.from_pretrained(family_dirs["roberta"], max_position_embeddings=18)
    RobertaForSequenceClassification(config).save_pretrained(d)
    copy_tokenizer(family_dirs["roberta"], d)
    assert load(spec(d)).max_length == 16 and read_head(spec(d)).max_length == 16
    monkeypatch.setattr(loading, "ID_POSITIONS", set())
    assert read_head(spec(d)).max_length == 18  # the config alone can't tell
    clf = load(spec(d))
    assert clf.max_length == 16
    assert predict(clf, [Example((" ".join(["wonderful film"] * 40),))]).probs.shape == (1, 2)


def test_config_label_names_are_checked_against_the_task(tiny_dirs, tmp_path):
    """A config that names its outputs is the model's own word on them: the same names in another order label
    predictions in that order (roberta-large-mnli answers contradiction, neutral, entailment); names of another
    task are refused at load, instead of SST-2 outputs being called entailment and not_entailment."""
    import json

    from app.core.execution.pair import Pair

    def with_names(names: list[str]) -> Path:
        d = tmp_path / "-".join(names)
        if d.exists():
            return d
        shutil.copytree(tiny_dirs["bert"], d)
        cfg = json.loads((d / "config.json").read_text())
        cfg["id2label"] = {str(i): n for i, n in enumerate(names)}
        cfg["label2id"] = {n: i for i, n in enumerate(names)}
        (d / "config.json").write_text(json.dumps(cfg))
        return d

    plain = load(spec(tiny_dirs["bert"]))
    swapped = load(spec(with_names(["positive", "negative"])))
    assert swapped.labels == ("positive", "negative") and plain.labels == ("negative", "positive")
    ex = Example(("a fine film",))
    p_plain, p_swapped = predict(plain, [ex]).record(0), predict(swapped, [ex]).record(0)
    # the same weights: what the task calls "negative" is output 0 for one and output 1 for the other
    assert p_swapped["probabilities"]["positive"] == pytest.approx(p_plain["probabilities"]["negative"], abs=1e-6)
    assert load(spec(with_names(["NEGATIVE", "POSITIVE"]))).labels == ("negative", "positive")
    assert read_head(spec(with_names(["positive", "negative"]))).labels == ("positive", "negative")
    with pytest.raises(ModelLoadError, match=r"its config names its outputs \['negative', 'positive'\], but task "
                                             r"'rte' has \['entailment', 'not_entailment'\]; give the task"):
        _ = Pair.resolve(models=["offline:bert-sst2", "offline:albert-sst2"], task="rte").models


@pytest.mark.parametrize("fmt", ["safetensors", "bin"])
def test_a_checkpoint_without_a_trained_head_is_refused(tmp_path, fmt, tiny_dirs, monkeypatch):
    """`bert-base-uncased` itself, or any masked-LM checkpoint, would get a random classifier from transformers
    with only a log line; a researcher would read noise as the model's answers."""
    from transformers import BertConfig, BertForMaskedLM, BertTokenizerFast

    from app.core.models.offline import minilm_dir

    d = tmp_path / "mlm"
    config = BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=37)
    BertForMaskedLM(config).save_pretrained(d, safe_serialization=fmt == "safetensors")
    BertTokenizerFast.from_pretrained(minilm_dir()).save_pretrained(d)
    with pytest.raises(ModelLoadError, match=r"4 weights are missing from .*\(.*classifier\.weight.*\); it has no "
                                             r"trained classification head.*ALBERT_LENS_ALLOW_UNTRAINED_HEAD=1"):
        load(spec(d))
    # asked for, it loads for its embeddings, and says its head is random wherever the model is described
    clf = load(ModelSpec("M", str(d), "bert", TASKS["sst2"], untrained_head_ok=True))
    assert clf.untrained_head and "classification head untrained (random)" in clf.describe()
    monkeypatch.setenv("ALBERT_LENS_ALLOW_UNTRAINED_HEAD", "1")
    assert load(spec(d)).untrained_head and not load(spec(tiny_dirs["bert"])).untrained_head


def test_head_and_model_name_the_configs_family(family_dirs):
    """A user's directory named "r" says nothing; its config says roberta, and both the head and the loaded
    model report that (the banner and the facts table show it)."""
    user = custom_pair(str(family_dirs["roberta"]), str(family_dirs["electra"])).models
    assert [read_head(s).family for s in user] == ["roberta", "electra"]
    assert [load(s).family for s in user] == ["roberta", "electra"]


def test_a_model_loaded_with_an_untrained_head_is_not_served_to_a_spec_that_did_not_ask(tmp_path):
    from transformers import BertConfig, BertForMaskedLM, BertTokenizerFast

    from app.core.models.offline import minilm_dir

    d = tmp_path / "mlm"
    BertForMaskedLM(BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                               intermediate_size=37)).save_pretrained(d)
    BertTokenizerFast.from_pretrained(minilm_dir()).save_pretrained(d)
    asked = ModelSpec("M", str(d), "bert", TASKS["sst2"], untrained_head_ok=True)
    assert get_classifier(asked).untrained_head
    with pytest.raises(ModelLoadError, match=r"it has no trained classification head"):
        get_classifier(spec(d))


def test_a_model_first_loaded_inside_inference_mode_still_gives_gradients(tiny_dirs):
    """A pair's weights load on first use, which can be inside a batch job running in inference mode; weights
    made there were inference tensors, and every later gradient through them failed ("Inference tensors cannot
    be saved for backward": LIT's gradients, after a graph test had first loaded the pair)."""
    from app.core.techniques.gradients import input_gradients

    with torch.inference_mode():
        clf = load(ModelSpec("M", str(tiny_dirs["bert"]), "bert", TASKS["sst2"]))
        assert predict(clf, [Example(("a fine film",))]).probs.shape == (1, 2)
    assert not any(p.is_inference() for p in clf.model.parameters())
    g = input_gradients(clf, Example(("a fine film",)))
    assert g.gradients.shape[0] == len(g.tokens) and abs(g.gradients).sum() > 0


def test_an_albert_as_textattacks_zoo_ships_it_reads_its_sentencepiece_model(tiny_dirs, tmp_path):
    """TextAttack's ALBERTs come with `spiece.model` and no `tokenizer.json`: the tokenizer is the SentencePiece
    model's, piece for piece. transformers 5 reads that file through protobuf (a declared dependency): without it
    the load failed ("`tiktoken` is required"), the study's ALBERTs unusable on the modern stack."""
    import sentencepiece as spm

    zoo = tmp_path / "albert-zoo"
    shutil.copytree(tiny_dirs["albert"], zoo)
    (zoo / "tokenizer.json").unlink(missing_ok=True)
    sp = spm.SentencePieceProcessor(model_file=str(zoo / "spiece.model"))
    clf = load(ModelSpec("ALBERT", str(zoo), "albert", TASKS["sst2"]))
    text = "the cities were beautiful but the hotel was dreadful ."
    assert len(clf.tokenizer.get_vocab()) == sp.get_piece_size()
    assert clf.tokenizer(text)["input_ids"] == [sp.piece_to_id("[CLS]"), *sp.encode(text), sp.piece_to_id("[SEP]")]
