"""Shared fixtures: tiny random BERT/ALBERT (real tokenizers), the real MiniLM, and the shared data folder."""
from __future__ import annotations

import functools
import os
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# where the core reads it too (`runtime.SHARED_DATA`): ALBERT_LENS_SHARED_DATA, else ../shared/data
SHARED = Path(os.environ.get("ALBERT_LENS_SHARED_DATA") or ROOT.parent / "shared" / "data")


def _scratch(prefix: str) -> str:
    """A temporary folder this process removes when it exits: the caches a run fills (the offline pair's
    assets, TextAttack's word embeddings: ~3 GB a process) were left in /tmp by every run, 45 GB of them
    after a day's runs here, until a fresh clone's run failed on a full disk."""
    import atexit
    import shutil

    path = tempfile.mkdtemp(prefix=prefix)
    atexit.register(shutil.rmtree, path, True)
    return path


# Hermetic caches, and the shared NLTK data, before anything imports the core. (A run's processes share the first
# one's cache: pytest-xdist's workers and the processes tests start inherit it, and its owner removes it.)
if "ALBERT_LENS_CACHE" not in os.environ:
    os.environ["ALBERT_LENS_CACHE"] = _scratch("albert-lens-test-")
# The timing decisions (tuning.py) hold for this machine, not for a cache: a test that gives itself a cache (every
# documented command, the reports, the trainings) still reads the run's, instead of timing the same models again
# (~100 CPU s a run). The tests of the timing itself set their own (test_tuning.py, test_kernels.py).
os.environ.setdefault("ALBERT_LENS_TIMING", os.environ["ALBERT_LENS_CACHE"])
RUN_CACHE = os.environ["ALBERT_LENS_CACHE"]
# The hub pinned off, whatever machine runs the suite: an online laptop or CI runner must neither download
# base-size models nor find them in its own Hugging Face cache (the default pair would change). Tests of online
# behaviour simulate it explicitly (tests/test_runtime.py).
os.environ.pop("ALBERT_LENS_ASSUME_ONLINE", None)
for _flag in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):
    os.environ[_flag] = "1"
# one per run, as the cache: pytest-xdist's workers end without running atexit hooks, and each one's own folder
# was left in /tmp (four a run)
if not Path(os.environ.get("HF_HOME", "")).name.startswith("albert-lens-test-hf-"):
    os.environ["HF_HOME"] = _scratch("albert-lens-test-hf-")
# The CPU unless a run asks for another device: the suite's references are CPU figures, and tests of the device
# plumbing name their device (tests/test_device.py).
os.environ.setdefault("ALBERT_LENS_DEVICE", "cpu")
# int8 and bf16 where asked, on any CPU: their tests check their answers; the choice of fp32 on a CPU where they are
# slower is tested on its own (tests/test_precision.py)
os.environ.setdefault("ALBERT_LENS_FORCE_PRECISION", "1")
if (SHARED / "nltk_data").is_dir():
    os.environ["NLTK_DATA"] = str(SHARED / "nltk_data")

import torch  # noqa: E402

from app.core.ground import runtime  # noqa: E402

