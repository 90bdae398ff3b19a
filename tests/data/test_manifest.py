"""Generation manifests (DESIGN §2): valid lines parse, every malformed line is a ManifestError,
the line reader is robust, and media paths respect the data root (DESIGN §6)."""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path

import pytest

from mmverify.core.errors import ErrorCode, ScoringError
from mmverify.data import manifest
from mmverify.data.instructions import InstructionSet
from mmverify.data.jsonsafe import first_problem
from mmverify.data.manifest import (
    ManifestError,
    PathPolicyError,
    is_regular_file,
    is_stream,
    iter_manifest_lines,
    manifest_base_dir,
    parse_generation,
    parse_line,
    parse_part,
    resolve_media_path,
)
from tests.conftest import write_manifest

PNG_BYTES = b"\x89PNG\r\n\x1a\n fake payload \x00\xff"


def line(**fields) -> str:
    """A valid manifest line with ``fields`` overriding the defaults (a value of ... removes the key)."""
    obj = {
        "task": "i_format_border",
        "instance_id": "i_format_border/3",
        "parts": [{"type": "text", "text": "Here is the image:"}, {"type": "image", "path": "gen/0003_0.png"}],
    }
    obj.update(fields)
    return json.dumps({k: v for k, v in obj.items() if v is not ...})


# -- valid lines ---------------------------------------------------------------------------------


def test_design_doc_example_parses_field_by_field():
    """The example line of DESIGN §2, with sample and model, round-trips into a Generation."""
    text = (
        '{"task": "i_format_border", "instance_id": "i_format_border/3", "sample": 2, "model": "m1",'
        ' "parts": [{"type": "text", "text": "Here is the image:"}, {"type": "image", "path": "gen/0003_0.png"}]}'
    )
    gen = parse_line(text, line=7)
    assert gen.task == "i_format_border"
    assert gen.instance_id == "i_format_border/3"
    assert gen.sample == 2
    assert gen.model == "m1"
    assert gen.line == 7
    assert gen.instance is None
    assert [(p.type, p.text, p.path, p.data) for p in gen.parts] == [
        ("text", "Here is the image:", None, None),
        ("image", None, "gen/0003_0.png", None),
    ]


def test_sample_defaults_to_0_and_model_to_none():
    gen = parse_line(line(), 1)
    assert gen.sample == 0
    assert gen.model is None


def test_parts_keep_order_and_all_three_types():
    """Order is the response order; text, image and audio parts (a_structure-like) all parse."""
    parts = [
        {"type": "audio", "path": "a0.wav"},
        {"type": "text", "text": "  spaced  "},
        {"type": "image", "path": "/abs/i.png"},
        {"type": "text", "text": ""},
    ]
    gen = parse_line(line(parts=parts), 1)
    assert [p.type for p in gen.parts] == ["audio", "text", "image", "text"]
    assert gen.parts[1].text == "  spaced  "  # text is verbatim
    assert gen.parts[2].path == "/abs/i.png"
    assert gen.parts[3].text == ""


def test_empty_parts_list_is_a_valid_line():
    """An empty response is the generator's fault (scored 0 later), not a malformed line."""
    assert parse_line(line(parts=[]), 1).parts == ()


def test_inline_base64_data_is_decoded_to_bytes():
    encoded = base64.b64encode(PNG_BYTES).decode("ascii")
    gen = parse_line(line(parts=[{"type": "image", "data": encoded}]), 1)
    assert gen.parts[0].data == PNG_BYTES
    assert gen.parts[0].path is None


def test_inline_instance_without_id_gets_task_slash_line_n():
    """With an inline annotation the id defaults to ``<task>/line-<manifest line number>``."""
    annotation = {"instruction": "draw a red border", "color": "red"}
    gen = parse_line(line(instance_id=..., instance=annotation), line=12)
    assert gen.instance_id == "i_format_border/line-12"
    assert dict(gen.instance) == annotation


