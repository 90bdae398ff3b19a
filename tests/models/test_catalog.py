"""The backend catalog against the package metadata."""

from __future__ import annotations

import tomllib
from pathlib import Path

from mmverify.core.registry import import_object
from mmverify.models.catalog import BACKENDS

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


def test_every_backend_names_an_extra_the_package_declares():
    """A missing package's message says ``pip install "mmverify[<extra>]"``: that extra must exist."""
    extras = tomllib.loads(PYPROJECT.read_text())["project"]["optional-dependencies"]
    named = {info.name: import_object(info.impl).extra for info in BACKENDS}
    assert named["laion-clap"] == "laion-clap"
    assert {name: extra for name, extra in named.items() if extra not in extras} == {}
