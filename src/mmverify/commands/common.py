"""What every command shares: the consoles, exit codes and the one-line failure."""

from __future__ import annotations

from pathlib import Path
from typing import NoReturn

import typer
from rich.console import Console
from rich.markup import escape

console = Console(stderr=True)
stdout = Console()
EXIT_USAGE = 2  # unusable arguments or an unusable output folder
EXIT_ERROR_ROWS = 3  # score --fail-on-errors: the run completed with error rows


def output_folder(text: str) -> Path:
    """``--out`` as a path; an empty value is refused, where a path would quietly mean ``.``."""
    if not text.strip():
        fail("--out needs a folder (an empty value would write into the working directory)")
    return Path(text)


def fail(message: str) -> NoReturn:
    """Print ``message`` (plain text: paths may hold [brackets]) on one unwrapped line, so a path in
    it can be copied whole, and exit with the usage code."""
    console.print(f"[red]error:[/red] {escape(message)}", highlight=False, soft_wrap=True)
    raise typer.Exit(EXIT_USAGE)


def check_limit_option(flag: str, seconds: float | None) -> None:
    """Refuse a time-limit option the deadlines cannot hold, naming it (0 or unset: no limit)."""
    from ..pipelines.execute import check_time_limit

    try:
        check_time_limit(seconds or None, flag, no_limit="0")
    except ValueError as exc:
        fail(str(exc))


def os_problem(exc: OSError) -> str:
    """An OSError as one line naming the file: ``/proc/x: No such file or directory``."""
    where = exc.filename if exc.filename is not None else "a file"
    return f"{where}: {exc.strerror or exc}"
