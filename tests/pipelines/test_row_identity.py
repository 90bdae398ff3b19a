"""A row's identity fields, taken without a deep copy, are what ``dataclasses.asdict`` gives."""

from __future__ import annotations

import dataclasses

from mmverify.pipelines.results import ROW_FIELDS, RowIdentity, error_row


def test_fields_are_asdicts_and_every_one_is_a_row_field():
    for identity in (RowIdentity("a_sound_cot", "7", 2, "model-x", "k" * 64, 12, "clap"), RowIdentity("t", "i", 0, None, "k", 1, None)):
        fields = identity.fields()
        assert fields == dataclasses.asdict(identity) and list(fields) == [f.name for f in dataclasses.fields(RowIdentity)]
        assert all(type(value) in (str, int, type(None)) for value in fields.values())  # nothing a deep copy would change
        fields["task"] = "changed"
        assert identity.task != "changed"  # a copy, not the instance's own dict
    row = error_row(identity, "media_missing", "no such file")
    assert set(fields) <= set(ROW_FIELDS) and all(row[name] == value for name, value in identity.fields().items())
