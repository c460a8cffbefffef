"""What every tab shares: the request guard (jobs, Stop, errors as messages), the concurrency groups, where heavy
work runs, and the small widgets (dataset field, JSON accordion, a tab's one-line description)."""
from __future__ import annotations

import contextvars
import functools
import html
import inspect
import logging
import numbers
import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import gradio as gr
from gradio.context import LocalContext

from app.core import api
from app.core.ground.errors import LensError
from app.core.present import views

log = logging.getLogger("albert_lens.ui")
MAX_UPLOAD_MB = 20

_RUNNING: dict[str, set[api.Job]] = {}  # session -> its running jobs, which its Stop buttons cancel
_RUNNING_LOCK = threading.Lock()


def _event_alive() -> Callable[[], bool] | None:
    """Whether the client of the event this thread runs is still there: Gradio marks a queued event's job dead
    when its client's stream closes (tab closed, network gone), but a function already running in a worker thread
    is never told; the core asks this between batches instead. gradio_client's `cancel()` (Gradio's /cancel) ends
    the event's task instead, which takes the event off the queue's list while the function's thread runs on:
    an event that was listed and no longer is, asked from inside its still-running function, was cancelled."""
    blocks, event_id = LocalContext.blocks.get(None), LocalContext.event_id.get(None)
    if blocks is None or event_id is None or getattr(blocks, "_queue", None) is None:
        return _connection_alive()
    queue = blocks._queue

    def listed() -> bool | None:
        """The event's `alive` flag while the queue lists it, None once it doesn't."""
        for group in list(queue.active_jobs):
            for event in group or ():
                if event._id == event_id:
                    return bool(event.alive)
        return None

    if listed() is None:  # not a queued event (a REST call straight to the function): its own connection tells
        return _connection_alive()

    return lambda: bool(listed())  # no longer listed while its function runs: cancelled


CONNECTION_CHECK_S = 0.2  # how often a direct call asks the server loop whether its client's connection closed


def _connection_alive() -> Callable[[], bool] | None:
    """For a function called straight through Gradio's REST route (`/run/<name>`, which the normal app offers):
    whether the HTTP client is still connected, asked of the server's event loop (the function runs in one of
    anyio's worker threads), at most every `CONNECTION_CHECK_S`."""
    request = getattr(LocalContext.request.get(None), "request", None)
    if request is None or not hasattr(request, "is_disconnected"):
        return None
    import anyio.from_thread

    state = {"gone": False, "asked": time.monotonic()}  # a quick call (/predict) never asks

    def alive() -> bool:
        now = time.monotonic()
        if not state["gone"] and now - state["asked"] >= CONNECTION_CHECK_S:
            state["asked"] = now
            try:
                state["gone"] = bool(anyio.from_thread.run(request.is_disconnected))
            except RuntimeError:  # not in a thread anyio started: nothing to ask
                return True
        return not state["gone"]

    return alive


def _session_key(request=None) -> str:
    request = request or LocalContext.request.get(None)
    return getattr(request, "session_hash", None) or "default"


def guarded(fn):
    """Each handler runs as a job (this server's time budget, stopped when its client leaves or presses Stop);
    errors become messages in the UI (escaped), never tracebacks, that stay until the reader closes them (Gradio's
    default closed them after 10 s, leaving bare "Error" badges and no reason)."""

    @functools.wraps(fn)
    def inner(*args, **kwargs):
        job = api.job(alive=_event_alive(), name=fn.__name__)
        key = _session_key()
        with _RUNNING_LOCK:
            _RUNNING.setdefault(key, set()).add(job)
        try:
            with api.running(job):
                return fn(*args, **kwargs)
        except gr.Error:
            raise
        except LensError as exc:
            raise gr.Error(html.escape(api.public_message(str(exc)), quote=False), duration=None,
                           print_exception=False) from None
        except Exception as exc:  # noqa: BLE001 - the app must keep serving
            log.exception("handler %s failed", fn.__name__)
            raise gr.Error(f"something went wrong in {fn.__name__.removeprefix('do_')} ({type(exc).__name__}); "
                           "the server logged it. Check the inputs or try again.", duration=None,
                           print_exception=False) from None
        finally:
            with _RUNNING_LOCK:
                running = _RUNNING.get(key)
                if running is not None:
                    running.discard(job)
                    if not running:
                        _RUNNING.pop(key, None)

    return inner


def stop_session(request: gr.Request) -> str:
    """The Stop buttons: every job of this browser session ends at its next batch."""
    with _RUNNING_LOCK:
        running = list(_RUNNING.get(_session_key(request), ()))
    for job in running:
        job.cancel()
    return "stopping after the current batch ..." if running else "nothing is running"


