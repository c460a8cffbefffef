import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from app.core.ground import runtime

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture()
def probe(monkeypatch):
    """The probe itself, with the suite's hub pin lifted for this test only (conftest pins it off)."""
    for flag in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "ALBERT_LENS_ASSUME_ONLINE"):
        monkeypatch.delenv(flag, raising=False)
    runtime.hub_reachable.cache_clear()
    yield monkeypatch
    runtime.hub_reachable.cache_clear()


def test_hub_probe_says_no_when_nothing_answers(probe):
    with socket.socket() as s:  # a port nothing listens on: refused at once
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    probe.setattr(runtime, "HUB_HOST", "127.0.0.1")
    probe.setattr(runtime, "HUB_PORT", port)
    assert runtime.hub_reachable(3.0) is False


def test_hub_probe_says_yes_when_the_hub_answers(probe):
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        probe.setattr(runtime, "HUB_HOST", "127.0.0.1")
        probe.setattr(runtime, "HUB_PORT", server.getsockname()[1])
        assert runtime.hub_reachable(3.0) is True


def test_hub_probe_gives_up_on_a_hanging_lookup(probe):
    """A DNS lookup ignores socket timeouts; the probe stops waiting for it instead of hanging the app."""
    release = threading.Event()

    def hang(*a, **k):
        release.wait(30)
        raise OSError("never answered")

    probe.setattr(socket, "create_connection", hang)
    t0 = time.perf_counter()
    try:
        assert runtime.hub_reachable(0.2) is False
        assert time.perf_counter() - t0 < 10  # 0.7 s when it works: it did not wait for the 30 s lookup
    finally:
        release.set()


def test_assume_online_skips_the_probe(probe):
    probe.setenv("ALBERT_LENS_ASSUME_ONLINE", "1")
    probe.setattr(socket, "create_connection", lambda *a, **k: pytest.fail("probed the network"))
    assert runtime.hub_reachable() is True


def test_offline_switch_short_circuits(monkeypatch):
    runtime.hub_reachable.cache_clear()
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert runtime.hub_reachable() is False
    runtime.hub_reachable.cache_clear()


def test_textattack_imports_offline_with_no_nltk_data(tmp_path):
    """A fresh cache and no NLTK_DATA: the project materialises stop words and TextAttack's marker itself."""
    env = {k: v for k, v in os.environ.items() if k not in {"NLTK_DATA", "TA_CACHE_DIR"}}
    env.update(ALBERT_LENS_CACHE=str(tmp_path / "cache"), HOME=str(tmp_path / "home"), HF_HUB_OFFLINE="1",
               ALBERT_LENS_SHARED_DATA=str(tmp_path / "no-shared-data"))
    code = ("import app.core, nltk; from app.core.ground.compat import import_textattack; "
            "textattack = import_textattack(); "
            "print(len(nltk.corpus.stopwords.words('english')), textattack.__name__)")
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stderr[-2000:]
    n, name = out.stdout.split()[-2:]
    assert int(n) > 100 and name == "textattack"
    stop = tmp_path / "cache" / "nltk_data" / "corpora" / "stopwords" / "english"
    assert "the" in stop.read_text().split()
    assert (tmp_path / "cache" / "textattack" / "post_install_check_3").is_file()
    assert oct(stop.parent.stat().st_mode & 0o777) == "0o755"


def test_every_command_finds_the_nltk_data_beside_the_checkout(tmp_path):
    """`./run test` pointed NLTK_DATA at ../shared/data/nltk_data for the tests alone: `./run app` had no tagger,
    so WordNet swaps took every part of speech there while the README promised the word's own. Now any entry
    point reads the folder beside the checkout (after a given NLTK_DATA)."""
    beside = runtime.PROJECT_ROOT.parent / "shared" / "data" / "nltk_data"
    assert (beside / "taggers").is_dir(), "this test needs ../shared/data beside the checkout"
    env = {k: v for k, v in os.environ.items() if k not in {"NLTK_DATA", "ALBERT_LENS_SHARED_DATA"}}
    env.update(ALBERT_LENS_CACHE=str(tmp_path / "cache"), HF_HUB_OFFLINE="1")
    code = ("import app.core, nltk, os; print(nltk.pos_tag(['the', 'film', 'was', 'good'], tagset='universal')); "
            "print(os.environ['NLTK_DATA'])")
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stderr[-2000:]
    tags, dirs = out.stdout.strip().splitlines()[-2:]
    assert tags == "[('the', 'DET'), ('film', 'NOUN'), ('was', 'VERB'), ('good', 'ADJ')]"
    assert dirs.split(os.pathsep)[0] == str(beside)


def test_log_lines_are_bounded_whoever_logs_them(monkeypatch):
    """LIT logged each rejected input whole (a 10 MB request wrote 10 MB): once a server bounds its log lines,
    every record is cut when it is made, LIT's and absl's included, with its full length said."""
    import io
    import logging

    from app.core.ground import runtime

    monkeypatch.setattr(runtime, "_BOUNDED", False)
    # the plain factory (a LIT server started earlier in this process bounded its own), restored afterwards
    monkeypatch.setattr(logging, "_logRecordFactory", logging.LogRecord)
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    for name in ("absl", "lit_nlp.app", "albert_lens.lit"):
        logging.getLogger(name).addHandler(handler)
    try:
        runtime.bounded_log_lines(limit=100)
        runtime.bounded_log_lines(limit=100)  # a second call wraps nothing twice
        logging.getLogger("absl").warning("rejected %s", "x" * 10_000_000)
        logging.getLogger("lit_nlp.app").warning("short")
    finally:
        for name in ("absl", "lit_nlp.app", "albert_lens.lit"):
            logging.getLogger(name).removeHandler(handler)
    lines = stream.getvalue().splitlines()
    assert lines[0] == "rejected " + "x" * 91 + "… (10,000,009 characters, cut)"
    assert lines[1] == "short"
