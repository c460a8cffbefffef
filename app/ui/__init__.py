"""The Gradio front end: one module per tab over `app.core.api`, BERT and ALBERT side by side in each.

Thin by design: a tab's handlers are plain functions `handler(ctx, *inputs)` that call one facade function and
shape its result with `app.core.present.views` (tested without a server, tests/test_ui_handlers.py). Each event has an
`api_name`, its first output is the result's JSON, and inputs with a default are optional for `gradio_client`.
"""
from __future__ import annotations

import asyncio
import contextlib
import html
import json
import logging
import os
import threading
import time

import gradio as gr

from app.core import api
from app.core.present import views

from . import (
    attacks,
    benchmark,
    checklist,
    common,
    compare,
    counterfactuals,
    declared,
    facts,
    inside,
    projection,
    saliency,
)
from .attacks import attack_examples as _attack_examples  # noqa: F401 - tests and older imports
from .common import (  # noqa: F401 - the shared pieces, importable from the package
    _RUNNING,
    DATASET,
    MAX_UPLOAD_MB,
    SINGLE,
    Ctx,
    Heavy,
    shipped,
    stop_session,
)
from .common import shipped as _shipped  # noqa: F401
from .common import upload_path as _upload_path  # noqa: F401
from .counterfactuals import default_swaps as _default_swaps  # noqa: F401
from .fair_queue import QUEUE_ROOM, FairQueue

log = logging.getLogger("albert_lens.ui")
# Gradio's highlighted text breaks lines inside words (word-break: break-all), splitting a saliency map's words;
# table headers wrap instead of ending in "...": "albert-sst2 before" fits no column of a side-by-side table
CSS = (".textfield { word-break: normal !important; overflow-wrap: anywhere; }\n"
       # WCAG AA: white on Gradio's orange buttons was 2.8:1 and the footer's grey 1.9:1 (4.5:1 wanted for text);
       # the focused control had a faint grey ring; a tab's description was 11.2 px
       "button.primary { background: #c2410c !important; color: #fff !important; border-color: #c2410c !important; }\n"
       "button.primary:hover { background: #9a3412 !important; border-color: #9a3412 !important; }\n"
       "footer, footer a, footer button { color: #52525b !important; }\n"
       "button[role=tab][aria-selected=true] { color: #c2410c !important; }\n"
       ":focus-visible { outline: 3px solid #1d4ed8 !important; outline-offset: 2px !important; }\n"
       ".prose small { font-size: 13px; }\n"
       # a box only the page's script writes (CLICK_JS): in the page, never seen
       ".offscreen { position: absolute !important; left: -10000px !important; width: 1px !important; "
       "height: 1px !important; overflow: hidden !important; opacity: 0 !important; }\n"
       ".square-plot { max-width: 500px; }\n"  # with its 420 px height and legend: a square drawing area
       # a finger dragged sideways on a projection draws its range (the brush reads x only); up or down it scrolls
       # the page: a touch screen gave every drag to scrolling and cancelled the brush at its first move
       ".square-plot .vega-embed canvas, .square-plot .vega-embed svg { touch-action: pan-y; }\n"
       # Gradio's cells break anywhere, so a narrow column split a number mid-digit ("-0.00090" over "4"): a word
       # or number breaks only where it can't fit whole, and a column sized to its content holds it whole
       ".table-wrap td, .table-wrap td span { overflow-wrap: break-word !important; word-break: normal !important; }\n"
       # Gradio 6's cells get their widths from its script, so a word that doesn't fit would still be broken:
       # there a number stays whole (a sentence still wraps between its words)
       "[role=gridcell], [role=gridcell] span { overflow-wrap: normal !important; word-break: normal !important; }\n"
       "th .header-content, th .header-button, th .header-button > span { white-space: pre-wrap !important; "
       "overflow: visible !important; text-overflow: clip !important; overflow-wrap: anywhere; }\n"
       # on a phone the percentage column widths squeezed tables to a letter per line: columns keep a readable
       # width and the table scrolls sideways instead
       "@media (max-width: 720px) { th, td { min-width: 6em; width: auto !important; }\n"
       # Gradio 6's tables: each column as wide as its widest word, header and cells alike (TABLES_JS); a word
       # is never broken, in a header neither
       "  th[role=columnheader] { min-width: 0; } th[role=columnheader] .header-content, "
       "th[role=columnheader] span { overflow-wrap: normal !important; word-break: normal !important; }\n"
       # and its tab names wrap onto a second line instead of all but two hiding in a "..." menu (Gradio 5; Gradio
       # 6 measures the bar itself and puts the tabs that don't fit in its "..." menu)
       "  .tab-wrapper, .tab-container { height: auto !important; } .tab-container { flex-wrap: wrap !important; }\n"
       "  .tab-container button { padding: 4px 8px !important; }\n"
       # a figure's label sat over its top (its title); and Gradio's own warnings ("On mobile, the connection can
       # break ...") covered the results they were about: the app itself raises none
       "  .figure { padding-top: 30px !important; } .toast-body.warning { display: none !important; }\n"
       # a chart of a bar per word keeps its drawn size and scrolls sideways, as a wide table does: shrunk to the
       # phone's width its word labels were a few pixels tall
       # every figure (drawn at 100 dpi, its smallest text 7 pt: 9.7 px) keeps its drawn size on a phone and
       # scrolls sideways, as a wide table does: shrunk to the phone's width its text was 4-5 px tall
       "  .figure .matplotlib { overflow-x: auto; align-items: flex-start !important; }\n"
       "  .figure .matplotlib img { max-width: none !important; width: auto !important; }\n"
       "  .table-wrap table { table-layout: auto !important; min-width: 640px; }\n"
       # a table of ten columns (the counterfactuals' edits): wide enough that a Δp such as -0.000904 fits whole
       "  .wide-table .table-wrap table { min-width: 980px !important; }\n"
       "  .table-wrap thead { table-layout: auto !important; } .table-container { overflow-x: auto; }\n"
       "  .prose table { display: block; overflow-x: auto; } .prose th, .prose td { white-space: nowrap; }\n"
       # a table wider than the phone scrolls with its first column (the row's name: a model, a word, a text) held
       "  .table-wrap td:first-child, .table-wrap th:first-child, .prose td:first-child, .prose th:first-child,\n"
       "  .table-wrap .first-column,\n"  # Gradio 6's grid cells
       "  .methods-table td:first-child, .methods-table th:first-child { position: sticky; left: 0; z-index: 1;\n"
       "    background: var(--table-even-background-fill, var(--background-fill-primary, white)); } }")
