"""The dashboard as plain HTML: tables, forms and an inline SVG chart, for either framework.

Server-rendered with no JavaScript and nothing fetched from elsewhere: the chart is an
``<svg>`` drawn here, so it needs no library, no build step and no script. The markup
uses the class names of Django's admin (``module``, ``button``, ``help``), so inside the
admin it looks like the admin; the Flask page adds a small stylesheet of its own. The
frameworks supply the hidden fields their forms need (a CSRF token) and where forms go.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from html import escape

from mcache.admin.dashboard import RATES, CacheView, Trace
from mcache.admin.dashboard_actions import Action
from mcache.admin.report import CACHE_FIELDS, SERVER_FIELDS, byte_size, number_text, server_cell
from mcache.observe.samples import MINUTES
from mcache.observe.trace import LEGEND

__all__ = ["chart_svg", "confirm_html", "dashboard_html"]

_WIDTH, _PLOT_HEIGHT, _LEFT, _RIGHT, _TOP, _AXIS = 640, 140, 40, 16, 10, 22
_LEGEND_ROW, _LEGEND_GAP, _CHARACTER = 18, 22, 6.5
"""Pixels: the plot sits between the margins; below it the minute labels, then the legend
in rows (a name's width is guessed from its length at 11 px)."""
_MIN_SPAN = 5
"""The fewest minutes the time axis spans, so a first sample does not fill the width."""
_COLOURS = ("#2a6ebb", "#d1495b", "#edae49", "#00798c", "#66a182", "#8d6a9f", "#30638e")


def chart_svg(view: CacheView) -> str:
    """Return the hit ratio of the last hour as an inline SVG: the whole cache, and each
    family with lookups when families are counted.

    The time axis starts at the first minute sampled (the hour at most, five minutes
    at least), so a few minutes of data spread over the width; the legend is a row
    of its own under the plot, clear of the lines.
    """
    oldest = view.now_minute - MINUTES + 1
    series = [("all", view.minutes), *((view.families or {}).items())]
    drawn = []
    for name, minutes in series:
        points = [(m.minute, r) for m in minutes if (r := m.hit_ratio) is not None]
        points = [(minute, ratio) for minute, ratio in points if minute >= oldest]
        if points:
            drawn.append((name, _COLOURS[len(drawn) % len(_COLOURS)], points))
    first = min((points[0][0] for _, _, points in drawn), default=oldest)
    span = max(view.now_minute - first, _MIN_SPAN)
    legend, rows = _legend(drawn)
    height = _TOP + _PLOT_HEIGHT + _AXIS + rows * _LEGEND_ROW
    plot_w, bottom = _WIDTH - _LEFT - _RIGHT, _TOP + _PLOT_HEIGHT
    parts = [
        f'<svg class="mcache-chart" role="img" viewBox="0 0 {_WIDTH} {height}" '
        f'width="{_WIDTH}" height="{height}" fill="currentColor" '
        'xmlns="http://www.w3.org/2000/svg">',
        f"<title>{escape(view.name)}: hit ratio per minute, the last {span} minutes</title>",
    ]
    for ratio in (0.0, 0.5, 1.0):
        y = _TOP + (1 - ratio) * _PLOT_HEIGHT
        parts.append(
            f'<line x1="{_LEFT}" x2="{_WIDTH - _RIGHT}" y1="{y:.1f}" y2="{y:.1f}" stroke="#ccc"/>'
            f'<text x="{_LEFT - 4}" y="{y + 4:.1f}" font-size="11" text-anchor="end">'
            f"{ratio:.0%}</text>"
        )
    parts.append(
        f'<text x="{_LEFT}" y="{bottom + 15}" font-size="11">{span} min ago</text>'
        f'<text x="{_WIDTH - _RIGHT}" y="{bottom + 15}" font-size="11" text-anchor="end">'
        "now</text>"
    )
    for name, colour, points in drawn:
        xy = [
            (_LEFT + (minute - view.now_minute + span) / span * plot_w,
             _TOP + (1 - ratio) * _PLOT_HEIGHT, minute, ratio)
            for minute, ratio in points
        ]  # fmt: skip
        coordinates = " ".join(f"{x:.1f},{y:.1f}" for x, y, _, _ in xy)
        parts.append(
            f'<polyline class="mcache-series" data-family="{escape(name)}" fill="none" '
            f'stroke="{colour}" stroke-width="2" points="{coordinates}"/>'
        )
        parts.extend(
            f'<circle cx="{x:.1f}" cy="{y:.1f}" r="2.5" fill="{colour}"><title>{escape(name)}, '
            f"{view.now_minute - minute} min ago: {ratio:.1%}</title></circle>"
            for x, y, minute, ratio in xy
        )
    parts.extend(legend)
    if not drawn:
        parts.append(
            f'<text x="{_WIDTH / 2}" y="{_TOP + _PLOT_HEIGHT / 2}" font-size="13" '
            'text-anchor="middle">no lookups sampled yet: samples are written once a minute'
            "</text>"
        )
    parts.append("</svg>")
    return "".join(parts)


def _legend(drawn: Sequence[tuple[str, str, object]]) -> tuple[list[str], int]:
    """Return the legend's entries (a stroke and a name each, in rows under the plot's
    labels, wrapped at the chart's width) and how many rows they take."""
    parts, x, row = [], float(_LEFT), 0
    for name, colour, _ in drawn:
        width = 18 + len(name) * _CHARACTER
        if x + width > _WIDTH - _RIGHT and x > _LEFT:
            x, row = float(_LEFT), row + 1
        y = _TOP + _PLOT_HEIGHT + _AXIS + row * _LEGEND_ROW + 8
        parts.append(
            f'<g class="mcache-legend" data-family="{escape(name)}">'
            f'<line x1="{x:.1f}" x2="{x + 14:.1f}" y1="{y - 4:.1f}" y2="{y - 4:.1f}" '
            f'stroke="{colour}" stroke-width="3"/>'
            f'<text x="{x + 18:.1f}" y="{y:.1f}" font-size="11">'
            f"{escape(name)}</text></g>"
        )
        x += width + _LEGEND_GAP
    return parts, row + 1 if drawn else 0


def dashboard_html(
    views: Sequence[CacheView],
    action_url: str,
    hidden: Mapping[str, str],
    trace: Trace | None = None,
    target_label: str = "",
) -> str:
    """Return the dashboard's body: each cache's section, then the trace form.

    ``hidden``: fields every form carries (a CSRF token); ``trace``: what the trace form
    asked for, and its events; ``target_label``: what the framework invalidates besides tags
    ("model", "table"), offered as its own form.
    """
    parts = [_cache_html(view, action_url, hidden, target_label) for view in views]
    caches = "".join(f"<option>{escape(view.name)}</option>" for view in views)
    parts.append(
        '<div class="module"><h2>Trace</h2><form method="get" class="mcache-trace">'
        f'<label>Cache <select name="cache">{caches}</select></label> '
        '<label>Page path, fragment or key <input name="trace" value="'
        f'{escape(trace.asked if trace else "")}" size="40"></label> <input type="submit" '
        'class="button" value="Show events"></form>'
        f"{_trace_html(trace) if trace else ''}</div>"
    )
    return "\n".join(parts)


def _trace_html(trace: Trace) -> str:
    if trace.problem:
        return f'<p class="help">{escape(trace.problem)}</p>'
    rows = "".join(
        f"<tr><td>{escape(key)}</td><td><code>{escape(letters)}</code></td>"
        f"<td>{_when(written)}</td></tr>"
        for key, letters, written in trace.rows
    )
    return (
        '<table class="mcache-trace-letters"><tr><th>key</th><th>events</th>'
        f'<th>last event</th></tr>{rows}</table><p class="help">{escape(LEGEND)}</p>'
    )


def _when(written: float | None) -> str:
    if written is None:
        return ""
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(written))