def action(trigger, fn: Callable, inputs, outputs: list, **event):
    """`trigger.click(fn, inputs, outputs, **event)`, with the action's previous outputs cleared the moment it
    is clicked: a run that fails leaves its message beside empty outputs, never above the last run's results
    (which would read as this run's). The clearing runs in the page's own event, outside the queue; the
    endpoint that `event`'s api_name names (gradio_client's) is `fn` alone."""
    blank = (lambda: None) if len(outputs) == 1 else (lambda: [None] * len(outputs))
    cleared = trigger.click(blank, None, outputs, queue=False, api_name=False, show_progress="hidden")
    return cleared.then(fn, inputs, outputs, **event)


def stop_button(target) -> None:
    gr.Button("Stop", size="sm").click(stop_session, None, target, queue=False, api_name=False)


# Concurrency groups: a cheap prediction never waits in a queue behind explanations (`single`), and those never
# behind work over a dataset (`dataset`). One explanation and one job over a dataset at a time: on two cores each
# already uses both, and a second of each only slowed /predict (16 users, browser-like p50 305 -> 187 ms, p95
# 1.29 -> 0.70 s; benchmarks/README.md) at the same requests served. ALBERT_LENS_CONCURRENCY sets the dataset
# slots on a larger machine.
# /predict skips the queue (`direct`): the page then POSTs it to /run/predict and has its answer in the response,
# where a queued event waits for the queue's 50 ms pick-up poll and the event stream's 50 ms poll (idle p50 70 ms
# of which ~10 ms is the models). The queue's limit no longer applies there, so `direct` holds its own slots: 16,
# since concurrent predictions share forward passes (`api.predict`, app/core/execution/batching.py): a waiting
# request costs
# a blocked thread, and the passes grow with the waiting (16 users beside LIME and an attack, 4 slots -> 16:
# ~50 -> ~80 answers a second; benchmarks/README.md).
DIRECT_SLOTS = 16
SINGLE = {"concurrency_id": "single", "concurrency_limit": 1}
DATASET = {"concurrency_id": "dataset",
           "concurrency_limit": max(1, int(os.environ.get("ALBERT_LENS_CONCURRENCY", "1")))}


class Heavy:
    """Where an explanation (`single`) or work over a dataset (`dataset`) runs: here, or in a worker process of the
    facade's pools (hosted mode: /predict then keeps the server's interpreter and the cores' first call)."""

    def __init__(self, pools: dict | None = None):
        self.pools = pools or {}

    def _run(self, group: str, fn, *args, **kwargs):
        pool = self.pools.get(group)
        return pool.call(fn, *args, **kwargs) if pool is not None else fn(*args, **kwargs)

    def single(self, fn, *args, **kwargs):
        return self._run("single", fn, *args, **kwargs)

    def dataset(self, fn, *args, **kwargs):
        return self._run("dataset", fn, *args, **kwargs)

    def close(self) -> None:
        for pool in self.pools.values():
            pool.close()


@dataclass
class Ctx:
    """What a tab's handlers are given besides the inputs: the pair and where heavy work runs. A test builds one
    with `Ctx.of(pair)` and calls a handler as a plain function, no server."""
    pair: api.Pair
    heavy: Heavy
    hosted: bool
    datasets: list  # (label, value) choices of every dataset field: the shipped examples, the released dev set
    # linked views: the shared example's two text boxes (`text_inputs`) and the line under them that says where a
    # picked example came from and its gold label; the tables that load one into them
    inputs: list = field(default_factory=list)
    note: object = None
    # every dataset field, with its own choices: a slice picked in one tab becomes every dataset-level tab's dataset
    dataset_fields: list = field(default_factory=list)
    slice_buttons: list = field(default_factory=list)
    save_buttons: list = field(default_factory=list)  # (button, inputs, save): `save_as_dataset`
    links: list = field(default_factory=list)
    # what re-runs when a pick sets the example: (handler, inputs, outputs), Compare's prediction
    on_pick: list = field(default_factory=list)

    def link(self, table, source, texts_of: Callable, switch: bool = True, note_of: Callable | None = None,
             rows_of: Callable | None = None) -> None:
        """Picking a row of `table` loads `texts_of(res, row)` (`res`: the value of `source`, the tab's JSON or
        state) into every tab's text boxes, `note_of(res, row)` (`views.picked_note`: where it came from, its
        gold label) under them, and, with `switch`, opens Compare. `rows_of(res)`: the table as the server sent it
        (`picked_row`). `table` may be a Textbox the page's script fills (`CLICK_JS`: a point clicked on a plot):
        `row` is then its value."""
        if rows_of is None and not isinstance(table, gr.Textbox):
            raise TypeError("Ctx.link: a table needs rows_of (a sorted table's pick is found by its values)")
        self.links.append((table, source, texts_of, switch, note_of, rows_of))

    @classmethod
    def of(cls, pair: api.Pair, heavy: Heavy | None = None) -> Ctx:
        named = list(api.shipped_datasets()) + list(api.released_datasets(pair))
        hosted = api.limits()["hosted"]
        # locally, the sets saved before (by the app or the command line) are offered from the start
        kept = [] if hosted else [(s.label, s.spec) for s in api.saved_sets()]
        return cls(pair, heavy or Heavy(), hosted, [(n, n) for n in named] + kept)

    @property
    def names(self) -> list[str]:
        return [m.name for m in self.pair.models]

    @property
    def dev(self) -> str | None:
        """The released dev split by name (the study's UMAPs, flip rates and attacks ran on it)."""
        return next(iter(api.released_datasets(self.pair)), None)

    @property
    def default_dataset(self) -> str:
        """Every dataset field's first value, the same in every tab: the released dev split where it is here (what
        Benchmark scores), else the shipped examples. Projection and Saliency had started on the 30 shipped
        examples beside Benchmark's SST-2 dev, and "above 70% of sentiment_plain's 30" read as SST-2's."""
        return self.dev or api.default_dataset(self.pair)


