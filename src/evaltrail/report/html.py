"""index.html: run facts, leaderboard tables, charts, and the empty scenario view report.js fills.

Every data string goes through html.escape; the only inline script is JSON with `<` escaped, so
no data can close it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from html import escape

from .charts import Chart
from .tables import Table


@dataclass(frozen=True)
class ModelFacts:
    name: str
    """Model name (params.yaml)."""
    sha256: list[str]
    """Weights sha256 as the score summaries record them (more than one: mixed runs)."""
    license: str | None
    """Weights licence from params.yaml."""
    sha256_of: str = "weights (the GGUF file)"
    """What the sha256 hashes (evaltrail.config.SHA256_OF): a served model's is the server's word."""


@dataclass(frozen=True)
class ScenarioFacts:
    name: str
    """Scenario name; also the data file's stem."""
    description: str | None
    """One line on what it measures."""
    method: str
    """Adaptation method."""
    main_metric: str | None
    """The leaderboard's number."""
    instances: int | None
    """Original instances scored."""
    variants: int | None
    """Perturbation variants scored."""


def verification_line(rec: dict) -> str:
    """A cell's last `evaltrail verify` (its results/verify JSON record) in one line."""
    on, n, ag, first = f"on {rec['checked_at'][:10]}", rec["sample_size"], rec["agreement"], rec["first_mismatch"]
    if ag:
        line = f"agreement {ag['same_predictions']}/{ag['predictions']} predictions"
        if ag["delta"] is not None:
            verdict = "reproduced within noise" if rec["reproduced"] else "NOT reproduced within noise"
            line += f", {ag['metric']} delta {ag['delta']:+.3f} [{ag['ci_low']:+.3f}, {ag['ci_high']:+.3f}]: {verdict}"
        return f"{line} {on}"
    if first:
        return f"{n - rec['identical']}/{n} differ {on} (first: request {first['request_id']}, {first['field']})"
    unknown = " (committed identity unknown)" if rec["committed_identity"] is None else ""
    return f"verified {n}/{n} identical {on}{unknown}"


def script_json(obj) -> str:
    """JSON safe inside <script>: `<` escaped so no string can end the element."""
    return json.dumps(obj, sort_keys=True, ensure_ascii=False).replace("<", "\\u003c")


def _attr(v) -> str:
    return escape(str(v), quote=True)


def _head(t: Table) -> str:
    """One header row, or two when columns are grouped (scenario over metric); sortable headers
    carry their column index, since a grouped header's position is not the column's."""

    def th(i: int, c, extra: str = "") -> str:
        title = f' title="{_attr(c.title)}"' if c.title else ""
        kind = "num" if c.numeric else "text"
        return f'<th scope="col" tabindex="0" data-col="{i}" data-type="{kind}"{title}{extra}>{escape(c.label)}</th>'

    if not any(c.group for c in t.columns):
        return "<tr>" + "".join(th(i, c) for i, c in enumerate(t.columns)) + "</tr>"
    top, i = [], 0
    while i < len(t.columns):
        c = t.columns[i]
        if not c.group:
            top.append(th(i, c, ' rowspan="2"'))
            i += 1
            continue
        span = next((j for j in range(i, len(t.columns)) if t.columns[j].group != c.group), len(t.columns)) - i
        top.append(f'<th scope="colgroup" colspan="{span}" class="group">{escape(c.group)}</th>')
        i += span
    bottom = "".join(th(i, c) for i, c in enumerate(t.columns) if c.group)
    return f"<tr>{''.join(top)}</tr><tr>{bottom}</tr>"


def table_html(t: Table) -> str:
    body = []
    for row in t.rows:
        cells = []
        for i, c in enumerate(row):
            sort = "" if c.sort is None else (repr(c.sort) if isinstance(c.sort, float) else str(c.sort))
            tag = "th" if i == 0 else "td"
            attrs = (' scope="row"' if i == 0 else "") + f' data-sort="{_attr(sort)}"'
            attrs += f' title="{_attr(c.title)}"' if c.title else ""
            ci = f'<span class="ci">{escape(c.ci)}</span>' if c.ci else ""
            cells.append(f"<{tag}{attrs}>{escape(c.text)}{ci}</{tag}>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return (
        f'<figure class="table"><figcaption>{escape(t.title)}</figcaption>'
        f'<table class="sortable" id="table-{_attr(t.key)}"><thead>{_head(t)}</thead>'
        f"<tbody>{''.join(body)}</tbody></table></figure>"
    )


