"""The README's task table is the catalog's (so docs cannot drift from the code)."""

from pathlib import Path

from mmverify.tasks.catalog import markdown_table


def test_readme_task_table_matches_the_catalog():
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    assert markdown_table() in readme, "regenerate the README table with `mmverify tasks --markdown`"