def _cache_html(view: CacheView, action_url: str, hidden: Mapping[str, str], target: str) -> str:
    report = view.report
    counters = report.get("cache", {})
    rows = "".join(
        f"<tr><th>{escape(label)}</th><td>{escape(number_text(counters.get(field, 0)))}</td></tr>"
        for field, label in CACHE_FIELDS
    )
    rates = "".join(
        f"<tr><th>{escape(label)}</th><td>{view.rate(field):,.1f} / min</td></tr>"
        for field, label in RATES
    )
    ratio = counters.get("hit_ratio", 0.0)
    families = (
        ""
        if view.families is not None
        else '<p class="help">Per-family lines: add "families" to this cache\'s metrics option.</p>'
    )
    return (
        f'<div class="module mcache-cache" data-cache="{escape(view.name)}">'
        f"<h2>Cache {escape(view.name)}</h2>"
        f'<p>Hit ratio <strong class="mcache-hit-ratio">{ratio:.1%}</strong> '
        f"({escape(str(report.get('scope', '')))}; lock, tag and counter keys not counted)</p>"
        f"{_warnings_html(report.get('warnings', ()))}{chart_svg(view)}{families}"
        f"{_servers_html(report.get('servers', {}))}"
        f'<div class="mcache-row"><table class="mcache-counters"><caption>Counted</caption>'
        f"{rows}<tr><th>hit ratio</th><td>{ratio:.1%}</td></tr></table>"
        f"<table><caption>The last hour</caption>{rates}</table></div>"
        f"{_hot_html(view)}{_slabs_html(view.slabs)}"
        f"{_actions_html(view, action_url, hidden, target)}</div>"
    )


def _warnings_html(warnings: Sequence[str]) -> str:
    if not warnings:
        return ""
    items = "".join(f"<li>{escape(warning)}</li>" for warning in warnings)
    return f'<ul class="mcache-warnings errorlist">{items}</ul>'


