"""The Reward API: error policies, determinism, in-memory media, per-item deadlines, refusals."""

from __future__ import annotations

import base64
import io
import json
import math
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
from PIL import Image

from mmverify.api import score_items
from mmverify.pipelines import execute
from mmverify.pipelines.reward import (
    NON_FINITE_IMAGE,
    Reward,
    RewardError,
    deadline,
    image_bytes,
    png_bytes,
    to_part,
    to_parts,
    to_uint8_image,
    wav_bytes,
)
from tests.conftest import raw_png, save_png
from tests.pipelines.conftest import bordered


def png(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(array).save(buffer, format="PNG")
    return buffer.getvalue()


GREEN_BORDER = bordered("green")


def test_scores_match_the_pipeline_for_every_way_of_passing_an_image(tmp_path: Path):
    save_png(tmp_path / "b.png", GREEN_BORDER)
    reference = score_items(
        [{"task": "i_format_border", "instance": {"color": "green"}, "parts": [{"type": "image", "path": "b.png"}]}],
        base_dir=tmp_path,
    )[0]
    torch = pytest.importorskip("torch")
    reward = Reward("i_format_border", media_root=tmp_path)
    forms = [
        Image.fromarray(GREEN_BORDER),
        GREEN_BORDER,
        GREEN_BORDER.astype(np.float32) / 255.0,
        torch.from_numpy(GREEN_BORDER).permute(2, 0, 1).float() / 255.0,  # CHW float tensor
        png(GREEN_BORDER),
        tmp_path / "b.png",
        {"type": "image", "path": "b.png"},
        {"type": "image", "image": Image.fromarray(GREEN_BORDER)},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64," + base64.b64encode(png(GREEN_BORDER)).decode()}},
    ]
    batch = reward([({"color": "green"}, [form]) for form in forms])
    assert batch.scores == [reference["score"]] * len(forms)
    for row in batch.rows:
        assert row["components"] == reference["components"] and row["evidence"] == reference["evidence"]


def test_manifest_items_give_exactly_the_rows_of_score_items(tmp_path: Path):
    save_png(tmp_path / "b.png", GREEN_BORDER)
    items = [
        {"task": "i_format_border", "instance": {"color": "green"}, "parts": [{"type": "image", "path": "b.png"}]},
        {"task": "i_structure", "instance": {"order": ["it"]}, "parts": [{"type": "image", "path": "b.png"}, {"type": "text", "text": "x"}]},
        {"task": "i_format_border", "instance": {"instruction": "no colour"}, "parts": [{"type": "image", "path": "b.png"}]},
        {"task": "i_format_bordr", "instance": {}, "parts": []},
    ]
    assert Reward(media_root=tmp_path).score_items(items).rows == score_items(items, base_dir=tmp_path)


@pytest.fixture
def mixed() -> list[tuple[dict, list]]:
    return [
        ({"color": "green"}, [GREEN_BORDER]),  # scored, high
        ({"instruction": "a border, colour missing"}, [GREEN_BORDER]),  # error: invalid_instance
        ({"color": "green"}, ["no image at all"]),  # the generation's fault: scored 0
    ]


def test_error_policies(mixed):
    rows = Reward("i_format_border")(mixed).rows
    assert [r["status"] for r in rows] == ["scored", "error", "scored"]
    assert rows[1]["error"]["code"] == "invalid_instance" and rows[2]["reason"] == "no_image"
    high = rows[0]["score"]
    assert Reward("i_format_border")(mixed).scores == [high, None, 0.0]  # default: none
    assert Reward("i_format_border", on_error="zero")(mixed).scores == [high, 0.0, 0.0]
    nan = Reward("i_format_border", on_error="nan")(mixed).scores
    assert nan[0] == high and math.isnan(nan[1]) and nan[2] == 0.0
    with pytest.raises(RewardError) as caught:
        Reward("i_format_border", on_error="raise")(mixed)
    assert caught.value.errors == [(1, "invalid_instance", rows[1]["error"]["message"])]
    assert len(caught.value.rows) == 3
    assert Reward("i_format_border")(mixed).errors == [(1, "invalid_instance", rows[1]["error"]["message"])]


def test_bad_configuration_fails_at_build_time():
    with pytest.raises(ValueError, match="Did you mean"):
        Reward("i_format_bordr")
    with pytest.raises(ValueError, match="on_error"):
        Reward("i_structure", on_error="skip")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="seconds above 0"):
        Reward("i_structure", timeout=0)
    with pytest.raises(ValueError, match="name the task"):
        Reward(["i_structure", "a_structure"]).item({"order": ["t"]}, ["x"])
    with pytest.raises(ValueError, match="in_flight"):
        Reward("i_structure", in_flight=1, decode_processes=2)  # decoding processes serve items scored together
    with pytest.raises(ValueError, match="decode_processes"):
        Reward("i_structure", decode_processes=-1)


