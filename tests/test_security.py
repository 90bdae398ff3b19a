"""Static checks over the package source: no code path evaluates or unpickles user data."""

from __future__ import annotations

import ast
from pathlib import Path

SOURCE = Path(__file__).resolve().parents[1] / "src" / "mmverify"


def _calls() -> list[tuple[str, int, ast.Call]]:
    found = []
    for path in sorted(SOURCE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                found.append((str(path.relative_to(SOURCE)), node.lineno, node))
    return found


def _name(call: ast.Call) -> str:
    func = call.func
    parts = []
    while isinstance(func, ast.Attribute):
        parts.append(func.attr)
        func = func.value
    if isinstance(func, ast.Name):
        parts.append(func.id)
    return ".".join(reversed(parts))


def _keyword(call: ast.Call, name: str) -> ast.expr | None:
    return next((k.value for k in call.keywords if k.arg == name), None)


def test_no_eval_exec_or_pickle_loads():
    builtins = {"eval", "exec", "compile", "__import__"}  # bare names only: model.eval() is fine
    loaders = {"pickle.load", "pickle.loads", "marshal.loads", "yaml.load", "yaml.unsafe_load", "dill.load", "joblib.load"}
    offenders = [
        f"{path}:{line} {_name(call)}"
        for path, line, call in _calls()
        if (isinstance(call.func, ast.Name) and call.func.id in builtins) or _name(call) in loaders
    ]
    assert not offenders, offenders


def test_torch_and_numpy_loads_refuse_pickled_objects():
    offenders = []
    for path, line, call in _calls():
        name = _name(call)
        if name == "torch.load":
            flag = _keyword(call, "weights_only")
            if not (isinstance(flag, ast.Constant) and flag.value is True):
                offenders.append(f"{path}:{line} torch.load without weights_only=True")
        if name in ("np.load", "numpy.load"):
            flag = _keyword(call, "allow_pickle")
            if not (isinstance(flag, ast.Constant) and flag.value is False):
                offenders.append(f"{path}:{line} np.load without allow_pickle=False")
    assert not offenders, offenders


def test_no_shell_commands():
    offenders = [
        f"{path}:{line}"
        for path, line, call in _calls()
        if _name(call).startswith("subprocess.") and isinstance(_keyword(call, "shell"), ast.Constant) and _keyword(call, "shell").value is True
    ]
    assert not offenders, offenders
