"""The report's stylesheet (system fonts only, nothing fetched) and its content policy."""

from __future__ import annotations

import base64
import hashlib

STYLE = """
:root { --ink: #1f2933; --muted: #7b8794; --line: #e4e7eb; --accent: #2f6fb2; --good: #2e8b57; --bad: #c0392b; --warn: #d68910; }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif; color: var(--ink); background: #f7f8fa; }
header { background: #fff; border-bottom: 1px solid var(--line); padding: 14px 24px; }
header h1 { margin: 0 0 4px; font-size: 20px; }
header .headline { font-size: 15px; }
header .headline strong { font-size: 22px; color: var(--accent); }
nav { display: flex; gap: 16px; margin-top: 6px; }
nav a { color: var(--accent); text-decoration: none; }
main { padding: 8px 24px 40px; }
section { background: #fff; border: 1px solid var(--line); border-radius: 6px; padding: 12px 16px; margin: 14px 0; }
h2 { font-size: 17px; margin: 2px 0 10px; }
h4 { font-size: 13px; margin: 10px 0 4px; color: var(--muted); text-transform: uppercase; letter-spacing: .03em; }
table { border-collapse: collapse; }
th, td { padding: 4px 8px; border-bottom: 1px solid var(--line); text-align: left; vertical-align: middle; }
th { font-weight: 600; background: #fafbfc; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
.muted { color: var(--muted); }
.config { color: var(--muted); font-size: 12px; margin-top: 4px; }
.groups { display: flex; gap: 12px; flex-wrap: wrap; margin-bottom: 12px; }
.group-card { border: 1px solid var(--line); border-radius: 6px; padding: 8px 14px; min-width: 150px; }
.group-card .value { font-size: 20px; font-weight: 600; }
.scroll { overflow-x: auto; }
table.leaderboard th.task { writing-mode: vertical-rl; transform: rotate(180deg); font-weight: 500; font-size: 12px; white-space: nowrap; padding: 6px 2px; }
table.leaderboard th.group { text-align: center; border-left: 2px solid var(--line); }
table.leaderboard td.avg, table.leaderboard th.avg { background: #f2f6fb; font-weight: 600; }
table.leaderboard td { font-size: 12px; }
table.leaderboard td.best { font-weight: 700; color: var(--accent); }
.ci { display: block; color: var(--muted); font-size: 10px; font-weight: 400; }
.notes { font-size: 12px; color: var(--muted); max-width: 280px; }
.controls { display: flex; gap: 12px; flex-wrap: wrap; align-items: end; margin-bottom: 8px; }
.controls label { display: flex; flex-direction: column; font-size: 12px; color: var(--muted); }
.controls input, .controls select { font: inherit; padding: 3px 6px; border: 1px solid #cbd2d9; border-radius: 4px; min-width: 70px; }
.pager { display: flex; gap: 10px; align-items: center; margin: 8px 0; }
.pager button { font: inherit; padding: 2px 10px; }
#items-table { width: 100%; }
#items-table tr.item { cursor: pointer; }
#items-table tr.item:hover { background: #f0f5fb; }
#items-table tr.error td { color: var(--bad); }
td.id { font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-size: 12px; }
td.note { font-size: 12px; max-width: 380px; overflow: hidden; text-overflow: ellipsis; white-space: nowrap; }
td.thumb img { height: 40px; width: auto; border-radius: 3px; display: block; }
.bar { display: inline-block; width: 60px; height: 6px; background: var(--line); margin-left: 6px; vertical-align: middle; border-radius: 3px; }
.bar .fill { display: block; height: 100%; background: var(--accent); border-radius: 3px; }
.badge { display: inline-block; padding: 0 6px; border-radius: 8px; font-size: 11px; background: var(--line); }
.badge.error { background: #fdecea; color: var(--bad); }
tr.detail > td { background: #fbfcfd; }
.detail-box { padding: 4px 4px 10px; }
pre { white-space: pre-wrap; word-break: break-word; background: #f4f5f7; padding: 6px 8px; border-radius: 4px; margin: 4px 0; font-size: 12px; max-height: 320px; overflow: auto; }
.problem { color: var(--bad); }
.reason { color: var(--warn); font-weight: 600; }
figure.media { display: inline-block; margin: 4px 12px 8px 0; vertical-align: top; }
figure.media .frame { position: relative; display: inline-block; line-height: 0; }
figure.media .frame img { max-width: 256px; max-height: 256px; }
figure.media .frame svg { position: absolute; left: 0; top: 0; width: 100%; height: 100%; overflow: visible; }
figure.media figcaption { font-size: 12px; color: var(--muted); max-width: 480px; }
figure.audio img.plot { display: block; border: 1px solid var(--line); }
figure.audio audio { display: block; width: 480px; margin-top: 4px; }
rect.halo { fill: none; stroke: #000; stroke-opacity: 0.55; stroke-width: 4; }
rect.box { fill-opacity: 0.15; stroke-width: 2; }
.box.region { fill: #00b4ff; stroke: #00b4ff; }
.box.penalty { fill: #ff3b30; stroke: #ff3b30; stroke-dasharray: 5 3; }
.box.edit { fill: #ffd60a; stroke: #ffd60a; }
.box.widened { fill: none; stroke: #ff9500; stroke-dasharray: 6 3; }
.key { display: inline-flex; align-items: center; gap: 4px; margin-left: 10px; }
.swatch { display: inline-block; width: 10px; height: 10px; border: 2px solid; }
.swatch.region { background: #00b4ff; border-color: #00b4ff; } .swatch.penalty { background: #ff3b30; border-color: #ff3b30; }
.swatch.edit { background: #ffd60a; border-color: #ffd60a; } .swatch.widened { background: transparent; border-color: #ff9500; border-style: dashed; }
details.judge { margin: 4px 0; }
details.judge summary { cursor: pointer; font-size: 13px; }
pre.reply { background: #eef6ee; }
p.alignment { font-size: 14px; line-height: 1.9; }
p.alignment del { background: #fdecea; color: var(--bad); }
p.alignment ins { background: #e8f5e9; color: var(--good); text-decoration: none; border-bottom: 2px solid var(--good); }
table.components th { background: none; font-weight: 500; }
.errors-code { margin-bottom: 14px; }
.errors-code code { font-size: 14px; font-weight: 600; }
footer { color: var(--muted); font-size: 12px; padding: 0 24px 24px; }
"""


def content_policy(*scripts: str) -> str:
    """A ``<meta>`` Content-Security-Policy for a self-contained page: nothing is fetched, images
    and audio are data URIs, and the only scripts that run are ``scripts`` (by their hashes).  A
    backstop: text from runs is escaped where it is written, and a value that slipped through
    still could not run or load anything."""
    hashes = " ".join(f"'sha256-{base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()}'" for script in scripts)
    allowed = hashes or "'none'"
    policy = f"default-src 'none'; img-src data:; media-src data:; style-src 'unsafe-inline'; script-src {allowed}"
    return f'<meta http-equiv="Content-Security-Policy" content="{policy}">'