def test_same_input_gives_bit_identical_output_every_time(mixed):
    first = json.dumps(Reward("i_format_border")(mixed).rows)
    reward = Reward("i_format_border")
    for _ in range(100):
        assert json.dumps(reward(mixed).rows) == first


def test_rows_do_not_depend_on_batch_position():
    reward = Reward("i_structure")
    alone = reward([({"order": ["t"]}, ["hello"])]).rows[0]
    later = reward([({"order": ["it"]}, ["x"]), ({"order": ["t"]}, ["hello"])]).rows[1]
    assert {**later, "line": 1} == alone
    assert alone["instance_id"].startswith("i_structure/")
    # manifest lines are named by their position, as `mmverify score` names them
    line = {"task": "i_structure", "instance": {"order": ["t"]}, "parts": [to_part("hello")]}
    assert [row["instance_id"] for row in reward.score_items([line, line]).rows] == ["i_structure/line-1", "i_structure/line-2"]
    # a pair refused while it is built is named by its content too
    refused = [reward([({"order": ["it"]}, ["x"])] * n + [({"order": ["t"]}, [object()])]).rows[n] for n in (0, 2)]
    assert [row["error"]["code"] for row in refused] == ["malformed_line"] * 2
    assert refused[0]["instance_id"] == refused[1]["instance_id"] == alone["instance_id"]


def test_thresholds_are_keyed_by_task_id_and_refuse_unknown_tasks():
    from mmverify.pipelines.thresholds import Threshold

    prefixed = Reward("i_structure", thresholds={"task:i_structure": {"threshold": 0.5}})
    assert prefixed([({"order": ["t"]}, ["hello"])]).rows[0]["passed"] is True
    as_object = Reward("i_structure", thresholds={"task:i_structure": Threshold(0.5)})
    assert as_object([({"order": ["t"]}, ["hello"])]).rows[0]["passed"] is True
    for thresholds in ({"i_structur": {"threshold": 0.5}}, {"i_structur": Threshold(0.5)}):
        with pytest.raises(ValueError, match="unknown task 'i_structur'. Did you mean 'i_structure'"):
            Reward("i_structure", thresholds=thresholds)
    # one task named twice, whatever the spelling, is refused rather than one silently kept
    for thresholds in ({"i_structure": {"threshold": 0.9}, "task:i_structure": {"threshold": 0.1}},
                       {"i_structure": Threshold(0.9), "task:i_structure": {"threshold": 0.1}}):  # fmt: skip
        with pytest.raises(ValueError, match="name i_structure twice"):
            Reward("i_structure", thresholds=thresholds)