def bind(fn: Callable, ctx: Ctx) -> Callable:
    """`fn(ctx, *inputs)` as Gradio's handler of the inputs: its name kept (errors and logs name it), its
    signature without `ctx` (Gradio reads the defaults that make a gradio_client input optional, and `progress`)."""

    @functools.wraps(fn)
    def handler(*args, **kwargs):
        return fn(ctx, *args, **kwargs)

    sig = inspect.signature(fn)
    handler.__signature__ = sig.replace(parameters=list(sig.parameters.values())[1:])
    handler.__name__ = f"do_{fn.__name__}"  # the job's name: a tab's handler is named as its endpoint
    return guarded(handler)


def _off_the_queue(request) -> bool:
    """Whether the event came by the page's direct POST (/run/NAME), not through the queue (gradio_client's)."""
    path = getattr(getattr(request, "url", None), "path", "") or ""
    return "/run/" in path


def direct(handler: Callable, slots: int = DIRECT_SLOTS, shown_error: Callable[[str], tuple] | None = None) -> dict:
    """Event kwargs for a cheap handler served outside the queue, at most `slots` at a time, each client (its
    address) at most its share of them (`api.Shares`: hosted, 2 running and 2 waiting; a request past that is
    refused at once rather than holding a server thread), a freed slot going to the client that holds fewest.
    `shown_error(message)`: the outputs that show a refusal on the page. Gradio's page closes the message of an
    event outside the queue after 10 s whatever it is told (leaving bare "Error" badges); the page's run then
    answers with the message in its outputs, where it stays until the next run. A queued call (gradio_client's)
    still gets the error."""
    caps = api.limits()
    shares = api.Shares(slots, min(slots, int(caps["client_slots"])), int(caps["client_waiting"]),
                        wait_s=float(caps["request_seconds"]), what=handler.__name__.removeprefix("do_"))
    proxies = caps["proxies"]

    @functools.wraps(handler)
    def gated(*args, **kwargs):
        request = LocalContext.request.get(None)  # the event's request, as Gradio records it for the handler
        peer = getattr(getattr(request, "client", None), "host", None)
        client = api.client_key(peer, getattr(request, "headers", None), proxies)
        try:
            try:
                with shares.slot(client):
                    return handler(*args, **kwargs)
            except (api.TooMany, api.SharesBusy) as exc:
                raise gr.Error(html.escape(str(exc), quote=False), duration=None, print_exception=False) from None
        except gr.Error as exc:
            if shown_error is None or not _off_the_queue(request):
                raise
            return shown_error(exc.message)

    gated.shares = shares
    # a client that queues it anyway (gradio_client always does) gets the same slots in a group of its own
    return {"fn": gated, "queue": False, "concurrency_id": "predict", "concurrency_limit": slots}


def on_select(fn: Callable, ctx: Ctx, rows_of: Callable) -> Callable:
    """`fn(ctx, res, row)` as the handler of a table's row being picked, `res` the tab's JSON output (the table
    shows a shortened view of it) and `row` the picked row's place in the table as the server sent it,
    `rows_of(res)` (`picked_row`). Gradio finds the event's data by its type hint, which a `functools.partial`
    hides."""

    def picked(res: dict | None, evt: gr.SelectData):
        return fn(ctx, res, picked_row(rows_of(res) if res else None, evt))

    return picked


