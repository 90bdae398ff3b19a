"""Instruction sets: the real MMMG folder parses, ids resolve, bad ids and bad files fail clearly."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from mmverify.core.errors import ErrorCode, ScoringError
from mmverify.data.instructions import InstructionSet, InstructionSetError, read_jsonl_objects

# Row counts copied from the table in shared/mmmg/SOURCE.md (an independent record of the data).
SOURCE_MD_COUNTS = {
    "a_consistency_conversation": 20,
    "a_music_attribute": 20,
    "a_music_exclude": 20,
    "a_music_intensity": 10,
    "a_sound_begin_end": 20,
    "a_sound_cot": 18,
    "a_sound_include": 20,
    "a_sound_silence": 20,
    "a_speech_attribute": 20,
    "a_speech_chinese": 20,
    "a_speech_constraint": 20,
    "a_speech_imitate": 20,
    "a_speech_modify": 20,
    "a_speech_retrieve": 40,
    "a_speech_translate": 40,
    "a_structure": 20,
    "i_consistency_3d_object": 20,
    "i_consistency_3d_scene": 20,
    "i_consistency_compose": 20,
    "i_consistency_decompose": 20,
    "i_consistency_semantic": 20,
    "i_edit_add": 20,
    "i_edit_color": 20,
    "i_edit_object_add": 20,
    "i_edit_object_attribute": 20,
    "i_edit_object_modify": 20,
    "i_edit_object_remove": 20,
    "i_edit_text": 25,
    "i_edit_text_add": 20,
    "i_edit_text_alter": 20,
    "i_format_background": 15,
    "i_format_border": 15,
    "i_object_attribute": 40,
    "i_object_commonsense": 40,
    "i_object_cot": 40,
    "i_object_count": 40,
    "i_object_exclude": 40,
    "i_object_include": 40,
    "i_ocr": 20,
    "i_ocr_chinese": 10,
    "i_ocr_german": 10,
    "i_ocr_two": 20,
    "i_relation_all": 20,
    "i_relation_two": 20,
    "i_spacial_absolute": 20,
    "i_spacial_relative": 20,
    "i_structure": 20,
    "it_coherence_code": 20,
    "it_coherence_color": 20,
    "it_coherence_count": 20,
    "it_coherence_math": 20,
    "it_coherence_ocr": 20,
    "it_coherence_size": 20,
    "it_coherence_spacial_absolute": 20,
    "it_coherence_spacial_relative": 20,
}


@pytest.fixture(scope="module")
def real_set(mmmg_instructions: Path) -> InstructionSet:
    return InstructionSet(mmmg_instructions)


def test_source_md_table_is_complete():
    """Guard the transcription of the table: 55 files; by hand, 8x40 + 40x20 + 1x25 + 1x18 + 2x15 + 3x10 = 1223
    (SOURCE.md: 1198 rows in the 54 files other than the 25-row i_edit_text)."""
    assert len(SOURCE_MD_COUNTS) == 55
    assert sorted(SOURCE_MD_COUNTS.values()).count(20) == 40
    assert sorted(SOURCE_MD_COUNTS.values()).count(40) == 8
    assert sum(SOURCE_MD_COUNTS.values()) == 1223
    assert sum(n for task, n in SOURCE_MD_COUNTS.items() if task != "i_edit_text") == 1198


def test_every_real_file_parses_with_the_published_row_count(real_set: InstructionSet):
    """All task files of the real folder load, and row counts equal SOURCE.md's table.

    Several files lack a trailing newline, so a naive ``wc -l``-style count would be off by one.
    """
    assert real_set.sources() == sorted(SOURCE_MD_COUNTS)
    counts = {source: len(real_set.rows(source)) for source in real_set.sources()}
    assert counts == SOURCE_MD_COUNTS
    for source in real_set.sources():
        assert all(isinstance(row, dict) and isinstance(row.get("instruction"), str) for row in real_set.rows(source))


def test_instance_lookup_returns_the_line_at_that_0_based_index(real_set: InstructionSet, mmmg_instructions: Path):
    """``i_format_border/3`` is the 4th line of the file, with source and media folder set."""
    fourth_line = (mmmg_instructions / "i_format_border.jsonl").read_text(encoding="utf-8").splitlines()[3]
    expected = json.loads(fourth_line)
    instance = real_set.instance("i_format_border/3")
    assert instance.id == "i_format_border/3"
    assert dict(instance.data) == expected
    assert instance.data["color"] == "purple"  # as read by eye from the file
    assert instance.source == "i_format_border"
    assert instance.media_dir == mmmg_instructions


def test_last_valid_index_resolves_and_the_next_one_does_not(real_set: InstructionSet):
    """Index bounds: i_ocr has 20 rows, so /19 exists and /20 is unknown."""
    assert real_set.instance("i_ocr/19").source == "i_ocr"
    with pytest.raises(ScoringError) as info:
        real_set.instance("i_ocr/20")
    assert info.value.code == ErrorCode.UNKNOWN_INSTANCE


@pytest.mark.parametrize("bad_id", ["x", "i_ocr/abc", "i_ocr/999", "nope/0", "i_ocr/", "/3", "i_ocr/-1", ""])
def test_bad_instance_ids_raise_unknown_instance(real_set: InstructionSet, bad_id: str):
    """Malformed, out-of-range and unknown-file ids are the user's error: ScoringError(unknown_instance)."""
    with pytest.raises(ScoringError) as info:
        real_set.instance(bad_id)
    assert info.value.code == ErrorCode.UNKNOWN_INSTANCE
    assert info.value.message  # says something