def test_a_malformed_pair_is_its_own_row_and_its_neighbours_are_scored():
    """None, a string or a tuple of another length in a batch of pairs: that item's
    malformed_line row, where the whole call raised before."""
    reward = Reward("i_structure")
    good = ({"order": ["t"]}, ["hello"])
    batch = reward([good, None, ({"order": ["t"]},), "xy", good, ({"order": ["t"]}, ["a"], "extra")])
    assert batch.scores[0] == batch.scores[4] == 1.0
    assert [row["error"]["code"] for row in batch.rows[1:4] + batch.rows[5:]] == ["malformed_line"] * 4
    assert "expected an (instance, parts) pair, got a NoneType" in batch.rows[1]["error"]["message"]
    assert "got a tuple of 1" in batch.rows[2]["error"]["message"] and "got a tuple of 3" in batch.rows[5]["error"]["message"]
    assert {**batch.rows[4], "line": 1} == reward([good]).rows[0]


def test_several_tasks_and_refusals(tmp_path: Path):
    reward = Reward(["i_structure", "a_structure"])
    audio = (np.zeros(8000, dtype=np.float32), 8000)
    batch = reward(
        [({"order": ["it"]}, [GREEN_BORDER, "caption"]), ({"order": ["ta"]}, ["intro", audio]), ({"color": "green"}, [GREEN_BORDER])],
        tasks=["i_structure", "a_structure", "i_format_border"],
    )
    assert batch.scores == [1.0, 1.0, None]
    assert batch.rows[2]["error"]["code"] == "unknown_task" and "a_structure, i_structure" in batch.rows[2]["error"]["message"]
    unnamed = reward([({"order": ["it"]}, [GREEN_BORDER, "caption"])]).rows[0]
    assert unnamed["error"]["code"] == "malformed_line" and "tasks=[...]" in unnamed["error"]["message"]

    # the restriction reads the task as the planner does: a name too long to show in a row, one
    # padded with whitespace, one with the registry's prefix
    border = {"instance": {"color": "green"}, "parts": [to_part(GREEN_BORDER)]}
    padded = reward.rows([{**border, "task": "i_format_border" + " " * 1001}, {**border, "task": " task:i_format_border "}])
    assert [row["error"]["code"] for row in padded] == ["unknown_task", "unknown_task"]
    prefixed = reward.rows([{"task": "task:i_structure ", "instance": {"order": ["t"]}, "parts": [to_part("hello")]}])
    assert prefixed[0]["status"] == "scored"

    save_png(tmp_path / "root" / "in.png", GREEN_BORDER)
    save_png(tmp_path / "out.png", GREEN_BORDER)
    rooted = Reward("i_format_border", data_root=tmp_path / "root")
    rows = rooted([({"color": "green"}, [{"type": "image", "path": "in.png"}]), ({"color": "green"}, [{"type": "image", "path": "../out.png"}])]).rows
    assert rows[0]["status"] == "scored" and rows[1]["error"]["code"] == "path_outside_root"
    inline_only = Reward("i_format_border", allow_paths=False)
    assert inline_only([({"color": "green"}, [tmp_path / "out.png"])]).rows[0]["error"]["code"] == "path_outside_root"


def test_in_memory_media_encode_deterministically():
    assert png_bytes(GREEN_BORDER) == png_bytes(GREEN_BORDER.copy())
    assert image_bytes(GREEN_BORDER) == image_bytes(GREEN_BORDER.copy())
    for array in (GREEN_BORDER, GREEN_BORDER[..., 0], np.dstack([GREEN_BORDER, GREEN_BORDER[..., :1]])):
        decoded = np.asarray(Image.open(io.BytesIO(image_bytes(array))))
        assert np.array_equal(decoded, array)  # lossless for gray, RGB and RGBA
    samples = np.sin(np.arange(16000, dtype=np.float32) / 7.0)
    encoded = wav_bytes(samples, 16000)
    time.sleep(1.1)  # libsndfile would stamp a float WAV with the time; ours must not change
    assert wav_bytes(samples, 16000) == encoded
    decoded, rate = sf.read(io.BytesIO(encoded), dtype="float32")
    assert rate == 16000 and np.array_equal(decoded, samples)
    pcm, _ = sf.read(io.BytesIO(wav_bytes((samples * 1000).astype(np.int16), 8000)), dtype="int16")
    assert np.array_equal(pcm, (samples * 1000).astype(np.int16))
    stereo, _ = sf.read(io.BytesIO(wav_bytes(np.stack([samples, -samples]), 16000)), dtype="float32")
    assert stereo.shape == (16000, 2)