# A click on a projection's point (a press and release within 4 px, not a brush) makes it the example: the plots'
# tooltip names the point under the pointer, its "row" first (a tap with no hover before it asks the plot with a
# move of its own); the script hands that row to the hidden
# #projection-click box, whose input event loads the example and runs Compare (`projection.clicked_texts`). Both
# what Gradio 5 listens to (the DOM's input event) and what Gradio 6 does (a key press) are sent.
CLICK_JS = """() => {
  if (window.albertLensClicks) return;
  window.albertLensClicks = true;
  let down = null;
  const tooltipRow = () => {
    const tip = document.getElementById("vg-tooltip-element");
    if (!tip || !tip.classList.contains("visible")) return null;
    for (const key of tip.querySelectorAll("td.key")) {
      if (key.textContent.trim().replace(/:$/, "") === "row") {
        return key.nextElementSibling ? key.nextElementSibling.textContent.trim() : null;
      }
    }
    return null;
  };
  document.addEventListener("pointerdown", (e) => {
    const plot = e.target.closest ? e.target.closest(".square-plot") : null;
    if (!plot) { down = null; return; }
    let row = tooltipRow();
    if (!row) {  // no hover before the press (a tap on a touch screen): the plot is asked what lies under it
      for (const Ev of [PointerEvent, MouseEvent]) {
        e.target.dispatchEvent(new Ev(Ev === PointerEvent ? "pointermove" : "mousemove",
                                      { clientX: e.clientX, clientY: e.clientY, bubbles: true }));
      }
      row = tooltipRow();
    }
    down = { x: e.clientX, y: e.clientY, row };
  }, true);
  document.addEventListener("pointerup", (e) => {
    const d = down;
    down = null;
    if (!d || !d.row || Math.hypot(e.clientX - d.x, e.clientY - d.y) > 4) return;
    const box = document.querySelector("#projection-click textarea, #projection-click input");
    if (!box) return;
    box.value = d.row + "/" + Date.now();
    box.dispatchEvent(new Event("input", { bubbles: true }));  // the box's value (Gradio 5: and its input event)
    // Gradio 6's text box raises its input event on a key press, not on the DOM's input event
    box.dispatchEvent(new KeyboardEvent("keypress", { key: "0", bubbles: true }));
  }, true);
}"""
# Gradio 5.50's plots echo their axis limits back to the page forever: NativePlot's `$: x_lim = x_lim || null`
# reports the array it was given, Blocks copies it (`[...value]`) into a new array and hands it back, and the plot
# reports that again, one round a frame. A page holding a projection (its three plots share axes through `x_lim` and
# `y_lim`) kept the visitor's browser re-laying out every component while nobody touched it (benchmarks/README.md,
# the test suite's section). The limits only ever come from the server, so the plots' own reports of them are
# dropped before Blocks hears them.
LIMITS_JS = """() => {
  if (window.albertLensLimits) return;
  window.albertLensLimits = true;
  window.addEventListener("prop_change", (e) => {
    const prop = e.detail && e.detail.prop;
    if (prop === "x_lim" || prop === "y_lim") e.stopImmediatePropagation();
  }, true);
}"""
# Gradio 6's tables take their column widths from the percentages a tab gives (`column_widths`): on a phone, of a
# ~330 px wide table, headers broke words letter by letter ("t/y/p/e", "capa/bili/ty") and cells mid-word
# ("positiv/e", on a desktop too where a column was narrow), and the body's cells, held to a minimum width, no
# longer lined up under their headers. Each column is made as wide as its widest word (header or cell, in its own
# font and padding, up to WIDEST), at least what Gradio gave it, the header and every cell of the column alike (a
# style rule per column, so the rows the table draws as it scrolls get it too); sentences still wrap between
# words, and a table wider than its box scrolls sideways.
TABLES_JS = """() => {
  if (window.albertLensTables) return;
  window.albertLensTables = true;
  const sheet = document.createElement("style");
  document.head.appendChild(sheet);
  const canvas = document.createElement("canvas").getContext("2d");
  const need = new Map(), laid = new Map();  // per grid and column: the width its words need, its header's
  const WIDEST = 480;  // a longer "word" (a path, a URL) still wraps inside it
  const widest = (el) => {
    const text = el.querySelector("span.text") || el.querySelector("span") || el;
    const s = getComputedStyle(text);
    canvas.font = s.font;
    let w = 0;
    for (const word of (text.textContent || "").split(/\\s+/))
      if (word) w = Math.max(w, canvas.measureText(word).width);
    let pad = 0;
    for (let e = text; e && e !== el.parentElement; e = e.parentElement) {
      const c = getComputedStyle(e);
      pad += parseFloat(c.paddingLeft) + parseFloat(c.paddingRight) + parseFloat(c.borderLeftWidth) +
             parseFloat(c.borderRightWidth);
      if (e === el) break;
    }
    const menu = el.querySelector("button");
    return Math.ceil(w + pad + (menu ? menu.getBoundingClientRect().width : 0) + 2);
  };
  let grids = 0;
  const fit = () => {
    for (const grid of document.querySelectorAll("[role=grid]")) {
      if (!grid.offsetParent) continue;
      if (!grid.dataset.fit) grid.dataset.fit = String(++grids);
      const id = grid.dataset.fit;
      for (const head of grid.querySelectorAll("th[role=columnheader]")) {
        const col = Number(head.getAttribute("aria-colindex")) - 1;
        const key = id + ":" + col;
        let w = Math.max(need.get(key) || 0, widest(head), parseFloat(head.style.width) || 0);
        for (const cell of [head, ...grid.querySelectorAll(`[role=gridcell][data-col="${col}"]`)]) {
          w = Math.max(w, widest(cell));
          // what the measure missed (a gap, a margin), read from the text's overflow as laid out now
          const text = cell.querySelector("span.text") || cell.querySelector("span");
          if (text && text.scrollWidth > text.clientWidth + 1)
            w = Math.max(w, (need.get(key) || cell.getBoundingClientRect().width) + text.scrollWidth -
                         text.clientWidth + 1);
        }
        need.set(key, Math.min(Math.ceil(w), WIDEST));
        laid.set(key, Math.ceil(head.getBoundingClientRect().width));
      }
    }
    // a header cell at least its column's widest word; the header (a table of its own) laid out by the browser,
    // and each column's cells exactly as wide as its header came out, so that they stand under it
    const css = [...need].map(([key, w]) => {
      const [id, col] = key.split(":");
      const cells = Math.max(laid.get(key) || 0, w);
      return `[data-fit="${id}"] th[aria-colindex="${Number(col) + 1}"] { width: ${w}px !important; ` +
             `min-width: ${w}px !important; max-width: none !important; }\\n` +
             `[data-fit="${id}"] [role=gridcell][data-col="${col}"] { width: ${cells}px !important; ` +
             `min-width: ${cells}px !important; max-width: ${cells}px !important; flex: 0 0 ${cells}px !important; }`;
    });
    css.push(`[data-fit][role=grid][data-fit] table.header-table.header-table { width: auto !important; ` +
             `min-width: 0 !important; table-layout: auto !important; }`);
    const text = css.join("\\n");
    if (sheet.textContent !== text) { sheet.textContent = text; soon(); }  // measured again as laid out now
  };
  let pending = null;
  const soon = () => { if (!pending) pending = requestAnimationFrame(() => { pending = null; fit(); }); };
  new MutationObserver(soon).observe(document.body, { childList: true, subtree: true, characterData: true });
  addEventListener("resize", soon);
  soon();
}"""
# The keyboard, as WAI-ARIA's tabs pattern has it: the tab bar is one stop of the Tab key (the tab shown; Gradio
# made each tab a stop, so Predict was 11 presses from the text box), the arrow keys (and Home, End) move between
# tabs and open the one reached. Each figure's image says what it shows to a screen reader (Gradio's alt text was
# "undefined plot visualising provided data"): its block's label and its title.
KEYS_JS = """() => {
  if (window.albertLensKeys) return;
  window.albertLensKeys = true;
  const tabs = (bar) => [...bar.querySelectorAll("button[role=tab]")].filter(t => t.offsetParent);
  const rove = () => {
    for (const bar of document.querySelectorAll("[role=tablist]")) {
      const all = tabs(bar);
      const on = all.find(t => t.getAttribute("aria-selected") === "true") || all[0];
      for (const t of all) {
        const want = t === on ? "0" : "-1";
        if (t.getAttribute("tabindex") !== want) t.setAttribute("tabindex", want);
      }
    }
    for (const img of document.querySelectorAll(".figure img")) {
      const block = img.closest(".block");
      const label = block && block.querySelector("[data-testid=block-label]");
      const said = "figure: " + (label ? label.textContent.trim() : "a chart") + " (the page's text gives its numbers)";
      if (img.alt !== said) img.alt = said;
    }
  };
  document.addEventListener("keydown", (e) => {
    const tab = e.target.closest && e.target.closest("button[role=tab]");
    const bar = tab && tab.closest("[role=tablist]");
    if (!bar || !["ArrowRight", "ArrowLeft", "Home", "End"].includes(e.key)) return;
    const all = tabs(bar), at = all.indexOf(tab);
    const next = e.key === "Home" ? 0 : e.key === "End" ? all.length - 1 :
      (at + (e.key === "ArrowRight" ? 1 : all.length - 1)) % all.length;
    e.preventDefault();
    all[next].click();
    all[next].focus();
  }, true);
  let pending = null;
  new MutationObserver(() => { if (!pending) pending = requestAnimationFrame(() => { pending = null; rove(); }); })
    .observe(document.body, { childList: true, subtree: true, attributes: true,
              attributeFilter: ["aria-selected", "src"] });
  rove();
}"""
PAGE_JS = f"() => {{ ({CLICK_JS})(); ({LIMITS_JS})(); ({TABLES_JS})(); ({KEYS_JS})(); }}"
TABS = (compare, benchmark, saliency, counterfactuals, projection, facts, inside, attacks, checklist)


