"""Helpers for tests and benchmarks that need models: tiny random-init checkpoints made locally."""