def test_inline_instance_keeps_a_user_chosen_id():
    gen = parse_line(line(instance_id="my-own-id", instance={"color": "red"}), line=12)
    assert gen.instance_id == "my-own-id"


def test_default_instance_id_uses_the_normalised_task():
    """The default id is derived from the task the Generation carries, so both agree."""
    gen = parse_line(json.dumps({"task": " i_ocr ", "instance": {}, "parts": []}), line=3)
    assert gen.task == "i_ocr"
    assert gen.instance_id == "i_ocr/line-3"


def test_parse_generation_accepts_an_already_decoded_object():
    gen = parse_generation({"task": "a_structure", "instance_id": "a_structure/0", "parts": []}, line=4)
    assert (gen.task, gen.instance_id, gen.line) == ("a_structure", "a_structure/0", 4)


# -- malformed lines -------------------------------------------------------------------------------

MALFORMED = {
    # name: (line text, a fragment the message must contain)
    "not_json": ("{task: i_ocr}", "invalid JSON"),
    "truncated_json": ('{"task": "i_ocr", "parts": [', "invalid JSON"),
    "json_array": ('[{"task": "i_ocr"}]', "JSON object"),
    "json_string": ('"i_ocr"', "JSON object"),
    "missing_task": (line(task=...), "'task'"),
    "empty_task": (line(task=""), "'task'"),
    "blank_task": (line(task="   "), "'task'"),
    "task_not_string": (line(task=5), "'task'"),
    "parts_missing": (line(parts=...), "'parts'"),
    "parts_not_list": (line(parts={"type": "text", "text": "x"}), "'parts'"),
    "part_not_object": (line(parts=["hello"]), "parts[0]"),
    "unknown_part_type": (line(parts=[{"type": "video", "path": "v.mp4"}]), "parts[0].type"),
    "part_without_type": (line(parts=[{"text": "x"}]), "parts[0].type"),
    "text_part_without_text": (line(parts=[{"type": "text"}]), "parts[0].text"),
    "text_part_with_non_string": (line(parts=[{"type": "text", "text": 3}]), "parts[0].text"),
    "media_with_path_and_data": (
        line(parts=[{"type": "text", "text": "a"}, {"type": "image", "path": "x.png", "data": "AAAA"}]),
        "parts[1] needs exactly one",
    ),
    "media_with_neither": (line(parts=[{"type": "audio"}]), "parts[0] needs exactly one"),
    "media_path_empty": (line(parts=[{"type": "image", "path": ""}]), "parts[0].path"),
    "media_path_not_string": (line(parts=[{"type": "image", "path": 7}]), "parts[0].path"),
    "media_path_nul": (line(parts=[{"type": "image", "path": "a\u0000.png"}]), "parts[0].path"),
    "invalid_base64_chars": (line(parts=[{"type": "image", "data": "not base64!!"}]), "base64"),
    "invalid_base64_padding": (line(parts=[{"type": "image", "data": "AAA"}]), "base64"),
    "data_not_string": (line(parts=[{"type": "image", "data": 12}]), "parts[0].data"),
    "negative_sample": (line(sample=-1), "'sample'"),
    "bool_sample": (line(sample=True), "'sample'"),
    "float_sample": (line(sample=1.0), "'sample'"),
    "string_sample": (line(sample="0"), "'sample'"),
    "model_not_string": (line(model=3), "'model'"),
    "instance_not_object": (line(instance=["a"]), "'instance'"),
    "instance_id_missing": (line(instance_id=...), "'instance_id'"),
    "instance_id_empty": (line(instance_id=""), "'instance_id'"),
    "instance_id_not_string": (line(instance_id=3), "'instance_id'"),
    "deeply_nested_array": ("[" * 100_000, "nested"),
    "deeply_nested_inside_object": ('{"task": "i_ocr", "instance": ' + "[" * 100_000 + "]" * 100_000 + "}", "nested"),
}