def picked_row(sent, evt: gr.SelectData) -> int | None:
    """The picked row's place in `sent`, the table as the server sent it (a DataFrame or a list of rows). A table
    the visitor sorted (its header's menu) numbers its rows as shown, and so does the event: sorted descending,
    the first row opened the unsorted table's first example. The row's values (`evt.row_value`) find it; where
    several rows hold the same values, the one at the event's index if it is among them."""
    row = evt.index[0] if isinstance(evt.index, list | tuple) else evt.index
    row = None if row is None else int(row)
    values = getattr(evt, "row_value", None)
    if sent is None or values is None:
        return row
    rows = sent.values.tolist() if hasattr(sent, "values") else list(sent)
    hits = [i for i, r in enumerate(rows) if len(r) == len(values) and all(map(_same_cell, r, values))]
    return row if not hits or row in hits else hits[0]


def _same_cell(sent, shown) -> bool:
    """A cell as the server sent it and as the page hands it back: numbers through JSON, None for NaN."""
    def missing(v) -> bool:
        return v is None or (isinstance(v, float) and v != v)

    if missing(sent) or missing(shown):
        return missing(sent) and missing(shown)
    if isinstance(sent, numbers.Real) and not isinstance(sent, bool) and isinstance(shown, int | float | str):
        try:
            return abs(float(sent) - float(shown)) <= 1e-9 * max(1.0, abs(float(sent)))
        except ValueError:
            return False
    return str(sent) == str(shown)


def on_select_range(fn: Callable, ctx: Ctx, *args) -> Callable:
    """`fn(ctx, state, *args, span)` as the handler of a range drawn on a plot (`span`: its x range)."""

    def selected(state, evt: gr.SelectData):
        return fn(ctx, state, *args, evt.index)

    return selected


