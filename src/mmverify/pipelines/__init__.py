"""Orchestration: planning and executing score runs, resumable results, summaries, reports."""
