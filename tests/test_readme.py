"""The README against the code: its task table is the catalog's, and its Python examples run and
give the values their comments promise (so docs cannot drift from the code)."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

import pytest

from mmverify.tasks.catalog import markdown_table

README = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
# Examples that need what the test suite does not install (TRL, datasets) or a running server.
NEEDS_MORE = ("from trl import", "urllib.request")


def test_readme_task_table_matches_the_catalog():
    assert markdown_table() in README, "regenerate the README table with `mmverify tasks --markdown`"


def python_examples() -> list[tuple[int, str]]:
    """(line number, code) of every ```python block the suite can run."""
    found = []
    for match in re.finditer(r"^```python\n(.*?)^```", README, flags=re.S | re.M):
        if not any(marker in match.group(1) for marker in NEEDS_MORE):
            found.append((README.count("\n", 0, match.start()) + 1, match.group(1)))
    return found


def promised(line: str) -> tuple[bool, Any]:
    """The value a ``expression   # value`` comment promises (text after `` -- `` is prose)."""
    if "  # " not in line:
        return False, None
    comment = line.split("  # ", 1)[1].split(" -- ", 1)[0].strip()
    try:
        return True, ast.literal_eval(comment)
    except (ValueError, SyntaxError):
        return False, None


def test_the_readme_has_runnable_python_examples():
    assert len(python_examples()) >= 3


@pytest.mark.parametrize("start,code", python_examples(), ids=lambda value: f"L{value}" if isinstance(value, int) else "")
def test_a_readme_python_example_runs_and_gives_what_it_promises(start, code, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MMVERIFY_CACHE_DIR", str(tmp_path / "cache"))
    lines = code.splitlines()
    namespace: dict[str, Any] = {}
    checked = 0
    for statement in ast.parse(code).body:
        source = "\n".join(lines[statement.lineno - 1 : statement.end_lineno])
        known, value = promised(lines[statement.end_lineno - 1])
        if isinstance(statement, ast.Expr) and known:
            got = eval(compile(ast.Expression(statement.value), f"README.md:{start}", "eval"), namespace)
            assert got == value, f"README line {start + statement.end_lineno}: {source!r} gave {got!r}"
            checked += 1
        else:
            exec(compile(ast.Module([statement], []), f"README.md:{start}", "exec"), namespace)
    assert checked == sum(promised(line)[0] for line in lines)  # no promise left unchecked


def test_the_readme_counts_the_bad_inputs_the_robustness_corpus_holds():
    from tests.robustness.corpus import all_cases

    stated = re.search(r"generates (\d+) kinds of bad", README)
    assert stated is not None and int(stated.group(1)) == len(all_cases())
