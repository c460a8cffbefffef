"""What the front ends show, written once: summaries, tables and highlighted words built from the facade's
results, without Gradio, so the app and the command line read the same sentences and the functions are tested
without a server."""
from __future__ import annotations

import html
import os
from collections.abc import Sequence

import pandas as pd

from ..ground.alignment import Word, split_words
from ..techniques.meaning import MIN_COSINE


# ---------------------------------------------------------------- the paired tests and edits, in words
def format_mean(m: dict) -> str:
    """A `mean_interval` as "mean [low, high]" (the CLI, the report and the app write it alike)."""
    return "n/a" if m["mean"] is None else f"{m['mean']:.3f} [{m['interval'][0]:.3f}, {m['interval'][1]:.3f}]"


def p_text(p: float) -> str:
    """A p-value as the views write it: three significant digits, the smallest in scientific notation
    (0.000166, 3e-12; never LIT's "0.000")."""
    return f"{p:.3g}"


def verdict(cmp: dict, names: Sequence[str], unit: str = "examples", alpha: float = 0.05) -> str:
    """One sentence a reader can act on: the gap, its interval, and whether it is more than chance."""
    metric, (a, b), d = cmp["metric"], names, cmp["difference"]
    lo, hi = cmp["difference_interval"]
    pct = f"{int(round(100 * cmp['confidence']))}%"
    ci = (f"{pct} CI {lo:+.3f} to {hi:+.3f}" if lo is not None and hi is not None
          else f"no {pct} interval: {cmp['no_interval']}" if cmp.get("no_interval")
          else f"{cmp['n']:,} {unit} are too few to bound a {pct} interval")
    lead = f"{b} − {a} {metric}: {d:+.3f} ({ci}); p = {p_text(cmp['p_value'])} ({cmp['test']})"
    if cmp["p_value"] < alpha:
        return f"{lead}: {b if d > 0 else a}'s {metric} is higher beyond chance on these {cmp['n']:,} {unit}"
    return f"{lead}: not distinguishable from chance on these {cmp['n']:,} {unit}"


def describe(cmp: dict, names: Sequence[str]) -> list[str]:
    """A benchmark's paired comparison as sentences, the same in the CLI, the report and the app: the verdict,
    then who was right (accuracy) or how the two models' scores correlate (regression)."""
    if "undefined" in cmp:
        return [f"No paired test: {cmp['undefined']}"]
    lines = [verdict(cmp, names) + "."]
    if cmp["metric"] == "pearson":
        lines.append(f"The two models' scores correlate at {cmp['agreement']:.3f}.")
    elif "both_right" in cmp:
        kappa = "n/a" if cmp["kappa"] is None else f"{cmp['kappa']:.2f}"
        lines.append(f"Right: both {cmp['both_right']:,}, only {names[0]} {cmp['only_right'][0]:,}, only {names[1]} "
                     f"{cmp['only_right'][1]:,}, neither {cmp['both_wrong']:,}; the models give the same answer on "
                     f"{100 * cmp['agreement']:.1f}% (Cohen's kappa {kappa}).")
    return lines


def unread_by_all(maps: Sequence[dict]) -> set[int]:
    """Indices of the words past every model's cut in an `api.saliency` result's maps: no model read them."""
    return set.intersection(*(set(m.get("unread", ())) for m in maps)) if maps else set()


def own_delta(change: dict, k: int) -> tuple[str, float]:
    """(label, change) of model k's probability of the label it gave the original (its score for regression)."""
    b = change["before"][k]
    key = b.get("label") if "label" in b else "score"
    return key, float(change["deltas"][k].get(key, 0.0))


def edits_text(change: dict) -> str:
    return ", ".join(f"{a or '∅'}→{b or '∅'}" for a, b in change["edits"])  # ∅→word: a word added


def percent(x: float | None, digits: int = 0) -> str:
    """A rate as a percentage (whole by default); "n/a" where nothing was measured (the app, the CLI and the
    report)."""
    return "n/a" if x is None else f"{100 * x:.{digits}f}%"


def cut_line(res: dict) -> str:
    """Said first in a summary whose work was stopped part-way."""
    cut = res.get("stopped")
    if not cut:
        return ""
    return (f"**Stopped after {cut['done']:,} of {cut['total']:,} {html.escape(cut['what'])}**: "
            f"{html.escape(cut['reason'])}. The figures below are for those.\n\n")


UNREAD_SHOWN = 300  # characters of a long plain stretch shown before "... N more"


def clip(text: str, what: str = "") -> str:
    """A long stretch of plain text (what a model did not read, what an attack left alone) as its start and
    how much more: the input box, and the JSON, hold all of it."""
    if len(text) <= UNREAD_SHOWN + 100:
        return text
    return f"{text[:UNREAD_SHOWN]} … [{len(text) - UNREAD_SHOWN:,} more characters{what}]"


def largest_bars(largest: list[tuple[str, str]]) -> str:
    """Under the saliency chart: each model's largest bar, in words."""
    return "<small>largest bar: " + " · ".join(f"**{html.escape(m)}** {html.escape(w)}" for m, w in largest if w) + \
        "</small>" if any(w for _, w in largest) else ""


# an unsigned map (a sensitivity, gradient norm's) as shades of one colour, never the signed red/purple pair
SENSITIVITY_LEVELS = 5
SENSITIVITY_COLOURS = {f"sensitivity {k}": c for k, c in
                       enumerate(("#fef3c7", "#fde68a", "#fbbf24", "#d97706", "#92400e"), start=1)}


def _level(share: float) -> str:
    return f"sensitivity {min(SENSITIVITY_LEVELS, 1 + int(share * SENSITIVITY_LEVELS))}"


def highlight(sal: dict, texts: list[str], signed: bool = True, top: float | None = None
              ) -> list[tuple[str, float | str | None]]:
    """Words with scores scaled to [-1, 1], the original spacing kept between them; fields separated. A field's
    text past the model's cut is one plain span, shortened (a long review would be thousands of unscored spans
    and pages of text the input box already holds). Unsigned (`signed=False`: a sensitivity, which neither
    supports nor opposes a class): each word's level of the largest score, 1-5 (`SENSITIVITY_COLOURS`), which
    the page draws in one colour's shades where signed scores are red or purple. `top`: the score drawn full
    (both models' largest, for one scale; None: this map's largest)."""
    top = top or largest_score([sal])
    shade = (lambda x: round(x / top, 4)) if signed else (lambda x: _level(abs(x) / top))
    if sal.get("spans"):  # the words' places as the core found them, carried in the map
        spans = [Word(w, f, a, b) for w, f, (a, b) in zip(sal["words"], sal["fields"], sal["spans"])]
    else:
        spans = [w for f, t in enumerate(texts) for w in split_words(t, f)]
    unread = set(sal.get("unread", ()))
    out: list[tuple[str, float | None]] = []
    pos, field, done = 0, 0, False
    for i, (span, score) in enumerate(zip(spans, sal["scores"])):
        if span.field != field:
            out.append(("  ‖  ", None))
            field, pos, done = span.field, 0, False
        if done:
            continue
        if i in unread:
            out.append((clip(texts[field][pos:], ", not read"), None))
            done = True
            continue
        if span.start > pos:
            out.append((texts[field][pos : span.start], None))
        out.append((span.text, shade(score)))
        pos = span.end
    return out


def largest_score(maps: Sequence[dict]) -> float:
    """The largest |score| of any of `maps`: one colour scale for both models' highlights and bars."""
    return max((abs(s) for m in maps for s in m["scores"]), default=0.0) or 1.0


def first_screen(info: dict) -> str:
    """The app's opening lines: the task and its labels, both models with their sizes and the device, and three
    things to try first (`api.overview`)."""
    labels = " / ".join(info["labels"]) if info["labels"] else "a score"
    fields = " + ".join(info["fields"])
    models = ", ".join(f"**{html.escape(m['model'])}** {m['parameters'] / 1e6:.1f}M parameters, {m['layers']} layers"
                       + (" sharing one set of weights" if m["shares_layers"] else "") for m in info["models"])
    a, b = (html.escape(m["model"]) for m in info["models"][:2])
    return (f"Task **{html.escape(info['task'])}**: {html.escape(fields)} → {html.escape(labels)}. {models}; "
            f"answering on {html.escape(str(info['device']))}.\n\n"
            f"To start: **1.** type a sentence below and press *Predict*: do {a} and {b} agree? "
            "**2.** *Benchmark*: score both on the dev set, then *Find slices* for where they differ. "
            "**3.** *Saliency*: which words each model relied on.")


