"""Importing the official MMMG output layout (DESIGN §2): ``<dir>/<source>.jsonl`` rows with a
``response`` and ``image_list`` / ``audio_list`` of global numbers naming ``image/<source>_<n>.png`` /
``audio/<source>_<n>.wav``; samples of one instruction on consecutive rows.  Each line carries what
the official evaluator of its task reads (lists, coherence text, or response order); a broken row
costs one typed row when scored, never the import."""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from mmverify.data.instructions import InstructionSet, InstructionSetError
from mmverify.data.manifest import parse_generation
from mmverify.data.mmmg_import import (
    MMMGImporter,
    MMMGLayoutError,
    coherence_parts,
    list_task_parts,
    order_parts,
    task_parts,
)
from mmverify.pipelines.score import ScoreConfig, run_score
from mmverify.verifiers.structure import check_order, modality_sequence
from tests.conftest import save_png, scene
from tests.reference.mmmg_import_layout import coherence_reading, loaded_files, order_letters, order_score

IMG = "<image_start><image_{}><image_end>"
AUD = "<audio_start><audio_{}><audio_end>"
SOURCES = (
    "i_structure", "a_structure", "a_music_attribute", "i_format_border", "it_coherence_count",
    "it_coherence_math", "a_music_intensity", "a_sound_cot",
)  # fmt: skip


