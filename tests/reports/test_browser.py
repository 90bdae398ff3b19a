"""The HTML report in a real browser: headless Chromium renders it, runs its script without
console errors, lists every task and item, and never executes markup from the results."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mmverify.cli import app
from mmverify.reports import write_html_report
from tests.conftest import running_in_ci
from tests.reports.synthetic import write_synthetic_run

pytestmark = pytest.mark.slow

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


@pytest.fixture(scope="module")
def browser() -> str:
    for name in BROWSERS:
        path = shutil.which(name)
        if path:
            return path
    message = f"no Chromium binary found (looked for {', '.join(BROWSERS)}; scripts/setup.sh installs Debian's chromium)"
    if running_in_ci():
        pytest.fail(f"{message}; CI=true requires it", pytrace=False)
    pytest.skip(message)


def run_browser(browser: str, profile: Path, *args: str) -> subprocess.CompletedProcess[str]:
    command = [browser, "--headless", "--disable-gpu", "--no-sandbox", "--no-first-run", f"--user-data-dir={profile}",
               "--enable-logging=stderr", "--v=0", *args]  # fmt: skip
    return subprocess.run(command, capture_output=True, text=True, timeout=120, check=True)


def dump_dom(browser: str, page: Path, profile: Path, fragment: str = "") -> tuple[str, str]:
    done = run_browser(browser, profile, "--dump-dom", page.resolve().as_uri() + fragment)
    return done.stdout, done.stderr


def body_attributes(dom: str) -> str:
    match = re.search(r"<body([^>]*)>", dom)
    assert match is not None, dom[:500]
    return match.group(1)


def console_errors(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "CONSOLE" in line or "Uncaught" in line]


@pytest.fixture(scope="module")
def demo_page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("demo") / "demo"
    result = CliRunner().invoke(app, ["demo", "--out", str(out)])
    assert result.exit_code == 0, result.output
    return write_html_report(out / "run")


def test_demo_report_renders_every_task_and_item(browser: str, demo_page: Path, tmp_path: Path) -> None:
    dom, stderr = dump_dom(browser, demo_page, tmp_path / "profile")
    attributes = body_attributes(dom)
    assert 'data-ready="1"' in attributes and "data-error" not in attributes
    assert not console_errors(stderr), console_errors(stderr)
    for task in ("i_format_border", "i_format_background", "i_structure"):
        assert f'data-task-row="{task}"' in dom
        assert f'<option value="{task}">{task}</option>' in dom  # the item browser's task filter
    assert "10 of 10 items" in dom
    assert len(re.findall(r'<tr class="item (?:scored|error)"', dom)) == 10


def test_opening_an_item_shows_its_media_and_boxes(browser: str, demo_page: Path, tmp_path: Path) -> None:
    dom, stderr = dump_dom(browser, demo_page, tmp_path / "profile", "#item-0")
    assert "data-error" not in body_attributes(dom) and not console_errors(stderr)
    assert 'class="detail"' in dom
    assert dom.count('class="box region"') == 4 and dom.count('class="box penalty"') == 4  # border strips, inner bands


def test_results_cannot_inject_markup(browser: str, tmp_path: Path) -> None:
    run = write_synthetic_run(tmp_path / "synthetic")
    page = write_html_report(run)
    dom, stderr = dump_dom(browser, page, tmp_path / "profile", "#item-0")  # item 0 holds the judge reply with the payload
    attributes = body_attributes(dom)
    assert 'data-ready="1"' in attributes and "data-error" not in attributes and "data-pwned" not in attributes
    assert not console_errors(stderr), console_errors(stderr)
    assert "18 of 18 items" in dom
    assert "&lt;/script&gt;&lt;img src=x onerror=" in dom  # shown as text in the reply, the reason and the notes
    assert "<img src=\"x\"" not in dom and "<img src=x" not in dom


def test_screenshot(browser: str, demo_page: Path, tmp_path: Path) -> None:
    shot = tmp_path / "report.png"
    run_browser(browser, tmp_path / "profile", f"--screenshot={shot}", "--window-size=1400,1000", demo_page.resolve().as_uri())
    assert shot.stat().st_size > 20_000  # a rendered page, not a blank one


@pytest.mark.parametrize(
    ("fragment", "expected"),
    [
        ("#filter:task=i_format_border&order=worst&limit=2", ["demo/border-too-wide", "demo/border-wrong-colour"]),
        ("#filter:order=best&limit=1", ["demo/border-clean"]),
        ("#filter:status=error", ["demo/missing-file"]),
        ("#filter:min=0.1&max=0.9", ["demo/left-half-noisy"]),
        ("#filter:status=passed", ["demo/order-right"]),
    ],
)
def test_filters_in_the_browser(browser: str, demo_page: Path, tmp_path: Path, fragment: str, expected: list[str]) -> None:
    dom, stderr = dump_dom(browser, demo_page, tmp_path / "profile", fragment)
    assert "data-error" not in body_attributes(dom) and not console_errors(stderr)
    shown = re.findall(r'<td class="id">([^<#]+)</td>', dom)
    assert shown == expected
    assert f"{len(expected)} of 10 items" in dom


def test_a_forged_summary_cannot_inject_markup_and_the_policy_blocks_any_other_script(browser: str, tmp_path: Path) -> None:
    import json

    run = write_synthetic_run(tmp_path / "synthetic")
    summary = json.loads((run / "summary.json").read_text())
    payload = "<img src=x onerror=\"document.body.setAttribute('data-pwned', '1')\">"
    summary["overall"]["tasks_scored"] = payload
    for entry in summary["tasks"].values():
        entry["n_scored"] = payload
    (run / "summary.json").write_text(json.dumps(summary))
    page = write_html_report(run)
    dom, stderr = dump_dom(browser, page, tmp_path / "profile")
    attributes = body_attributes(dom)
    assert 'data-ready="1"' in attributes and "data-pwned" not in attributes, attributes
    assert "&lt;img src=x onerror=" in dom and not console_errors(stderr)
    # a script the policy does not name by its hash does not run
    smuggled = page.with_name("smuggled.html")
    smuggled.write_text(page.read_text().replace("</body>", "<script>document.body.setAttribute('data-pwned', '2')</script></body>"))
    dom, _ = dump_dom(browser, smuggled, tmp_path / "profile2")
    assert "data-pwned" not in body_attributes(dom) and 'data-ready="1"' in body_attributes(dom)