def load_texts(texts: list[str] | None, n_boxes: int, switch: bool, note: str = "") -> list:
    """The outputs of a picked row: the example's fields into the shared (text, text2) boxes; Compare opened;
    the note under the boxes (where it came from, its gold label)."""
    if not texts:
        return [gr.update()] * (n_boxes + 2)
    pair_ = (list(texts) + [""])[:2]
    return [*(pair_ * (n_boxes // 2)), gr.Tabs(selected="compare") if switch else gr.update(), note]


def wire_links(ctx: Ctx, tabs: gr.Tabs) -> None:
    """After every tab is built: each linked table sets the shared example (`Ctx.link`) and, when it opens
    Compare, Compare answers for it at once (`Ctx.on_pick`)."""
    for table, source, texts_of, switch, note_of, rows_of in ctx.links:
        def load(ctx_: Ctx, res, row, texts_of=texts_of, switch=switch, note_of=note_of):
            texts = texts_of(res, row) if res and row is not None else None
            note = note_of(res, row) if texts and note_of is not None else ""
            return load_texts(texts, len(ctx_.inputs), switch, note)

        if isinstance(table, gr.Textbox):  # a box the page's script fills (a point clicked on a plot)
            picked = table.input(lambda res, value, load=load: load(ctx, res, value), [source, table],
                                 [*ctx.inputs, tabs, ctx.note], api_name=False, queue=False)
        else:
            picked = table.select(on_select(load, ctx, rows_of), source, [*ctx.inputs, tabs, ctx.note],
                                  api_name=False, queue=False)
        if switch:
            for fn, inputs, outputs in ctx.on_pick:
                picked.success(when_given(fn, len(outputs)), inputs, outputs, api_name=False, queue=False)
            # the page shows Compare from its top, where the example and its answer are (a point tapped on a
            # phone opened Compare scrolled far below its answer)
            picked.then(None, None, None, js=SCROLL_TO_EXAMPLE_JS, api_name=False, queue=False)


SCROLL_TO_EXAMPLE_JS = """() => {
  const box = document.getElementById("example-text");
  if (box) box.scrollIntoView({block: "start"});
}"""


def when_given(fn: Callable, n_outputs: int) -> Callable:
    """`fn` for an example that has a text; outputs left as they are otherwise (a pick that loaded nothing)."""

    @functools.wraps(fn)
    def run(*args, **kwargs):
        if not (args and str(args[0] or "").strip()):
            return gr.update() if n_outputs == 1 else [gr.update()] * n_outputs
        return fn(*args, **kwargs)

    return run


def describe(text: str) -> None:
    """A tab's first line: what it answers and how to read it."""
    gr.Markdown(f"<small>{text}</small>")


def json_out(what: str = "result") -> gr.JSON:
    """The full result for whoever wants it, closed: the page shows the figures first."""
    with gr.Accordion(f"{what} as JSON", open=False):
        out = gr.JSON(label="JSON", show_label=False)
    # Gradio 5's JSON hands back a pydantic RootModel, which the queue's messages dump but its direct route
    # (/run/<api>, the page's way to call an event off the queue, `direct`) turns into the string "root={...}":
    # the plain value serialises the same on both routes.
    postprocess = out.postprocess
    out.postprocess = lambda value: getattr(postprocess(value), "root", None)
    return out


def text_inputs(ctx: Ctx) -> tuple[gr.Textbox, gr.Textbox]:
    """The example every tab reads, shown once (the app puts it above the tabs): typed once, or set by a pick in
    any tab (a benchmark row, a slice, a CheckList failure, an attack's row, a projection point), which also has
    Compare answer for it. Rendered where it is first asked for; every later call gets the same two boxes."""
    if not ctx.inputs:
        fields, two_texts = ctx.pair.task.fields, ctx.pair.task.two_texts
        with gr.Row():
            t1 = gr.Textbox(label=f"{fields[0]} · the example every tab reads", lines=2, max_lines=8,
                            elem_id="example-text")
            t2 = gr.Textbox(label=fields[1] if two_texts else "second text", lines=2, visible=two_texts,
                            elem_id="example-text2")
        ctx.note = gr.Markdown(elem_id="example-note")
        for box in (t1, t2):  # typing makes it the reader's own example: the pick's note goes
            box.input(lambda: "", None, ctx.note, api_name=False, queue=False, show_progress="hidden")
        ctx.inputs = [t1, t2]
    return ctx.inputs[0], ctx.inputs[1]


def dataset_field(ctx: Ctx, label: str, hint: str, value: str | None = None, extra: list | None = None,
                  **kw) -> gr.Dropdown:
    """A dataset dropdown of (name, value) choices: locally also a typed path or id (`hint` says which); hosted,
    the listed ones only, since typed server paths are refused there anyway (`api.readable`)."""
    choices = (extra or []) + ctx.datasets
    field_ = gr.Dropdown(choices, value=value, allow_custom_value=not ctx.hosted,
                         label=label if ctx.hosted else f"{label} ({hint})", **kw)
    ctx.dataset_fields.append((field_, choices))
    return field_


def use_as_dataset(ctx: Ctx, button, inputs: list, spec_of: Callable) -> None:
    """`button` makes a slice every dataset field's value: `spec_of(*inputs)` gives (its name, the
    `api.slice_spec` that reads it) or None. Each tab's dataset-level action then runs on the slice; the note
    under the example says so. Wired after every tab is built (`wire_links`), when all the fields exist."""
    ctx.slice_buttons.append((button, inputs, spec_of))


def save_as_dataset(ctx: Ctx, button, inputs: list, save: Callable) -> None:
    """`button` keeps examples as a saved set and makes it every dataset field's value: `save(*inputs, key=...)`
    saves them (`api.save_edits`, `key` this visitor's where hosted) and returns the `SavedSet`. Wired after every
    tab is built, with the slice buttons."""
    ctx.save_buttons.append((button, inputs, save))


def owner_key(ctx: Ctx, request=None) -> str | None:
    """Whose saved sets a request reads and writes: hosted, this browser session's own key; locally, the one
    folder the app and the command line share."""
    return api.visitor_key(_session_key(request)) if ctx.hosted else None


def saved_choices(ctx: Ctx, request=None) -> list[tuple[str, str]]:
    return [(s.label, s.spec) for s in api.saved_sets(owner_key(ctx, request))]


def _with(choices: list, more: list) -> list:
    """`choices` and then `more`, each value once (the later label wins: a set saved again has its new size)."""
    values = {v for _, v in more}
    return [c for c in choices if c[1] not in values] + list(more)


def wire_slice_buttons(ctx: Ctx) -> None:
    fields = ctx.dataset_fields
    for button, inputs, spec_of in ctx.slice_buttons:
        def use(*values, request: gr.Request = None, spec_of=spec_of):
            got = spec_of(*values)
            if not got:
                return [gr.update()] * len(fields) + ["<small>nothing picked yet: pick a row first</small>"]
            name, spec = got
            more = [*saved_choices(ctx, request), (name, spec)]
            return [gr.update(choices=_with(choices, more), value=spec) for _, choices in fields] + [
                views.slice_note(name)]

        button.click(use, inputs, [f for f, _ in fields] + [ctx.note], api_name=False, queue=False)
    for button, inputs, save in ctx.save_buttons:
        @guarded
        def kept(*values, request: gr.Request = None, save=save):
            got = save(*values, key=owner_key(ctx, request))
            more = saved_choices(ctx, request)
            return [gr.update(choices=_with(choices, more), value=got.spec) for _, choices in fields] + [
                views.saved_note(got, local=not ctx.hosted)]

        button.click(kept, inputs, [f for f, _ in fields] + [ctx.note], api_name=False, queue=False)


def upload_path(uploaded) -> str | None:
    if not uploaded:
        return None
    path = Path(uploaded if isinstance(uploaded, str) else uploaded.name)
    size = path.stat().st_size
    if size > MAX_UPLOAD_MB * 2**20:
        raise LensError(f"upload: {path.name} is {size / 2**20:.1f} MB; the limit is {MAX_UPLOAD_MB} MB")
    if path.suffix.lower() not in (".csv", ".tsv", ".jsonl"):
        raise LensError(f"upload: {path.name} is not a .csv, .tsv or .jsonl file")
    return str(path)


def uploaded_or_named(values: dict) -> dict:
    """A handler's `read`: a file dropped on the page is the dataset, else the named one."""
    return {"dataset": upload_path(values["uploaded"]) or values["dataset"]}


def left_text(elapsed: float, done: int, total: int) -> str:
    """", about 40 s left": the rest at the pace so far (nothing before the first step, or when it would say 0)."""
    if done <= 0 or done >= total:
        return ""
    left = elapsed * (total - done) / done
    if left < 1:
        return ""
    said = f"{left:.0f} s" if left < 90 else f"{left / 60:.0f} min" if left < 5400 else f"{left / 3600:.1f} h"
    return f", about {said} left"


class Ticker:
    """A run's progress on the page: the core's (done, total) as the bar and, every `every` seconds, the seconds
    so far, so that no action sits on a frozen bar: before the core's first report (and where it makes none, as
    for one sentence) an honest "working"; after its last step while the run goes on, "finishing". Single-
    sentence actions showed 0% or 10% for the whole run, and attention 100% from 0.7 s to 19 s."""

    def __init__(self, progress: Callable, desc: str, every: float = 1.0, clock: Callable[[], float] = time.monotonic):
        self.progress, self.desc, self.every, self.clock = progress, desc, every, clock
        self.started = clock()
        self.done: tuple[int, int] | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()

    def report(self, done: int, total: int) -> None:
        """The core's progress callback."""
        with self._lock:
            self.done = (int(done), max(int(total), 1))
        self.show()

    def show(self) -> None:
        seconds = f"{self.clock() - self.started:.0f} s"
        with self._lock:
            if self.done is None:
                self.progress((int(self.clock() - self.started), None), desc=f"{self.desc}: working", unit="s")
            elif self.done[0] >= self.done[1]:
                self.progress(1.0, desc=f"{self.desc}: finishing · {seconds}")
            else:
                d, n = self.done
                left = left_text(self.clock() - self.started, d, n)
                self.progress(d / n, desc=f"{self.desc} · {d:,} of {n:,} · {seconds}{left}")

    def _tick(self) -> None:
        while not self._stop.wait(self.every):
            try:
                self.show()
            except Exception:  # noqa: BLE001 - a page gone: the run itself says so
                return

    def __enter__(self) -> Callable[[int, int], None]:
        self.show()
        # Gradio finds the event's progress through context variables: the ticking thread runs in a copy of them
        threading.Thread(target=contextvars.copy_context().run, args=(self._tick,), daemon=True,
                         name=f"progress-{self.desc}").start()
        return self.report

    def __exit__(self, *exc) -> None:
        self._stop.set()


def ticking(progress: Callable, desc: str, every: float = 1.0) -> Ticker:
    """`with ticking(progress, desc) as report:` a run whose `report(done, total)` and elapsed seconds the page
    shows (`Ticker`)."""
    return Ticker(progress, desc, every)


@functools.lru_cache(maxsize=8)
def _task_examples(task) -> tuple:
    return tuple(api.shipped_examples(task, None if task.two_texts else 8))


def shipped(pair: api.Pair) -> tuple:
    """The shipped examples for the pair's task (read once: the Compare, Saliency and Attacks tabs all offer
    them); eight for single sentences, all the pairs."""
    return _task_examples(pair.task)


def examples(pair: api.Pair) -> list[list[str]]:
    return [list(e.texts) for e in shipped(pair)]



INPUTS = ("text", "text2", "dataset", "limit")  # a capability's inputs as the facade names them
# (capability, the module whose handler answers it): a tab's own handlers say which capabilities it shows, and
# the More tab (`declared`) shows the others
HANDLED: set[tuple[str, str]] = set()


def handler(capability: str, show: Callable, *, params: tuple[str, ...], extras: dict | None = None,
            where: str = "single", desc: str = "", endpoint: str = "", read: Callable | None = None,
            rest: bool = False, module: str = "") -> Callable:
    """A tab's handler of a declared capability, generated from its declaration: `handler(ctx, *params, progress)`,
    its parameters (gradio_client's, in this order) the capability's inputs and the options the tab shows, named
    and defaulting as declared (text required where the capability reads only one input), and the tab's own
    `extras` ({name: default}: an upload, a colour); an option the tab does not show keeps its declared default.
    It runs the facade's entry point (`api.NAME`, `api.run`'s) in the tab's worker group (`where`) with a progress
    bar and returns `show(ctx, res, values)`, the tab's outputs (`values`: every parameter by name, as `read` left
    them). `read(values)`: the values the tab's extras change (a file dropped on the page read instead of the
    dataset field: `uploaded_or_named`). `rest`: `params` are those the tab lays out, followed by every other
    option the capability declares (`with_rest`), read again when the page is built (`handler.fresh()`: a method
    or generator registered since, a plugin's, brings its options)."""
    laid_out = tuple(params)
    module = module or sys._getframe(1).f_globals.get("__name__", __name__)  # the tab's own
    params = with_rest(capability, laid_out) if rest else laid_out
    declaration = api.capabilities.get(capability)
    declared = {o.name: o for o in declaration.options}
    extras = extras or {}
    unknown = [n for n in params if n not in declared and n not in INPUTS and n not in extras]
    if unknown or len(set(params)) != len(params):
        raise ValueError(f"{capability}: parameters {unknown or params} are not its inputs, options or extras")
    P = inspect.Parameter

    def param(name: str) -> inspect.Parameter:
        if name in declared:
            return P(name, P.POSITIONAL_OR_KEYWORD, default=declared[name].default)
        if name == "text" and ("dataset" not in params or declaration.inputs == "both"):  # it reads one input
            # (explains it, or places it in the dataset): it is required
            return P(name, P.POSITIONAL_OR_KEYWORD, annotation=str)
        return P(name, P.POSITIONAL_OR_KEYWORD, default=extras.get(name))

    def run(ctx: Ctx, *args, **kwargs) -> tuple:
        # Gradio hands the progress tracker in at its parameter's place, after the tab's values
        progress = args[len(params)] if len(args) > len(params) else kwargs.pop("progress", gr.Progress())
        values = dict(zip(params, args)) | kwargs
        values = {p: values.get(p, run.__signature__.parameters[p].default) for p in params}
        values |= read(values) if read is not None else {}
        request = {k: v for k, v in values.items() if k in declared or k in INPUTS}
        with ticking(progress, desc or capability) as report:  # its entry point, which a worker pickles
            res = getattr(ctx.heavy, where)(getattr(api, capability), ctx.pair, **request, progress=report)
        return show(ctx, res, values)

    run.__signature__ = inspect.Signature([P("ctx", P.POSITIONAL_OR_KEYWORD), *map(param, params),
                                           P("progress", P.POSITIONAL_OR_KEYWORD, default=gr.Progress())])
    run.__name__ = run.__qualname__ = endpoint or capability
    run.params = tuple(params)
    run.__module__ = module  # the tab's own, as a written handler's
    HANDLED.add((capability, run.__module__))

    def fresh() -> Callable:
        """This handler, or one made again where the capability's options changed since (`rest`)."""
        if not rest or with_rest(capability, laid_out) == run.params:
            return run
        return handler(capability, show, params=laid_out, extras=extras, where=where, desc=desc, endpoint=endpoint,
                       read=read, rest=True, module=module)

    run.fresh = fresh
    run.__doc__ = declaration.help
    return run


def with_rest(capability: str, laid_out: tuple[str, ...]) -> tuple[str, ...]:
    """A handler's parameters: those a tab lays out itself, then every other option the capability declares (a
    plugin's method or generator options among them), which the tab shows as generated controls (`controls`)."""
    declared = [o.name for o in api.capabilities.get(capability).options]
    return (*laid_out, *(n for n in declared if n not in laid_out))


def control(option) -> gr.components.Component:
    """The control an option's declaration calls for: a menu of its choices, a checkbox, a number or a text box,
    at its declared default, labelled with its name and help."""
    label = f"{option.name}: {option.help}"
    if option.choices:
        return gr.Dropdown(list(option.choices), value=option.default, label=label)
    if option.kind is bool:
        return gr.Checkbox(value=option.default, label=label)
    if option.kind in (int, float):
        return number(value=option.default, label=label, precision=0 if option.kind is int else None)
    return gr.Textbox(value=option.default, label=label)


def controls(capability: str, laid_out: dict) -> dict:
    """`laid_out` ({name: component}, the tab's own) and a generated control for every other option the capability
    declares, in one row: a tab states each control once, by name, and its handlers read them by name (`inputs`)."""
    declaration = api.capabilities.get(capability)
    rest = [o for o in declaration.options if o.name not in laid_out]
    chosen = (declaration.parts or {}).get(declaration.option(declaration.chooses).default) \
        if declaration.chooses else None
    own = {o.name for o in api.capabilities.part_options(declaration.parts or {})}
    made = {}
    if rest:
        with gr.Row():
            for o in rest:  # a variant's option starts hidden unless the default variant reads it (`show_parts`)
                made[o.name] = control(o)
                if declaration.chooses and o.name in own:
                    made[o.name].visible = chosen is not None and chosen.reads(o.name)
    return {**laid_out, **made}


def wire(trigger, handler: Callable, ctx: Ctx, named: dict, outputs: list, **event):
    """`action(trigger, ...)` of `handler` as the capability is declared now (`handler.fresh()`), fed by the
    tab's controls by name (`inputs`)."""
    run = handler.fresh()
    return action(trigger, bind(run, ctx), inputs(run, named), outputs, **event)


def inputs(handler: Callable, named: dict) -> list:
    """The components that feed `handler`'s parameters, by name (`handler.params`): no second list matched by
    position, and a parameter without a control is an error when the page is built."""
    missing = [p for p in handler.params if p not in named]
    if missing:
        raise ValueError(f"{handler.__name__}: no control for {missing}")
    return [named[p] for p in handler.params]


def parts_read(capability: str, choice: str, names: list[str]) -> list[bool]:
    """For each option in `names`, whether the variant `choice` (a method, a generator) reads it."""
    part = (api.capabilities.get(capability).parts or {}).get(choice)
    return [part is not None and part.reads(n) for n in names]


def show_parts(capability: str, chooser, named: dict, extra: tuple[Callable, list] | None = None) -> None:
    """A variant's options shown only while the variant chosen in `chooser` (a method, a generator) reads them:
    integrated gradients' tolerance, a plugin method's own option. `extra`: (fn, its outputs), `fn(choice)` giving
    more updates for the same change (the counterfactual's dataset fields)."""
    parts = api.capabilities.get(capability).parts or {}
    shown = [n for n in (o.name for o in api.capabilities.part_options(parts)) if n in named]
    more, more_outputs = extra or (None, [])

    def visible(choice):
        updates = [gr.update(visible=v) for v in parts_read(capability, choice, shown)]
        return [*updates, *(more(choice) if more else ())]

    chooser.change(visible, chooser, [named[n] for n in shown] + list(more_outputs), api_name=False, queue=False)


def capped(n: int, key: str = "max_examples") -> int:
    """A count field's starting value, at most this server's cap (a larger number typed there is refused)."""
    return min(n, int(api.limits()[key]))


def default(capability: str, name: str):
    """An option's default as its capability declares it: a handler's default (what gradio_client sends when an
    input is left out) is never typed a second time."""
    return api.capabilities.get(capability).option(name).default


def option(capability: str, name: str):
    """An option as its capability declares it (`app.core.declare.capabilities`): a tab's control takes its choices and
    its default from here, so a method or generator declared there is offered here."""
    return api.capabilities.get(capability).option(name)


def slider(*args, **kwargs) -> gr.Slider:
    """gr.Slider whose value, when a client sends something that is not a number, reaches the core unchanged: the
    core's check names the field and its range (Gradio's own bounds check compared the string with a number and
    answered with no reason). An instance's `preprocess`, not a subclass: Gradio writes a .pyi beside the module
    of every component class it sees defined."""
    component = gr.Slider(*args, **kwargs)
    strict = component.preprocess

    def preprocess(payload):
        if isinstance(payload, bool) or not isinstance(payload, int | float):
            return payload
        return strict(payload)

    component.preprocess = preprocess
    return component


def number(*args, **kwargs) -> gr.Number:
    """gr.Number whose value reaches the core as the visitor sent it when Gradio could not round it: Gradio's own
    rounding answered min_size="abc" with "type str doesn't define __round__ method", and a 5,000-digit integer
    with an OverflowError, before the core could name the field and its range (`policy.count`)."""
    component = gr.Number(*args, **kwargs)
    strict = component.preprocess

    def preprocess(payload):
        if isinstance(payload, bool) or not isinstance(payload, int | float):
            return payload
        try:
            return strict(payload)
        except (TypeError, ValueError, OverflowError):
            return payload

    component.preprocess = preprocess
    return component