def _servers_html(servers: Mapping[str, Mapping[str, object]]) -> str:
    if not servers:
        return ""
    header = "".join(f"<th>{escape(label)}</th>" for _, label in SERVER_FIELDS)
    rows = []
    for name, fields in sorted(servers.items()):
        if fields.get("dead"):
            state = '<td class="mcache-dead">down</td>'
            cells = "".join("<td></td>" for _ in SERVER_FIELDS)
        else:
            state = "<td>up</td>"
            cells = "".join(
                f"<td>{escape(server_cell(f, fields.get(f, '')))}</td>" for f, _ in SERVER_FIELDS
            )
        rows.append(f"<tr><th>{escape(name)}</th>{state}{cells}</tr>")
    return (
        f'<table class="mcache-servers"><caption>Servers</caption><tr><th>server</th>'
        f"<th>state</th>{header}</tr>{''.join(rows)}</table>"
    )


def _hot_html(view: CacheView) -> str:
    if not view.hot:
        return f'<p class="help">Hot keys: {escape(view.hot_note or "none read yet")}</p>'
    rows = "".join(
        f"<tr><td>{escape(row['readable'] or row['key'])}</td><td>{escape(row['family'])}</td>"
        f"<td>{'yes' if row['read'] else 'no'}</td><td>{row['idle_s']:.0f} s ago</td>"
        f"<td>{escape(number_text(row.get('size', '')))}</td></tr>"
        for row in view.hot
    )
    return (
        '<table class="mcache-hot"><caption>Hot keys</caption><tr><th>key</th><th>family</th>'
        f"<th>read since written</th><th>last access</th><th>bytes</th></tr>{rows}</table>"
    )


def _slabs_html(slabs: list[tuple[int, int, int]]) -> str:
    if not slabs:
        return ""
    peak = max(total for _, total, _ in slabs) or 1
    rows = "".join(
        f"<tr><td>{byte_size(size)}</td><td>{byte_size(total)}</td><td>{byte_size(used)}</td>"
        f'<td><svg width="200" height="10"><rect width="{total / peak * 200:.0f}" height="10"'
        f' fill="#ccc"/><rect width="{used / peak * 200:.0f}" height="10" fill="#2a6ebb"/>'
        "</svg></td></tr>"
        for size, total, used in slabs
    )
    return (
        '<table class="mcache-slabs"><caption>Memory per slab class</caption><tr>'
        f"<th>chunk</th><th>allocated</th><th>in use</th><th></th></tr>{rows}</table>"
    )


def _actions_html(view: CacheView, url: str, hidden: Mapping[str, str], target: str) -> str:
    forms = [
        _form(view.name, "invalidate", url, hidden, '<input name="target" placeholder="tag">'),
    ]
    if target:
        forms.append(
            _form(
                view.name,
                "invalidate",
                url,
                hidden,
                f'<input name="label" placeholder="{escape(target)}">',
                f"Invalidate a {target}",  # escaped by _form
            )
        )
    if view.functions:
        options = "".join(f"<option>{escape(name)}</option>" for name in view.functions)
        forms.append(
            _form(
                view.name,
                "refresh",
                url,
                hidden,
                f'<select name="target">{options}</select> '
                '<input name="arguments" placeholder="arguments as JSON: [42]">',
            )
        )
    forms.append(_form(view.name, "flush", url, hidden, "", "Flush the store"))
    return '<div class="mcache-actions"><h3>Actions</h3>' + "".join(forms) + "</div>"


def _form(
    cache: str, kind: str, url: str, hidden: Mapping[str, str], inputs: str, label: str = ""
) -> str:
    fields = {**hidden, "kind": kind, "cache": cache}
    return (
        f'<form method="post" action="{escape(url)}" class="mcache-{kind}">'
        + "".join(_hidden(name, value) for name, value in fields.items())
        + f'{inputs} <input type="submit" class="button" value="'
        f'{escape(label or kind.capitalize())}"></form>'
    )


def confirm_html(
    action: Action, action_url: str, cancel_url: str, hidden: Mapping[str, str]
) -> str:
    """Return the confirmation page's body: what will be done, and the button that does it."""
    fields = {**hidden, **action.fields(), "confirmed": "yes"}
    typed = (
        f"<p><label>Type the cache's name, {escape(action.cache)}, to confirm: "
        '<input name="typed" autocomplete="off"></label></p>'
        if action.kind == "flush"
        else ""
    )
    return (
        f'<div class="module mcache-confirm"><h2>Confirm</h2><p>{escape(action.describe())}.</p>'
        f'<form method="post" action="{escape(action_url)}">'
        + "".join(_hidden(name, value) for name, value in fields.items())
        + f'{typed}<input type="submit" class="button default" value="Yes, do it"> '
        f'<a href="{escape(cancel_url)}">Cancel</a></form></div>'
    )


def _hidden(name: str, value: str) -> str:
    return f'<input type="hidden" name="{escape(name)}" value="{escape(value)}">'