def build(pair: api.Pair, workers: bool = False) -> gr.Blocks:
    """The app; `workers` runs explanations and work over datasets in child processes (`launch` turns it on in hosted
    mode, or with ALBERT_LENS_WORKERS=1); `demo.heavy.close()` stops them."""
    api.allow_reads_under(gr.utils.get_upload_folder())  # hosted mode reads uploads, no other server path
    heavy = Heavy(api.worker_pools(pair, {"single": SINGLE["concurrency_limit"],
                                          "dataset": DATASET["concurrency_limit"]}) if workers else None)
    ctx = Ctx.of(pair, heavy)
    with gr.Blocks(title="albert-lens", analytics_enabled=False) as demo:
        gr.Markdown(banner(pair))
        gr.Markdown(views.first_screen(api.overview(pair)))
        common.text_inputs(ctx)  # one example, above the tabs: every tab reads it
        with gr.Tabs() as tabs:
            for tab in TABS:
                tab.tab(ctx)
            # the declared capabilities without a tab of their own (a plugin's among them)
            declared.tab(ctx, served={name for name, module in common.HANDLED
                                      if module.startswith("app.ui.") and module != declared.__name__})
        common.wire_links(ctx, tabs)
        common.wire_slice_buttons(ctx)
    # hosted: no REST route around the queue (a burst of direct POSTs to /gradio_api/run/<name> skipped its
    # limits and size, and starved every page for minutes); gradio_client and the page queue, and still work.
    # A Space (SPACE_ID set) gets this from Gradio itself; a self-hosted --hosted server did not. Its size: room
    # for clients with a job there already and as much for newcomers (fair_queue.py, held at the door by `serve`).
    demo.queue(default_concurrency_limit=DATASET["concurrency_limit"], max_size=2 * QUEUE_ROOM,
               api_open=not api.limits()["hosted"])
    # Gradio's queue looks for a new event every 50 ms when it is idle: a queued call (every gradio_client call,
    # and the page's explanations) waited up to that long before starting. 5 ms costs nothing measurable.
    if hasattr(demo._queue, "sleep_when_free"):
        demo._queue.sleep_when_free = 0.005
    demo.heavy = heavy
    _page_at_launch(demo)
    return demo