@pytest.mark.parametrize("bad_id", ["i_ocr/²", "i_ocr/٣"])
def test_non_ascii_digit_indices_are_unknown(real_set: InstructionSet, bad_id: str):
    """Indices are ASCII decimal numbers; other Unicode 'digits' must not crash or alias real rows."""
    with pytest.raises(ScoringError) as info:
        real_set.instance(bad_id)
    assert info.value.code == ErrorCode.UNKNOWN_INSTANCE


def test_instance_ids_cannot_reach_files_outside_the_folder(tmp_path: Path):
    """An id's task part names a file *in* the folder; ``..`` or ``/`` must not escape it."""
    (tmp_path / "set").mkdir()
    (tmp_path / "outside.jsonl").write_text('{"instruction": "secret"}\n', encoding="utf-8")
    with pytest.raises(ScoringError) as info:
        InstructionSet(tmp_path / "set").instance("../outside/0")
    assert info.value.code == ErrorCode.UNKNOWN_INSTANCE


def test_corrupt_json_line_names_file_and_line(tmp_path: Path):
    """A broken line fails with ``<file>:<line>`` so the user can find it."""
    (tmp_path / "t.jsonl").write_text('{"instruction": "a"}\n{"instruction": \n', encoding="utf-8")
    with pytest.raises(InstructionSetError, match=r"t\.jsonl:2\b"):
        read_jsonl_objects(tmp_path / "t.jsonl")
    with pytest.raises(InstructionSetError, match=r"t\.jsonl:2\b"):
        InstructionSet(tmp_path).rows("t")


def test_corrupt_file_is_invalid_instance_through_lookup(tmp_path: Path):
    """Through ``instance()`` a broken file is an invalid_instance error (the data's fault, not the id's)."""
    (tmp_path / "t.jsonl").write_text('{"instruction": "a"}\nnot json\n', encoding="utf-8")
    with pytest.raises(ScoringError) as info:
        InstructionSet(tmp_path).instance("t/0")
    assert info.value.code == ErrorCode.INVALID_INSTANCE
    assert "t.jsonl:2" in info.value.message


def test_non_object_line_is_refused_with_its_line_number(tmp_path: Path):
    """Every line must be an object; a JSON array on line 3 is reported as such."""
    (tmp_path / "t.jsonl").write_text('{"a": 1}\n{"a": 2}\n[1, 2]\n', encoding="utf-8")
    with pytest.raises(InstructionSetError, match=r"t\.jsonl:3.*object"):
        read_jsonl_objects(tmp_path / "t.jsonl")


def test_a_blank_line_between_rows_is_refused_and_trailing_ones_are_ignored(tmp_path: Path):
    """Rows are named by their line: skipping a blank line inside the file would score every later
    instance id against its neighbour's annotation."""
    (tmp_path / "t.jsonl").write_text('{"a": 1}\n\n   \n{"a": 2}\n', encoding="utf-8")
    with pytest.raises(InstructionSetError, match=r"t\.jsonl:2: a blank line before the last row"):
        read_jsonl_objects(tmp_path / "t.jsonl")
    with pytest.raises(ScoringError) as info:
        InstructionSet(tmp_path).instance("t/1")
    assert info.value.code == ErrorCode.INVALID_INSTANCE and "t.jsonl:2" in info.value.message
    (tmp_path / "u.jsonl").write_text('{"a": 1}\n{"a": 2}\n\n  \n', encoding="utf-8")
    assert read_jsonl_objects(tmp_path / "u.jsonl") == [{"a": 1}, {"a": 2}]
    (tmp_path / "v.jsonl").write_text('{"a": 1}\n{oops\n', encoding="utf-8")
    with pytest.raises(InstructionSetError, match=r"v\.jsonl:2\b"):
        read_jsonl_objects(tmp_path / "v.jsonl")


def test_invalid_utf8_is_an_instruction_set_error(tmp_path: Path):
    """Undecodable bytes are a broken task file like bad JSON: InstructionSetError naming file:line."""
    (tmp_path / "t.jsonl").write_bytes(b'{"a": 1}\n{"a": "\xff"}\n')
    with pytest.raises(InstructionSetError, match=r"t\.jsonl:2\b"):
        read_jsonl_objects(tmp_path / "t.jsonl")


def test_missing_folder_is_refused(tmp_path: Path):
    with pytest.raises(FileNotFoundError):
        InstructionSet(tmp_path / "does-not-exist")


def test_media_path_follows_the_official_layout(tmp_path: Path, mmmg_instructions: Path):
    """``image/<source>_<k>.png`` and ``audio/<source>_<k>.wav`` beside the task files."""
    shutil.copy(mmmg_instructions / "i_consistency_3d_object.jsonl", tmp_path)
    shutil.copy(mmmg_instructions / "a_speech_imitate.jsonl", tmp_path)
    instructions = InstructionSet(tmp_path)
    views = instructions.instance("i_consistency_3d_object/2")
    k = views.data["ref_image_list"][0]
    assert views.media_path("image", k) == tmp_path / "image" / f"i_consistency_3d_object_{k}.png"
    assert views.media_path("image", 7) == tmp_path / "image" / "i_consistency_3d_object_7.png"
    speaker = instructions.instance("a_speech_imitate/0")
    assert speaker.media_path("audio", 12) == tmp_path / "audio" / "a_speech_imitate_12.wav"


def test_ids_with_leading_zeros_are_not_aliases(real_set: InstructionSet):
    """'i_ocr/03' would split instruction 3's samples across two ids in the summary."""
    with pytest.raises(ScoringError) as info:
        real_set.instance("i_ocr/03")
    assert info.value.code == "unknown_instance"
    assert real_set.instance("i_ocr/0").data == real_set.rows("i_ocr")[0]