def prob_label(rec: dict) -> dict:
    return rec.get("probabilities") or {"score": rec.get("score", 0.0)}


def benchmark_summary(res: dict, names: list[str]) -> str:
    metric = "accuracy" if "accuracy" in res["models"][0] else "pearson"
    rows = ["| model | " + metric + " | parameters | examples/s | latency p50 |", "|---|---|---|---|---|"]
    rows += [f"| {html.escape(r['model'])} | {r[metric]:.4f} | {r['parameters']:,} | {r['throughput_per_s']:.1f} | "
             f"{r['latency_ms_median']:.1f} ms |" for r in res["models"]]
    lines = [f"**{html.escape(res['dataset'])}**, {res['n']:,} labelled examples", "\n".join(rows)]
    lines += [html.escape(t, quote=False) for t in describe(res["comparison"], names)]
    lines.append(f"{res['disagreements']['total']:,} examples get different answers from the two models.")
    return "\n\n".join(lines)


def disagreement_frame(res: dict, names: list[str]) -> pd.DataFrame:
    cols = ["row", "input", "gold", *names, "right"]
    rows = []
    for e in res["disagreements"]["examples"]:
        preds = [p if isinstance(p, str) else f"{p:.2f}" for p in e["predictions"]]
        rows.append([e.get("row", e["index"] + 1), clip(" ‖ ".join(e["texts"])), str(e["gold"]), *preds,
                     e.get("right") or ("neither" if "right" in e else f"gap {e['gap']:.2f}")])
    return pd.DataFrame(rows, columns=cols)


def slices_summary(res: dict) -> str:
    """The slice search in words: what was tested, how many differ beyond chance, and the strongest one."""
    a, b = res["models"]
    what = "accuracy" if res["metric"] == "accuracy" else "agreement"
    head = (f"**{html.escape(res['dataset'])}**, {res['n']:,} labelled examples: {res['candidates_tested']} candidate "
            f"slices of at least {res['min_size']} examples tested for a paired difference in {what}, with a "
            f"false-discovery rate (q) over them all.")
    if not res["findings"]:
        return head + f"\n\nNo slice differs beyond chance (every q >= {res['alpha']:g})."
    top = res["slices"][0]
    acc = top["accuracy"]
    return (head + f"\n\n**{res['findings']}** differ beyond chance (q < {res['alpha']:g}). The strongest: "
            f"**{html.escape(top['name'])}** ({top['size']} examples): {html.escape(a)} {acc[a]:.3f}, "
            f"{html.escape(b)} {acc[b]:.3f}, agreement {top['agreement']:.2f}, q = {top['q']:.2g}. "
            "Pick a row to open its first example in Compare.")


def slices_frame(res: dict) -> pd.DataFrame:
    """One row per slice, findings first: its name, size, both accuracies, the gap in examples, p and q."""
    a, b = res["models"]
    cols = ["slice", "size", a, b, "agree", "gap", "q", "beyond chance"]
    rows = [[s["name"], s["size"], f"{s['accuracy'][a]:.3f}", f"{s['accuracy'][b]:.3f}", f"{s['agreement']:.2f}",
             f"{s['gap_examples']:+d}", f"{s['q']:.2g}", "yes" if s["q"] < res["alpha"] else "no"]
            for s in res["slices"]]
    return pd.DataFrame(rows, columns=cols)


def fact_text(value) -> str:
    """Counts with thousands separators (1,007,916 reads at a glance), measurements to 3 significant digits."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    return f"{value:,}" if isinstance(value, int) else f"{value:,.3g}"


def span(values) -> list[float]:
    """Axis limits around the data with a 5% margin: the plots' default domain starts at zero, which squeezes a
    UMAP cloud lying at x = 9..12 into a corner."""
    lo, hi = float(values.min()), float(values.max())
    pad = 0.05 * (hi - lo) or 0.5
    return [lo - pad, hi + pad]


def fixed(x: float, digits: int = 3) -> str:
    """x to `digits` decimals without a minus sign on a value that rounds to zero ("-0.000")."""
    return f"{round(x, digits) + 0.0:.{digits}f}"


def map_header(m: dict) -> str:
    """A saliency panel's title: whose map, and which class it explains (plain text: a component label)."""
    if m["target_label"] is None:
        return f"{m['model']} · explains its score"
    of = "logit of " if m.get("output") == "logit" else ""
    return f"{m['model']} · explains {of}{m['target_label']}"


def saliency_summary(res: dict) -> str:
    parts = []
    for m, f in zip(res["maps"], res["faithfulness"]):
        what = ("the score" if m["target_label"] is None else
                f"{'the logit of ' if m.get('output') == 'logit' else ''}*{html.escape(str(m['target_label']))}* "
                f"(p={fixed(m['probability'] or 0)})")
        s = (f"**{html.escape(m['model'])}** explains {what}: comprehensiveness {fixed(f['comprehensiveness'])}, "
             f"sufficiency {fixed(f['sufficiency'])}, {m['seconds'] * 1000:.0f} ms")
        if m.get("delta") is not None:
            s += f", IG delta {m['delta']:.2g} after {m['n_steps']} steps"
        if m.get("note"):
            s += f" — {html.escape(m['note'])}"
        parts.append(s)
    agree, on = res["agreement"], res.get("agreement_label")
    on = f" on *{html.escape(str(on))}*" if on is not None else ""
    parts.append(f"rank agreement between the models{on} (Spearman): **{agree:.2f}**" if agree is not None
                 else "rank agreement: undefined (too few words or constant scores)")
    return "\n\n".join(parts)


def saliency_dataset_summary(res: dict, markdown: bool = True, show: int = 5) -> str:
    """Saliency over a dataset in words: the app's markdown, or the command line's fixed-width text (with the
    `show` examples where the models agree least)."""
    if not markdown:
        return _saliency_dataset_text(res, show)
    names = res["models"]
    rows = ["| model | comprehensiveness | … of a random ranking | sufficiency |", "|---|---|---|---|"]
    rows += [f"| {html.escape(n)} | " + " | ".join(format_mean(res[key][k]) for key in
                                                   ("comprehensiveness", "random_comprehensiveness", "sufficiency"))
             + " |" for k, n in enumerate(names)]
    a = res["agreement"]
    of = " of the logit" if res.get("output") == "logit" else ""
    lines = [f"**{html.escape(res['dataset'])}**, {res['n']} examples, {res['method'].replace('_', ' ')}{of} "
             "(mean and 95% interval; comprehensiveness well above the random ranking's means the maps found "
             "words the model relies on)", "", *rows, ""]
    if "comprehensiveness_comparison" in res:
        lines.append(html.escape(verdict(res["comprehensiveness_comparison"], names), quote=False))
    lines.append("" if a["mean"] is None else f"\n\nRank agreement between the models: **{format_mean(a)}** "
                 f"over {a['n']} examples")
    return "\n".join(lines)


def _saliency_dataset_text(res: dict, show: int) -> str:
    names = res["models"]
    of = " of the logit" if res.get("output") == "logit" else ""
    lines = [f"{res['method']}{of} over {res['n']} examples of {res['dataset']} (mean [95% interval])", ""]
    nw = max(10, *(len(n) + 2 for n in names))
    lines.append(f"{'':<{nw}}{'comprehensiveness':>26}{'random ranking':>26}{'sufficiency':>26}")
    for k, n in enumerate(names):
        lines.append(f"{n:<{nw}}" + "".join(f"{format_mean(res[key][k]):>26}" for key in
                                            ("comprehensiveness", "random_comprehensiveness", "sufficiency")))
    if "comprehensiveness_comparison" in res:
        lines.append(verdict(res["comprehensiveness_comparison"], names))
    a = res["agreement"]
    if a["mean"] is not None:
        lines.append(f"rank agreement between the models: {format_mean(a)} over {a['n']} examples; least on:")
        for i in res["lowest_agreement"][:show]:
            e = res["examples"][i]
            tops = " · ".join(f"{n}: {', '.join(w) or '(no word for the class)'}"
                              for n, w in zip(names, e["top_words"]))
            text = " / ".join(e["texts"])[:100]
            lines.append(f"  row {e.get('row', i + 1)}  {e['agreement']:+.2f}  {text}  ({tops})")
    return "\n".join(lines)


