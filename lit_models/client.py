"""LIT's page as this project serves it: LIT's own build, with its icon fonts served by the LIT server itself.

LIT's index.html loads the Material Icons from fonts.googleapis.com; where that is out of reach (offline, or a
network that blocks it) every icon shows as its name ("smart_toy", "help_outline") across the toolbars. The fonts
ship in `assets/fonts/` (Apache 2.0) and the page links them from its own server, which also keeps a Space's
visitors' requests off Google's servers for them. Everything else is LIT's files, linked, not changed."""
from __future__ import annotations

import logging
import os
import shutil
from importlib.metadata import version
from pathlib import Path

from app.core.api import ASSETS_DIR, cache_dir

FONTS = ASSETS_DIR / "fonts"
ICON_FONTS = {"Material Icons": "material-icons.woff2", "Material Icons Outlined": "material-icons-outlined.woff2"}
GOOGLE_ICONS = ('<link href="https://fonts.googleapis.com/css?family=Google+Material+Icons|Material+Icons|'
                'Material+Icons+Outlined&display=block" rel="stylesheet">')
LOCAL_CSS = "albert-lens-fonts.css"
# LIT names Roboto and Google Sans (and "sans", not a generic family): without Google's fonts the page fell back to
# a serif; these faces come first, so Google's (loaded when reachable) still win
_FALLBACKS = {"Roboto": 'local("Roboto"), local("Arial"), local("Liberation Sans"), local("DejaVu Sans")',
              "Google Sans": 'local("Google Sans"), local("Roboto"), local("Arial"), local("Liberation Sans"), '
                             'local("DejaVu Sans")'}

log = logging.getLogger(__name__)


def lit_build() -> Path:
    import lit_nlp  # deferred: LIT: only its front end

    return Path(lit_nlp.__file__).parent / "client" / "build" / "default"


def font_css() -> str:
    faces = [f'@font-face {{ font-family: "{family}"; font-style: normal; font-weight: 400; font-display: block; '
             f'src: url("{name}") format("woff2"); }}' for family, name in ICON_FONTS.items()]
    faces += [f'@font-face {{ font-family: "{family}"; src: {src}; }}' for family, src in _FALLBACKS.items()]
    return "\n".join(faces) + "\n"


def patch_index(html: str) -> str:
    """LIT's index.html with the icon fonts linked from the server and the fallback faces before Google's."""
    if GOOGLE_ICONS not in html:
        raise ValueError("LIT's index.html no longer links the Material Icons as expected")
    return html.replace(GOOGLE_ICONS, f'<link href="static/{LOCAL_CSS}" rel="stylesheet">')


def client_root(root: Path | None = None) -> Path:
    """A client root for LIT's server: LIT's build linked file by file (copied where links are refused), its
    index.html patched, the fonts beside it. LIT's own build is returned, with a warning, if its page changed
    shape or the cache can't be written: icons as words are better than no LIT."""
    src = lit_build()
    try:
        html = patch_index((src / "static" / "index.html").read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        log.warning("serving LIT's page unchanged (%s): its icons need fonts.googleapis.com", e)
        return src
    out = root or cache_dir() / "lit-client" / version("lit-nlp")
    try:
        _build(src, out, html)
    except OSError as e:  # a read-only cache, a full disk
        log.warning("serving LIT's page unchanged (could not write %s: %s): its icons need fonts.googleapis.com",
                    out, e)
        return src
    return out


def _build(src: Path, out: Path, html: str) -> None:
    for f in src.rglob("*"):
        if not f.is_file() or f.relative_to(src).as_posix() == "static/index.html":
            continue
        dst = out / f.relative_to(src)
        if dst.is_symlink() and dst.resolve() == f.resolve():
            continue
        dst.parent.mkdir(parents=True, exist_ok=True)
        _replace(dst, lambda tmp, f=f: _link_or_copy(f, tmp))
    static = out / "static"
    for name in ICON_FONTS.values():
        _replace(static / name, lambda tmp, name=name: shutil.copyfile(FONTS / name, tmp))
    _replace(static / LOCAL_CSS, lambda tmp: tmp.write_text(font_css(), encoding="utf-8"))
    _replace(static / "index.html", lambda tmp: tmp.write_text(html, encoding="utf-8"))


def _link_or_copy(src: Path, dst: Path) -> None:
    try:
        os.symlink(src, dst)
    except OSError:
        shutil.copyfile(src, dst)


def _replace(dst: Path, write) -> None:
    """Write beside `dst`, then rename over it: a second server starting at the same time never reads half a
    file."""
    tmp = dst.with_name(f".{dst.name}.{os.getpid()}.tmp")
    tmp.unlink(missing_ok=True)
    write(tmp)
    os.replace(tmp, dst)
