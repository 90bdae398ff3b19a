"""The judge modules form a layered graph: none imports another that imports it back, not even
lazily inside a function, and each imports cleanly whichever is imported first."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import mmverify.models

MODELS = Path(mmverify.models.__file__).parent
GROUP = sorted(path.stem for path in MODELS.glob("judge*.py"))


def judge_imports(name: str) -> set[str]:
    """The judge modules ``name`` imports anywhere in its source (top level or inside functions)."""
    tree = ast.parse((MODELS / f"{name}.py").read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level == 1:  # from .x import y / from . import x
                targets = [node.module] if node.module else [alias.name for alias in node.names]
            elif node.level == 0 and node.module and node.module.startswith("mmverify.models."):
                targets = [node.module.rsplit(".", 1)[1]]
            else:
                targets = []
            found.update(t.split(".")[0] for t in targets)
        elif isinstance(node, ast.Import):
            found.update(a.name.rsplit(".", 1)[1] for a in node.names if a.name.startswith("mmverify.models."))
    return found & set(GROUP) - {name}


def test_the_group_is_what_this_test_expects() -> None:
    assert {"judge", "judge_cache", "judge_config", "judge_local", "judge_retry", "judge_usage", "judge_wire"} <= set(GROUP)


def test_no_judge_module_imports_one_that_imports_it_back() -> None:
    graph = {name: judge_imports(name) for name in GROUP}
    reaches: dict[str, set[str]] = {}

    def reachable(name: str, path: tuple[str, ...] = ()) -> set[str]:
        if name in path:
            pytest.fail(f"import cycle: {' -> '.join(path[path.index(name):] + (name,))}")
        if name not in reaches:
            seen: set[str] = set()
            for target in graph[name]:
                seen |= {target} | reachable(target, path + (name,))
            reaches[name] = seen
        return reaches[name]

    for name in GROUP:
        assert name not in reachable(name)
    # the layering this split is for: configuration and the wire format never reach the client
    assert "judge" not in reachable("judge_config") | reachable("judge_wire") | reachable("judge_local")
    assert reachable("judge_usage") == set() and graph["judge_wire"] == set()


@pytest.mark.parametrize("first", GROUP)
def test_each_module_imports_first_in_a_fresh_interpreter(first: str) -> None:
    rest = [name for name in GROUP if name != first]
    for order in ([first, *rest], [first, *reversed(rest)]):
        code = "".join(f"import mmverify.models.{name}\n" for name in order)
        child = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
        assert child.returncode == 0, f"importing {order} failed:\n{child.stderr}"