def _page_at_launch(demo: gr.Blocks) -> None:
    """The page's css and script go to `launch()` (Gradio 6 takes them there, no longer in `Blocks`): every launch
    of this app gets them, the tests' and a script's included, unless it gives its own."""
    launch = demo.launch

    def launch_with_page(*args, **kwargs):
        kwargs.setdefault("css", CSS)
        kwargs.setdefault("js", PAGE_JS)
        with _patient_readiness():
            return launch(*args, **kwargs)

    demo.launch = launch_with_page


READY_S = 30.0  # how long `launch()` waits for its own server to answer on localhost


def answers(url: str, wait_s: float = READY_S) -> bool:
    """Whether the server at `url` answers (as Gradio's own check: a HEAD, any success or redirect), trying until
    `wait_s` seconds have passed. Gradio's check before `launch()` returns gives up after one HEAD that takes over
    3 s: on a busy CPU (a shared Space's, a test run's) the app failed to start with "When localhost is not
    accessible, a shareable link must be created"."""
    import httpx

    deadline = time.monotonic() + wait_s
    while True:
        left = deadline - time.monotonic()
        try:
            if httpx.head(url, timeout=max(1.0, left), verify=False).status_code in (200, 301, 302, 303, 307, 308,
                                                                                      401):
                return True
        except (httpx.TransportError, OSError):
            pass
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.5)