def lowest_agreement_frame(res: dict) -> pd.DataFrame:
    names = res["models"]
    rows = []
    for i in res.get("lowest_agreement", []):
        e = res["examples"][i]
        rows.append([e.get("row", i + 1), clip(" ‖ ".join(e["texts"])), str(e["label"]), round(e["agreement"], 3),
                     *[", ".join(w) or "(none for the class)" for w in e["top_words"]]])
    return pd.DataFrame(
        rows, columns=["row", "input", "explained class", "agreement", *[f"{n} top words" for n in names]]
    )


def valid_edits_note(res: dict, names: list[str]) -> str:
    """For WordNet synonym swaps: how many keep the meaning (the ones the rates count) and the rates over all."""
    if "valid_edits" not in res:
        return ""
    every = ", ".join(f"{n} {percent(r, 1)}" for n, r in zip(names, res["flip_rate_all_edits"]))
    return (f"{res['valid_edits']} of {res['changed']} swaps keep the meaning (the same part of speech, the word's "
            f"usual sense, MiniLM cosine >= {MIN_COSINE:g}) and are the ones counted; over every swap: {every}")


def counterfactual_summary(res: dict, names: list[str]) -> str:
    if "flip_rate" in res:  # over a dataset
        rates = " · ".join(f"**{html.escape(n)}** {percent(r, 1)}" for n, r in zip(names, res["flip_rate"]))
        only = " · ".join(f"only {html.escape(n)}: {len(o)}" for n, o in zip(names, res["only"]))
        text = (f"{res['changed']} edits ({res['edits']}) of {res['examples_changed']} examples in "
                f"{html.escape(res['dataset'])}; flip rate {rates}; {only}")
        if note := valid_edits_note(res, names):
            text += "\n\n" + html.escape(note, quote=False)
        if "comparison" in res:
            text += "\n\n" + html.escape(verdict(res["comparison"], names, unit="edits"), quote=False)
        return text
    n = len(res["changes"])
    flips = [sum(c["flipped"][k] for c in res["changes"]) for k in range(len(names))]
    notes = [f"**{html.escape(p['model'])}**: {html.escape(p['note'])}" for p in res.get("per_model", [])
             if p.get("note")]
    return f"{n} edit(s); label flips: " + " · ".join(f"**{html.escape(a)}** {b}" for a, b in zip(names, flips)) + (
        "<br>" + "<br>".join(notes) if notes else "")


def attack_line(model: str, s: dict, markdown: bool = True) -> str:
    """One model's attack summary, the same sentence in the app (markdown) and on the command line (plain)."""
    skipped = f" ({s['skipped']} skipped: already wrong on the gold label)" if s["skipped"] else ""
    name = f"**{html.escape(model)}**" if markdown else model
    extra = ""
    if s.get("avg_perturbed_words_pct") is not None:
        extra += f", {s['avg_perturbed_words_pct']:.1f}% of words perturbed"
    if s.get("avg_seconds") is not None:
        extra += f", {s['avg_seconds']:.2f} s/example"
    transfer = percent(s["transfer_rate"]) + (f" of {s['transfer_n']}" if s.get("transfer_n") else "")
    return (f"{name}: success {percent(s['success_rate'])} of {s['attacked']} attacked{skipped}, "
            f"{s['avg_queries'] or 0:.0f} queries{extra}, transfer {transfer}")


def flips(change: dict, names: list[str]) -> str:
    who = [n for n, f in zip(names, change["flipped"]) if f]
    return "both" if len(who) == len(names) > 1 else f"{who[0]} only" if who else "none"


def around_edit(original: str, edited: str, before: int = 120, after: int = 240) -> str:
    """A long edited text as the stretch around its first change (a cell holding a whole review would hide an
    edit past its first lines, and send every row's full text to the browser)."""
    if len(edited) <= before + after + 100:
        return edited
    at = len(os.path.commonprefix([original, edited]))
    start, end = max(0, at - before), min(len(edited), at + after)
    return ("…" if start else "") + edited[start:end] + ("…" if end < len(edited) else "")


GENERATOR_NAMES = {"your_edit": "your edit", "word_replacement": "word swap", "wordnet_synonym": "WordNet synonym",
                   "wordnet_antonym": "WordNet antonym", "hotflip": "HotFlip", "ablation_flip": "word removal"}


def generator_name(generator: str) -> str:
    """A counterfactual generator as people read it ("wordnet_synonym" -> "WordNet synonym")."""
    key = generator.removeprefix("dataset_")
    return GENERATOR_NAMES.get(key, key.replace("_", " "))


def mark_edits(original: str, edited: str) -> str:
    """The edited text with each word the edit put in marked «like this» (a removed word leaves «∅»), so a
    table row shows what changed without comparing the two texts by eye."""
    import difflib

    if original == edited:
        return edited
    a, b = split_words(original), split_words(edited)
    out, pos = [], 0
    matcher = difflib.SequenceMatcher(a=[w.text for w in a], b=[w.text for w in b], autojunk=False)
    for tag, _, _, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        if j2 > j1:  # replaced or inserted words: their span in the edited text
            start, end = b[j1].start, b[j2 - 1].end
            out.append(edited[pos:start] + "«" + edited[start:end] + "»")
            pos = end
        else:  # deleted: mark where they were
            at = b[j1].start if j1 < len(b) else len(edited)
            out.append(edited[pos:at] + "«∅» ")
            pos = at
    return "".join(out) + edited[pos:]


def uncounted(change: dict) -> bool:
    """An edit the flip rates leave out: checked for meaning, and failed (`meaning.validity`)."""
    return bool(change.get("validity")) and not change["validity"].get("valid")


def counted(change: dict) -> str:
    """Whether an edit counts as meaning-keeping (WordNet swaps are checked, `meaning.validity`), and why not:
    "yes", or "no: " and each check it failed; "" where the generator's edits are not checked."""
    from ..techniques.meaning import MIN_COSINE

    v = change.get("validity")
    if not v:
        return ""
    if not uncounted(change):
        return "yes"
    why = [w for w, failed in (("another part of speech", v.get("part_of_speech_kept") is False),
                               ("not the word's usual sense", v.get("usual_sense") is False),
                               (f"meaning moved (cosine {v.get('cosine', 0):.2f} < {MIN_COSINE:g})",
                                v.get("cosine", 1.0) < MIN_COSINE)) if failed]
    return "no: " + (", ".join(why) or "failed the meaning check")


def changes_frame(res: dict, names: list[str]) -> pd.DataFrame:
    """One row per edit; which model's label it flips comes first, and over a dataset the examples that flip
    one model only lead the table (the study's question: where do the two models part ways?). Where edits are
    checked for meaning (WordNet swaps), a "counted" column says which the flip rates count, and they lead."""
    rows = []
    ordered = changes_in_order(res, names)
    checked = any(c.get("validity") for c in ordered)
    for c in ordered:
        shown = [around_edit(o, mark_edits(o, e)) for o, e in zip(c.get("original") or c["edited"], c["edited"])]
        row = {**({"row": c["row"]} if "row" in c else {}), "flips": flips(c, names),
               **({"counted": counted(c)} if checked else {}), "edited": " / ".join(shown),
               "edits": edits_text(c), "generator": generator_name(c["generator"]), **_answers(c, names)}
        rows.append(row)
    return pd.DataFrame(rows)


def _answers(change: dict, names: list[str]) -> dict:
    """An edit's columns per model: its answer before and after, and Δp of the label it gave the original (its
    score for regression): one column per model whatever the label, where a column per label would leave every
    other row empty."""
    row = {}
    for k, n in enumerate(names):
        b, a = change["before"][k], change["after"][k]
        row[f"{n} before"] = b.get("label", b.get("score"))
        row[f"{n} after"] = a.get("label", a.get("score"))
        row[f"{n} Δp"] = float(f"{own_delta(change, k)[1]:.3g}")  # small effects keep their digits
    return row


def pinned_frame(pinned: list[dict], names: list[str]) -> pd.DataFrame:
    """The pinned edits, each beside its original (LIT's pinned datapoint, for every edit kept): where it came from
    (the dataset's row, or typed), the original, the edit with its changed words marked, and per model its answer
    before and after and Δp of the label it gave the original."""
    rows = []
    for i, c in enumerate(pinned, 1):
        row = {"#": i, "from": f"row {c['row']}" if c.get("row") else "typed",
               "original": " / ".join(around_edit(e, o) for o, e in zip(c["original"], c["edited"])),
               "edited": " / ".join(around_edit(o, mark_edits(o, e)) for o, e in zip(c["original"], c["edited"])),
               "edits": edits_text(c), "flips": flips(c, names), **_answers(c, names)}
        rows.append(row)
    return pd.DataFrame(rows)


