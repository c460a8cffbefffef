"""The README and docs/ as a newcomer runs them: every `albert-lens` command in a bash block runs with its flags as
written (exit 0), every gradio_client call in a python block runs against a live app, every image the README shows
exists, and the front page stays short.

What this checks is plumbing (the flags parse, the command's whole path runs, it says something), so a command over
a dataset or a suite, or that times the pair (`facts`), runs on the suite's tiny pair in place of `--pair offline`
(most of their CPU was the offline pair's forward passes); the commands on a sentence, and the documented `report`
(test_report.py, which reads every section of it: the techniques over SST-2 on the offline pair), run on the offline
pair exactly as written. The offline pair's numbers on those datasets are other tests' subject (test_checklist,
test_precision, test_device, test_attacks, ...).

Not run here: `./run app` and `./run test` (CI itself runs the second, the first is the app's launch, tested in
test_ui.py), and `albert-lens app` / `albert-lens lit`, which start servers: their lines are parsed with the CLI's
own parser (a renamed flag fails) and both servers are started by test_ui.py and test_lit.py. Commands that take
minutes (train-offline) are in `text` blocks, which say so.
"""
import re
import shlex
from pathlib import Path

import pytest

from .conftest import tiny_models

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SERVERS = ("app", "lit")


def _blocks(page: Path, lang: str) -> list[str]:
    return re.findall(rf"^```{lang}\n(.*?)^```", page.read_text(encoding="utf-8"), flags=re.S | re.M)


def _commands(page: Path) -> list[str]:
    """Each `albert-lens` line of the page's bash blocks, continuation lines joined."""
    out = []
    for block in _blocks(page, "bash"):
        for line in block.replace("\\\n", " ").splitlines():
            words = shlex.split(line, comments=True)
            while words and "=" in words[0] and not words[0].startswith("-"):  # VAR=value before the command
                words = words[1:]
            if words and words[0] == "albert-lens":
                out.append(words[1:])
    return out


ALL = sorted({tuple(c) for page in PAGES for c in _commands(page)})


def test_the_pages_have_commands_and_every_page_starts_with_an_example():
    assert len(ALL) >= 25
    for page in (ROOT / "docs").glob("*.md"):
        text = page.read_text(encoding="utf-8")
        assert len(text[:text.index("```")].splitlines()) <= 8, f"{page.name}: its example should come first"


# a command another test runs as written and reads every output of, instead of running it twice
RUN_ELSEWHERE = {"report": "tests/test_report.py::test_report_has_every_table_and_figure_and_reuses_its_cache"}


def test_the_commands_run_elsewhere_are_on_the_pages_once():
    for name in RUN_ELSEWHERE:
        assert len([c for c in ALL if c[0] == name]) == 1, name


def on_the_tiny_pair(args: list[str], tiny_dirs: dict) -> list[str]:
    """`args` with `--pair offline` swapped for the tiny pair where the command reads a dataset or a suite, or
    times the pair (`facts`: its latency and throughput, repeated runs over shipped examples)."""
    if not ({"--dataset", "--suite"} & set(args) or args[0] == "facts") or "--pair" not in args:
        return args
    at = args.index("--pair")
    assert args[at + 1] == "offline", args  # a documented dataset command on another pair: decide its pair here
    return args[:at] + tiny_models(tiny_dirs) + args[at + 2:]  # offline is an SST-2 pair, as the tiny one is


def test_dataset_commands_swap_only_their_pair():
    dirs = {"bert": "B", "albert": "A"}
    sentence = ["predict", "--pair", "offline", "Fine."]
    assert on_the_tiny_pair(sentence, dirs) == sentence
    assert on_the_tiny_pair(["facts", "--pair", "offline"], dirs) == ["facts", "--models", "B", "A", "--task", "sst2"]
    assert on_the_tiny_pair(["slices", "--pair", "offline", "--dataset", "d.tsv", "--limit", "9"], dirs) == [
        "slices", "--models", "B", "A", "--task", "sst2", "--dataset", "d.tsv", "--limit", "9"]
    run_here = [list(c) for c in ALL if c[0] not in SERVERS]
    assert sum(1 for c in run_here if on_the_tiny_pair(c, dirs) != c) >= 15
    # the command-line parser takes the swapped form of every documented dataset command
    from app.cli import build_parser

    for c in run_here:
        build_parser().parse_args(on_the_tiny_pair(c, dirs))


@pytest.mark.parametrize("args", [c for c in ALL if c[0] not in SERVERS and c[0] not in RUN_ELSEWHERE],
                         ids=lambda c: " ".join(c)[:80])
def test_every_command_runs_as_written(args, checkout, tiny_dirs, capsys, monkeypatch):
    import logging

    from app.cli import main

    # the CLI's logging.basicConfig binds the stderr of its first call: here each command's own
    monkeypatch.setattr(logging.root, "handlers", [])
    assert main(on_the_tiny_pair(list(args), tiny_dirs)) == 0, capsys.readouterr().err[-2000:]
    out = capsys.readouterr()
    assert out.out.strip() or out.err.strip()  # it said something


def test_server_commands_parse_with_the_clis_own_parser():
    from app.cli import build_parser

    servers = [c for c in ALL if c[0] in SERVERS]
    assert {c[0] for c in servers} == set(SERVERS)
    for c in servers:
        build_parser().parse_args(list(c))


def test_the_gradio_client_calls_run_against_a_live_app(client):
    """docs/api.md's block against a live app (its address swapped in), and what it prints."""
    import contextlib
    import io

    blocks = [b for page in PAGES for b in _blocks(page, "python") if "gradio_client" in b]
    assert len(blocks) == 1
    out, ns = io.StringIO(), {}
    with contextlib.redirect_stdout(out):
        exec(blocks[0].replace('Client("http://127.0.0.1:7860/")', f'Client("{client.src}", verbose=False)'), ns)
    first, second = out.getvalue().splitlines()
    assert ns["result"]["recipe"] == "deepwordbug" and "success_rate" in second  # the attack's defaults applied
    assert first.count("'positive'") + first.count("'negative'") == 2  # both maps, one class each


def test_the_readme_shows_every_tab_in_a_small_picture_and_its_quickstart_is_short():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    body = text.split("---", 2)[2]  # after the Space's front matter
    images = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", body)
    assert len(images) == 10  # a picture per tab, and Counterfactuals' pinned edits
    for img in images:
        assert (ROOT / img).is_file() and (ROOT / img).stat().st_size > 5_000, img
    assert sum(p.stat().st_size for p in (ROOT / "docs" / "images").glob("*")) < 2 * 2**20
    first = next(i for i, line in enumerate(body.splitlines()) if line.startswith("!["))
    assert first < 60
    for link in re.findall(r"\]\(((?:docs|benchmarks)/[^)#]+)", text):
        assert (ROOT / link).is_file(), link
