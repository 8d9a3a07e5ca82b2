"""Reports of a run: ``report.md``, a self-contained ``report.html`` and ``figures/*.png``.

Both documents render the same :class:`audit.model.RunResult` through jinja2 templates shipped
in ``audit/templates/`` (``report.md.j2``, ``report.html.j2``); neither is made from the other.
The top of each is what a person reads first: a verdict banner (no violation / VIOLATION /
claim not supported) with the claim and the confidence, each audit's spec in words, and ε_lower
beside the design's ceiling and the accountant's ε, so that an audit limited by its number of
trials does not read as a loose accountant. Each audit then gets its figures: the trade-off
plane, the log-log ROC, ε against steps and a histogram of the in and out scores.

The result schema is :mod:`audit.model` (format ``dpaudit.result/2``). Figures use matplotlib's
Agg backend; the HTML embeds them as base64 PNG, so it is one file.
"""

from __future__ import annotations

import base64
import math
import re
from pathlib import Path
from typing import Any

import jinja2
import markupsafe
import matplotlib

from accountants.errors import InputError, InputTypeError

from . import formatting, model
from .comparator import format_confidence
from .model import AuditResult, RunResult

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.patches import Rectangle

__all__ = ["RESULT_FORMAT", "dumps", "method_columns", "render", "render_html", "render_markdown", "summary_columns",
           "summary_rows", "summary_table"]

RESULT_FORMAT = model.RESULT_FORMAT

# The accountants' columns (one per method, :func:`method_columns`) go between the two halves.
_HEAD = ("audit", "design", "threat", "score", "trials", "eps_lower", "ceiling", "eps_certifiable", "lower/certifiable")
_TAIL = ("lower/ceiling", "lower/tight", "eps_estimate (GDP)", "violation")
CERTIFIABLE_SENTENCE = (
    "eps_certifiable: what the best possible attack on the tightest accountant's curve (the smallest eps at delta, "
    "the curve the violation test uses; for PLD, the curve of the ordered direction (D, D') that certifies most, "
    "since an audit reads one pair) would certify with the same trials, confidence, delta and threshold "
    "strategy (median of seeded simulations), so lower/certifiable near 1 means the attack is optimal and the "
    "accountant tight as far as this design can tell.")


_ROUND = {"nearest": formatting.nearest, "up": formatting.upper, "down": formatting.lower}


def _f(x: Any, digits: int = 3, how: str = "nearest") -> str:
    """``digits`` decimals; upper bounds ``how="up"``, lower bounds ``how="down"`` (audit/formatting.py)."""
    if x is None:
        return "n/a"
    if isinstance(x, float):
        if not math.isfinite(x):
            return "n/a"
        return _ROUND[how](x, digits, fixed=True)
    return str(x)


def _up(x: Any, digits: int = 3) -> str:
    return _f(x, digits, "up")


def _down(x: Any, digits: int = 3) -> str:
    return _f(x, digits, "down")