def saved_note(kept, local: bool) -> str:
    """Under the example once a saved set is every tab's dataset (locally, the command line's name for it too)."""
    spec = f'"{kept.spec}"' if " " in kept.spec else kept.spec
    cli = f" and the command line's <code>--dataset {html.escape(spec, quote=False)}</code>" if local else ""
    return (f"<small>saved {kept.n:,} examples as «{html.escape(kept.name, quote=False)}»; every dataset "
            f"field{cli} now reads it</small>")


def changes_in_order(res: dict, names: list[str]) -> list[dict]:
    """The edits in the changes table's order: those that keep the meaning (or aren't checked) before those that
    don't; over a dataset, within each, those that flip one model only first, then both, then neither (dataset
    order within each group); a picked row is the edit at its place here."""
    changes = list(res.get("changes") or res.get("examples") or [])
    if "flip_rate" in res:
        rank = {"both": 1, "none": 2}
        changes.sort(key=lambda c: (uncounted(c), rank.get(flips(c, names), 0)))
    else:
        changes.sort(key=uncounted)  # stable: the edits the rates count first, each group in its order
    return changes


def benchmark_table(res: dict) -> str:
    """The benchmark as the command line prints it: a fixed-width table and the paired test in words."""
    metric = "accuracy" if "accuracy" in res["models"][0] else "pearson"
    lines = [f"{res['pair']} on {res['dataset']} (n={res['n']})",
             f"{'model':<10}{metric:>10}{'params':>14}{'ex/s':>10}{'ms p50':>10}{'ms p95':>10}"]
    for r in res["models"]:
        lines.append(f"{r['model']:<10}{r[metric]:>10.4f}{r['parameters']:>14,}{r['throughput_per_s']:>10.1f}"
                     f"{r['latency_ms_median']:>10.1f}{r['latency_ms_p95']:>10.1f}")
    rat = res["ratios"]
    eng = res.get("engine", {})
    if eng.get("engine") == "ray":
        lines.append(f"engine: Ray, {eng['workers']} workers ({eng['address']}), wall {eng['wall_seconds']:.1f} s, "
                     f"{eng['examples_per_s_both_models']:.1f} examples/s for both models")
    lines.append(f"second/first: parameters {rat['parameters_b_over_a']:.2f}x, throughput "
                 f"{rat['throughput_b_over_a']:.2f}x, latency {rat['latency_b_over_a']:.2f}x")
    cmp, names = res.get("comparison"), [r["model"] for r in res["models"]]
    if cmp is None:  # a result cached by an earlier version
        return "\n".join(lines)
    return "\n".join(lines + describe(cmp, names))


def slices_table(res: dict, rows: int = 20) -> str:
    """Where the models differ, as the command line prints it: the findings in words, then a fixed-width table
    of the slices (size, both accuracies or the agreement, the gap in examples, p and q)."""
    a, b = res["models"]
    acc = res["overall"]["accuracy"]
    found = res["findings"]
    what = "accuracy" if res["metric"] == "accuracy" else "agreement"
    lines = [f"{res['dataset']} (n={res['n']}): {a} {acc[a]:.3f}, {b} {acc[b]:.3f}, agreement "
             f"{res['overall']['agreement']:.3f}",
             f"{res['candidates_tested']} candidate slices of at least {res['min_size']} examples tested for a "
             f"paired difference in {what}; "
             + (f"{found} with a false-discovery rate q < {res['alpha']:g}." if found else
                f"none with a false-discovery rate q < {res['alpha']:g}: no slice differs beyond chance."),
             f"{'slice':<44}{'size':>6}{a[:10]:>11}{b[:10]:>11}{'agree':>7}{'gap':>6}{'p':>10}{'q':>10}"]
    for s in res["slices"][:rows]:
        name = s["name"] if len(s["name"]) <= 42 else s["name"][:41] + "…"
        mark = " *" if s["q"] < res["alpha"] else ""
        lines.append(f"{name:<44}{s['size']:>6}{s['accuracy'][a]:>11.3f}{s['accuracy'][b]:>11.3f}"
                     f"{s['agreement']:>7.2f}{s['gap_examples']:>+6d}{s['p']:>10.2g}{s['q']:>10.2g}{mark}")
    lines.append(f"gap: examples only {b} gets right minus those only {a} gets right; * q < {res['alpha']:g}")
    return "\n".join(lines)


def confusion_text(res: dict) -> str:
    """Both models' confusion matrices, side by side, per facet part, as the command line prints them: counts
    with gold labels down and predicted ones across, then each model's accuracy and the paired test."""
    a, b = res["models"]
    labels = [str(lab)[:10] for lab in res["labels"]]
    width = max(10, *(len(lab) + 1 for lab in labels))
    side = width * len(labels)
    lines = [f"Confusion matrices on {res['dataset']} (n={res['n']:,}), split by {res['facet']}: gold labels down, "
             "predicted across"]
    for part in res["facets"]:
        lines += ["", f"{part['name']} (n={part['n']:,})",
                  f"{'gold':<12}{a[:side - 2]:<{side}}   {b[:side - 2]:<{side}}",
                  f"{'':<12}{''.join(f'{lab:>{width}}' for lab in labels)}   "
                  f"{''.join(f'{lab:>{width}}' for lab in labels)}"]
        for t, lab in enumerate(labels):
            lines.append(f"{lab:<12}" + "   ".join("".join(f"{m[t][q]:>{width},}" for q in range(len(labels)))
                                                    for m in part["matrices"]))
        acc = part["accuracy"]
        lines.append(f"{'accuracy':<12}{acc[0]:>{side}.1%}   {acc[1]:>{side}.1%}")
        lines.append("  " + verdict(part["comparison"], res["models"]))
    return "\n".join(lines)


def curves_text(res: dict) -> str:
    """Both models' areas under the ROC and precision-recall curves for one class, each with its interval, and
    the paired comparison of each area."""
    names = res["models"]
    lines = [f"ROC and precision-recall curves on {res['dataset']} (n={res['n']:,}) for «{res['positive']}» "
             f"against the rest ({res['positives']:,} of them)"]
    for cmp in (res["auc"], res["average_precision"]):
        pct = f"{int(round(100 * cmp['confidence']))}%"
        for name, value, (lo, hi) in zip(names, cmp["values"], cmp["intervals"]):
            bound = f"{pct} CI {lo:.3f} to {hi:.3f}" if lo is not None else f"no interval: {cmp['no_interval']}"
            lines.append(f"  {cmp['metric']} of {name}: {value:.3f} ({bound})")
        lines.append("  " + verdict(cmp, names))
    return "\n".join(lines)


def projection_summary(res: dict, names: list[str]) -> str:
    cached = ", ".join(f"{html.escape(n)} {'from cache' if c else 'computed'}"
                       for n, c in zip(names, res["embeddings_cached"]))
    return (f"**{html.escape(res['dataset'])}**, {res['n']} examples · shared {res['k']}-nearest neighbours: "
            f"**{res['knn_overlap']:.2f}** (unrelated spaces: {res['knn_chance']:.2f}) · Procrustes disparity "
            f"{res['procrustes_disparity']:.3f} · embeddings: {cached}")


FACT_LABELS = {  # Model facts' rows as people read them; a key not here reads with spaces for underscores
    "source": "source", "family": "architecture", "parameters": "parameters",
    "parameters_embeddings": "parameters: embeddings", "parameters_encoder": "parameters: encoder layers",
    "parameters_head": "parameters: pooler and classifier", "layers": "layers", "hidden_size": "hidden size",
    "embedding_size": "embedding size", "shares_layers": "one layer's weights shared by every depth",
    "vocab_size": "vocabulary", "tokenizer": "tokenizer", "precision": "precision", "device": "device",
    "device_name": "device name", "device_memory_gb": "device memory (GB)",
    "latency_ms": "latency, one input (ms, mean, 95% CI)", "throughput_per_s": "throughput (inputs/s, batched, 95% CI)",
    "gpu_memory_mb": "GPU memory held (MB)", "gpu_peak_memory_mb": "GPU memory at peak (MB)",
    "cuda_graphs": "small batches replayed from CUDA graphs", "cuda_graph_buckets": "CUDA graph buckets",
    "cuda_graphs_off": "why CUDA graphs are off",
    "cuda_graph_ig_rounds": "integrated-gradients rounds replayed (nodes, tokens)",
    "cuda_graphs_ig_off": "why integrated gradients' CUDA graphs are off",
}
FOOTNOTED = ("linear_layers",)  # long implementation notes: under the table, not in a column of their own
WITH_INTERVAL = {"latency_ms": "latency_ms_interval", "throughput_per_s": "throughput_interval"}