runtime.prepare()
# Under pytest-xdist the workers share the machine's cores: each takes its share, so two workers on two cores don't
# run four threads (oversubscribed, every product slower than on one thread). The processes a test starts (training,
# the Space build's smoke test, a fresh process's warm-up) get the same share through OMP_NUM_THREADS: at PyTorch's
# default of one thread per core, a training run beside the other worker ran 3 threads on 2 cores, 1.5-2x slower.
_WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
_THREADS = max(1, min(2, len(os.sched_getaffinity(0)) // _WORKERS))
torch.set_num_threads(_THREADS)
if _WORKERS > 1:
    os.environ.setdefault("OMP_NUM_THREADS", str(_THREADS))
# NumPy's OpenBLAS was loaded (by pytest's plugins) before that variable was set: each worker ran its matrix
# products (CKA, PCA, UMAP, significance tests) on two threads beside the other worker's, and OpenBLAS's threads wait
# for each other spinning: a worker's tests used more CPU than wall time, and the run ~9 more CPU minutes.
from threadpoolctl import threadpool_limits  # noqa: E402

threadpool_limits(_THREADS)
# Ray starts its worker processes at nice 15, which a server wants (batch work yields to the app) but which, beside
# busy test workers at nice 0, left a Ray test waiting minutes for its actors to import torch (the killed-worker
# test: 10 s alone, over 4 min beside two other workers). The tests check Ray's answers, not its priorities.
os.environ.setdefault("RAY_worker_niceness", "0")
# The app's worker processes likewise (nice 10 by default): beside the other busy test worker the app-with-workers
# test took 65 s against 17 s alone. The priority itself is tested with a pool that asks for it (test_workers.py).
os.environ.setdefault("ALBERT_LENS_WORKER_NICE", "0")
# The servers tests start live seconds: their warm-ups (UMAP's kernels, WordNet, ~6 CPU s a process) are left to
# a first use that mostly never comes. The warm-ups themselves are tested (test_ui.py, test_projection.py).
os.environ.setdefault("ALBERT_LENS_WARM_UP", "0")

SENTENCES = [
    "it 's a charming and often affecting journey .",
    "unflinchingly bleak and desperate",
    "the acting , costumes , music , cinematography and sound are all astounding .",
    "a gorgeous , witty , seductive movie .",
    "the movie fails to live up to the sum of its parts .",
    "I loved it!!! 😍 Best film of 2024, café crème & naïve charm.",
    "Terrible. Just terrible — don't watch it.",
]


def free_port() -> int:
    """A loopback port nobody holds now, for a server a test starts: Gradio's own default (`server_port=None`)
    takes 7860 first, the port `./run app` wants beside a test run."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def gradio_client(url: str):
    """gradio_client's `Client` for a test's app. gradio_client opens a new httpx client for each request, and
    each built a TLS context from certifi's bundle, even for http://: ~10 ms of CPU a request, a fifth of the
    hostile-visitor tests' CPU (592 requests). One context, built once, is given instead (httpx takes a context
    as `verify`; gradio_client passes `ssl_verify` to httpx as that)."""
    from gradio_client import Client

    return Client(url, verbose=False, ssl_verify=_tls_context())


@functools.lru_cache(maxsize=1)
def _tls_context():
    import ssl

    import certifi

    return ssl.create_default_context(cafile=certifi.where())


def stop_lit(server) -> None:
    """Stop a LIT notebook server now: its thread waits up to 30 s in each `handle_request` (LIT sets the timeout),
    so `stop()` alone took that long; a request to it ends the wait."""
    import threading
    import urllib.request

    port = server.port
    stopping = threading.Thread(target=server.stop)
    stopping.start()
    while stopping.is_alive():  # a request that came before the stop flag was read leaves it waiting again
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5).read()
        except Exception:  # noqa: BLE001 - any answer, or none, ends that wait
            pass
        stopping.join(0.2)


@pytest.fixture
def checkout(tmp_path, monkeypatch):
    """A working directory laid out like a checkout: `../shared/data` beside it, outputs written inside it."""
    (tmp_path / "shared").symlink_to(shared().parent)
    work = tmp_path / "albert-lens"
    work.mkdir()
    monkeypatch.chdir(work)
    # a cache of its own (embeddings, reports), but the offline pair built in the run's: one build and one load of
    # it for every command (`loading._where`: a model is kept by the folder it is built in, links followed)
    built = Path(RUN_CACHE) / "offline"
    built.mkdir(parents=True, exist_ok=True)
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / "offline").symlink_to(built)
    monkeypatch.setenv("ALBERT_LENS_CACHE", str(tmp_path / "cache"))
    yield work
    # a command with `--engine ray` started a local Ray instance, which a user's process ends on exit: here it
    # would stay for the rest of this worker's tests, its daemons taking CPU, and answer test_engine's ray.init
    import sys

    if "ray" in sys.modules and sys.modules["ray"].is_initialized():
        sys.modules["ray"].shutdown()


def shared(*parts: str) -> Path:
    path = SHARED.joinpath(*parts)
    if not path.exists():
        pytest.fail(f"shared data missing: {path} (tests need ../shared/data beside the checkout, or "
                    "ALBERT_LENS_SHARED_DATA)")
    return path


def _tiny_bert(path: Path, num_labels: int = 2) -> Path:
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizerFast

    from app.core.models.offline import minilm_dir

    torch.manual_seed(0)
    config = BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=37, max_position_embeddings=512, num_labels=num_labels)
    BertForSequenceClassification(config).save_pretrained(path)
    BertTokenizerFast.from_pretrained(minilm_dir()).save_pretrained(path)
    return path


def _tiny_albert(path: Path, num_labels: int = 2) -> Path:
    """A tiny ALBERT whose tokenizer is a real SentencePiece model trained here on SST-2 sentences."""
    import sentencepiece as spm
    from transformers import AlbertConfig, AlbertForSequenceClassification, AlbertTokenizerFast

    path.mkdir(parents=True, exist_ok=True)
    corpus = [line.split("\t")[0] for line in shared("glue", "sst2", "dev.tsv").read_text().splitlines()[1:]]
    corpus += SENTENCES * 3
    (path / "corpus.txt").write_text("\n".join(corpus), encoding="utf-8")
    spm.SentencePieceTrainer.train(
        input=str(path / "corpus.txt"), model_prefix=str(path / "spiece"), vocab_size=800, model_type="unigram",
        pad_id=0, unk_id=1, bos_id=2, eos_id=3, pad_piece="<pad>", unk_piece="<unk>", bos_piece="[CLS]",
        eos_piece="[SEP]", user_defined_symbols=["[MASK]"], character_coverage=1.0, minloglevel=2,
    )
    (path / "corpus.txt").unlink()
    tok = AlbertTokenizerFast(vocab_file=str(path / "spiece.model"))
    if len(tok.get_vocab()) < 10:  # transformers 5 builds it from the pieces, and ignores the file (5 specials left)
        sp = spm.SentencePieceProcessor(model_file=str(path / "spiece.model"))
        tok = AlbertTokenizerFast(vocab=[(sp.id_to_piece(i), sp.get_score(i)) for i in range(sp.get_piece_size())])
    tok.save_pretrained(path)
    torch.manual_seed(1)
    config = AlbertConfig(vocab_size=tok.vocab_size, embedding_size=16, hidden_size=32, num_hidden_layers=3,
                          num_attention_heads=2, intermediate_size=37, num_labels=num_labels)
    AlbertForSequenceClassification(config).save_pretrained(path)
    return path


TOKENIZER_FILES = ("tokenizer", "vocab", "special", "spiece")


def copy_tokenizer(src: Path, dst: Path) -> None:
    """Give the model folder `dst` the tokenizer saved in `src`, replacing any it had."""
    import shutil

    for f in dst.iterdir():
        if f.name.startswith(TOKENIZER_FILES):
            f.unlink()
    for f in src.iterdir():
        if f.name.startswith(TOKENIZER_FILES):
            shutil.copy(f, dst / f.name)


def _tiny_family(kind: str, path: Path, tokenizer_from: Path, own_inputs: bool = True) -> Path:
    """A tiny random DistilBERT or ELECTRA saved with BERT's tokenizer. `own_inputs`: DistilBERT's tokenizer
    config then lists no segment ids, as DistilBERT's own tokenizer does; without it, the borrowed tokenizer
    returns them."""
    import json

    from transformers import AutoModelForSequenceClassification, DistilBertConfig, ElectraConfig

    config = {
        "distilbert": lambda: DistilBertConfig(vocab_size=30522, dim=32, n_layers=2, n_heads=2, hidden_dim=37),
        "electra": lambda: ElectraConfig(vocab_size=30522, embedding_size=16, hidden_size=32, num_hidden_layers=2,
                                         num_attention_heads=2, intermediate_size=37),
    }[kind]()
    torch.manual_seed(0)
    AutoModelForSequenceClassification.from_config(config).save_pretrained(path)
    copy_tokenizer(tokenizer_from, path)
    if kind == "distilbert" and own_inputs:
        cfg = json.loads((path / "tokenizer_config.json").read_text())
        cfg["model_input_names"] = ["input_ids", "attention_mask"]
        (path / "tokenizer_config.json").write_text(json.dumps(cfg))
    return path


def _tiny_roberta(path: Path) -> Path:
    """A tiny RoBERTa with a real byte-level BPE tokenizer trained here on SST-2: <s> a </s></s> b </s>, no
    segment ids, positions numbered from the ids, pad id 1."""
    from tokenizers import ByteLevelBPETokenizer
    from tokenizers.processors import RobertaProcessing
    from transformers import RobertaConfig, RobertaForSequenceClassification, RobertaTokenizerFast

    path.mkdir(parents=True, exist_ok=True)
    corpus = [line.split("\t")[0] for line in shared("glue", "sst2", "dev.tsv").read_text().splitlines()[1:]]
    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(corpus + SENTENCES * 3, vocab_size=1000, min_frequency=2,
                            special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"], show_progress=False)
    bpe.save_model(str(path))
    # built from the trained tokenizer itself, so its tokenizer.json holds the vocabulary: transformers 5 made a
    # RoBERTa tokenizer from vocab.json and merges.txt without it
    bpe._tokenizer.post_processor = RobertaProcessing(("</s>", 2), ("<s>", 0), trim_offsets=True,
                                                      add_prefix_space=False)
    tok = RobertaTokenizerFast(tokenizer_object=bpe._tokenizer, bos_token="<s>", eos_token="</s>", sep_token="</s>",
                               cls_token="<s>", unk_token="<unk>", pad_token="<pad>", mask_token="<mask>")
    tok.save_pretrained(path)
    torch.manual_seed(2)
    config = RobertaConfig(vocab_size=tok.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                           intermediate_size=37, max_position_embeddings=514, type_vocab_size=1, pad_token_id=1)
    RobertaForSequenceClassification(config).save_pretrained(path)
    return path


@pytest.fixture(scope="session")
def family_dirs(tiny_dirs, tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("families")
    return {"distilbert": _tiny_family("distilbert", root / "distilbert", tiny_dirs["bert"]),
            "electra": _tiny_family("electra", root / "electra", tiny_dirs["bert"]),
            "roberta": _tiny_roberta(root / "roberta")}


@pytest.fixture(scope="session")
def tiny_dirs(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("tiny")
    return {
        "bert": _tiny_bert(root / "bert"),
        "albert": _tiny_albert(root / "albert"),
        "albert3": _tiny_albert(root / "albert3", num_labels=3),
    }


def tiny_models(tiny_dirs: dict[str, Path]) -> list[str]:
    """The command line's flags for the tiny pair (`tiny_dirs`), an SST-2 pair."""
    return ["--models", str(tiny_dirs["bert"]), str(tiny_dirs["albert"]), "--task", "sst2"]


@pytest.fixture(scope="session")
def tiny_pair(tiny_dirs):
    from app.core.execution.pair import Pair

    return Pair.resolve(models=[str(tiny_dirs["bert"]), str(tiny_dirs["albert"])], task="sst2")


@pytest.fixture(scope="session")
def tiny_nli_pair(tiny_dirs, tmp_path_factory):
    from app.core.execution.pair import Pair

    bert3 = _tiny_bert(tmp_path_factory.mktemp("bert3") / "m", num_labels=2)
    return Pair.resolve(models=[str(bert3), str(tiny_dirs["albert"])], task="rte")


@pytest.fixture(scope="session")
def minilm_classifier():
    """The real pretrained MiniLM with a seeded classification head (it has none of its own)."""
    from app.core.models.loading import get_classifier
    from app.core.models.offline import minilm_dir
    from app.core.models.registry import TASKS, ModelSpec

    torch.manual_seed(0)
    return get_classifier(ModelSpec("MiniLM", str(minilm_dir()), "bert", TASKS["sst2"], untrained_head_ok=True))


@pytest.fixture(scope="session")
def offline_pair():
    from app.core.execution.pair import Pair

    return Pair.resolve("offline")


def run_shared(name: str, compute):
    """`compute()`, once per run whichever process asks first: kept in the run's cache under a lock that another
    pytest-xdist worker waits on, then reads (a reference several tests hold their answers to, computed once)."""
    import fcntl
    import pickle

    folder = Path(RUN_CACHE) / "test-answers"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.pkl"
    with open(folder / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if path.is_file():
            return pickle.loads(path.read_bytes())  # written by this run, a few lines below
        value = compute()
        part = path.with_suffix(".part")
        part.write_bytes(pickle.dumps(value))
        part.replace(path)
        return value


@pytest.fixture(scope="session")
def offline_sst2_dev(offline_pair):
    """(SST-2 dev's 872 examples, each offline model's fp32 `predict` of them): the fp32 reference of the
    accuracy bars and of the int8 and bf16 fidelity tests, computed once a run."""
    from app.core.execution.inference import predict
    from app.core.ground.data import load_dataset

    dev = load_dataset(shared("glue", "sst2", "dev.tsv")).examples
    assert all(m.precision == "fp32" for m in offline_pair.models)
    return dev, run_shared("offline-sst2-dev-fp32", lambda: [predict(m, dev) for m in offline_pair.models])


@pytest.fixture(scope="session")
def offline_news_cls(offline_pair):
    """(AG News test's first 300 texts, each offline model's fp32 [CLS] embeddings of them): the int8 and bf16
    fidelity tests' reference, computed once a run."""
    from app.core.ground.data import load_dataset
    from app.core.techniques.embeddings import embed

    news = load_dataset(shared("ag_news", "test.csv")).head(300).examples
    return news, run_shared("offline-news-cls-fp32", lambda: [embed(m, news) for m in offline_pair.models])


@pytest.fixture(scope="module")
def client(tiny_pair):
    """The Gradio app on the tiny pair, launched on a free loopback port and driven by gradio_client."""
    from app.ui import build

    demo = build(tiny_pair)
    _, url, _ = demo.launch(server_name="127.0.0.1", server_port=free_port(), prevent_thread_lock=True, quiet=True)
    try:
        yield gradio_client(url)
    finally:
        demo.close()


@pytest.fixture(scope="module")
def textattack_loaded():
    """TextAttack imported once before these files' tests. Its import used to close the captured stderr under
    `capsys` once LIT (absl) was imported ("lost sys.stderr"): TextAttack's and flair's `dictConfig` shut down
    every logging handler, absl's with its stream; the core now imports it with their configuration kept to
    their own loggers (`attacks.logging_kept`, tests/test_attacks.py)."""
    from app.core.techniques import attacks

    attacks._textattack()


# ------------------------------------------------------------------ what each test costs
# ALBERT_LENS_TEST_CPU=FILE appends one JSON line per test: its CPU seconds (user + system, of the worker and of
# the processes it waited for: a subprocess's CLI, a server's workers once reaped), its wall seconds, and its
# set-up's share (a fixture that loads a model is paid by the first test that asks). benchmarks/suite_cpu.py sums it.
_CPU_LOG = os.environ.get("ALBERT_LENS_TEST_CPU")


def _cpu_now() -> float:
    import resource

    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    if not _CPU_LOG:
        yield
        return
    import json
    import time

    cpu, wall = _cpu_now(), time.monotonic()
    yield
    row = {"test": item.nodeid, "cpu_s": round(_cpu_now() - cpu, 3), "wall_s": round(time.monotonic() - wall, 3)}
    with open(_CPU_LOG, "a") as f:
        f.write(json.dumps(row) + "\n")


# ------------------------------------------------------------------ which test is running
# Dots sat silent for minutes while one slow test ran. The process that reports (the only one, or pytest-xdist's
# controller, which hears each worker's test start and finish) says which tests have run past a minute, and again
# each further minute, on the terminal pytest writes to.
SLOW_NOTICE_S = float(os.environ.get("ALBERT_LENS_SLOW_NOTICE_S", "60"))
_RUNNING: dict[str, float] = {}


def pytest_runtest_logstart(nodeid, location):
    import time

    _RUNNING[nodeid] = time.monotonic()


def pytest_runtest_logfinish(nodeid, location):
    _RUNNING.pop(nodeid, None)


def pytest_sessionstart(session):
    import threading
    import time

    config = session.config
    if hasattr(config, "workerinput"):  # an xdist worker: its controller reports
        return
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    capman = config.pluginmanager.get_plugin("capturemanager")
    if reporter is None:
        return

    def say(line: str) -> None:
        # in a single process the tests' output is captured at the file descriptor: write to the saved terminal
        saved = getattr(getattr(getattr(capman, "_global_capturing", None), "out", None), "targetfd_save", None)
        if saved is not None and not hasattr(config, "workerinput") and not _xdist_controller(config):
            os.write(saved, (line + "\n").encode())
        else:
            reporter.write_line(line)

    def watch() -> None:
        told: dict[str, int] = {}
        while True:
            time.sleep(5)
            now = time.monotonic()
            for nodeid, started in list(_RUNNING.items()):
                minutes = int((now - started) // SLOW_NOTICE_S)
                if minutes >= 1 and told.get(nodeid, 0) < minutes:
                    told[nodeid] = minutes
                    say(f"\n[still running after {minutes * int(SLOW_NOTICE_S)} s] {nodeid}")

    threading.Thread(target=watch, name="slow-test-notice", daemon=True).start()


def _xdist_controller(config) -> bool:
    return getattr(config.option, "numprocesses", None) not in (None, 0) and not hasattr(config, "workerinput")


# ------------------------------------------------------------------ the order files run in
# pytest-xdist (`--dist loadgroup`) hands tests and groups to workers in collection order: the longest first, so that no
# worker is left running a long file alone at the end (a browser test started last kept one core idle for minutes).
# Seconds per file on a quiet two-core AMD machine, from `./run test`'s durations; files not listed follow. (`./run
# test` passes --no-loadscope-reorder: xdist otherwise sends the groups with the most tests first.)
LONGEST_FIRST = ["test_docs.py", "test_offline.py", "test_browser.py", "test_hostile.py", "test_precision.py",
                 "test_device.py", "test_attacks.py", "test_checklist.py", "test_engine.py", "test_report.py",
                 "test_projection.py", "test_hosting.py", "test_base_size.py", "test_workers.py",
                 "test_explanation.py", "test_similarity.py", "test_gpu_bench.py", "test_faithfulness.py"]


# A test whose fixtures are all built per test or per worker (function or session scope) goes to whichever worker
# is free, on its own (`./run test` uses `--dist loadgroup`); a test with a module- or class-scoped fixture (a server,
# a browser, a suite's run) stays with its file, so that fixture is built once. The docs' commands were one 400 s
# file on one worker, and the last minutes of a run one worker's alone.


def _grouped(item) -> bool:
    defs = getattr(getattr(item, "_fixtureinfo", None), "name2fixturedefs", {}) or {}
    return any(d.scope in ("module", "class", "package") for ds in defs.values() for d in ds)


def pytest_configure(config):
    config.addinivalue_line("markers", "xdist_group(name): tests pytest-xdist's loadgroup keeps on one worker")


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's own, which names each test's group from these marks
def pytest_collection_modifyitems(session, config, items):
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: each file keeps its own order
    grouping = bool(getattr(config.option, "loadgroup", False))  # an xdist worker under --dist loadgroup
    for item in items:
        if item.get_closest_marker("xdist_group") is None and _grouped(item):
            item.add_marker(pytest.mark.xdist_group(item.path.stem))
            if grouping and "@" not in item.nodeid:
                _name_group(item, item.path.stem)


def _name_group(item, group: str) -> None:
    """Put the group in the test's id, where xdist's scheduler reads it (`path::test@group`): xdist 3.8 writes it
    to `item._nodeid`, which pytest 9 no longer reads (it keeps the id in `item._id`), so every test ran as a group
    of its own and a module fixture was built again each time another file's test ran between two of its tests."""
    from _pytest.nodeid import coerce_node_id

    item._id = coerce_node_id(f"{item.nodeid}@{group}")
