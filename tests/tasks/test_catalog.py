"""The task catalog against the MMMG paper (DESIGN §5) and the published instruction files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mmverify.core.registry import UnknownIdError
from mmverify.tasks.base import Task
from mmverify.tasks.catalog import CATALOG, TASK_REGISTRY, TASKS, TaskInfo, task_info, tasks_for_source

# Task lists per modality group, transcribed from DESIGN §5 (paper: 15 / 22 / 9 / 9 = 55 tasks).
# The paper names the instrument, tempo and genre tasks without file stems; the catalog calls them
# a_music_instrument, a_music_tempo and a_music_genre.
PAPER_GROUPS = {
    "image": {
        "i_object_include", "i_object_exclude", "i_object_count", "i_object_attribute", "i_object_cot",
        "i_object_commonsense", "i_relation_two", "i_relation_all", "i_spacial_relative", "i_spacial_absolute",
        "i_format_background", "i_format_border", "i_ocr", "i_ocr_two", "i_ocr_multi_lingual",
    },
    "image-text": {
        "i_edit_object_add", "i_edit_object_remove", "i_edit_object_modify", "i_edit_object_attribute",
        "i_edit_text_add", "i_edit_text_alter", "i_edit_add", "i_edit_color",
        "i_consistency_semantic", "i_consistency_compose", "i_consistency_decompose",
        "i_consistency_3d_object", "i_consistency_3d_scene",
        "it_coherence_count", "it_coherence_color", "it_coherence_size", "it_coherence_spacial_relative",
        "it_coherence_spacial_absolute", "it_coherence_ocr", "it_coherence_math", "it_coherence_code",
        "i_structure",
    },
    "audio": {
        "a_sound_begin_end", "a_sound_include", "a_sound_cot", "a_sound_silence", "a_music_instrument",
        "a_music_exclude", "a_music_tempo", "a_music_intensity", "a_music_genre",
    },
    "audio-text": {
        "a_speech_attribute", "a_speech_chinese", "a_speech_imitate", "a_speech_constraint", "a_speech_modify",
        "a_consistency_conversation", "a_speech_translate", "a_speech_retrieve", "a_structure",
    },
}

IMPLEMENTED = {
    "i_format_background", "i_format_border", "i_structure", "a_structure",
    "i_consistency_3d_object", "i_consistency_3d_scene", "a_music_intensity", "a_music_tempo",
    "a_sound_begin_end", "a_sound_include", "a_sound_cot", "a_sound_silence",
    "a_music_instrument", "a_music_exclude", "a_music_genre",
    *(SPEECH_NEEDS := {
        "a_speech_attribute": ("transcriber", "gender"), "a_speech_chinese": ("transcriber_zh", "gender"),
        "a_speech_imitate": ("transcriber", "speaker"), "a_consistency_conversation": ("transcriber", "speaker"),
        "a_speech_constraint": ("transcriber",), "a_speech_modify": ("transcriber",), "a_speech_translate": ("transcriber",),
        "a_speech_retrieve": ("transcriber",),
    }),
    *(IMAGE_JUDGED := {
        "i_object_include", "i_object_exclude", "i_object_count", "i_object_attribute", "i_object_cot",
        "i_object_commonsense", "i_relation_two", "i_relation_all", "i_spacial_relative", "i_spacial_absolute",
        "i_ocr", "i_ocr_two", "i_ocr_multi_lingual",
    }),
    *(EDITING_NEEDS := {  # editing and object-consistency tasks: a VLM judge, or DreamSim for the reference edits
        **dict.fromkeys((
            "i_edit_object_add", "i_edit_object_remove", "i_edit_object_modify", "i_edit_object_attribute",
            "i_edit_text_add", "i_edit_text_alter", "i_consistency_semantic", "i_consistency_compose",
            "i_consistency_decompose",
        ), ("judge",)),
        "i_edit_add": ("image_similarity",), "i_edit_color": ("image_similarity",),
    }),
    *(COHERENCE_NEEDS := {  # self-coherence and reasoning tasks: a VLM judge, plus an LLM (math) or DreamSim (code)
        **dict.fromkeys((
            "it_coherence_count", "it_coherence_color", "it_coherence_size", "it_coherence_spacial_relative",
            "it_coherence_spacial_absolute", "it_coherence_ocr",
        ), ("judge",)),
        "it_coherence_math": ("judge:llm", "judge"), "it_coherence_code": ("image_similarity", "judge"),
    }),
}


def test_paper_group_sizes():
    """Guard the transcription above against the paper's counts."""
    assert {group: len(ids) for group, ids in PAPER_GROUPS.items()} == {
        "image": 15, "image-text": 22, "audio": 9, "audio-text": 9,
    }


def test_catalog_has_55_unique_tasks_in_the_papers_groups():
    ids = [info.id for info in TASKS]
    assert len(ids) == 55
    assert len(set(ids)) == 55
    assert set(CATALOG) == set(ids)
    by_group: dict[str, set[str]] = {}
    for info in TASKS:
        by_group.setdefault(info.group, set()).add(info.id)
    assert by_group == PAPER_GROUPS