def test_float_images_map_like_image_rl_trainers():
    torch = pytest.importorskip("torch")
    tensor = torch.rand(3, 5, 7, generator=torch.Generator().manual_seed(0))
    expected = (tensor * 255).round().clamp(0, 255).to(torch.uint8).permute(1, 2, 0).numpy()
    assert np.array_equal(to_uint8_image(tensor), expected)
    assert np.array_equal(to_uint8_image(tensor.permute(1, 2, 0).numpy()), expected)  # HWC numpy
    assert np.array_equal(to_uint8_image(tensor.numpy(), channels_first=True), expected)
    assert to_uint8_image(np.zeros((4, 6), dtype=bool)).shape == (4, 6)
    # float64 arrays are mapped in float64: values that float32 would round the other way
    wide = np.random.default_rng(0).integers(0, 255, (6, 8)) + 0.5 + np.random.default_rng(1).choice([-1e-9, 1e-9], (6, 8))
    assert np.array_equal(to_uint8_image(wide / 255), np.round(wide).astype(np.uint8))
    assert not np.array_equal(to_uint8_image((wide / 255).astype(np.float32)), np.round(wide).astype(np.uint8))
    with pytest.raises(ValueError, match="channels"):
        to_uint8_image(np.zeros((5, 6, 7)))


def test_a_16_bit_array_reads_like_the_16_bit_png_of_it(tmp_path: Path):
    from PIL import Image

    from mmverify.core.media import load_image

    wide = np.random.default_rng(2).integers(0, 65536, size=(9, 11), dtype=np.uint16)
    Image.fromarray(wide).save(tmp_path / "wide.png")  # mode I;16
    gray = load_image(tmp_path / "wide.png")
    assert gray.dtype == np.uint8 and np.array_equal(to_uint8_image(wide), gray[:, :, 0])
    assert to_uint8_image(np.full((2, 2), 300, dtype=np.int64)).max() == 255  # wider integers: 0..255, clipped

    colour = np.random.default_rng(3).integers(0, 65536, size=(5, 7, 3), dtype=np.uint16)
    (tmp_path / "colour.png").write_bytes(png16_rgb(colour))
    assert np.array_equal(to_uint8_image(colour), load_image(tmp_path / "colour.png"))


def png16_rgb(array: np.ndarray) -> bytes:
    """A 16-bit RGB PNG of ``array`` (Pillow writes none)."""
    height, width, _ = array.shape
    return raw_png(width, height, 16, 2, b"".join(b"\x00" + array[y].astype(">u2").tobytes() for y in range(height)))


def test_unusual_parts():
    assert to_part("hi") == {"type": "text", "text": "hi"}
    assert to_part(png(GREEN_BORDER))["type"] == "image"
    assert to_part(wav_bytes(np.zeros(10, dtype=np.float32), 8000))["type"] == "audio"
    assert to_part({"type": "audio", "audio": np.zeros(10, dtype=np.float32), "sample_rate": 8000})["type"] == "audio"
    assert to_part({"type": "image", "nonsense": 1}) == {"type": "image", "nonsense": 1}  # left to the planner
    with pytest.raises(ValueError, match="sample rate"):
        to_part(np.zeros(100, dtype=np.float32))
    with pytest.raises(ValueError, match="data: URLs"):
        to_part({"type": "image_url", "image_url": {"url": "https://example.com/a.png"}})
    with pytest.raises(TypeError):
        to_part(object())
    # (samples, rate) with a rate a WAV header cannot hold says so, whatever the rate's type
    for rate in (22050.0, np.float32(8000), 2**32, 0):
        with pytest.raises(ValueError, match="sample_rate must be a positive integer"):
            to_part((np.zeros(10, dtype=np.float32), rate))
        with pytest.raises(ValueError, match="sample_rate must be a positive integer"):
            to_parts((np.zeros(10, dtype=np.float32), rate))


