"""Instance media (``image_list`` / ``ref_image_list`` numbers naming ``image/<task>_<n>.png``) obey
the path policy of the parts' paths: under a data root, symlinks included; none at all on a server
without a data root; an instruction set's own media come from the folder the user named."""

from __future__ import annotations

import base64
import http.client
import io
import json
import os
import pickle
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

from mmverify.api import score_items
from mmverify.core.errors import ScoringError
from mmverify.pipelines.plan import Planner, WorkItem
from mmverify.tasks.catalog import task_info

TASK = "i_consistency_3d_object"
SOURCE = task_info(TASK).source_files[0]
VIEW = np.random.default_rng(1).integers(0, 256, (64, 64, 3), dtype=np.uint8)


def png(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(array).save(buffer, format="PNG")
    return buffer.getvalue()


def item() -> dict[str, Any]:
    """The reference view sent back as the generation: scores 1 when the reference is read."""
    return {"task": TASK, "instance": {"ref_image_list": [0]}, "parts": [{"type": "image", "data": base64.b64encode(png(VIEW)).decode()}]}


def images_at(folder: Path) -> Path:
    folder.mkdir(parents=True)
    (folder / f"{SOURCE}_0.png").write_bytes(png(VIEW))
    return folder


def outcome(row: dict[str, Any]) -> tuple[str, Any]:
    return (row["status"], row["error"]["code"] if row["error"] else row["score"])


def test_instance_media_escaping_the_data_root_are_refused(tmp_path: Path):
    root = tmp_path / "root"
    root.mkdir()
    os.symlink(images_at(tmp_path / "elsewhere"), root / "image")
    assert outcome(score_items([item()], base_dir=root, data_root=root)[0]) == ("error", "path_outside_root")
    assert outcome(score_items([item()], base_dir=root)[0]) == ("scored", 1.0)  # no data root: read as before
    inside = tmp_path / "inside"
    images_at(inside / "image")
    assert outcome(score_items([item()], base_dir=inside, data_root=inside)[0]) == ("scored", 1.0)


def test_the_server_applies_its_path_policy_to_instance_media(serve, tmp_path: Path, monkeypatch):
    def post(port: int) -> list[dict[str, Any]]:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        conn.request("POST", "/score", body=json.dumps({"items": [item()]}), headers={"Content-Type": "application/json"})
        reply = json.loads(conn.getresponse().read())
        conn.close()
        return reply["results"]

    secret = images_at(tmp_path / "secret")
    root = tmp_path / "root"
    root.mkdir()
    os.symlink(secret, root / "image")
    [row] = post(serve(data_root=root, batch_wait_ms=0).port)
    assert outcome(row) == ("error", "path_outside_root") and str(tmp_path) not in json.dumps(row)
    monkeypatch.chdir(tmp_path)
    os.symlink(secret, tmp_path / "image")  # ./image in the server's working directory
    [row] = post(serve(batch_wait_ms=0).port)
    assert outcome(row) == ("error", "path_outside_root") and "no data root" in row["error"]["message"]


def test_an_instruction_sets_own_media_are_read_from_it(tmp_path: Path):
    instructions = tmp_path / "instructions"
    images_at(instructions / "image")
    (instructions / f"{SOURCE}.jsonl").write_text(json.dumps({"ref_image_list": [0]}) + "\n")
    root = tmp_path / "generations"
    root.mkdir()
    rows = score_items([item()], base_dir=root, data_root=root, instructions=instructions)
    assert outcome(rows[0]) == ("scored", 1.0)


def test_work_items_keep_their_path_policy_in_other_processes(tmp_path: Path):
    images_at(tmp_path / "image")
    line = json.dumps(item())
    entry = pickle.loads(pickle.dumps(Planner(manifest_dir=tmp_path, data_root=tmp_path).plan(1, line)))  # as --workers N
    assert isinstance(entry, WorkItem) and entry.instance.media_path("image", 0) == tmp_path.resolve() / "image" / f"{SOURCE}_0.png"
    closed = pickle.loads(pickle.dumps(Planner(manifest_dir=tmp_path, allow_paths=False).plan(1, line)))
    assert isinstance(closed, WorkItem)  # refused only when its task reads the media
    with pytest.raises(ScoringError) as info:
        closed.instance.media_path("image", 0)
    assert info.value.code == "path_outside_root"