@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_malformed_lines_raise_manifest_error_with_a_useful_message(name: str):
    """Every malformed variant is a ManifestError (never another exception) naming what is wrong."""
    text, fragment = MALFORMED[name]
    with pytest.raises(ManifestError) as info:
        parse_line(text, line=5)
    assert fragment in str(info.value)


def test_invalid_json_message_gives_the_column():
    with pytest.raises(ManifestError, match=r"column 2\b"):
        parse_line("{oops}", 1)
    with pytest.raises(ManifestError, match=r"column 14\b"):  # a line cut short, as read with its newline
        parse_line('{"task": "x",\n', 1)


def test_parse_part_rejects_unknown_type_with_its_index():
    with pytest.raises(ManifestError, match=r"parts\[4\]\.type must be one of text, image, audio"):
        parse_part({"type": "IMAGE", "path": "x.png"}, 4)


# -- reading manifest files ------------------------------------------------------------------------


def test_iter_manifest_lines_skips_blank_lines_and_keeps_1_based_numbers(tmp_path: Path):
    """Blank and whitespace-only lines are skipped; numbers are physical line numbers, from 1."""
    path = write_manifest(tmp_path / "m.jsonl", ["", line(sample=1), "   ", "\t", line(sample=2), ""])
    got = list(iter_manifest_lines(path))
    assert [number for number, _ in got] == [2, 5]
    assert [parse_line(text, number).sample for number, text in got] == [1, 2]


def test_iter_manifest_lines_handles_crlf_and_a_missing_final_newline(tmp_path: Path):
    path = tmp_path / "m.jsonl"
    path.write_bytes(line(sample=1).encode() + b"\r\n\r\n" + line(sample=3).encode())
    got = list(iter_manifest_lines(path))
    assert [n for n, _ in got] == [1, 3]
    assert [parse_line(t, n).sample for n, t in got] == [1, 3]


def test_invalid_utf8_is_replaced_not_fatal(tmp_path: Path):
    """A line with undecodable bytes still comes back (with U+FFFD) and later lines are unaffected."""
    path = tmp_path / "m.jsonl"
    bad = b'{"task": "i_ocr\xff\xfe", "instance_id": "i_ocr/0", "parts": []}'
    path.write_bytes(bad + b"\n" + line().encode() + b"\n")
    got = list(iter_manifest_lines(path))
    assert [n for n, _ in got] == [1, 2]
    assert "\ufffd" in got[0][1]
    assert parse_line(got[0][1], 1).task == "i_ocr\ufffd\ufffd"  # fails later as an unknown task
    assert parse_line(got[1][1], 2).instance_id == "i_format_border/3"


def test_over_long_line_yields_none_and_reading_goes_on(tmp_path: Path, monkeypatch):
    """A line over MAX_LINE_BYTES is reported as ``(n, None)``; neighbours are read normally."""
    monkeypatch.setattr(manifest, "MAX_LINE_BYTES", 200)
    short = json.dumps({"task": "i_ocr", "instance_id": "i_ocr/0", "parts": []})
    long = json.dumps({"task": "i_ocr", "instance_id": "i_ocr/1", "parts": [{"type": "text", "text": "x" * 500}]})
    assert len(short) < 200 < len(long)
    path = tmp_path / "m.jsonl"
    path.write_text("\n".join([short, long, short]) + "\n", encoding="utf-8")
    got = list(iter_manifest_lines(path))
    assert [n for n, _ in got] == [1, 2, 3]
    assert got[1][1] is None
    assert got[0][1] is not None and got[2][1] is not None


# -- media paths ------------------------------------------------------------------------------------


def test_relative_paths_resolve_against_the_manifest_folder(tmp_path: Path):
    assert resolve_media_path("gen/a.png", tmp_path, None) == tmp_path / "gen" / "a.png"