def write_rows(path: Path, rows: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def real_rows(mmmg_instructions: Path, source: str) -> list[dict]:
    """Instruction rows read directly with json (independently of the code under test)."""
    text = (mmmg_instructions / f"{source}.jsonl").read_text(encoding="utf-8")
    return [json.loads(x) for x in text.splitlines() if x.strip()]


@pytest.fixture()
def instructions(tmp_path: Path, mmmg_instructions: Path) -> InstructionSet:
    """A private instruction folder holding copies of some real task files."""
    folder = tmp_path / "instructions"
    folder.mkdir()
    for source in SOURCES:
        shutil.copy(mmmg_instructions / f"{source}.jsonl", folder)
    return InstructionSet(folder)


def structure_rows(n_instructions: int = 20, samples: int = 2) -> list[dict]:
    """Rows for i_structure: text, image, text, image, with per-row global image numbers."""
    return [
        {
            "response": f"  Row {r} intro.\n" + IMG.format(0) + "\n middle " + IMG.format(1),
            "image_list": [1000 + 2 * r, 1001 + 2 * r],
        }
        for r in range(n_instructions * samples)
    ]


@pytest.fixture()
def output_dir(tmp_path: Path, mmmg_instructions: Path) -> Path:
    """A fake official output folder for i_structure (2 samples), a_music_attribute and i_format_border."""
    out = tmp_path / "model-x"
    write_rows(out / "i_structure.jsonl", structure_rows())
    n_music = len(real_rows(mmmg_instructions, "a_music_attribute"))
    write_rows(
        out / "a_music_attribute.jsonl",
        [{"response": AUD.format(0), "audio_list": [500 + r], "image_list": []} for r in range(n_music)],
    )
    write_rows(
        out / "i_format_border.jsonl",
        [{"response": IMG.format(0) + " done", "image_list": [7 * r], "audio_list": []} for r in range(15)],
    )
    write_rows(out / "a_music_genre.jsonl", [{"response": AUD.format(0), "audio_list": [0]}])  # no instruction file
    write_rows(out / "notes.jsonl", [{"anything": 1}])
    (out / "README.txt").write_text("not a task file")
    return out


def by_source(lines: list[dict], source: str) -> list[dict]:
    return [x for x in lines if x["instance_id"].startswith(source + "/")]


def media(parts: list[dict], kind: str | None = None) -> list[str]:
    return [p["path"] for p in parts if p["type"] != "text" and (kind is None or p["type"] == kind)]


def texts(parts: list[dict]) -> list[str]:
    return [p["text"] for p in parts if p["type"] == "text"]


# -- list tasks: the row's lists, whatever the response says ------------------------------------------


def test_well_formed_response_is_interleaved_verbatim(tmp_path: Path):
    """Placeholders naming the entries in order: text kept byte for byte between the media."""
    response = "  Lead\n" + IMG.format(0) + "\n\tmid  " + IMG.format(1) + " end \n"
    built = list_task_parts(response, {"image_list": [40, 41]}, "i_format_border", tmp_path)
    assert built.parts == [
        {"type": "text", "text": "  Lead\n"},
        {"type": "image", "path": str(tmp_path / "image" / "i_format_border_40.png")},
        {"type": "text", "text": "\n\tmid  "},
        {"type": "image", "path": str(tmp_path / "image" / "i_format_border_41.png")},
        {"type": "text", "text": " end \n"},
    ]
    assert built.notes == []


@pytest.mark.parametrize("response", ["", "Here is your sound.", "   "])
def test_empty_or_text_only_response_keeps_the_listed_audio(tmp_path: Path, response: str):
    """The official audio evaluators read audio_list directly: a response without placeholders
    (models that write no placeholder, failed text) still has its clip."""
    built = list_task_parts(response, {"audio_list": [12], "image_list": []}, "a_sound_cot", tmp_path)
    assert media(built.parts) == [str(tmp_path / "audio" / "a_sound_cot_12.wav")]
    assert texts(built.parts) == ([response] if response else [])


@pytest.mark.parametrize(
    "placeholder",
    ["<audio_begin><audio_0><audio_end>", "<audio_start><audio_0></audio_end>", "<audio_begin><audio_0></audio_end>"],
)
def test_other_spellings_are_interleaved_like_the_official_one(tmp_path: Path, placeholder: str):
    built = list_task_parts("Listen: " + placeholder + " ok", {"audio_list": [3]}, "a_sound_cot", tmp_path)
    assert built.parts == [
        {"type": "text", "text": "Listen: "},
        {"type": "audio", "path": str(tmp_path / "audio" / "a_sound_cot_3.wav")},
        {"type": "text", "text": " ok"},
    ]


@pytest.mark.parametrize(
    "response",
    [
        IMG.format(1) + IMG.format(0),  # reversed
        IMG.format(0) + IMG.format(0),  # one entry twice
        IMG.format(0),  # fewer placeholders than entries
        IMG.format(0) + IMG.format(1) + IMG.format(2),  # one beyond the list
        "<image_start><audio_0><image_end>" + IMG.format(1),  # mixed kinds
    ],
)
def test_inconsistent_placeholders_fall_back_to_list_order(tmp_path: Path, response: str):
    """Media follow image_list exactly (what the official evaluator opens); the text comes first."""
    built = list_task_parts("A" + response + "B", {"image_list": [8, 9], "audio_list": []}, "i_format_border", tmp_path)
    folder = tmp_path / "image"
    assert media(built.parts) == [str(folder / "i_format_border_8.png"), str(folder / "i_format_border_9.png")]
    assert built.parts[0]["type"] == "text" and built.notes


def test_image_and_audio_lists_are_both_read_in_list_order(tmp_path: Path):
    built = list_task_parts("", {"image_list": [5, 2], "audio_list": [9, 1]}, "t", tmp_path)
    assert media(built.parts, "image") == [str(tmp_path / "image" / "t_5.png"), str(tmp_path / "image" / "t_2.png")]
    assert media(built.parts, "audio") == [str(tmp_path / "audio" / "t_9.wav"), str(tmp_path / "audio" / "t_1.wav")]


@pytest.mark.parametrize("entry", [None, "a/b", 2.5, True, [3], "", "../x"])
def test_an_entry_naming_no_file_points_at_a_missing_file(tmp_path: Path, entry):
    """A per-row problem: the line is still produced and its part names a file that does not exist."""
    built = list_task_parts(IMG.format(0), {"image_list": [entry]}, "i_format_border", tmp_path, r=4)
    (path,) = media(built.parts)
    assert Path(path).parent == tmp_path / "image" and "unusable-entry-row4-0" in path
    assert not Path(path).exists() and built.notes


@pytest.mark.parametrize("entry", [7, "7", -1])
def test_entries_name_files_as_the_official_pipeline_formats_them(tmp_path: Path, entry):
    built = list_task_parts("", {"image_list": [entry]}, "s", tmp_path)
    assert media(built.parts) == [str(tmp_path / "image" / f"s_{entry}.png")]


def test_missing_or_non_list_lists_read_as_empty(tmp_path: Path):
    assert list_task_parts("x", {}, "s", tmp_path).parts == [{"type": "text", "text": "x"}]
    built = list_task_parts("x", {"image_list": "3"}, "s", tmp_path)
    assert media(built.parts) == [] and built.notes


# -- coherence tasks --------------------------------------------------------------------------------


def test_coherence_text_keeps_its_side_of_the_image(tmp_path: Path):
    """The newest evaluator reads only the text after the image: the sides must survive the import."""
    built = coherence_parts("I drew:" + IMG.format(0) + "<count>4</count>.", {"image_list": [6]}, "it_coherence_count", tmp_path)
    assert built.parts == [
        {"type": "text", "text": "I drew:"},
        {"type": "image", "path": str(tmp_path / "image" / "it_coherence_count_6.png")},
        {"type": "text", "text": "<count>4</count>."},
    ]


@pytest.mark.parametrize(
    "response",
    ["<count>4</count>", "<image_begin><image_0><image_end><count>4</count>", IMG.format(0) + IMG.format(1) + "<count>4</count>"],
)
def test_coherence_without_exactly_one_placeholder_reads_no_image(tmp_path: Path, response: str):
    built = coherence_parts(response, {"image_list": [6]}, "it_coherence_count", tmp_path)
    assert media(built.parts) == [] and built.notes


def test_reasoning_coherence_accepts_several_placeholders(tmp_path: Path):
    response = "<<p>>" + IMG.format(0) + IMG.format(1)
    built = coherence_parts(response, {"image_list": [1, 2]}, "it_coherence_math", tmp_path, several=True)
    assert len(media(built.parts)) == 2 and texts(built.parts) == ["<<p>>"]
    assert task_parts("it_coherence_math", response, {"image_list": [1, 2]}, "it_coherence_math", tmp_path).parts == built.parts


# -- order tasks ------------------------------------------------------------------------------------


def test_order_parts_follow_the_response_and_mixed_kinds_take_the_middle_token(tmp_path: Path):
    response = " Intro " + IMG.format(1) + "\n" + "<image_start><audio_0><image_end>" + "tail"
    built = order_parts(response, {"image_list": [10, 11], "audio_list": [20]}, "i_structure", tmp_path)
    assert built.parts == [
        {"type": "text", "text": " Intro "},
        {"type": "image", "path": str(tmp_path / "image" / "i_structure_11.png")},
        {"type": "text", "text": "\n"},
        {"type": "audio", "path": str(tmp_path / "audio" / "i_structure_20.wav")},
        {"type": "text", "text": "tail"},
    ]


@pytest.mark.parametrize("response", ["Intro <image_begin><image_0><image_end>", "a " + IMG.format(0) + " b <image_1> c"])
def test_order_with_a_stray_media_token_is_one_text_part(tmp_path: Path, response: str):
    """The official evaluator gives up on such a response (score 0); so does the order 't'."""
    built = order_parts(response, {"image_list": [1, 2]}, "i_structure", tmp_path)
    assert built.parts == [{"type": "text", "text": response}] and built.notes


@pytest.mark.parametrize("number", ["2", "9" * 5000])
def test_order_placeholder_beyond_the_list_keeps_its_place_without_media(tmp_path: Path, number: str):
    response = "t " + IMG.format(0) + " u " + IMG.format(number)
    built = order_parts(response, {"image_list": [4]}, "i_structure", tmp_path)
    assert [p["type"] for p in built.parts] == ["text", "image", "text", "image"]
    assert built.parts[3] == {"type": "image", "data": ""} and built.notes


# -- the importer -----------------------------------------------------------------------------------


def test_samples_are_inferred_and_rows_map_to_instance_and_sample(output_dir: Path, instructions: InstructionSet):
    """40 rows for 20 instructions → 2 samples; row r is instance r // 2, sample r % 2, in file order."""
    lines = by_source(list(MMMGImporter(output_dir, instructions).lines()), "i_structure")
    assert len(lines) == 40
    for r, line in enumerate(lines):
        assert line["task"] == "i_structure"
        assert line["instance_id"] == f"i_structure/{r // 2}"
        assert line["sample"] == r % 2
        assert line["model"] == "model-x"  # defaults to the output folder's name


def test_imported_parts_are_verbatim_text_and_global_image_numbers(output_dir: Path, instructions: InstructionSet):
    lines = by_source(list(MMMGImporter(output_dir, instructions, relative_to=output_dir).lines()), "i_structure")
    r = 5
    assert lines[r]["parts"] == [
        {"type": "text", "text": f"  Row {r} intro.\n"},
        {"type": "image", "path": f"image/i_structure_{1000 + 2 * r}.png"},
        {"type": "text", "text": "\n middle "},
        {"type": "image", "path": f"image/i_structure_{1001 + 2 * r}.png"},
    ]


def test_paths_are_absolute_without_relative_to(output_dir: Path, instructions: InstructionSet):
    line = by_source(list(MMMGImporter(output_dir, instructions).lines()), "i_format_border")[3]
    assert line["parts"][0] == {"type": "image", "path": str((output_dir / "image" / "i_format_border_21.png").resolve())}
    assert line["parts"][1] == {"type": "text", "text": " done"}


def test_relative_to_makes_paths_relative_to_the_manifest_folder(tmp_path: Path, output_dir: Path, instructions):
    """The CLI passes the manifest's folder, so paths resolve from where the manifest lives."""
    manifest_dir = tmp_path / "manifests"
    manifest_dir.mkdir()
    line = by_source(list(MMMGImporter(output_dir, instructions, relative_to=manifest_dir).lines()), "i_format_border")[2]
    path = line["parts"][0]["path"]
    assert path == "../model-x/image/i_format_border_14.png"
    assert (manifest_dir / path).resolve() == (output_dir / "image" / "i_format_border_14.png").resolve()


def test_music_attribute_rows_feed_instrument_and_tempo_tasks(
    output_dir: Path, instructions: InstructionSet, mmmg_instructions: Path
):
    """A row with both ``instrument`` and ``tempo`` yields two lines; a row with one yields one."""
    raw = real_rows(mmmg_instructions, "a_music_attribute")
    lines = by_source(list(MMMGImporter(output_dir, instructions, relative_to=output_dir).lines()), "a_music_attribute")
    tasks_by_instance: dict[str, set[str]] = {}
    for line in lines:
        tasks_by_instance.setdefault(line["instance_id"], set()).add(line["task"])
        index = int(line["instance_id"].rsplit("/", 1)[1])
        assert line["parts"] == [{"type": "audio", "path": f"audio/a_music_attribute_{500 + index}.wav"}]
    for index, row in enumerate(raw):
        expected = {name for field, name in (("instrument", "a_music_instrument"), ("tempo", "a_music_tempo")) if row.get(field) is not None}
        assert tasks_by_instance[f"a_music_attribute/{index}"] == expected, index
    both = sum(1 for row in raw if "instrument" in row and "tempo" in row)
    assert both == 10  # the published file: 5 instrument-only, 5 tempo-only, 10 with both
    assert len(lines) == len(raw) + both


def test_report_counts_and_skipped_files(output_dir: Path, instructions: InstructionSet):
    """Files with no instruction file are listed, not imported; line and file counts add up."""
    importer = MMMGImporter(output_dir, instructions)
    lines = list(importer.lines())
    assert sorted(importer.report.skipped_files) == ["a_music_genre.jsonl", "notes.jsonl"]
    assert importer.report.files == 3
    assert importer.report.lines == len(lines) == 40 + 30 + 15
    assert not by_source(lines, "a_music_genre")


def test_explicit_samples_matching_the_rows_is_accepted(tmp_path: Path, instructions: InstructionSet):
    out = write_rows(tmp_path / "out" / "i_structure.jsonl", structure_rows()).parent
    lines = list(MMMGImporter(out, instructions, samples=2).lines())
    assert [(x["instance_id"], x["sample"]) for x in lines[:4]] == [
        ("i_structure/0", 0), ("i_structure/0", 1), ("i_structure/1", 0), ("i_structure/1", 1),
    ]  # fmt: skip


@pytest.mark.parametrize("samples", [1, 3, 4])
def test_explicit_samples_mismatch_raises(tmp_path: Path, instructions: InstructionSet, samples: int):
    """40 rows for 20 instructions is not 1, 3 or 4 samples each (4 divides 40): refuse rather than misalign."""
    out = write_rows(tmp_path / "out" / "i_structure.jsonl", structure_rows()).parent
    with pytest.raises(MMMGLayoutError, match="i_structure.jsonl has 40 rows"):
        list(MMMGImporter(out, instructions, samples=samples).lines())


def test_invalid_samples_and_missing_folder_are_refused(tmp_path: Path, instructions: InstructionSet):
    with pytest.raises(ValueError):
        MMMGImporter(tmp_path, instructions, samples=0)
    with pytest.raises(FileNotFoundError):
        MMMGImporter(tmp_path / "missing", instructions)


def test_a_broken_row_is_a_per_row_problem_not_a_failed_import(tmp_path: Path, instructions: InstructionSet):
    """Out-of-range placeholders and entries naming no file no longer stop the import."""
    out = tmp_path / "out"
    rows = [{"response": IMG.format(0), "image_list": [r], "audio_list": []} for r in range(15)]
    rows[4] = {"response": IMG.format(1), "image_list": [4], "audio_list": []}
    rows[6] = {"response": IMG.format(0), "image_list": [None], "audio_list": []}
    rows[7] = {"image_list": [7]}  # no response, no audio_list
    write_rows(out / "i_format_border.jsonl", rows)
    importer = MMMGImporter(out, instructions, relative_to=out)
    lines = list(importer.lines())
    assert len(lines) == 15
    assert lines[4]["parts"] == [{"type": "text", "text": IMG.format(1)}, {"type": "image", "path": "image/i_format_border_4.png"}]
    assert "unusable-entry-row6-0" in lines[6]["parts"][0]["path"]
    assert lines[7]["parts"] == [{"type": "image", "path": "image/i_format_border_7.png"}]
    assert len(importer.report.warnings) == 3


def test_every_imported_line_is_a_valid_manifest_line(output_dir: Path, instructions: InstructionSet):
    """The importer's output must pass the manifest parser unchanged."""
    for number, line in enumerate(MMMGImporter(output_dir, instructions, relative_to=output_dir).lines(), 1):
        gen = parse_generation(json.loads(json.dumps(line)), number)
        assert gen.task == line["task"] and len(gen.parts) == len(line["parts"])


def test_surrogates_in_a_response_are_replaced_so_the_manifest_can_be_written(tmp_path: Path, instructions):
    out = tmp_path / "out"
    out.mkdir()
    rows = ['{"response": "caf\\udce9 ' + IMG.format(0) + '", "image_list": [%d]}' % r for r in range(15)]
    (out / "i_format_border.jsonl").write_text("\n".join(rows) + "\n", encoding="utf-8")
    importer = MMMGImporter(out, instructions)
    text = importer.manifest_text()
    text.encode("utf-8")  # would raise on a lone surrogate
    assert json.loads(text.splitlines()[0])["parts"][0]["text"] == "caf\ufffd "
    assert any("surrogate" in w for w in importer.report.warnings)


# -- nothing is produced when a file is broken ------------------------------------------------------


def _folder_with_a_broken_second_file(tmp_path: Path) -> Path:
    out = tmp_path / "out"
    write_rows(out / "a_music_intensity.jsonl", [{"response": AUD.format(0), "audio_list": [r]} for r in range(10)])
    write_rows(out / "i_format_border.jsonl", [{"response": "", "image_list": [r]} for r in range(14)])  # 15 needed
    return out


def test_lines_are_checked_before_the_first_is_yielded(tmp_path: Path, instructions: InstructionSet):
    """A consumer writing lines as they come (the CLI) writes nothing when a later file is broken."""
    lines = MMMGImporter(_folder_with_a_broken_second_file(tmp_path), instructions).lines()
    with pytest.raises(MMMGLayoutError, match="14 rows"):
        next(lines)


def test_write_manifest_is_atomic(tmp_path: Path, instructions: InstructionSet, monkeypatch: pytest.MonkeyPatch):
    """A broken folder, or a failure while writing, leaves the target as it was and no stray file."""
    folder = _folder_with_a_broken_second_file(tmp_path)
    target = tmp_path / "manifests" / "manifest.jsonl"
    target.parent.mkdir()
    target.write_text("previous\n")
    with pytest.raises(MMMGLayoutError):
        MMMGImporter(folder, instructions).write_manifest(target)
    assert target.read_text() == "previous\n" and [p.name for p in target.parent.iterdir()] == ["manifest.jsonl"]
    (folder / "i_format_border.jsonl").unlink()

    def failing_fsync(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("mmverify.data.mmmg_import.os.fsync", failing_fsync)
    with pytest.raises(OSError, match="No space"):
        MMMGImporter(folder, instructions).write_manifest(target)
    assert target.read_text() == "previous\n" and [p.name for p in target.parent.iterdir()] == ["manifest.jsonl"]
    monkeypatch.undo()
    MMMGImporter(folder, instructions).write_manifest(target)
    assert len(target.read_text().splitlines()) == 10


def test_invalid_json_in_an_output_file_stops_the_import_before_any_line(tmp_path: Path, instructions):
    out = tmp_path / "out"
    write_rows(out / "a_music_intensity.jsonl", [{"response": "", "audio_list": [r]} for r in range(10)])
    (out / "i_format_border.jsonl").write_text('{"response": ""\n')
    with pytest.raises(InstructionSetError):
        next(MMMGImporter(out, instructions).lines())


# -- parity with the official reading on generated folders ------------------------------------------

_TEXTS = ["", " ", "\n", "Intro.", "a <b> c", "<count>4</count>", "<<pattern>>", "{\"cat\": \"red\"}"]
_INVALID = [None, "x/y", 2.5, True, "7", -3]


def _placeholder(rng: random.Random, sizes: dict[str, int]) -> str:
    kind = rng.choice(["image", "audio"])
    number = rng.choice([rng.randrange(max(sizes[kind], 1)), rng.randrange(6), "9" * 30])
    start = rng.choice(["start"] * 4 + ["begin"])
    outer = kind if rng.random() < 0.85 else ("audio" if kind == "image" else "image")
    end = rng.choice([f"<{outer}_end>"] * 5 + [f"</{outer}_end>"])
    return f"<{outer}_{start}><{kind}_{number}>{end}"


def _response(rng: random.Random, sizes: dict[str, int]) -> object:
    roll = rng.random()
    if roll < 0.05:
        return None
    if roll < 0.1:
        return 5
    pieces = []
    for _ in range(rng.randrange(6)):
        choice = rng.random()
        pieces.append(rng.choice(_TEXTS) if choice < 0.45 else ("<image_2>" if choice < 0.5 else _placeholder(rng, sizes)))
    return "".join(pieces)


def _entries(rng: random.Random, counter: list[int]) -> list:
    entries = []
    for _ in range(rng.choice([0, 1, 1, 1, 2, 3])):
        if rng.random() < 0.1:
            entries.append(rng.choice(_INVALID))
        else:
            entries.append(counter[0])
            counter[0] += 1
    return entries


def _generated_folder(root: Path, seed: int, instructions: InstructionSet) -> tuple[Path, dict[str, list[dict]]]:
    """An output folder of random rows, responses and lists; ~80% of the named files exist."""
    rng = random.Random(seed)
    out = root / f"gen-{seed}"
    rows_by_source: dict[str, list[dict]] = {}
    for source in SOURCES:
        counter = [0]
        rows = []
        for _ in range(len(instructions.rows(source)) * rng.choice([1, 2])):
            row = {"image_list": _entries(rng, counter), "audio_list": _entries(rng, counter)}
            sizes = {"image": len(row["image_list"]), "audio": len(row["audio_list"])}
            response = _response(rng, sizes)
            if response is not None:
                row["response"] = response
            rows.append(row)
        rows_by_source[source] = rows
        write_rows(out / f"{source}.jsonl", rows)
        for kind, suffix in (("image", "png"), ("audio", "wav")):
            for n in range(counter[0]):
                if rng.random() < 0.8:
                    path = out / kind / f"{source}_{n}.{suffix}"
                    path.parent.mkdir(parents=True, exist_ok=True)
                    path.write_bytes(b"x")
    return out, rows_by_source


def _opened(paths: list) -> list[str | None]:
    """What opening each file gives: its real path, or None when there is no file."""
    return [str(Path(p).resolve()) if Path(p).is_file() else None for p in paths]


def _check_line(line: dict, row: dict, source: str, folder: Path, allowed: list[str]) -> str:
    """Compare one imported line with the official reading; returns which case it exercised."""
    parts, task = line["parts"], line["task"]
    response = row.get("response") if isinstance(row.get("response"), str) else ""
    listed = {kind: loaded_files(folder, source, row, kind) for kind in ("image", "audio")}
    if task in ("i_structure", "a_structure"):
        letters = order_letters(response)
        ours = modality_sequence([(p["type"], p.get("text", "")) for p in parts])
        assert ours == letters if letters is not None else not set(ours) & set("ia"), (response, ours, letters)
        assert check_order(ours, allowed).score == order_score(response, allowed)
        inline = any("data" in p for p in parts)
        return "order-unreadable" if letters is None else ("order-beyond-list" if inline else "order")
    elif task.startswith("it_coherence_"):
        several = task in ("it_coherence_math", "it_coherence_code")
        text, evaluated = coherence_reading(response, listed["image"], several)
        images = media(parts, "image")
        if evaluated and not several:  # what the task reads: the text after its image
            after = parts[[p["type"] for p in parts].index("image") + 1 :]
            assert "".join(texts(after)) == text
        else:
            assert "".join(texts(parts)) == text
        assert (len(images) == 1 or (several and len(images) >= 1)) == evaluated
        if evaluated:
            assert _opened(images) == _opened(listed["image"])
        return "coherence-evaluated" if evaluated else "coherence-skipped"
    for kind in ("image", "audio"):
        assert _opened(media(parts, kind)) == _opened(listed[kind]), (kind, row)
    missing = None in _opened(media(parts))
    return "list-missing-file" if missing else "list"


@pytest.mark.parametrize("seed", range(6))
def test_importer_reads_what_the_official_evaluators_read(tmp_path: Path, instructions: InstructionSet, seed: int):
    folder, rows_by_source = _generated_folder(tmp_path, seed, instructions)
    lines = list(MMMGImporter(folder, instructions).lines())
    checked = 0
    cases: set[str] = set()
    for source, rows in rows_by_source.items():
        per = len(rows) // len(instructions.rows(source))
        source_lines = by_source(lines, source)
        tasks = {line["task"] for line in source_lines}
        for task in tasks:
            task_lines = [line for line in source_lines if line["task"] == task]
            for line in task_lines:
                index = int(line["instance_id"].rsplit("/", 1)[1])
                row = rows[index * per + line["sample"]]
                allowed = instructions.rows(source)[index].get("order", [])
                cases.add(_check_line(line, row, source, folder, allowed))
                parse_generation(json.loads(json.dumps(line)), 1)
                checked += 1
    assert checked == len(lines) > 150
    assert cases == {
        "order", "order-unreadable", "order-beyond-list", "coherence-evaluated", "coherence-skipped",
        "list", "list-missing-file",
    }  # fmt: skip


def test_published_orders_all_name_a_media_part(mmmg_instructions: Path):
    """The importer hands an unreadable order response over as one text part ('t'); that scores 0
    like the official evaluator only because no published order is text alone."""
    for source in ("i_structure", "a_structure"):
        for row in real_rows(mmmg_instructions, source):
            assert all(set(order) & set("ia") for order in row["order"])


# -- scoring imported folders end to end ------------------------------------------------------------


def test_imported_problem_rows_score_as_typed_rows(tmp_path: Path, instructions: InstructionSet, mmmg_instructions: Path):
    out = tmp_path / "Model"
    border = [{"response": "", "image_list": [r], "audio_list": []} for r in range(15)]  # no placeholder at all
    border[1]["image_list"] = [None]  # names no file
    border[2]["image_list"] = [99]  # the file is absent
    for r in range(15):
        save_png(out / "image" / f"i_format_border_{r}.png", scene(seed=r))
    structure = [{"response": "Intro " + IMG.format(0), "image_list": [], "audio_list": []} for _ in range(20)]
    intensity = [{"response": "<audio_begin><audio_0><audio_end>", "image_list": [], "audio_list": [r]} for r in range(10)]
    t = np.arange(6 * 22050) / 22050
    for r in range(10):
        path = out / "audio" / f"a_music_intensity_{r}.wav"
        path.parent.mkdir(parents=True, exist_ok=True)
        sf.write(path, (0.3 * np.sin(2 * np.pi * 440 * t) * np.linspace(1, 0, t.size)).astype(np.float32), 22050)
    write_rows(out / "i_format_border.jsonl", border)
    write_rows(out / "i_structure.jsonl", structure)
    write_rows(out / "a_music_intensity.jsonl", intensity)
    manifest = tmp_path / "manifest.jsonl"
    MMMGImporter(out, instructions, relative_to=tmp_path).write_manifest(manifest)
    outcome = run_score(ScoreConfig(manifest=manifest, out=tmp_path / "run", instructions=mmmg_instructions, timeout=120))
    rows = [json.loads(x) for x in outcome.results_path.read_text().splitlines()]
    by_task: dict[str, list[dict]] = {}
    for row in rows:
        by_task.setdefault(row["task"], []).append(row)
    border_rows = sorted(by_task["i_format_border"], key=lambda r: int(r["instance_id"].split("/")[1]))
    assert [r["error"]["code"] for r in border_rows[1:3]] == ["missing_media", "missing_media"]
    assert all(r["status"] == "scored" and r["reason"] != "no_image" for r in border_rows[:1] + border_rows[3:])
    # the order is scored from the response although image_list is empty, as published
    orders = [row["order"] for row in real_rows(mmmg_instructions, "i_structure")]
    scores = {int(r["instance_id"].split("/")[1]): (r["status"], r["score"]) for r in by_task["i_structure"]}
    assert scores == {i: ("scored", order_score("Intro " + IMG.format(0), order)) for i, order in enumerate(orders)}
    assert 0 < sum(score for _, score in scores.values()) < len(orders)
    assert all(r["status"] == "scored" and r["reason"] != "no_audio" for r in by_task["a_music_intensity"])


def test_a_failed_import_leaves_the_previous_manifest_untouched(tmp_path: Path, instructions: InstructionSet):
    from typer.testing import CliRunner

    from mmverify.cli import app

    out = write_rows(tmp_path / "out" / "i_structure.jsonl", structure_rows()).parent
    target = tmp_path / "manifest.jsonl"
    target.write_text("previous\n")
    args = ["import-mmmg", str(out), "--instructions", str(instructions.root), "-o", str(target)]
    failed = CliRunner().invoke(app, [*args, "--samples", "3"])  # 40 rows are not 3 samples of 20
    assert failed.exit_code == 2 and target.read_text() == "previous\n"
    assert CliRunner().invoke(app, [*args, "--samples", "2"]).exit_code == 0
    assert len(target.read_text().splitlines()) == 40