def with_interval(m: dict, key: str) -> str:
    """A measured figure and its interval, as the facts table shows it: "31.2 (29.8–33.0)"."""
    lo_hi = m.get(WITH_INTERVAL.get(key, ""))
    value = m[key]
    if not lo_hi:
        return _fact_value(value)
    return f"{value:.1f} ({lo_hi[0]:.1f}–{lo_hi[1]:.1f})"


def fact_label(key: str) -> str:
    return FACT_LABELS.get(key, key.replace("_", " "))


def _fact_value(value) -> str:
    return ("yes" if value else "no") if isinstance(value, bool) else fact_text(value)


def facts_views(res: dict, names: list[str], steps: list[str]) -> tuple[str, pd.DataFrame, pd.DataFrame]:
    """Model facts as a summary line, a fact × model table (facts in words, booleans as yes / no) and the layer
    transitions as long-form rows; the matrix-product note goes under the summary, not into the table."""
    example_first = res.get("example_first")
    hidden = {"transitions", *FOOTNOTED, *WITH_INTERVAL.values()}
    rows = [{("model" if k == "model" else fact_label(k)): with_interval(m, k) for k in m if k not in hidden}
            for m in res["models"]]
    trans = [{"model": m["model"], "layer": steps[i], "l2": l2, "cosine": c}
             for m in res["models"]
             for i, (l2, c) in enumerate(zip(m["transitions"]["l2"], m["transitions"]["cosine"]))]
    r = res["ratios"]
    summary = (f"{html.escape(names[1])} / {html.escape(names[0])}: parameters **{r['parameters']:.2f}×**, latency "
               f"**{r['latency']:.2f}×**, throughput **{r['throughput']:.2f}×** (measured now on {res['n_inputs']} "
               f"inputs{': the example above, then shipped examples' if example_first else ''})\n\n"
               "One input at a time, both models in turns: "
               + html.escape(verdict(res["latency_comparison"], names, unit="inputs"), quote=False))
    if res.get("throughput_comparison"):
        rounds = res["throughput_comparison"]["n"]
        summary += (f"\n\nBatched, {rounds} rounds of all {res['n_inputs']} inputs in turns: "
                    + html.escape(verdict(res["throughput_comparison"], names, unit="rounds"), quote=False))
    notes = [f"{html.escape(m['model'])}: {html.escape(str(m[k]))}" for k in FOOTNOTED for m in res["models"] if k in m]
    if notes:
        summary += "\n\n<small>Matrix products: " + " · ".join(notes) + "</small>"
    if res.get("precision") and res["precision"].get("asked") != "fp32":
        summary += f"\n\n<small>{html.escape(precision_line(res['precision']))}</small>"
    table = pd.DataFrame(rows).set_index("model").T.reset_index().rename(columns={"index": "fact"})
    return summary, table.astype(str), pd.DataFrame(trans)


CHECKLIST_TYPES = {  # CheckList's three kinds of test (Ribeiro et al. 2020), as the tables abbreviate them
    "MFT": "minimum functionality: each case has a right answer (\"I didn't love the food\" is not positive)",
    "INV": "invariance: an edit that shouldn't change the answer (a typo, a name, a location) changes it",
    "DIR": "directional: an edit that should move the confidence one way (adding \"I hated it\") moves it the "
           "other",
}


def checklist_types_legend() -> str:
    """The test types of the CheckList tables, one line each, for people who haven't read the paper."""
    return "Test types: " + "; ".join(f"**{k}**, {v}" for k, v in CHECKLIST_TYPES.items()) + "."


def checklist_failures(res: dict, per_test: int = 2) -> list[dict]:
    """Up to `per_test` failing cases per test and model (over a dataset's perturbations, every one: each is a
    row of the dataset), in the table's order; `texts`: the case's first input (its fields), which a picked row
    loads into the other tabs."""
    rows = []
    shown = None if res.get("over") == "dataset" else per_test
    for t in res["tests"]:
        for r in t["results"]:
            for e in r["examples"][:shown]:
                rows.append({**({"row": e["row"]} if "row" in e else {}), "model": r["model"], "test": t["name"],
                             "inputs": " | ".join(" / ".join(x) for x in e["inputs"])[:300], "why": e["detail"],
                             "texts": list(e["inputs"][0]) if e["inputs"] else None})
    return rows


def checklist_cases(res: dict) -> pd.DataFrame:
    """Over a dataset's perturbations, every case run: its dataset row, the test, the perturbed text and whether
    each model kept its answer, in row order (a row's sentence is found here whether or not a model failed it)."""
    names = res["models"]
    rows = []
    for t in res["tests"]:
        for c in t.get("cases") or []:
            rows.append({"row": c["row"], "test": t["name"], "perturbed": " / ".join(c["inputs"][-1])[:300],
                         **{n: "n/a" if ok is None else "passes" if ok else "FAILS"
                            for n, ok in zip(names, c["passed"])}})
    rows.sort(key=lambda r: r["row"])  # stable: a row's tests in the suite's order
    return pd.DataFrame(rows, columns=["row", "test", "perturbed", *names])


def checklist_views(res: dict) -> tuple[pd.DataFrame, pd.DataFrame, list[dict]]:
    """A CheckList run as the fail rate per test (with its paired p-values), up to two failing cases per test
    and model, and the mean fail rate per capability (bar rows)."""
    rows = []
    for t in res["tests"]:
        row = {"capability": t["capability"], "test": t["name"], "type": t["type"], "n": t["results"][0]["n"]}
        for r in t["results"]:
            row[f"{r['model']} fail %"] = None if r["fail_rate"] is None else round(100 * r["fail_rate"], 1)
        paired = t.get("paired") or {}
        row["p (McNemar)"], row["p (Holm)"] = (None if paired.get(k) is None else round(paired[k], 4)
                                               for k in ("p_value", "p_holm"))
        row["expectation"] = t["expectation"]
        row["left out"] = t.get("left_out") or ""  # cases expecting a label a model does not predict
        rows.append(row)
    failing = checklist_failures(res)
    rowed = ["row"] if res.get("over") == "dataset" else []  # a dataset's perturbations: the dataset's row
    fails = pd.DataFrame([{k: v for k, v in f.items() if k != "texts"} for f in failing],
                         columns=[*rowed, "model", "test", "inputs", "why"])
    bars = [{"capability": cap, "model": m, "fail rate": v or 0.0}
            for cap, per in res["capabilities"].items() for m, v in per.items()]
    return pd.DataFrame(rows), fails, bars


# TextAttack's demo colours a changed word by the label it speaks for: the original words in the original label's
# colour, the new ones in the adversarial label's (textattack.shared.utils.color_from_label), here as soft tints
LABEL_TINTS = ("#f8c4c4", "#bfe8c4", "#bde6f2", "#dccbf0", "#c6d4f5", "#f5e3b8")


def _tint(label: str | None, labels: list[str]) -> str:
    return LABEL_TINTS[labels.index(label) % len(LABEL_TINTS)] if label in labels else "#f5e3b8"


def _marked_html(marked: list, tint: str) -> str:
    return "".join(f'<mark style="background:{tint};padding:0 2px;border-radius:3px">{html.escape(c)}</mark>'
                   if ch else html.escape(clip(c)) for c, ch in marked)