def test_absolute_paths_are_allowed_without_a_data_root(tmp_path: Path):
    elsewhere = tmp_path / "elsewhere" / "a.png"
    assert resolve_media_path(str(elsewhere), tmp_path / "manifests", None) == elsewhere


def test_a_normal_file_inside_the_data_root_is_accepted(tmp_path: Path):
    root = tmp_path / "root"
    (root / "gen").mkdir(parents=True)
    (root / "gen" / "a.png").write_bytes(PNG_BYTES)
    got = resolve_media_path("gen/a.png", root, root)
    assert Path(os.path.realpath(got)) == Path(os.path.realpath(root / "gen" / "a.png"))
    # an absolute path inside the root is fine too
    assert Path(os.path.realpath(resolve_media_path(str(root / "gen" / "a.png"), tmp_path, root))) == Path(
        os.path.realpath(root / "gen" / "a.png")
    )


@pytest.mark.parametrize("escape", ["../secret.png", "gen/../../secret.png"])
def test_dot_dot_escapes_are_refused_under_a_data_root(tmp_path: Path, escape: str):
    root = tmp_path / "root"
    (root / "gen").mkdir(parents=True)
    (tmp_path / "secret.png").write_bytes(PNG_BYTES)
    with pytest.raises(PathPolicyError, match="outside the data root"):
        resolve_media_path(escape, root, root)


def test_absolute_path_outside_the_data_root_is_refused(tmp_path: Path):
    root = tmp_path / "root"
    root.mkdir()
    with pytest.raises(PathPolicyError):
        resolve_media_path(str(tmp_path / "secret.png"), root, root)


def test_sibling_folder_sharing_the_root_prefix_is_refused(tmp_path: Path):
    """``/x/root-evil`` is not inside ``/x/root`` even though the string starts the same."""
    root = tmp_path / "root"
    root.mkdir()
    (tmp_path / "root-evil").mkdir()
    with pytest.raises(PathPolicyError):
        resolve_media_path("../root-evil/a.png", root, root)


def test_symlink_inside_the_root_pointing_outside_is_refused(tmp_path: Path):
    root = tmp_path / "root"
    root.mkdir()
    (tmp_path / "secret.png").write_bytes(PNG_BYTES)
    try:
        os.symlink(tmp_path / "secret.png", root / "innocent.png")
        os.symlink(tmp_path, root / "door")
    except (OSError, NotImplementedError):
        pytest.skip("symlinks not available")
    with pytest.raises(PathPolicyError):
        resolve_media_path("innocent.png", root, root)
    with pytest.raises(PathPolicyError):
        resolve_media_path("door/secret.png", root, root)


def test_symlink_staying_inside_the_root_is_accepted(tmp_path: Path):
    root = tmp_path / "root"
    (root / "gen").mkdir(parents=True)
    (root / "gen" / "a.png").write_bytes(PNG_BYTES)
    try:
        os.symlink(root / "gen" / "a.png", root / "alias.png")
    except (OSError, NotImplementedError):
        pytest.skip("symlinks not available")
    got = resolve_media_path("alias.png", root, root)
    assert got.read_bytes() == PNG_BYTES


def test_a_byte_order_mark_does_not_break_the_first_line(tmp_path: Path):
    path = tmp_path / "bom.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps({"task": "i_ocr", "instance_id": "i_ocr/0", "parts": []}).encode() + b"\n")
    [(number, text)] = list(iter_manifest_lines(path))
    assert number == 1 and parse_line(text, number).task == "i_ocr"


# -- values JSON decodes but the pipeline cannot carry ----------------------------------------------

HUGE = "8" * 5000  # beyond Python's int-string conversion limit (4300 digits)


def raw_line(**fields: str) -> str:
    """A line as raw JSON text: ``fields`` are JSON fragments spliced in verbatim."""
    values = {"task": '"i_structure"', "instance": '{"order": ["t"]}', "parts": '[{"type": "text", "text": "hi"}]'}
    values.update(fields)
    return "{" + ", ".join(f'"{key}": {value}' for key, value in values.items()) + "}"