def _facts_html(models: list[ModelFacts], scenarios: list[ScenarioFacts], verified: list[tuple[str, str, str]]) -> str:
    mrows = "".join(
        f'<tr><th scope="row">{escape(m.name)}</th><td><code>{"<br>".join(escape(s) for s in m.sha256) or "—"}'
        f"</code><br><small>of {escape(m.sha256_of)}</small></td><td>{escape(m.license or '—')}</td></tr>"
        for m in models
    )
    srows = "".join(
        f'<tr><th scope="row"><a class="scenario-link" href="#scenario/{_attr(s.name)}">{escape(s.name)}</a></th>'
        f"<td>{escape(s.description or '')}</td><td>{escape(s.method)}</td><td>{escape(s.main_metric or '—')}</td>"
        f"<td>{'—' if s.instances is None else s.instances}</td>"
        f"<td>{'—' if s.variants is None else s.variants}</td></tr>"
        for s in scenarios
    )
    return (
        '<h2 id="run">Run</h2><h3>Models</h3><table class="facts" id="models"><thead><tr><th>model</th>'
        f"<th>sha256</th><th>licence</th></tr></thead><tbody>{mrows}</tbody></table>"
        '<h3>Scenarios</h3><table class="facts" id="scenarios"><thead><tr><th>scenario</th><th>description</th>'
        "<th>method</th><th>main metric</th><th>instances</th><th>variants</th></tr></thead>"
        f"<tbody>{srows}</tbody></table>" + _verified_html(verified)
    )


def _verified_html(verified: list[tuple[str, str, str]]) -> str:
    """Each verified cell's last verification; nothing when no cell has one."""
    if not verified:
        return ""
    rows = "".join(
        f'<tr><th scope="row">{escape(s)}</th><td>{escape(m)}</td><td>{escape(line)}</td></tr>'
        for s, m, line in verified
    )
    return (
        '<h3>Verification</h3><table class="facts" id="verification"><thead><tr><th>scenario</th><th>model</th>'
        f"<th>last <code>evaltrail verify</code></th></tr></thead><tbody>{rows}</tbody></table>"
    )


def index_html(
    models: list[ModelFacts],
    scenarios: list[ScenarioFacts],
    board: list[Table],
    win_rates: list[Table],
    charts: list[Chart],
    battles: list[Table] = (),
    verified: list[tuple[str, str, str]] = (),
    classifiers: list[Table] = (),
) -> str:
    """verified: (scenario, model, verification_line) of each cell with a results/verify file."""
    nav = "".join(f'<a href="#scenario/{_attr(s.name)}">{escape(s.name)}</a>' for s in scenarios)
    parts = [
        _facts_html(models, scenarios, verified),
        '<h2 id="leaderboard">Leaderboard</h2><p class="note">Mean [95% CI] over original instances; '
        "↑ higher is better, ↓ lower is better. Click a column header to sort.</p>",
        *map(table_html, board),
    ]
    if win_rates:
        parts += ['<h2 id="win-rates">Mean win rates</h2>', *map(table_html, win_rates)]
    if battles:
        parts += [
            '<h2 id="battles">Battles</h2><p class="note">Pairwise judgements of open-ended answers '
            "(results/battles/); ratings and their CIs come from the verdicts alone.</p>",
            *map(table_html, battles),
        ]
    if classifiers:
        parts += [
            '<h2 id="classifiers">Refusal classifiers against people</h2><p class="note">A refusal rate is only '
            "as good as the classifier that labelled the answers: each is scored against XSTest's human labels; "
            "kappa below 0.6 means its rates are unreliable.</p>",
            *map(table_html, classifiers),
        ]
    if charts:
        parts.append('<h2 id="plots">Plots</h2>')
        parts += [
            f'<figure class="plot" id="plot-{_attr(c.key)}"><figcaption>{escape(c.title)}</figcaption>{c.svg}</figure>'
            for c in charts
        ]
    index = {"scenarios": [s.name for s in scenarios]}
    return f"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>evaltrail report</title>
<link rel="stylesheet" href="assets/report.css">
<script>window.EVALTRAIL_INDEX = {script_json(index)};</script>
<script src="assets/report.js" defer></script>
</head>
<body>
<header class="top"><h1><a href="#">evaltrail report</a></h1><nav aria-label="scenarios">{nav}</nav></header>
<main>
<section id="overview">
{"".join(parts)}
</section>
<section id="scenario-view" hidden></section>
<noscript><p>Sorting and the per-scenario drill-downs need JavaScript.</p></noscript>
</main>
</body>
</html>
"""
