"""Readers for instruction sets, generation manifests and the official MMMG output layout."""