@pytest.mark.parametrize(
    "fields, where",
    [
        ({"task": r'"i_structure\udcff"'}, "task"),
        ({"instance_id": r'"a\ud800b"'}, "instance_id"),
        ({"model": r'"\udfff"'}, "model"),
        ({"parts": r'[{"type": "text", "text": "x"}, {"type": "text", "text": "\udcff"}]'}, "parts[1].text"),
        ({"parts": r'[{"type": "image", "path": "g\udcff.png"}]'}, "parts[0].path"),
        ({"parts": r'[{"type": "text", "text": "x", "\udcff": 1}]'}, "parts[0]"),
        ({"sample": HUGE}, "sample"),
        ({"sample": "NaN"}, "sample"),
        ({"parts": '[{"type": "text", "text": "x", "n": -%s}]' % HUGE}, "parts[0].n"),
    ],
)
def test_unusable_values_in_read_fields_are_malformed_lines(fields: dict, where: str):
    with pytest.raises(ManifestError) as caught:
        parse_line(raw_line(**fields), 4)
    assert caught.value.code == "malformed_line" and caught.value.generation is None
    message = str(caught.value)
    assert f"at {where}:" in message
    message.encode("utf-8")  # the message never carries the surrogate itself


@pytest.mark.parametrize(
    "instance, what",
    [
        ('{"order": ["t"], "x": NaN}', "non-finite number (nan)"),
        ('{"order": ["t"], "x": [1, Infinity]}', "non-finite number (inf)"),
        ('{"order": ["t"], "x": {"y": -Infinity}}', "non-finite number (-inf)"),
        ('{"order": ["t"], "x": 1e999}', "non-finite number (inf)"),
        ('{"order": ["t"], "x": %s}' % HUGE, "integer of 5000 digits"),
        (r'{"order": ["t"], "x": "\udcff"}', r"unpaired surrogate (\udcff)"),
        (r'{"order": ["t"], "\ud800": 1}', r"unpaired surrogate (\ud800)"),
    ],
)
def test_unusable_values_in_the_inline_instance_are_invalid_instances(instance: str, what: str):
    """The rest of the line is fine, so the error row can name task, instance, sample and model."""
    with pytest.raises(ManifestError) as caught:
        parse_line(raw_line(instance=instance, sample="3", model='"m"'), 9)
    error = caught.value
    assert error.code == "invalid_instance" and what in str(error)
    generation = error.generation
    assert generation is not None and generation.instance is None
    assert (generation.task, generation.instance_id, generation.sample, generation.model, generation.line) == (
        "i_structure", "i_structure/line-9", 3, "m", 9,
    )  # fmt: skip


def test_unusable_values_in_fields_the_pipeline_ignores_do_not_matter():
    generation = parse_line(raw_line(meta='{"latency": NaN, "note": "\\udcff", "n": %s}' % HUGE), 1)
    assert generation.task == "i_structure"


def test_values_that_are_usable_pass():
    """Paired surrogate escapes are one character; long integers under the limit are integers."""
    generation = parse_line(raw_line(instance='{"order": ["t"], "n": %s, "e": "\\ud83d\\ude00"}' % ("7" * 4000)), 1)
    assert generation.instance["e"] == "\U0001f600" and generation.instance["n"] == int("7" * 4000)


def test_first_problem_names_nested_paths():
    assert first_problem({"a": [1, {"b": float("nan")}]}) == "a[1].b: a non-finite number (nan)"
    assert first_problem([0, "ok", "\udc80"]) == "[2]: a string with an unpaired surrogate (\\udc80)"
    assert first_problem({"a": [1, 2.5, "x", None, True]}) is None


# -- streams and awkward paths ----------------------------------------------------------------------