def attack_panel(example: dict, k: int, labels: list[str]) -> str:
    """Model k's attack on one example as TextAttack's demo shows it: label and confidence before → after, the
    original with the words it changed and the adversarial text with their replacements, coloured by label;
    whether it fools the other model; or why the attack failed."""
    r = example["results"][k]
    before = r.get("original_label")
    conf = (lambda c: "" if c is None else f" ({100 * c:.0f}%)")
    head = f"<b>{html.escape(r['model'])}</b>: "
    if r["outcome"] != "success":
        said = f"{html.escape(str(before))}{conf(r.get('original_confidence'))}, " if before else ""
        why = html.escape(r.get("why") or r["outcome"])
        return f"<div>{head}{said}<b>{html.escape(r['outcome'])}</b>: {why}</div>"
    after = r.get("adversarial_label")
    moved = (f"{html.escape(str(before))}{conf(r.get('original_confidence'))} → "
             f"<b>{html.escape(str(after))}</b>{conf(r.get('adversarial_confidence'))}")
    swaps = ", ".join(f"{html.escape(a)} → {html.escape(b)}" for a, b in r.get("swaps") or [])
    fooled = [t for t in example.get("transfer", []) if t["from"] == r["model"]]
    transfer = "".join(f" · {'fools' if t['fooled'] else 'does not fool'} {html.escape(t['to'])} "
                       f"({html.escape(str(t['label_before']))} → {html.escape(str(t['label_after']))})"
                       for t in fooled)
    original = r.get("marked_original") or [[" / ".join(example["texts"]), False]]
    return (f"<div>{head}{moved} in {r['queries']} queries{transfer}<br><small>{swaps}</small></div>"
            f"<div><small>original</small> {_marked_html(original, _tint(before, labels))}</div>"
            f"<div><small>adversarial</small> {_marked_html(r.get('marked') or [], _tint(after, labels))}</div>")


def attack_views(res: dict, names: list[str], labels: list[str], shown: int = 0
                 ) -> tuple[str, list[str], pd.DataFrame, list[dict]]:
    """An attack as its summary, example `shown`'s panel per model (`attack_panel`), a row per example and model
    (its outcome: the labels it moved between, or why it failed), and the success and transfer rates (bars)."""
    ex = res["examples"][shown] if 0 <= shown < len(res["examples"]) else None
    panels = [attack_panel(ex, k, labels) if ex else "" for k in range(len(names))]
    rows = [{"row": e.get("row", e["index"] + 1), "model": r["model"],
             "outcome": (f"{r['original_label']} → {r['adversarial_label']}" if r["outcome"] == "success"
                         else f"{r['outcome']}: {r.get('why') or ''}".rstrip(": ")),
             "adversarial": " / ".join(clip(t) for t in r["adversarial"] or []), "queries": r["queries"],
             "perturbed %": "" if r["perturbed_words_pct"] is None else round(r["perturbed_words_pct"], 1),
             "seconds": round(r["seconds"], 2)}
            for e in res["examples"] for r in e["results"]]
    bars = [{"model": m, "measure": f"{what} rate", "value": s[f"{what}_rate"] or 0.0}
            for m, s in res["summary"].items() for what in ("success", "transfer")]
    summary = cut_line(res) + " · ".join(attack_line(k, v) for k, v in res["summary"].items())
    if res.get("comparison") and res["comparison"]["n"] > 1:  # one example is no test
        summary += "<br>" + html.escape(verdict(res["comparison"], names, unit="examples attacked on both models"),
                                        quote=False)
    notes = dict.fromkeys(r["note"] for e in res["examples"] for r in e["results"] if r.get("note"))
    summary += "".join(f"<br><small>{html.escape(n)}</small>" for n in notes)  # e.g. a long input's window
    return summary, panels, pd.DataFrame(rows), bars


def method_label(name: str) -> str:
    """A saliency method's name for people, as its class gives it (`saliency.Method.label`)."""
    from ..techniques.saliency import METHODS  # deferred: the methods' classes carry their names; views stays light

    found = METHODS.get(name)
    return found.label if found is not None else name


# the options' values as people read them (the controls' labels)
OUTPUT_NAMES = {"prob": "probability", "logit": "logit"}
POOLING_NAMES = {"cls": "[CLS]", "mean": "mean", "words": "words"}
SHOWN_WORDS = 40  # word columns of the method table; the JSON has every word


def _cell(score: float | None, top: float, signed: bool = True) -> str:
    """A word's cell as the maps colour it: red for the explained class, purple against, shade by |score|; an
    unsigned method's (a sensitivity) in amber, as its highlight, never the red that reads as "supports"."""
    if score is None:
        return '<td style="color:#999">·</td>'
    a = min(1.0, abs(score) / top) if top else 0.0
    rgb = "217,119,6" if not signed else "220,38,38" if score >= 0 else "126,34,206"
    shown = f"{score / top if top else 0:{'+' if signed else ''}.2f}"
    return f'<td style="background:rgba({rgb},{0.85 * a:.2f});text-align:right">{shown}</td>'


def methods_table(res: dict) -> str:
    """Every method's map of each model with words as rows (ferret's table, turned so it fits a page's width and a
    phone's): one table per model, a column per method, each column scaled to its own largest |score|, the map's
    comprehensiveness and sufficiency under it, and the two models' agreement per method below."""
    words = res["words"][:SHOWN_WORDS]
    methods = list(dict.fromkeys(r["method"] for r in res["rows"]))
    models = list(dict.fromkeys(r["model"] for r in res["rows"]))
    by = {(r["model"], r["method"]): r for r in res["rows"]}
    head = "".join(f"<th>{html.escape(method_label(m))}</th>" for m in methods)
    tables = []
    for model in models:
        cols = []
        for method in methods:
            r = by[(model, method)]
            unread = set(r.get("unread") or ())
            scores = [None if i in unread else s for i, s in enumerate(r["scores"][:SHOWN_WORDS])]
            cols.append((scores, max((abs(s) for s in scores if s is not None), default=0.0), r.get("signed", True)))
        rows = [f"<tr><td>{html.escape(w)}</td>" + "".join(_cell(c[i], top, signed) for c, top, signed in cols)
                + "</tr>" for i, w in enumerate(words)]
        if len(res["words"]) > SHOWN_WORDS:
            rows.append(f'<tr><td colspan="{len(methods) + 1}">… {len(res["words"]) - SHOWN_WORDS} more words '
                        "(the JSON has every one)</td></tr>")
        for key, short in (("comprehensiveness", "compr."), ("sufficiency", "suff.")):
            rows.append(f"<tr><td><i>{short}</i></td>"
                        + "".join(f'<td style="text-align:right">{fixed(by[(model, m)][key])}</td>' for m in methods)
                        + "</tr>")
        tables.append(f'<div class="methods-table" style="flex:1 1 320px;min-width:0;overflow-x:auto">'
                      f'<b>{html.escape(model)}</b><table style="border-collapse:collapse;font-size:0.85em;width:100%">'
                      f"<thead><tr><th>word</th>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table></div>")
    agree = " · ".join(f"{html.escape(method_label(m))} {fixed(res['agreement'][m], 2)}"
                       for m in methods if res["agreement"].get(m) is not None)
    label, logit = res.get("target_label"), "the logit of " if res["output"] == "logit" else ""
    what = "the score" if label is None else f"{logit}<b>{html.escape(str(label))}</b>"
    if res.get("target_labels"):  # each model its own prediction
        what = "its model's own prediction: " + ", ".join(
            f"{html.escape(m)} {logit}<b>{html.escape(str(lab))}</b>" for m, lab in res["target_labels"].items())
    return (f"<div>Every map explains {what}; each column is scaled to its own largest score (+1 or −1). "
            "Comprehensiveness: higher is more faithful; sufficiency: lower is.</div>"
            f'<div style="display:flex;flex-wrap:wrap;gap:1em">{"".join(tables)}</div>'
            + (f"<div>The models' agreement (rank correlation) under each method: {agree}</div>" if agree else ""))


def probability_table(res: dict) -> str:
    """Both models' probabilities in the task's class order (a label widget sorts each model by confidence,
    so the two lists came in different orders), or their scores, with each model's latency."""
    models = res["models"]
    head = "| | " + " | ".join(f"**{html.escape(m['model'])}**" for m in models) + " |"
    rows = [head, "|---|" + "---|" * len(models)]
    if "probabilities" in models[0]:
        for label in models[0]["probabilities"]:
            cells = [f"{m['probabilities'].get(label, 0.0):.3f}" + (" ◀" if m.get("label") == label else "")
                     for m in models]
            rows.append(f"| {html.escape(str(label))} | " + " | ".join(cells) + " |")
    else:
        rows.append("| score | " + " | ".join(f"{m['score']:.3f}" for m in models) + " |")
    rows.append("| latency | " + " | ".join(f"{m['latency_ms']:.1f} ms" for m in models) + " |")
    return "\n".join(rows)