@contextlib.contextmanager
def _patient_readiness():
    """Gradio's readiness check replaced by `answers` for a launch (Gradio reads it from its `networking` module at
    the call; a launch that blocks, as the `app` command's, keeps it until it returns)."""
    from gradio import networking

    theirs = networking.url_ok
    networking.url_ok = answers
    try:
        yield
    finally:
        if networking.url_ok is answers and theirs is not answers:
            networking.url_ok = theirs


def banner(pair: api.Pair) -> str:
    """One line: the pair and its two models' sources (the full story, families and origins, is in Model facts
    and the server log); a model that would mislead says so."""
    models = " vs ".join(f"**{html.escape(m.name)}** <small>{html.escape(m.spec.source)}"
                         f"{', ' + m.spec.precision if m.spec.precision != 'fp32' else ''}</small>"
                         for m in pair.models)
    warn = "".join(f" · ⚠ {html.escape(m.name)}: classification head untrained (random), its predictions mean "
                   "nothing" for m in pair.models if getattr(m, "untrained_head", False))
    hw = pair.hardware()
    where = f" · on {html.escape(hw['device'])} <small>{html.escape(str(hw['device_name']))}</small>"
    said = pair.precision_asked
    line = html.escape(api.views.precision_line(said), quote=False)
    how = "" if said["asked"] == "fp32" else f" · <small>{line}</small>"
    return f"**albert-lens** · pair *{html.escape(pair.name)}*: {models}{where}{how}{warn}"