def _ratio(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or not b or not math.isfinite(b):
        return None
    return a / b


def _lower(a: AuditResult) -> float | None:
    return a.epsilon_lower.value if a.epsilon_lower is not None else None


def claim_status(c: model.ClaimCheck) -> str:
    """One vocabulary for a claim: ``"holds"``; ``"VIOLATED"`` when the audit refutes it (the training
    leaks more than the claim allows, "VIOLATION of claim" in the reasons); ``"not supported"`` when
    only the accountant's ε exceeds it (no leak shown, but no bound backs the claim)."""
    if c.holds:
        return "holds"
    return "VIOLATED" if not c.audit_holds else "not supported"


def _audit_verdict(a: AuditResult) -> str:
    if a.violation.violated or (a.conformance is not None and a.conformance.rejected):
        return "VIOLATION"
    if a.claim is not None and not a.claim.holds:
        return f"claim {claim_status(a.claim)}"
    return "no violation"


_CLASS = {"VIOLATION": "bad", "claim VIOLATED": "bad", "claim not supported": "warn"}


def run_verdict(result: RunResult) -> str:
    """``"VIOLATION"``, ``"claim VIOLATED"``, ``"claim not supported"`` or ``"no violation"``."""
    if result.violation:
        return "VIOLATION"
    failed = [a.claim for a in result.audits if a.claim is not None and not a.claim.holds]
    if failed:
        return "claim VIOLATED" if any(not c.audit_holds for c in failed) else "claim not supported"
    if result.claim is not None and not result.claim.holds:
        return "claim not supported"
    return "no violation"


def method_columns(result: RunResult) -> list[tuple[str, str]]:
    """(method, label) of every accounting method with an ε in some audit of ``result``, by name: the
    accountants' columns (the registry decides which methods there are; the result records their labels)."""
    found: dict[str, str] = {}
    for a in result.audits:
        for e in a.epsilons:
            found.setdefault(e.method, e.label)
    return sorted(found.items())


def _epsilon_of(a: AuditResult, method: str) -> float | None:
    return next((e.value for e in a.epsilons if e.method == method), None)


def _upper(a: AuditResult) -> float | None:
    """The tightest accountant ε of ``a`` (its upper bound; :attr:`audit.model.AuditResult.epsilon_upper`)."""
    e = a.epsilon_upper
    return None if e is None else e.value


def summary_columns(result: RunResult) -> list[str]:
    """The terminal table's header: the fixed columns with one ``eps_<label>`` per accounting method."""
    return [*_HEAD, *(f"eps_{label.lower()}" for _, label in method_columns(result)), *_TAIL]


def summary_rows(result: RunResult) -> list[list[str]]:
    """One row of strings per audit, in the order of :func:`summary_columns`."""
    rows = []
    methods = [m for m, _ in method_columns(result)]
    for a in result.audits:
        gdp = a.gdp_estimate
        rows.append([a.name, a.design, a.threat_model, a.score, str(a.trials), _down(_lower(a)), _up(a.ceiling),
                     _f(a.epsilon_certifiable), _f(a.certifiable_ratio, 2), *(_up(_epsilon_of(a, m)) for m in methods),
                     _f(_ratio(_lower(a), a.ceiling), 2), _f(_ratio(_lower(a), _upper(a)), 2),
                     _f(gdp.epsilon_estimate if gdp else None), "VIOLATED" if a.violation.violated else (
                         "PREMISE BROKEN" if a.conformance is not None and a.conformance.rejected else "no")])
    return rows


def _confidence_note(result: RunResult) -> str:
    conf = 1 - result.significance
    k = max(1, len(result.audits))
    each = f", each audit at {1 - result.significance / k:.4g}" if k > 1 else ""
    splits = [f"; {a.name!r} splits its share between its ε audit (at {1 - a.significance:.4g}) and "
              f"{len(a.conformance.tests)} premise tests (each at level {a.conformance.tests[0].level:.3g})"
              for a in result.audits if a.conformance is not None and a.conformance.tests]
    return f"{format_confidence(conf)} confidence jointly{each}{''.join(splits)}"


def conformance_lines(result: RunResult) -> list[str]:
    """One line per premise test of every audit that ran them (audit/conformance.py), for the terminal."""
    out = []
    for a in result.audits:
        if a.conformance is None:
            continue
        for t in a.conformance.tests:
            verdict = "REJECTED" if t.rejected else ("skipped" if t.skipped else "holds")
            p = "n/a" if t.p_value is None else f"{t.p_value:.3g}"
            out.append(f"  {a.name}: {t.premise}/{t.name}: {verdict} (p = {p}, level {t.level:.3g}): "
                       f"{t.skipped or t.finding}")
    return (["conformance (premises of the DP-SGD proof):", *out]) if out else []


def one_run_lines(result: RunResult) -> list[str]:
    """One line per one-run statistic of every one-run audit (which certified what), for the terminal."""
    out = []
    for a in result.audits:
        for st in a.one_run_statistics:
            what = (f"eps >= {formatting.lower(st.value, 4)}" if st.bound == "lower" else
                    f"mu >= {formatting.lower(st.value, 4)} (a GDP mu bound, refuted GDP curve eps "
                    f"{st.epsilon:.4g}; not an eps lower bound)")
            cert = "" if st.epsilon_certifiable is None else f", eps_certifiable {st.epsilon_certifiable:.4g}"
            used = "in eps_lower" if st.in_epsilon_lower else "not in eps_lower"
            why = f" (assumes {st.assumption})" if st.assumption else ""
            out.append(f"  {a.name}: {st.name}: {what} at {format_confidence(st.confidence)}{cert}; {used}{why}")
    return (["one-run statistics (which certified what):", *out]) if out else []


def sequential_words(a: AuditResult) -> str | None:
    """One sentence on a sequential audit: trials spent, why it stopped, the looks (None for a fixed design)."""
    q = a.sequential
    if q is None:
        return None
    looks = ", ".join(str(n) for n in q.looks) if len(q.looks) <= 4 else \
        f"{q.looks[0]}, {q.looks[1]}, …, {q.looks[-1]} ({len(q.looks)})"
    last = q.evaluated[-1] if q.evaluated else None
    test = "" if last is None or last.p_value is None else (
        f"; at look {len(q.evaluated)} the exact threshold test's p ≤ {formatting.upper(last.p_value, 2)} against its "
        f"level {last.level:.2g}")
    return (f"sequential design: {q.trials} of at most {q.max_trials} trials, stopped by {q.reason}; looks {looks} "
            f"at levels summing to {a.significance:.4g}{test}")


def sequential_lines(result: RunResult) -> list[str]:
    """One line per sequential audit, for the terminal."""
    return [f"  {a.name}: {w}" for a in result.audits if (w := sequential_words(a)) is not None]


def summary_table(result: RunResult) -> str:
    """A plain-text table for the terminal, under a one-line verdict."""
    _check(result)
    head = summary_columns(result)
    rows = [head, *summary_rows(result)]
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    lines.insert(0, f"verdict: {run_verdict(result)}"
                    f"{_claim_words(result)} ({_confidence_note(result)}, delta={result.delta:g})\n")
    lines.append(f"eps_lower: lower bounds holding jointly at {format_confidence(1 - result.significance)} confidence "
                 f"(delta={result.delta:g}); ceiling: the most this design can certify; "
                 f"{'/'.join(summary_columns(result)[len(_HEAD):-len(_TAIL)]) or 'eps_*'}: accountant upper bounds, "
                 "one per method (lower/tight: over the tightest); eps_estimate: GDP fit, an estimate only.\n"
                 + CERTIFIABLE_SENTENCE)
    lines += conformance_lines(result)
    lines += one_run_lines(result)
    lines += sequential_lines(result)
    return "\n".join(lines)


def _claim_words(result: RunResult) -> str:
    checks = [a.claim for a in result.audits if a.claim is not None]
    if not checks:
        return ""
    c = checks[0]
    return f" for the claim (ε = {formatting.exact(c.epsilon)}, δ = {c.delta:g})"


def _check(result: Any) -> None:
    if not isinstance(result, RunResult):
        raise InputTypeError(f"result must be an audit.model.RunResult; got {type(result).__name__}")


# ------------------------------------------------------------------------------------------ figures

# 3.6 x 3.4 in at 150 dpi: 540 px wide, so legends at 9 pt stay about 11 px tall on a 390 px phone (issue 23)
_FIGSIZE, _DPI, _LEGEND = (3.6, 3.4), 150, 9
_LOOSER_STYLES = ("--", ":", "-.")  # the tightest method is drawn solid, the others in these styles


def _method_styles(a: AuditResult, methods) -> dict[str, tuple[str, str]]:
    """method → (line style, label): the tightest (the audit's upper bound) solid, the others dashed or
    dotted in name order; labels as the registry gave them (the method's name for a file without them)."""
    labels = {e.method: e.label for e in a.epsilons}
    tight = a.epsilon_upper.method if a.epsilon_upper is not None else None
    looser = [m for m in sorted(methods) if m != tight]
    return {m: ("-" if m == tight else _LOOSER_STYLES[looser.index(m) % len(_LOOSER_STYLES)],
                labels.get(m, m).replace("$", r"\$"))  # a registered label is text, never matplotlib mathtext
            for m in methods}


def _curve_items(a: AuditResult):
    styles = _method_styles(a, a.curves)
    for key, c in a.curves.items():
        style, label = styles[key]
        yield c, style, label


def _tradeoff_figure(a: AuditResult, path: Path) -> None:
    fig, ax = plt.subplots(figsize=_FIGSIZE, dpi=_DPI)
    ax.plot([0, 1], [1, 0], color="0.75", lw=1, ls=":", label="no privacy loss (f = 1 − α)")
    for c, style, label in _curve_items(a):
        ax.plot(c.alpha, c.beta, style, lw=1.6, label=f"{label} curve")
    if a.roc:
        ax.plot(a.roc.fpr, [1 - t for t in a.roc.tpr], color="tab:gray", lw=0.8, alpha=0.7,
                label="empirical (all thresholds)")
    pts = a.points
    if pts:
        for x0, x1, y0, y1 in zip(pts.fpr_lo, pts.fpr_hi, pts.fnr_lo, pts.fnr_hi, strict=True):
            ax.add_patch(Rectangle((x0, y0), x1 - x0, y1 - y0, fill=False, lw=0.6, ec="tab:red", alpha=0.6))
        ax.plot(pts.fpr, pts.fnr, "o", ms=3, color="tab:red",
                label=f"empirical points, {format_confidence(pts.confidence)} boxes")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_xlabel("α = FPR (type I error)")
    ax.set_ylabel("β = FNR (type II error)")
    ax.set_title(f"trade-off plane: {a.name}", fontsize=10)
    ax.legend(fontsize=_LEGEND, loc="upper right")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def _roc_figure(a: AuditResult, path: Path) -> None:
    fig, ax = plt.subplots(figsize=_FIGSIZE, dpi=_DPI)
    for c, style, label in _curve_items(a):
        xs = [x for x in c.alpha if x > 0]
        ys = [max(1 - b, 1e-7) for x, b in zip(c.alpha, c.beta, strict=True) if x > 0]
        ax.plot(xs, ys, style, lw=1.6, label=f"{label} bound")
    if a.roc:
        n_out = max(1, a.n_out or 1)
        xs = [max(x, 0.5 / n_out) for x in a.roc.fpr]
        ax.step(xs, [max(t, 1e-7) for t in a.roc.tpr], where="post", color="tab:red", lw=1.2,
                label="empirical ROC (FPR 0 drawn at 1/(2·n_out))")
    ax.plot([1e-6, 1], [1e-6, 1], color="0.75", ls=":", lw=1, label="chance")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(1e-4, 1)
    ax.set_ylim(1e-4, 1.05)
    ax.set_xlabel("FPR")
    ax.set_ylabel("TPR = 1 − FNR")
    ax.set_title(f"log-log ROC: {a.name}", fontsize=10)
    ax.legend(fontsize=_LEGEND, loc="lower right")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def _steps_figure(a: AuditResult, path: Path) -> None:
    fig, ax = plt.subplots(figsize=_FIGSIZE, dpi=_DPI)
    sc = a.steps_curve
    drawn = [(x.method, x.epsilon) for x in (sc.series if sc is not None else ()) if x.epsilon]
    styles = _method_styles(a, [m for m, _ in drawn])
    for i, (m, eps) in enumerate(drawn):
        style, label = styles[m]
        ax.plot(sc.steps if sc is not None else (), eps, style + "os^vD"[i % 5], ms=3, label=f"ε_{label}, upper")
    lb = a.epsilon_lower
    if lb:
        ax.plot([a.spec.steps], [lb.value], "v", color="tab:red", ms=7,
                label=f"ε_lower ({format_confidence(lb.confidence)}) at the audited T")
    if a.ceiling is not None:
        ax.axhline(a.ceiling, color="tab:red", ls=":", lw=1, label="ceiling of the design")
    if a.epsilon_certifiable is not None:
        ax.axhline(a.epsilon_certifiable, color="tab:purple", ls="-.", lw=1, label="ε_certifiable")
    ax.set_xlabel("steps T")
    ax.set_ylabel(f"ε at δ = {a.delta:g}")
    ax.set_title(f"ε against steps: {a.name}", fontsize=10)
    ax.legend(fontsize=_LEGEND)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def _histogram_figure(a: AuditResult, path: Path) -> None:
    h = a.histogram
    if h is None:
        return  # _figures draws it only for an audit with a histogram
    fig, ax = plt.subplots(figsize=_FIGSIZE, dpi=_DPI)
    for counts, label, colour in ((h.out_counts, h.out_label, "tab:blue"), (h.in_counts, h.in_label, "tab:orange")):
        ax.stairs(counts, h.edges, fill=True, alpha=0.45, color=colour, label=f"{label} ({sum(counts)})")
        ax.stairs(counts, h.edges, color=colour, lw=1)
    lb = a.epsilon_lower
    if lb is not None and lb.threshold is not None and math.isfinite(lb.threshold) and lb.value > 0:
        ax.axvline(lb.threshold, color="tab:red", ls="--", lw=1, label="threshold attaining ε_lower")
    ax.set_xlabel(f"score: {h.score} (higher ⇒ member)")
    ax.set_ylabel("rows")
    ax.set_title(f"scores in and out: {a.name}", fontsize=10)
    ax.legend(fontsize=_LEGEND)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def _inside(path: Path, folder: Path) -> Path:
    """``path`` if it resolves inside ``folder`` (names are validated; this is the second lock)."""
    if not path.resolve().is_relative_to(folder.resolve()):
        raise InputError(f"refusing to write {str(path)!r} outside {str(folder)!r}")
    return path


def _figures(result: RunResult, run: Path) -> dict[str, list[tuple[str, Path]]]:
    fig_dir = run / "figures"
    fig_dir.mkdir(parents=True, exist_ok=True)
    out: dict[str, list[tuple[str, Path]]] = {}
    for a in result.audits:
        items = []
        todo = []
        if a.points or a.curves:
            todo.append(("trade-off plane", "tradeoff", _tradeoff_figure))
        if a.roc:
            todo.append(("log-log ROC", "roc", _roc_figure))
        todo.append(("ε against steps", "epsilon_steps", _steps_figure))
        if a.histogram:
            todo.append(("histogram of the scores in and out", "histogram", _histogram_figure))
        for title, stem, draw in todo:
            p = _inside(fig_dir / f"{stem}_{model.check_name(a.name, 'audit name')}.png", fig_dir)
            draw(a, p)
            items.append((title, p))
        out[a.name] = items
    return out


# ------------------------------------------------------------------------------------------ documents


_MD_ESCAPES = str.maketrans({"\\": "\\\\", "`": "\\`", "*": "\\*", "[": "\\[", "]": "\\]", "|": "\\|",
                             "<": "&lt;", ">": "&gt;", "&": "&amp;", "\n": " ", "\r": " "})


def md_escape(value: Any) -> markupsafe.Markup:
    """Text made inert in Markdown, as autoescaping makes it inert in HTML: no raw HTML (``<``, ``>``,
    ``&`` as entities), no code span, emphasis, link or table cell it could open or close (backslash
    escapes), no new block (newlines become spaces). Markup (already safe) passes unchanged."""
    if isinstance(value, markupsafe.Markup):
        return value
    return markupsafe.Markup(str(value).translate(_MD_ESCAPES))


def md_code(value: Any) -> markupsafe.Markup:
    """``value`` as one Markdown code span that no backtick in it can close (CommonMark §6.1: the fence
    is one backtick longer than the longest run inside; padded with spaces so an edge backtick stays inside).
    ``<`` and ``&`` stay literal in a code span, so nothing in it is read as HTML."""
    text = str(value).replace("\n", " ").replace("\r", " ")
    runs = [len(m) for m in re.findall(r"`+", text)]
    fence = "`" * (max(runs, default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") or (text.startswith(" ") and text.endswith(" ")) else ""
    return markupsafe.Markup(f"{fence}{pad}{text}{pad}{fence}")


def _md_finalize(value: Any) -> Any:
    return value if value is None else md_escape(value)


def _env(*, markdown: bool = False) -> jinja2.Environment:
    """The templates' environment: HTML autoescaped (report.html.j2); Markdown escaped by
    :func:`md_escape` on every ``{{ }}`` (report.md.j2), code spans through the ``code`` filter."""
    env = jinja2.Environment(loader=jinja2.PackageLoader("audit", "templates"), autoescape=jinja2.select_autoescape(
        enabled_extensions=("html.j2",), default_for_string=False), trim_blocks=True, lstrip_blocks=True,
        keep_trailing_newline=True, undefined=jinja2.StrictUndefined, finalize=_md_finalize if markdown else None)
    env.filters["num"] = _f  # estimates and ratios, to nearest
    env.filters["up"] = _up  # upper bounds (accountants, ceilings), rounded up
    env.filters["down"] = _down  # lower bounds (ε_lower, certified lower ends), rounded down
    env.filters["exact"] = formatting.exact  # a user's input (the claimed ε)
    env.filters["pct"] = lambda x: "n/a" if x is None else f"{100 * x:.4g}%"
    env.filters["cell"] = md_escape  # a table cell: '|' escaped with the rest
    env.filters["code"] = md_code
    return env


def _bar(a: AuditResult) -> dict[str, Any] | None:
    """ε_lower on one axis with the ceiling, ε_certifiable and the accountants' ε (positions in percent).

    Marks are keyed by kind (the CSS colour): an accountant's ε is ``tight`` for the tightest, ``upper`` otherwise.
    """
    marks = [("lower", "ε_lower", _lower(a)), ("ceiling", "ceiling", a.ceiling),
             ("certifiable", "ε_certifiable", a.epsilon_certifiable),
             *((("tight" if e.role == model.TIGHTEST else "upper"), f"ε_{e.label}", e.value) for e in a.epsilons)]
    how = {"lower": _down, "ceiling": _up, "certifiable": _f, "tight": _up, "upper": _up}
    shown = [(k, label, v) for k, label, v in marks if v is not None and math.isfinite(v)]
    lower = _lower(a)
    if lower is None or not shown:
        return None
    top = max(v for _, _, v in shown) or 1.0
    return {"fill": 100.0 * lower / top,
            "marks": [{"key": k, "label": label, "value": v, "text": how[k](v, 2), "pos": 100.0 * v / top}
                      for k, label, v in shown]}


def _tightness_words(a: AuditResult) -> str | None:
    """One sentence that separates "the design cannot certify more" from "the accountant is loose"."""
    lb, ceiling, upper = _lower(a), a.ceiling, _upper(a)
    if lb is None or ceiling is None or upper is None or a.violation.violated:
        return None  # a violation is the finding; ratios to a refuted accountant say nothing more
    by = f" (by {a.epsilon_upper.method})" if a.epsilon_upper is not None else ""
    if ceiling < upper:
        return (f"This design can certify at most ε = {formatting.upper(ceiling, 3)} (its ceiling), below the "
                f"accountant's {formatting.upper(upper, 3)}{by}: ε_lower/ε_tight is capped at {ceiling / upper:.2f} "
                "by the number of trials, so a low ratio here is a limit of the design, not evidence of a loose "
                "accountant.")
    return (f"The ceiling ({formatting.upper(ceiling, 3)}) is above the accountant's {formatting.upper(upper, 3)}{by}, "
            "so the design could certify the claimed ε: the gap between ε_lower and ε_tight measures the attack (or a "
            "loose accountant).")


TERMS = {
    "eps_lower": "a lower bound on the ε of the training that ran, holding at the stated confidence "
                 "(rounded down).",
    "ceiling": "the largest ε_lower this design (trials, confidence, δ) could ever certify, even for a "
               "training with no privacy at all (rounded up).",
    "eps_certifiable": "what the best possible attack on the accountant's own curve (for PLD, the curve of "
                       "one ordered direction (D, D′), the one that certifies most: an audit reads one pair) "
                       "would certify with the same design; lower/certifiable near 1 means the attack is optimal.",
    "eps_tight": "the accountants' upper bounds on ε for the claimed spec (rounded up).",
    "ratios": "ε_lower divided by each: how much of the room the audit used; a low lower/tight with a ceiling "
              "below ε_tight is a limit of the design, not a loose accountant.",
    "clopper_pearson": "Clopper–Pearson: exact binomial confidence intervals for the attack's error rates.",
    "jeffreys": "Jeffreys: an approximate binomial interval (coverage not guaranteed; never used for a violation).",
    "bonferroni": "Bonferroni: a union bound over a grid of candidate thresholds fixed by the design, so picking the "
                  "best threshold is paid for; the significance is also split over the audits of the run.",
    "split": "split: the threshold is chosen on a fraction of the trials and the bound computed on the rest.",
    "multi_split": "multi_split: several seeded splits, each at half the significance; their lower median is kept.",
    "explicit": "explicit: a threshold fixed before the scores were seen (no correction).",
    "estimates": "the GDP fit (μ, ε) and Δ(theory‖empirical), a Bayes-error gap between the accountant's curve and "
                 "the empirical one: informative estimates only; they never pass or fail anything.",
    "violation": "a confidence box lies entirely below a curve (the accountant's or the claim's), or, in a "
                 "sequential audit, the exact threshold test rejects that curve: the training leaks more than it "
                 "allows, a bug or broken DP, not noise.",
}
_VERDICT_WORDS = {
    "VIOLATION": "an audit found the training leaking more than its accountant allows: a bug or broken DP, not noise.",
    "claim VIOLATED": "an audit found the training leaking more than the claim allows (a VIOLATION of the claim): "
                      "a bug, broken DP or a claim below the accountant's ε, not noise.",
    "claim not supported": "no audit found a leak, but the accountant's ε exceeds the claim: no bound backs it.",
    "no violation": "no audit found the training leaking more than its accountant allows.",
}


def _context(result: RunResult, figures: dict[str, list[tuple[str, Path]]], run: Path, *, embed: bool
             ) -> dict[str, Any]:
    methods = method_columns(result)
    audits = []
    for a in result.audits:
        figs = []
        for title, p in figures.get(a.name, []):
            src = ("data:image/png;base64," + base64.b64encode(p.read_bytes()).decode()) if embed else \
                p.relative_to(run).as_posix()
            figs.append({"title": title, "src": src})
        verdict = _audit_verdict(a)
        audits.append({"a": a, "verdict": verdict, "cls": _CLASS.get(verdict, "ok"), "lower": _lower(a),
                       "claim_word": claim_status(a.claim) if a.claim is not None else None,
                       "lower_over_ceiling": _ratio(_lower(a), a.ceiling), "bar": _bar(a),
                       "by_method": [_epsilon_of(a, m) for m, _ in methods],
                       "epsilons": [{"e": e, "ratio": _ratio(_lower(a), e.value)} for e in a.epsilons],
                       "lower_over_upper": _ratio(_lower(a), _upper(a)),
                       "tightness_words": _tightness_words(a), "sequential_words": sequential_words(a),
                       "figures": figs})
    checks = [a.claim for a in result.audits if a.claim is not None]
    verdict = run_verdict(result)
    claim_word = "holds" if result.claim is None or result.claim.holds else verdict.removeprefix("claim ")
    if claim_word == "VIOLATION":  # the accountant's curve is violated: the claim is refuted with it
        claim_word = "VIOLATED"
    return {"r": result, "run": str(run), "audits": audits, "verdict": verdict,
            "verdict_words": _VERDICT_WORDS[verdict], "claim_word": claim_word, "terms": TERMS,
            "claim_check": checks[0] if checks else None, "confidence_note": _confidence_note(result),
            "k": len(result.audits), "methods": [{"method": m, "label": label} for m, label in methods]}


def render_markdown(result: RunResult, figures: dict[str, list[tuple[str, Path]]], run: Path) -> str:
    """report.md text (figures linked by relative path)."""
    _check(result)
    return _env(markdown=True).get_template("report.md.j2").render(**_context(result, figures, Path(run), embed=False))


def render_html(result: RunResult, figures: dict[str, list[tuple[str, Path]]], run: Path) -> str:
    """report.html text (self-contained: figures embedded as base64 PNG)."""
    _check(result)
    return _env().get_template("report.html.j2").render(**_context(result, figures, Path(run), embed=True))


def render(run: str | Path, result: RunResult | None = None) -> dict[str, Path]:
    """Write figures, report.md and report.html for a run folder (from its result.json by default).

    Nothing is written until the result is read and valid (every audit name is checked like a
    TOML variant name, so a crafted result.json cannot place a file outside the run folder).

    Returns:
        {"markdown": path, "html": path, "json": path}.
    """
    run = Path(run)
    result = model.load_result(run) if result is None else result
    _check(result)
    figures = _figures(result, run)
    md, page = run / "report.md", run / "report.html"
    md.write_text(render_markdown(result, figures, run), encoding="utf-8")
    page.write_text(render_html(result, figures, run), encoding="utf-8")
    return {"markdown": md, "html": page, "json": run / model.RESULT_FILE}


def dumps(result: RunResult) -> str:
    """result.json text (sorted keys); see :func:`audit.model.dumps`."""
    return model.dumps(result)