def test_a_fifo_is_a_stream_whose_paths_resolve_from_its_folder(tmp_path: Path):
    fifo = tmp_path / "sub" / "pipe.jsonl"
    fifo.parent.mkdir()
    os.mkfifo(fifo)
    regular = write_manifest(tmp_path / "m.jsonl", [])
    assert is_stream(fifo) and not is_stream(regular) and not is_stream(tmp_path / "absent") and not is_stream(tmp_path)
    assert manifest_base_dir(fifo) == fifo.parent and manifest_base_dir(regular) == tmp_path


def test_a_device_stream_resolves_paths_from_the_working_directory(tmp_path: Path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert is_stream(Path("/dev/null")) and manifest_base_dir(Path("/dev/null")) == tmp_path


def test_is_regular_file_answers_false_for_names_the_file_system_refuses(tmp_path: Path):
    assert not is_regular_file(tmp_path / ("a" * 5000))
    assert not is_regular_file(tmp_path) and is_regular_file(write_manifest(tmp_path / "m.jsonl", []))


# -- instance ids and rows under --instructions ------------------------------------------------------


@pytest.fixture()
def small_instructions(tmp_path: Path) -> InstructionSet:
    folder = tmp_path / "instructions"
    folder.mkdir()
    rows = ['{"color": "green"}', '{"color": "red", "w": NaN}', '{"color": "blue", "n": %s}' % HUGE, '{"c": "\\udcff"}']
    (folder / "i_format_border.jsonl").write_text("\n".join(rows) + "\n", encoding="utf-8")
    return InstructionSet(folder)


@pytest.mark.parametrize("index", ["4", "10", "9" * 25, "1" * 5000])
def test_an_index_beyond_the_file_is_unknown_whatever_its_length(small_instructions: InstructionSet, index: str):
    with pytest.raises(ScoringError) as caught:
        small_instructions.instance(f"i_format_border/{index}")
    assert caught.value.code == ErrorCode.UNKNOWN_INSTANCE and "has only 4 instructions" in caught.value.message
    assert len(caught.value.message) < 200


@pytest.mark.parametrize("index", [1, 2, 3])
def test_an_unusable_instruction_row_is_an_invalid_instance_of_that_row_only(small_instructions: InstructionSet, index: int):
    with pytest.raises(ScoringError) as caught:
        small_instructions.instance(f"i_format_border/{index}")
    assert caught.value.code == ErrorCode.INVALID_INSTANCE
    assert small_instructions.instance("i_format_border/0").data == {"color": "green"}


@pytest.mark.parametrize("fields", [{"sample": '"x"'}, {"sample": "-1"}, {"model": "5"}, {"parts": '{"a": 1}'}])
def test_a_line_refused_after_its_task_and_id_names_them_in_its_row(fields: dict, tmp_path: Path):
    """Its row is grouped under its task in the summary, not under "?"."""
    from mmverify.pipelines.plan import Planner

    with pytest.raises(ManifestError) as caught:
        parse_line(raw_line(instance_id='"i_structure/7"', **fields), 4)
    assert caught.value.generation is None and caught.value.names == ("i_structure", "i_structure/7")
    [row] = Planner(manifest_dir=tmp_path).plan_all(4, raw_line(**fields))
    assert (row["task"], row["instance_id"], row["error"]["code"]) == ("i_structure", "i_structure/line-4", "malformed_line")
    [unnamed] = Planner(manifest_dir=tmp_path).plan_all(5, raw_line(task="5", **fields))
    assert (unnamed["task"], unnamed["instance_id"]) == ("?", "?")


def test_a_path_with_a_nul_character_is_refused_saying_so():
    line = raw_line(parts=json.dumps([{"type": "image", "path": "gen/a\x00.png"}]))
    with pytest.raises(ManifestError, match=r"parts\[0\]\.path holds a NUL character"):
        parse_line(line, 1)