def similarity_basis(res: dict) -> str:
    """What a CKA result rests on, as every front end says it: how many examples (or words) in how many
    minibatches, and how its intervals were drawn."""
    unit = "words" if res["pooling"] == "words" else "examples"
    n, k = res["n"], res["minibatches"]
    size = f"{k} minibatch{'es' if k != 1 else ''} of about {max(1, round(n / k)):,}"
    how = f"{size}; intervals: {res['interval']}" if res.get("interval") else f"{size}; no interval"
    return f"{n:,} {unit}, {res['pooling']} pooling, {how}"


def similarity_table(res: dict) -> str:
    """The CKA of each layer of the first model with the second's layers, as the command line prints it, and
    the best match per layer."""
    a, b = res["models"]
    cross = res["cross"]["cka"]
    cell = (lambda v: "   n/a" if v is None else f"{v:6.2f}")
    lines = [f"linear CKA on {res['dataset']} ({similarity_basis(res)}); rows: {a} layers, columns: {b} layers "
             "(0 = embeddings)",
             "      " + "".join(f"{j:>6}" for j in range(len(cross[0]))) + "   best"]
    for i, row in enumerate(cross):
        best = res["best_b_for_a"][i]
        lines.append(f"{i:>6}" + "".join(cell(v) for v in row) + f"   {'-' if best is None else best:>4}")
    return "\n".join(lines)


def attention_text(res: dict) -> str:
    """Per model and unit: where it attends most at the chosen layer (and how much), as the command line
    prints it."""
    head = "mean of the heads" if res["head"] is None else f"head {res['head']}"
    lines = []
    for m in res["models"]:
        lines.append(f"{m['model']}, layer {m['layer']}, {head}: each unit -> the unit it attends to most")
        for unit, row in zip(m["units"], m["map"]):
            j = max(range(len(row)), key=row.__getitem__)
            lines.append(f"  {unit:<16} -> {m['units'][j]:<16} {row[j]:.2f}")
    return "\n".join(lines)


def attention_stats_text(res: dict) -> str:
    """Per model and layer, the heads' means, as the command line prints them."""
    lines = [f"attention over {res['dataset']} (n={res['n']:,}): per layer, the mean over heads"]
    for m in res["models"]:
        lines.append(f"{m['model']}:  layer  entropy   [CLS]   [SEP]   punct   change from below")
        for i, (e, c, s_, p) in enumerate(zip(m["entropy"], m["cls"], m["sep"], m["punct"])):
            js = "" if i == 0 else f"{sum(m['neighbour_js'][i - 1]) / len(m['neighbour_js'][i - 1]):.3f}"
            lines.append(f"{'':8}{i + 1:>5} {sum(e) / len(e):8.2f} {sum(c) / len(c):7.2f} {sum(s_) / len(s_):7.2f} "
                         f"{sum(p) / len(p):7.2f}   {js}")
    return "\n".join(lines)


# ------------------------------------------------------------------ the command line's text
def signed(x: float) -> str:
    return f"{x:+.4f}" if abs(x) >= 1e-4 or x == 0 else f"{x:+.1e}"


def saliency_text(res: dict, pair_name: str, fields: list[str]) -> str:
    """`albert-lens saliency`: a row per word read, a column per model, then each map's faithfulness and the
    models' agreement."""
    maps = res["maps"]
    of = "logit of " if res["output"] == "logit" else ""
    heads = [f"{m['model']} ({of + m['target_label'] if m['target_label'] is not None else 'score'})" for m in maps]
    width = max([4, *(len(w) for w in maps[0]["words"])]) + 5
    col = max(22, *(len(h) + 2 for h in heads))
    lines = [f"{res['method']} · pair {pair_name}", "", f"{'word':<{width}}" + "".join(f"{h:>{col}}" for h in heads)]
    unread = unread_by_all(maps)
    for i, w in enumerate(maps[0]["words"]):
        if i in unread:
            continue
        field = f" [{fields[maps[0]['fields'][i]]}]" if len(fields) > 1 else ""
        lines.append(f"{f'{i + 1:>3} {w}{field}':<{width}}" + "".join(f"{signed(m['scores'][i]):>{col}}" for m in maps))
    if unread:
        lines.append(f"... and {len(unread)} words past the cut, which neither model read")
    lines.append("")
    for m, f in zip(maps, res["faithfulness"]):
        line = (f"{m['model']}: p={m['probability'] or 0:.3f}, comprehensiveness {f['comprehensiveness']:.3f}, "
                f"sufficiency {f['sufficiency']:.3f}, {m['seconds'] * 1000:.0f} ms")
        if m.get("delta") is not None:
            line += f", IG delta {m['delta']:.2g} after {m['n_steps']} steps"
        lines.append(line + (f" ({m['note']})" if m.get("note") else ""))
    agree, on = res["agreement"], res["agreement_label"]
    lines.append(f"rank agreement{'' if on is None else f' on {on}'} (Spearman): "
                 + ("undefined" if agree is None else f"{agree:.3f}"))
    return "\n".join(lines)


def counterfactual_text(res: dict, names: list[str], show: int = 5) -> str:
    """`albert-lens counterfactual`: over a dataset the flip rates and their test, with `show` edits only one
    model flips; on one input each edit and what it did to each model."""
    lines = []
    if "flip_rate" in res:
        lines.append(f"{res['changed']} edits ({res['edits']}) of {res['examples_changed']} examples in "
                     f"{res['dataset']}")
        for n, r, only in zip(names, res["flip_rate"], res["only"]):
            lines.append(f"  {n:<10} flip rate {percent(r, 1)} · flips only this model: {len(only)}")
        lines.append(f"  both flip: {res['both']}")
        if note := valid_edits_note(res, names):
            lines.append(f"  {note}")
        if "comparison" in res:
            lines.append(f"  {verdict(res['comparison'], names, unit='edits')}")
        for n, only in zip(names, res["only"]):
            for c in only[:show]:
                lines.append(f"  only {n}, row {c.get('row', '?')} ({edits_text(c)}): {' / '.join(c['edited'])}")
        return "\n".join(lines)
    for p in res.get("per_model") or []:
        if p.get("note"):
            lines.append(f"{p['model']}: {p['note']}")
    for c in res["changes"]:
        lines.append(f"{c['generator']}: {edits_text(c)}\n  {' / '.join(c['edited'])}")
        for k, n in enumerate(names):
            b, a = c["before"][k], c["after"][k]
            key, d = own_delta(c, k)
            flip = "  FLIPPED" if c["flipped"][k] else ""
            lines.append(f"  {n:<10} {b.get('label', b.get('score'))} → {a.get('label', a.get('score'))} "
                         f"(Δp({key}) {signed(d)}){flip}")
    if not res["changes"]:
        lines.append("no edit found")
    return "\n".join(lines)


def facts_text(res: dict) -> str:
    """`albert-lens facts`: a row per fact, a column per model, each model's layer transitions, the ratios and
    the paired latency verdict."""
    models = res["models"]
    names = [m["model"] for m in models]
    keys = [k for k in models[0] if k not in ("transitions", "model", *WITH_INTERVAL.values())]
    lines = [f"{'':<26}" + "".join(f"{n:>24}" for n in names)]
    for k in keys:
        shown = [with_interval(m, k) if k in WITH_INTERVAL and m.get(WITH_INTERVAL[k]) else
                 f"{v:,}" if isinstance(v, int) and not isinstance(v, bool) else
                 f"{v:.2f}" if isinstance(v, float) else str(v) for m in models for v in [m[k]]]
        lines.append(f"{k:<26}" + "".join(f"{v:>24}" for v in shown))
    for m in models:
        t = m["transitions"]
        lines.append(f"{m['model']} layer transitions, L2: " + " ".join(f"{x:.2f}" for x in t["l2"]))
        lines.append(f"{m['model']} layer transitions, cosine: " + " ".join(f"{x:.3f}" for x in t["cosine"]))
    r = res["ratios"]
    lines.append(f"{names[1]} / {names[0]}: parameters {r['parameters']:.2f}x, latency {r['latency']:.2f}x, "
                 f"throughput {r['throughput']:.2f}x (on {res['n_inputs']} inputs)")
    lines.append("one input at a time, both models in turns: "
                 + verdict(res["latency_comparison"], names, unit="inputs"))
    if res.get("throughput_comparison"):
        lines.append(f"batched, {res['throughput_comparison']['n']} rounds in turns: "
                     + verdict(res["throughput_comparison"], names, unit="rounds"))
    if res.get("precision"):
        lines.append(precision_line(res["precision"]))
    return "\n".join(lines)


