"""The parity entries as text: one task's explanation and the whole of ``docs/PARITY.md``.

The entries themselves, and what each field means, are in :mod:`.parity`;
``python -m mmverify.tasks.parity`` prints :func:`markdown`.
"""

from __future__ import annotations

from .catalog import CATALOG, task_info
from .parity import COMMITS, entries


def explain(task_id: str) -> str:
    """Plain-text explanation of one task: rule, published source, status and deviations."""
    info = task_info(task_id)
    entry = entries().get(info.id)
    lines = [f"{info.id} — {info.name} ({info.group})", f"rule: {info.method}"]
    if info.needs:
        lines.append(f"needs: {', '.join(info.needs)}")
    if entry is None:
        lines.append("published source: not recorded")
        return "\n".join(lines) + "\n"
    commit = COMMITS.get(entry.official_file, "?")
    lines += [
        f"published source: {entry.official} @{commit}",
        f"mmverify: {entry.module}",
        f"status (profile mmmg): {entry.status}",
    ]
    if entry.note:
        lines.append(f"note: {entry.note}")
    for profile in ("mmmg", "strict"):
        own = [d for d in entry.deviations if d.profile in (profile, "both")]
        lines.append(f"profile {profile}: " + ("no deviation" if not own else f"{len(own)} deviation(s)"))
        lines += [f"  - {d.rule}\n    why: {d.reason}" for d in own]
    lines.append("evidence: " + ", ".join(entry.evidence))
    return "\n".join(lines) + "\n"


def markdown() -> str:
    """docs/PARITY.md: one table, then each task's deviations."""
    out = [
        "# Parity with the published MMMG evaluator",
        "",
        "Generated from `src/mmverify/tasks/parity.py` by `python -m mmverify.tasks.parity`; "
        "`mmverify tasks --explain TASK` prints one entry. A test keeps this file, the task catalog and the "
        "named evidence in step.",
        "",
        "Profiles: `mmmg` (default) reproduces the published evaluator's decisions, newest version per task, "
        "fixing only its crashes and misalignments; `strict` applies the corrections this project recommends. "
        "The status is the `mmmg` profile's: *identical* (the same decision on every input the published code "
        "handles without crashing, for every well-formed judge reply, proven by the evidence tests against "
        "independent references or scripted judges; the deviations listed for such tasks concern crashes, "
        "rows the published code scores against another row's media, malformed judge replies, question wording "
        "and the audio resampling filter, close but not bit-identical), *deviation* (a deliberate difference that can change a "
        "decision the published code makes), *not verifiable* (no published code to compare with).",
        "",
        "Published files and the commits read: "
        + ", ".join(f"`{name}` @{commit}" for name, commit in COMMITS.items())
        + ".",
        "",
        "| task | published | mmverify | status | deviations | evidence |",
        "|---|---|---|---|---|---|",
    ]
    by_task = entries()
    for info in CATALOG.values():
        entry = by_task.get(info.id)
        if entry is None:
            out.append(f"| `{info.id}` | — | — | not recorded | — | — |")
            continue
        count = {p: sum(d.profile in (p, "both") for d in entry.deviations) for p in ("mmmg", "strict")}
        evidence = "<br>".join(f"`{e}`" for e in entry.evidence)
        out.append(
            f"| `{info.id}` | `{entry.official}` | `{entry.module}` | {entry.status} "
            f"| mmmg {count['mmmg']}, strict {count['strict']} | {evidence} |"
        )
    out += ["", "## Rules and deviations per task", ""]
    for info in CATALOG.values():
        entry = by_task.get(info.id)
        if entry is None:
            continue
        out.append(f"### `{info.id}` — {info.name}")
        out.append("")
        out.append(f"Rule: {info.method}." + (f" {entry.note}." if entry.note else ""))
        out.append("")
        for d in entry.deviations:
            out.append(f"- *{d.profile}*: {d.rule}. Why: {d.reason}.")
        if entry.deviations:
            out.append("")
    return "\n".join(out).rstrip("\n") + "\n"
