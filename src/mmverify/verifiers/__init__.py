"""Deterministic checks: pure functions over decoded media, transcripts and model outputs.

A verifier never loads a model; it receives model outputs (embeddings, transcripts, judge answers)
through explicit arguments, so every decision is testable without weights.
"""