def test_catalog_entries_are_complete():
    """Every entry has a name and method for ``mmverify tasks``, and CATALOG maps id → same object."""
    for info in TASKS:
        assert isinstance(info, TaskInfo)
        assert info.name.strip() and info.method.strip(), info.id
        assert CATALOG[info.id] is info
        assert info.aggregate in {"mean", "mean_of_sources"}


def test_every_published_instruction_file_feeds_a_task(mmmg_instructions: Path):
    """All files but ``i_edit_text.jsonl`` (an older combined file, superseded by _add/_alter) are used."""
    files = {p.stem for p in mmmg_instructions.glob("*.jsonl")}
    used = {source for info in TASKS for source in info.source_files}
    assert files - used == {"i_edit_text"}


def test_every_task_source_exists_except_unpublished_genre(mmmg_instructions: Path):
    """Sources point at real files; only a_music_genre's data is not published."""
    missing = {
        (info.id, source)
        for info in TASKS
        for source in info.source_files
        if not (mmmg_instructions / f"{source}.jsonl").is_file()
    }
    assert missing == {("a_music_genre", "a_music_genre")}


def test_source_files_default_to_the_id_and_multi_source_tasks():
    assert task_info("i_ocr").source_files == ("i_ocr",)
    assert set(task_info("i_ocr_multi_lingual").source_files) == {"i_ocr_chinese", "i_ocr_german"}
    assert task_info("a_music_instrument").source_files == ("a_music_attribute",)
    assert task_info("a_music_tempo").source_files == ("a_music_attribute",)


def test_music_attribute_rows_split_by_field(mmmg_instructions: Path):
    """Rows with ``instrument`` feed a_music_instrument, rows with ``tempo`` feed a_music_tempo, both → both."""
    text = (mmmg_instructions / "a_music_attribute.jsonl").read_text(encoding="utf-8")
    rows = [json.loads(x) for x in text.splitlines() if x.strip()]
    counts = {"a_music_instrument": 0, "a_music_tempo": 0}
    for row in rows:
        got = {info.id for info in tasks_for_source("a_music_attribute", row)}
        expected = {"a_music_instrument"} if "instrument" in row else set()
        expected |= {"a_music_tempo"} if "tempo" in row else set()
        assert got == expected, row
        for task in got:
            counts[task] += 1
    assert counts == {"a_music_instrument": 15, "a_music_tempo": 15}  # counted by eye in the published file


def test_tasks_for_source_on_synthetic_rows():
    assert [i.id for i in tasks_for_source("a_music_attribute", {"instruction": "x", "tempo": 90})] == ["a_music_tempo"]
    assert tasks_for_source("a_music_attribute", {"instruction": "x"}) == []
    assert [i.id for i in tasks_for_source("i_ocr_german", {"instruction": "x"})] == ["i_ocr_multi_lingual"]
    assert [i.id for i in tasks_for_source("a_music_genre", {"genre": "jazz"})] == ["a_music_genre"]
    assert tasks_for_source("a_music_genre", {"instruction": "x"}) == []
    assert tasks_for_source("i_edit_text", {"instruction": "x"}) == []
    assert tasks_for_source("no_such_file", {"instruction": "x"}) == []


def test_exactly_the_expected_tasks_are_implemented():
    assert {info.id for info in TASKS if info.implemented} == IMPLEMENTED
    assert {key.split(":", 1)[1] for key in TASK_REGISTRY} == IMPLEMENTED


@pytest.mark.parametrize("task_id", sorted(IMPLEMENTED))
def test_implementations_import_to_a_task_class_with_that_id(task_id: str):
    """The lazy ``impl`` target resolves to a Task subclass whose ``id`` is the catalog id."""
    cls = TASK_REGISTRY.get(task_id)
    assert isinstance(cls, type) and issubclass(cls, Task)
    assert cls.id == task_id
    assert TASK_REGISTRY.get(f"task:{task_id}") is cls
    # the tempo tracker and CLAP are the only models implemented tasks need; the others are programs
    clap = {"a_sound_begin_end", "a_sound_include", "a_sound_cot", "a_sound_silence", "a_music_instrument", "a_music_exclude", "a_music_genre"}
    needs = ("beat_tracker",) if task_id == "a_music_tempo" else ("audio_text",) if task_id in clap else ()
    needs = ("judge",) if task_id in IMAGE_JUDGED else needs  # the judged image tasks need only a VLM judge
    needs = SPEECH_NEEDS.get(task_id, needs)  # speech tasks: Whisper plus a gender or speaker model
    needs = EDITING_NEEDS.get(task_id, needs)
    needs = COHERENCE_NEEDS.get(task_id, needs)
    assert task_info(task_id).needs == needs


def test_unknown_task_suggests_the_close_match():
    with pytest.raises(UnknownIdError) as info:
        task_info("i_format_bordr")
    assert "i_format_border" in info.value.suggestions
    assert "Did you mean" in str(info.value) and "'i_format_border'" in str(info.value)
    with pytest.raises(KeyError):  # UnknownIdError is a KeyError for callers that expect one
        task_info("zzz_nothing_like_it")


def test_task_info_accepts_namespaced_and_bare_ids():
    assert task_info("task:i_ocr") is task_info("i_ocr") is CATALOG["i_ocr"]
    assert task_info("task:i_ocr").group == "image"
    with pytest.raises(UnknownIdError):
        task_info("image:i_ocr")
