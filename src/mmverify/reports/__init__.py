"""Run reports: a self-contained HTML page (overview, leaderboard, item browser, errors) and the
per-model leaderboard as CSV."""

from .html import DEFAULT_MAX_MEDIA, render_html, write_html_report
from .leaderboard import write_leaderboard_csv

__all__ = ["DEFAULT_MAX_MEDIA", "render_html", "write_html_report", "write_leaderboard_csv"]
