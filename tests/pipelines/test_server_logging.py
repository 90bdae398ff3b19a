"""The server's log lines go to the standard error in force when they are written."""

from __future__ import annotations

import io
import json
import sys

from mmverify.pipelines import server_gate


def test_log_lines_follow_a_replaced_standard_error(monkeypatch):
    monkeypatch.setattr(server_gate.LOGGER, "handlers", [])
    first = io.StringIO()
    monkeypatch.setattr(sys, "stderr", first)
    server_gate.setup_logging()  # the server starts while a stream that is later closed is in force
    server_gate.log_line(event="first")
    assert json.loads(first.getvalue()) == {"event": "first"}
    first.close()
    later = io.StringIO()
    monkeypatch.setattr(sys, "stderr", later)
    server_gate.log_line(event="later")
    assert [json.loads(line) for line in later.getvalue().splitlines()] == [{"event": "later"}]