def launch(pair: api.Pair, host: str = "127.0.0.1", port: int = 7860, **kw) -> None:
    api.bounded_log_lines()  # what a visitor sends reaches the log at most LOG_LINE_CHARS long
    workers = api.limits()["worker_processes"]
    demo = build(pair, workers=workers)
    for clf in pair.models:  # the app answers from worker threads
        clf.reserve_tokenizer()
    if not workers:  # else each worker process warms itself up
        _warm_up()
    serve(demo, server_name=host, server_port=port, show_error=True, max_file_size=f"{MAX_UPLOAD_MB}mb",
          state_session_capacity=session_capacity(), **kw)


def serve(demo: gr.Blocks, **launch_kw) -> tuple:
    """`demo.launch(**launch_kw)` with the server's errors answered in one line: Gradio builds its FastAPI app in
    debug mode, so a request for an unknown endpoint or function index (`/gradio_api/run/nosuch`, `fn_index`
    9999) answered HTTP 500 with a Python traceback naming the server's paths. Unknown names and indices now
    answer 404, any other failure 500 "internal error", both without a traceback (logged). Blocks like `launch`
    unless `prevent_thread_lock` is given."""
    from gradio.route_utils import FnIndexInferError
    from starlette.responses import PlainTextResponse

    def unknown(request, exc):
        return PlainTextResponse("no such endpoint or function on this server", status_code=404)

    def failed(request, exc):
        log.error("request %s failed: %s", request.url.path, type(exc).__name__, exc_info=exc)
        return PlainTextResponse("internal error; the server logged it", status_code=500)

    handlers = {FnIndexInferError: unknown, KeyError: unknown, IndexError: unknown, Exception: failed}
    app_kwargs = {**launch_kw.pop("app_kwargs", {}), "exception_handlers": handlers}
    block = not launch_kw.pop("prevent_thread_lock", False)
    out = demo.launch(prevent_thread_lock=True, app_kwargs=app_kwargs, **launch_kw)
    demo.app.debug = False  # Gradio passes debug=True; without it Starlette answers with `failed` above
    caps = api.limits()
    from starlette.middleware import Middleware

    jobs = FairQueue(demo._queue, most=int(caps["client_jobs"]), proxies=caps["proxies"], room=QUEUE_ROOM)
    demo.app.user_middleware.insert(0, Middleware(
        ShareAtTheDoor, most=int(caps["client_slots"]) + int(caps["client_waiting"]), rate=caps["client_rate"],
        proxies=caps["proxies"], jobs=jobs))
    demo.app.middleware_stack = None  # rebuilt at the next request, with debug off and the share at the door
    if block:
        demo.block_thread()
    return out