def test_in_memory_media_over_the_limits_score_0_without_being_converted_or_encoded(monkeypatch):
    """An array of 20000x20000 pixels (a view of one byte) is judged by its shape: encoding it
    first held several gigabytes. Its row is the generator's 0, as for a file that size; the
    limits are the reward's own."""
    import tracemalloc

    import torch
    from PIL import Image

    from mmverify.core.media import MediaLimits
    from mmverify.pipelines import reward_media

    reward = Reward("i_format_border")
    huge = np.broadcast_to(np.uint8(0), (20000, 20000, 3))
    tracemalloc.start()
    try:
        row = reward([({"color": "green"}, [huge])]).rows[0]
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert (row["status"], row["score"], row["reason"]) == ("scored", 0.0, "unreadable_image")
    assert row["evidence"]["media_reason"] == "media_too_large"
    assert "20000x20000 pixels is over the limit of 40,000,000" in row["evidence"]["message"]
    assert peak < 50_000_000  # nothing the size of the image was made

    converted: list[object] = []
    original = reward_media._as_numpy
    monkeypatch.setattr(reward_media, "_as_numpy", lambda value: converted.append(value) or original(value))
    tensor = torch.zeros(1, dtype=torch.bfloat16).expand(3, 8000, 8000)  # a tensor of 64 M pixels, read CHW
    assert reward([({"color": "green"}, [tensor])]).rows[0]["reason"] == "unreadable_image" and not converted

    small = Reward("i_format_border", limits=MediaLimits(max_pixels=100))
    rows = small([({"color": "green"}, [np.zeros((11, 10, 3), np.uint8)]), ({"color": "green"}, [Image.new("RGB", (11, 10))]),
                  ({"color": "green"}, [torch.zeros(3, 11, 10)]), ({"color": "green"}, [np.zeros((10, 10, 3), np.uint8)])]).rows  # fmt: skip
    assert ["over the limit of 100 pixels" in row["evidence"].get("message", "") for row in rows] == [True, True, True, False]
    assert rows[3]["status"] == "scored" and rows[3]["reason"] != "unreadable_image"
    audio = Reward("a_structure", profile="strict", limits=MediaLimits(max_samples=1000, max_seconds=2.0))  # strict decodes clips
    clips = [(np.zeros(1001, np.float32), 8000), (torch.zeros(2, 600), 8000), (np.zeros(900, np.float32), 400)]
    rows = audio([({"order": ["a"]}, [clip]) for clip in clips]).rows
    assert audio([({"order": ["a"]}, [(np.zeros(1000, np.float32), 8000)])]).scores == [1.0]
    assert {(row["status"], row["reason"], row["evidence"]["media_reason"]) for row in rows} == {("scored", "unreadable_audio", "media_too_large")}
    assert "1,001 samples is over the limit of 1,000" in rows[0]["evidence"]["message"]
    assert "1,200 samples is over the limit of 1,000" in rows[1]["evidence"]["message"]
    assert "2.2 s is over the limit of 2.0 s" in rows[2]["evidence"]["message"]


def test_non_finite_images_are_the_generators_fault():
    broken = np.full((32, 32, 3), np.nan, dtype=np.float32)
    assert to_part(broken)["data"] == base64.b64encode(NON_FINITE_IMAGE).decode()
    row = Reward("i_format_border")([({"color": "green"}, [broken])]).rows[0]
    assert (row["status"], row["score"], row["reason"]) == ("scored", 0.0, "unreadable_image")


class _Spinning:
    """A task that never finishes on its own (pure Python, so a deadline can interrupt it)."""

    version = 1

    def score(self, instance, response):  # noqa: ANN001
        stop = time.monotonic() + 30
        while time.monotonic() < stop:
            pass
        raise AssertionError("the deadline did not interrupt scoring")