def declared_text(res) -> str:
    """A declared capability's answer as text: the options it ran with, then its result, a block per model
    where it answers per model (a list of records naming their model), else as JSON."""
    import json

    lines = [f"{res['capability']}" + (f" · {res['dataset']} ({res['n']} examples)" if res.get("dataset") else "")]
    if res["options"]:
        lines.append("options: " + ", ".join(f"{k}={v}" for k, v in res["options"].items()))
    body = res["result"]
    if isinstance(body, list) and all(isinstance(r, dict) and "model" in r for r in body):
        for r in body:
            lines.append("")
            lines.append(str(r["model"]))
            lines += [f"  {k}: {json.dumps(v, ensure_ascii=False)}" for k, v in r.items() if k != "model"]
    else:
        lines.append(json.dumps(body, indent=2, ensure_ascii=False))
    return "\n".join(lines)


def refusal(message: str) -> str:
    """A refused request's message where its answer would be (already escaped for the page), until the next run."""
    return f"**Not answered:** {message}"


def picked_note(origin: str, gold: str | None = None, detail: str = "") -> str:
    """The line under the shared example after a pick: where it came from, its gold label when the dataset
    has one, and what else the row said (a CheckList expectation, an attack's outcome)."""
    parts = [f"picked from {html.escape(origin, quote=False)}"]
    if gold not in (None, ""):
        parts.append(f"gold label **{html.escape(str(gold), quote=False)}**")
    if detail:
        parts.append(html.escape(detail, quote=False))
    return "<small>" + " · ".join(parts) + "</small>"


def slice_note(name: str) -> str:
    """Under the example once a slice is every tab's dataset."""
    return (f"<small>every dataset field now reads {html.escape(name, quote=False)}: the dataset-level actions "
            "(benchmark, saliency and counterfactuals over a dataset, projection, CKA, attacks) run on it</small>")


def precision_line(said: dict) -> str:
    """One line: which precision was asked for, which answers and why (`Pair.precision_asked`)."""
    if said.get("asked") == said.get("used") == "fp32":
        return "precision: fp32"
    one = said.get("one_input") or {}
    also = f"; {one['why']}" if one.get("used") and one["used"] != said["used"] else ""
    return f"precision: {said['asked']} asked, {said['used']} answers: {said['why']}{also}"


def _or_dash(x: float | None, digits: int = 3) -> str:
    return "—" if x is None else fixed(x, digits)


def methods_text(res: dict, top: int = 3) -> str:
    """Every method's map of each model in lines: its faithfulness and its `top` words by |score|; then the two
    models' agreement per method (the app's table is `methods_table`)."""
    explained = OUTPUT_NAMES.get(res["output"], res["output"])
    lines = [f"every method explains {res['target_label']} (its {explained})"]
    for model in dict.fromkeys(r["model"] for r in res["rows"]):
        lines.append(model)
        for r in (r for r in res["rows"] if r["model"] == model):
            ranked = sorted((i for i, x in enumerate(r["scores"]) if x is not None), key=lambda i: -abs(r["scores"][i]))
            words = ", ".join(res["words"][i] for i in ranked[:top])
            lines.append(f"  {method_label(r['method']):<22} comprehensiveness {_or_dash(r['comprehensiveness'])}  "
                         f"sufficiency {_or_dash(r['sufficiency'])}  top: {words}")
    lines.append("the two models' agreement: " + " · ".join(f"{method_label(m)} {_or_dash(a, 2)}"
                                                             for m, a in res["agreement"].items()))
    return "\n".join(lines)


def projection_text(res: dict) -> str:
    """A projection's numbers in words: the dataset and settings, the neighbourhoods' overlap against chance, the
    aligned projections' disparity."""
    return "\n".join([
        f"{res['dataset']}: {res['n']} examples, {res['projection']} of {res['pooling']} pooling at layer "
        f"{res['layer']}",
        f"  shared {res['k']}-nearest neighbours between the two embedding spaces: {res['knn_overlap']:.3f} "
        f"(unrelated spaces: {res['knn_chance']:.3f})",
        f"  Procrustes disparity of the aligned projections: {res['procrustes_disparity']:.3f}"])


def attack_text(res: dict) -> str:
    """An attack's per-model summary lines and the paired verdict on the examples attacked on both models."""
    lines = [attack_line(name, s, markdown=False) for name, s in res["summary"].items()]
    if res["comparison"] is not None:
        lines.append(verdict(res["comparison"], res["models"], unit="examples attacked on both models"))
    return "\n".join(lines)


def checklist_text(res: dict) -> str:
    """A CheckList run: the suite, its table and the verdict in words."""
    head = f"{res['suite']} ({res['kind']}), up to {res['sample'] or 'all'} cases per test\n"
    return "\n".join(filter(None, [head, res["markdown"], res["summary"]]))


def locate_text(res: dict, show: int = 5) -> str:
    """Where the input sits in the dataset, per model: its answer and where its score falls among the dataset's,
    then its nearest examples (row, cosine, gold, the model's answer, text)."""
    lines = [f"{' / '.join(res['input'])!r} among {res['dataset']} ({res['n']:,} examples)"]
    for m in res["models"]:
        regression = not isinstance(m["answer"], str)
        what = f"score {m['score']:.3f}" if regression else f"{m['answer']} at {m['score']:.3f}"
        lines += ["", f"{m['model']}: {what}, above {100 * m['share_below']:.0f}% of the dataset's "
                      f"{'scores' if regression else 'probabilities of ' + m['answer']}; nearest examples:"]
        for nb in m["neighbours"][:show]:
            gold = f", gold {nb['gold']}" if nb["gold"] else ""
            lines.append(f"  row {nb['row']:>5}  cos {nb['cosine']:.3f}{gold}, says {nb['prediction']}: "
                         f"{clip(nb['text'])}")
    return "\n".join(lines)


def locate_summary(res: dict) -> str:
    """The Projection tab's lines for "where is my sentence": each model's answer and its place in the scores."""
    out = []
    for m in res["models"]:
        regression = not isinstance(m["answer"], str)
        what = f"score **{m['score']:.3f}**" if regression else f"**{html.escape(m['answer'])}** at {m['score']:.3f}"
        out.append(f"**{html.escape(m['model'])}**: {what}, above {100 * m['share_below']:.0f}% of "
                   f"{html.escape(res['dataset'])}'s {res['n']:,} examples; its {res['k']} nearest are listed below")
    return "\n\n".join(out)


def neighbours_frame(res: dict) -> pd.DataFrame:
    """Each model's nearest examples to the input, a row each: the model, the row, cosine, gold, its answer, text."""
    rows = [{"model": m["model"], "row": nb["row"], "cosine": round(nb["cosine"], 3), "gold": nb["gold"],
             "says": nb["prediction"], "text": clip(nb["text"])} for m in res["models"] for nb in m["neighbours"]]
    return pd.DataFrame(rows, columns=["model", "row", "cosine", "gold", "says", "text"])


def text_of(res, *, pair: str = "", show: int = 5) -> str:
    """What the command line prints for a capability's result (`--json` prints its `to_dict()`): the result's own
    `as_text(show=)` where its type has one (a plugin's), else the built-in text of its type; `pair` names the pair
    in the headers that say it, `show` how many rows a dataset's text lists."""
    from ..declare import results as r  # deferred: the CLI's --help reads views without the results' imports

    if callable(getattr(type(res), "as_text", None)):
        return res.as_text(show=show)
    if isinstance(res, r.SaliencyResult):
        return saliency_text(res, pair, res["fields"])
    if isinstance(res, r.SaliencyDatasetResult):
        return saliency_dataset_summary(res, markdown=False, show=show)
    if isinstance(res, r.CounterfactualResult):
        return counterfactual_text(res, res["models"], show=show)
    if isinstance(res, r.LocateResult):
        return locate_text(res, show=show)
    shown = {r.SaliencyMethodsResult: methods_text, r.ProjectionResult: projection_text,
             r.SimilarityResult: similarity_table, r.AttentionResult: attention_text,
             r.AttentionStatsResult: attention_stats_text, r.AttackResult: attack_text,
             r.ChecklistResult: checklist_text, r.SlicesResult: slices_table, r.ConfusionResult: confusion_text,
             r.CurvesResult: curves_text, r.CapabilityResult: declared_text}
    for kind, text in shown.items():
        if isinstance(res, kind):
            return text(res)
    raise TypeError(f"{type(res).__name__}: a result type needs an as_text(show=) method for people to read it")