class ShareAtTheDoor:
    """A client's direct calls (`POST /gradio_api/run/...`, the page's /predict) past its share are refused here,
    before Gradio reads them: more than `most` in flight, or (hosted) more than `rate` a second on average (a
    bucket of `2 * rate`); and its jobs (`POST /gradio_api/queue/join`) past its share of the queue (`jobs`, a
    `FairQueue`), with the wait until one of them should end. Refused inside the handler (`common.direct`), each
    of a flood's requests still cost the server Gradio's parsing and processing (60 clients' ~65 refusals a second
    took visitors' p95 from 0.12 s to 6.3 s), and a client within its slots but asking as fast as it is answered
    still took half the cores. One event loop runs this, so the counts need no lock."""

    JOIN = "/gradio_api/queue/join"

    def __init__(self, app, most: int, rate: float | None = None, proxies: int | tuple = 0,
                 prefix: str = "/gradio_api/run/", pause_s: float = 1.0, jobs: FairQueue | None = None):
        self.app, self.most, self.rate, self.proxies, self.prefix = app, most, rate, proxies, prefix
        self.pause_s, self.jobs = pause_s, jobs
        self.inflight: dict[str, int] = {}
        self.buckets: dict[str, tuple[float, float]] = {}  # client: (tokens, when)

    def _allowed(self, client: str) -> bool:
        if not self.rate:
            return True
        now = time.monotonic()
        burst = 2 * self.rate
        tokens, when = self.buckets.get(client, (burst, now))
        tokens = min(burst, tokens + (now - when) * self.rate)
        if len(self.buckets) > 10_000:  # forget the clients whose buckets are full again
            self.buckets = {c: (t, w) for c, (t, w) in self.buckets.items() if t + (now - w) * self.rate < burst}
        if tokens < 1:
            self.buckets[client] = (tokens, now)
            return False
        self.buckets[client] = (tokens - 1, now)
        return True

    async def _refuse(self, send, why: str, retry_s: int = 1, joining: bool = False) -> None:
        # the refusal waits a second (a sleeping coroutine: no thread, no CPU): a client that asks again the
        # moment it is refused (60 of them: ~470 refusals a second) asks at most once a second a connection
        await asyncio.sleep(self.pause_s)
        if joining:  # as Gradio's own refusals of a join: JSON whose "detail" the page shows in its error box
            body, kind = json.dumps({"detail": why}).encode(), b"application/json"
        else:
            body = f"your address {why}, its share here; wait for an answer before sending more".encode()
            kind = b"text/plain; charset=utf-8"
        await send({"type": "http.response.start", "status": 429,
                    "headers": [(b"content-type", kind),
                                (b"content-length", str(len(body)).encode()),
                                (b"retry-after", str(retry_s).encode())]})
        await send({"type": "http.response.body", "body": body})

    async def _join(self, client: str, scope, receive, send):
        """A job joining the queue: refused past the client's share, else counted until Gradio has queued it."""
        refused = self.jobs.refusal(client)
        if refused is not None:
            return await self._refuse(send, refused[0], retry_s=refused[1], joining=True)
        self.jobs.joining[client] += 1
        try:
            return await self.app(scope, receive, send)
        finally:
            self.jobs.joining[client] -= 1
            if self.jobs.joining[client] <= 0:
                del self.jobs.joining[client]

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope.get("method") != "POST":
            return await self.app(scope, receive, send)
        joining = self.jobs is not None and scope["path"] == self.JOIN
        if not (joining or scope["path"].startswith(self.prefix)):
            return await self.app(scope, receive, send)
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", ())}
        client = api.client_key((scope.get("client") or (None,))[0], headers, self.proxies)
        if joining:
            return await self._join(client, scope, receive, send)
        held = self.inflight.get(client, 0)
        if held >= self.most:
            return await self._refuse(send, f"already has {held} requests in flight")
        if not self._allowed(client):
            return await self._refuse(send, f"sent more than {self.rate:g} requests a second")
        self.inflight[client] = held + 1
        try:
            return await self.app(scope, receive, send)
        finally:
            self.inflight[client] -= 1
            if not self.inflight[client]:
                del self.inflight[client]


def session_capacity() -> int:
    """Sessions whose component values Gradio keeps in memory, oldest dropped first. Gradio's default, 10,000,
    let a public server grow by ~0.23 MB per visitor session without end (350 MB in a 16-user load test's three
    rounds); the app keeps no state of its own between clicks, so a dropped session loses nothing."""
    raw = os.environ.get("ALBERT_LENS_SESSIONS", "").strip()
    return int(raw) if raw.isascii() and raw.isdigit() and int(raw) > 0 else 256


def _warm_up() -> threading.Thread:
    """One-off costs of a process's first projection (UMAP's compilation) and first WordNet swap (loading
    WordNet), paid in the background while the app starts instead of by the first user to click."""
    def run():
        for step in api.warm_ups():
            try:
                step()
            except Exception as exc:  # noqa: BLE001 - a failed warm-up only leaves the one-off cost to the first use
                log.warning("warm-up %s.%s failed (%s); its first use will be slower", step.__module__,
                            step.__name__, exc)

    thread = threading.Thread(target=run, name="warm-up", daemon=True)
    thread.start()
    return thread