@pytest.fixture
def spinning_structure(monkeypatch):
    monkeypatch.setitem(execute._TASKS, ("i_structure", "mmmg"), _Spinning())  # built tasks by (id, profile)


@pytest.mark.parametrize("where", ["main thread", "worker thread"])
def test_per_item_timeout_on_any_thread(spinning_structure, where):
    reward = Reward("i_structure", timeout=0.3)
    result: dict = {}

    def run() -> None:
        result["batch"] = reward([({"order": ["t"]}, ["a"]), ({"order": ["t"]}, ["b"])])

    if where == "main thread":
        run()
    else:
        worker = threading.Thread(target=run)
        worker.start()
        worker.join(60)  # a hang guard: the spinning task gives up by itself after 30 s
        assert not worker.is_alive()
    rows = result["batch"].rows  # "timeout" rows: the deadline, not the task's own 30 s, ended them
    assert [r["error"]["code"] for r in rows] == ["timeout", "timeout"]
    assert rows[0]["error"]["message"] == "scoring took longer than 0.3 s"


def test_deadline_that_does_not_fire_leaves_no_exception_behind():
    # a limit only a hang reaches; once the block is left nothing stays armed for this thread, so
    # no timer can fire later, however long the machine stalls
    from mmverify.pipelines.deadlines import _WATCHDOG

    with deadline(60.0):
        assert any(thread == threading.get_ident() for _, thread in _WATCHDOG._armed.values())
    assert not any(thread == threading.get_ident() for _, thread in _WATCHDOG._armed.values())
    with deadline(None):
        pass


def test_model_settings_go_into_the_installed_scoring_context(monkeypatch, tmp_path: Path):
    from mmverify.pipelines.context import current

    for name in ("MMVERIFY_MODELS", "MMVERIFY_DEVICE", "MMVERIFY_CACHE_DIR", "MMVERIFY_TEST_JUDGE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr("mmverify.models.hub._HUB", None)
    reward = Reward("i_structure", models=["beat_tracker=librosa-beats"], device="cpu", cache_dir=tmp_path, env={"MMVERIFY_TEST_JUDGE": "x"})
    import os

    settings = current().settings
    assert current() is reward.context and settings["MMVERIFY_MODELS"] == "beat_tracker=librosa-beats"
    assert settings["MMVERIFY_DEVICE"] == "cpu" and settings["MMVERIFY_CACHE_DIR"] == str(tmp_path)
    assert settings["MMVERIFY_TEST_JUDGE"] == "x" and "MMVERIFY_MODELS" not in os.environ
    with pytest.raises(ValueError):
        Reward("i_structure", models="beat_tracker=nope")


def test_thresholds_set_passed():
    reward = Reward("i_format_border", thresholds={"i_format_border": {"threshold": 0.5}})
    rows = reward([({"color": "green"}, [GREEN_BORDER]), ({"color": "red"}, [GREEN_BORDER])]).rows
    assert [r["passed"] for r in rows] == [True, False]


def test_a_deadline_interrupts_only_its_own_thread(spinning_structure):
    slow, fast = Reward("i_structure", timeout=0.3), Reward("i_format_border", timeout=30)
    out: dict = {"fast": []}

    slow_done = threading.Event()

    def steady() -> None:  # scores for as long as the slow item runs, at least once
        while True:
            out["fast"].extend(fast([({"color": "green"}, [GREEN_BORDER])]).rows)
            if slow_done.is_set():
                return

    def spin() -> None:
        try:
            out["slow"] = slow([({"order": ["t"]}, ["a"])])
        finally:
            slow_done.set()

    threads = [threading.Thread(target=steady), threading.Thread(target=spin)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)  # a hang guard: the slow item ends at its 0.3 s deadline
    assert not any(thread.is_alive() for thread in threads)
    assert out["slow"].rows[0]["error"]["code"] == "timeout"
    assert out["fast"] and all(row["status"] == "scored" for row in out["fast"])
