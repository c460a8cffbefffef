"""One real browser session: headless Chromium (Debian) driven by Selenium opens the app, runs a prediction and a
saliency map, and saves a screenshot."""
import os
import shutil
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHOTS = Path(os.environ.get("ALBERT_LENS_SCREENSHOTS", ROOT / "tests" / "screenshots"))


@pytest.fixture(scope="module")
def app_url(offline_pair):
    from app.ui import build

    demo = build(offline_pair)
    _, url, _ = demo.launch(server_name="127.0.0.1", server_port=None, prevent_thread_lock=True, quiet=True)
    try:
        yield url
    finally:
        demo.close()


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    chromium, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if not (chromium and driver):
        pytest.fail("Debian chromium and chromium-driver are needed (scripts/setup --browser installs them)")
    os.environ["SE_OFFLINE"] = "true"  # never let Selenium Manager try a download
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = chromium
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--window-size=1400,1800", f"--user-data-dir={tmp_path_factory.mktemp('chrome')}"):
        opts.add_argument(arg)
    drv = webdriver.Chrome(service=Service(driver), options=opts)
    drv.set_page_load_timeout(60)
    try:
        yield drv
    finally:
        drv.quit()


def _wait(fn, timeout=90):
    end = time.time() + timeout
    while time.time() < end:
        try:
            value = fn()
            if value:
                return value
        except Exception:  # noqa: BLE001 - the page is still rendering
            pass
        time.sleep(0.5)
    raise AssertionError("timed out waiting for the page")


def _visible(drv, css):
    return [e for e in drv.find_elements("css selector", css) if e.is_displayed()]


def _button(drv, text):
    return _wait(lambda: [b for b in _visible(drv, "button") if b.text.strip() == text][0])


def test_prediction_and_saliency_in_a_real_browser(browser, app_url, offline_pair):
    drv = browser
    drv.get(app_url)
    _wait(lambda: "albert-lens" in drv.page_source and _visible(drv, "textarea"))
    box = _visible(drv, "textarea")[0]
    box.send_keys("What a wonderful, moving film!")
    _button(drv, "Predict").click()
    # both Label components show the predicted class
    labels = _wait(lambda: [e.text for e in _visible(drv, "[data-testid='label-output-value']") if e.text.strip()]
                   if len([e for e in _visible(drv, "[data-testid='label-output-value']") if e.text.strip()]) == 2
                   else None)
    assert all("positive" in t for t in labels), labels

    [t for t in _visible(drv, "button[role='tab']") if t.text.strip() == "Saliency"][0].click()
    box = _wait(lambda: _visible(drv, "textarea")[0])
    box.send_keys("A gorgeous, witty, seductive movie.")
    _button(drv, "Explain").click()
    _wait(lambda: "comprehensiveness" in drv.page_source)
    words = _wait(lambda: [e.text for e in _visible(drv, ".textspan") if e.text.strip()])
    assert "gorgeous" in " ".join(words)
    SHOTS.mkdir(parents=True, exist_ok=True)
    shot = SHOTS / "saliency.png"
    drv.save_screenshot(str(shot))
    assert shot.stat().st_size > 20_000

    # the side-by-side tables' headers ("ALBERT before", "ALBERT Δp") wrap; they used to end in "..."
    [t for t in _visible(drv, "button[role='tab']") if t.text.strip() == "Counterfactuals"][0].click()
    heads = _wait(lambda: [h for h in _visible(drv, "th") if "before" in h.text])
    cut = drv.execute_script("return arguments[0].map(h => h.querySelector('span')).filter(s => s.scrollWidth > "
                             "s.clientWidth + 1 || s.scrollHeight > s.clientHeight + 1).map(s => s.textContent)",
                             _visible(drv, "th"))
    assert len(heads) == 2 and cut == [], cut


_DEEP = """const css = arguments[0], out = [];
(function deep(root) { root.querySelectorAll('*').forEach(e => {
    if (e.matches(css)) out.push(e); if (e.shadowRoot) deep(e.shadowRoot); }); })(document);
return out;"""


# each matching element's text and drawn width
_DEEP_WIDTHS = _DEEP.replace(
    "return out;", "return out.map(e => [e.textContent.trim(), e.getBoundingClientRect().width]);"
)


def _deep(drv, css):
    """Elements matching `css` anywhere, inside LIT's shadow roots too."""
    return drv.execute_script(_DEEP, css)


def test_lit_page_renders_both_models_in_a_real_browser(browser, offline_pair):
    """The LIT server's page, opened at the URL the CLI prints: modules render (the data table lists the shipped
    examples), both models are selected, the page throws no JavaScript error, and the Metrics table shows the
    paired test against the other model."""
    from lit_models.server import make_server, page_url

    srv = make_server(offline_pair, None, port=None, server_type="notebook").serve()
    try:
        drv = browser
        drv.get_log("browser")  # drop what earlier pages logged
        drv.get(page_url(offline_pair, "localhost", srv.port))
        _wait(lambda: len(_deep(drv, "lit-data-table")) == 1 and len(_deep(drv, "td")) > 30, timeout=120)
        toggles = [b.get_attribute("textContent").strip() for b in _deep(drv, "button.selected")]
        selected = [t.replace("check_box", "", 1).strip() for t in toggles if t.startswith("check_box")]
        assert sorted(selected) == sorted(m.name for m in offline_pair.models), toggles
        errors = [e["message"] for e in drv.get_log("browser")
                  if e["level"] == "SEVERE" and "fonts.googleapis" not in e["message"]]  # no network for fonts here
        assert errors == []
        # LIT's icons come from the server's own fonts: with Google's out of reach they were words ("smart_toy")
        faces = drv.execute_script("return document.fonts.ready.then(() => [...document.fonts]"
                                   ".filter(f => f.family.includes('Material Icons')).map(f => [f.family, f.status]))")
        assert sorted({(f.strip('"'), s) for f, s in faces}) == [("Material Icons", "loaded"),
                                                                 ("Material Icons Outlined", "loaded")], faces
        # and an icon is drawn as one glyph about its font size wide, not as its name
        widths = drv.execute_script(_DEEP_WIDTHS, ".material-icon, .material-icon-outlined")
        named = [(t, w) for t, w in widths if t in {"smart_toy", "view_compact"}]
        assert named and all(w < 40 for _, w in named), named
        # the Metrics tab's table carries the paired test's columns beside LIT's accuracy
        [t for t in _deep(drv, ".tab") if t.get_attribute("textContent").strip() == "Metrics"][0].click()
        heads = _wait(lambda: [h.get_attribute("textContent") for h in _deep(drv, "th")
                               if "vs the other model" in h.get_attribute("textContent")], timeout=180)
        # a header's text is the component's name and the metric's on two lines, then its sort icons' names
        heads = [" ".join(h.split()) for h in heads]
        for column in ("vs the other modelother − this ", "vs the other modelp "):
            assert any(h.startswith(column) for h in heads), heads
        drv.save_screenshot(str(SHOTS / "lit.png"))
    finally:
        srv.stop()
