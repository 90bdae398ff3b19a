"""Importing the official MMMG output layout (DESIGN §2): ``<dir>/<task>.jsonl`` rows whose ``response``
holds ``<image_start><image_k><image_end>`` placeholders for the k-th entry of the row's ``image_list``
(global numbers naming ``image/<task>_<n>.png``), samples of one instruction on consecutive rows."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from mmverify.data.instructions import InstructionSet
from mmverify.data.manifest import parse_generation
from mmverify.data.mmmg_import import MMMGImporter, MMMGLayoutError, response_parts

IMG = "<image_start><image_{}><image_end>"
AUD = "<audio_start><audio_{}><audio_end>"


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
    """A private instruction folder holding copies of three real task files."""
    folder = tmp_path / "instructions"
    folder.mkdir()
    for source in ("i_structure", "a_music_attribute", "i_format_border"):
        shutil.copy(mmmg_instructions / f"{source}.jsonl", folder)
    return InstructionSet(folder)


def structure_rows(n_instructions: int = 20, samples: int = 2) -> list[dict]:
    """Rows for i_structure: text, image, text, image, with per-row global image numbers."""
    rows = []
    for r in range(n_instructions * samples):
        rows.append(
            {
                "response": f"  Row {r} intro.\n" + IMG.format(0) + "\n middle " + IMG.format(1),
                "image_list": [1000 + 2 * r, 1001 + 2 * r],
            }
        )
    return rows


@pytest.fixture()
def output_dir(tmp_path: Path, mmmg_instructions: Path) -> Path:
    """A fake official output folder for i_structure (2 samples), a_music_attribute and i_format_border."""
    out = tmp_path / "model-x"
    write_rows(out / "i_structure.jsonl", structure_rows())
    n_music = len(real_rows(mmmg_instructions, "a_music_attribute"))
    write_rows(
        out / "a_music_attribute.jsonl",
        [{"response": AUD.format(0), "audio_list": [500 + r]} for r in range(n_music)],
    )
    write_rows(
        out / "i_format_border.jsonl",
        [{"response": IMG.format(0) + " done", "image_list": [7 * r]} for r in range(15)],
    )
    write_rows(out / "a_music_genre.jsonl", [{"response": AUD.format(0), "audio_list": [0]}])  # no instruction file
    write_rows(out / "notes.jsonl", [{"anything": 1}])
    (out / "README.txt").write_text("not a task file")
    return out


def by_source(lines: list[dict], source: str) -> list[dict]:
    return [x for x in lines if x["instance_id"].startswith(source + "/")]


# -- response_parts ---------------------------------------------------------------------------------


def test_response_parts_keeps_text_verbatim_and_in_order(tmp_path: Path):
    """Text between placeholders is kept byte for byte (leading/trailing whitespace, newlines)."""
    response = "  Lead\n" + IMG.format(1) + IMG.format(0) + "\n\tmid  " + IMG.format(1) + " end \n"
    parts = response_parts(response, {"image_list": [40, 41]}, "i_structure", tmp_path)
    assert parts == [
        {"type": "text", "text": "  Lead\n"},
        {"type": "image", "path": str(tmp_path / "image" / "i_structure_41.png")},
        {"type": "image", "path": str(tmp_path / "image" / "i_structure_40.png")},
        {"type": "text", "text": "\n\tmid  "},
        {"type": "image", "path": str(tmp_path / "image" / "i_structure_41.png")},
        {"type": "text", "text": " end \n"},
    ]


def test_response_without_placeholders_is_one_text_part(tmp_path: Path):
    assert response_parts(" just text ", {}, "i_structure", tmp_path) == [{"type": "text", "text": " just text "}]
    assert response_parts("", {}, "i_structure", tmp_path) == []


def test_audio_placeholders_map_to_wav_files(tmp_path: Path):
    response = "Intro " + AUD.format(0) + " and " + AUD.format(1)
    parts = response_parts(response, {"audio_list": [12, 3]}, "a_structure", tmp_path)
    assert [p["type"] for p in parts] == ["text", "audio", "text", "audio"]
    assert parts[1]["path"] == str(tmp_path / "audio" / "a_structure_12.wav")
    assert parts[3]["path"] == str(tmp_path / "audio" / "a_structure_3.wav")


def test_image_and_audio_lists_are_indexed_separately(tmp_path: Path):
    """``<image_0>`` reads image_list[0] and ``<audio_0>`` reads audio_list[0]."""
    parts = response_parts(IMG.format(0) + AUD.format(0), {"image_list": [8], "audio_list": [9]}, "t", tmp_path)
    assert [p["path"] for p in parts] == [str(tmp_path / "image" / "t_8.png"), str(tmp_path / "audio" / "t_9.wav")]


@pytest.mark.parametrize(
    "placeholder",
    ["<image_start><audio_0><image_end>", "<audio_start><audio_0><image_end>", "<image_start><image_0><audio_end>"],
)
def test_mixed_placeholder_raises(tmp_path: Path, placeholder: str):
    row = {"image_list": [1], "audio_list": [2]}
    with pytest.raises(MMMGLayoutError, match="mixed"):
        response_parts("x " + placeholder, row, "i_structure", tmp_path)


def test_placeholder_index_beyond_the_list_raises(tmp_path: Path):
    with pytest.raises(MMMGLayoutError, match="image_list"):
        response_parts(IMG.format(0) + IMG.format(2), {"image_list": [5, 6]}, "i_structure", tmp_path)


# -- the importer ------------------------------------------------------------------------------------


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
    assert not Path(path).is_absolute()
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
        expected = set()
        if row.get("instrument") is not None:
            expected.add("a_music_instrument")
        if row.get("tempo") is not None:
            expected.add("a_music_tempo")
        assert tasks_by_instance[f"a_music_attribute/{index}"] == expected, index
    both = sum(1 for row in raw if "instrument" in row and "tempo" in row)
    assert both == 10  # the published file: 5 instrument-only, 5 tempo-only, 10 with both
    assert len(lines) == len(raw) + both


def test_report_counts_and_skipped_files(output_dir: Path, instructions: InstructionSet, mmmg_instructions: Path):
    """Files with no instruction file are listed, not imported; line and file counts add up."""
    importer = MMMGImporter(output_dir, instructions)
    lines = list(importer.lines())
    assert sorted(importer.report.skipped_files) == ["a_music_genre.jsonl", "notes.jsonl"]
    assert importer.report.files == 3
    assert importer.report.lines == len(lines) == 40 + 30 + 15
    assert not by_source(lines, "a_music_genre")


def test_every_imported_line_is_a_valid_manifest_line(output_dir: Path, instructions: InstructionSet):
    """The importer's output must pass the manifest parser unchanged."""
    for number, line in enumerate(MMMGImporter(output_dir, instructions, relative_to=output_dir).lines(), 1):
        gen = parse_generation(json.loads(json.dumps(line)), number)
        assert gen.task == line["task"]
        assert len(gen.parts) == len(line["parts"])


def test_explicit_samples_matching_the_rows_is_accepted(tmp_path: Path, instructions: InstructionSet):
    out = write_rows(tmp_path / "out" / "i_structure.jsonl", structure_rows()).parent
    lines = list(MMMGImporter(out, instructions, samples=2).lines())
    assert [(x["instance_id"], x["sample"]) for x in lines[:4]] == [
        ("i_structure/0", 0), ("i_structure/0", 1), ("i_structure/1", 0), ("i_structure/1", 1),
    ]


@pytest.mark.parametrize("samples", [1, 3, 4])
def test_explicit_samples_mismatch_raises(tmp_path: Path, instructions: InstructionSet, samples: int):
    """40 rows for 20 instructions is not 1, 3 or 4 samples each (4 divides 40): refuse rather than misalign."""
    out = write_rows(tmp_path / "out" / "i_structure.jsonl", structure_rows()).parent
    with pytest.raises(MMMGLayoutError, match="i_structure.jsonl has 40 rows"):
        list(MMMGImporter(out, instructions, samples=samples).lines())


def test_row_count_not_divisible_by_instructions_raises(tmp_path: Path, instructions: InstructionSet):
    out = tmp_path / "out"
    write_rows(out / "i_structure.jsonl", structure_rows()[:39])  # 39 rows for 20 instructions
    with pytest.raises(MMMGLayoutError, match="39 rows"):
        list(MMMGImporter(out, instructions).lines())


def test_invalid_samples_and_missing_folder_are_refused(tmp_path: Path, instructions: InstructionSet):
    with pytest.raises(ValueError):
        MMMGImporter(tmp_path, instructions, samples=0)
    with pytest.raises(FileNotFoundError):
        MMMGImporter(tmp_path / "missing", instructions)


def test_bad_placeholder_in_a_row_fails_the_import(tmp_path: Path, instructions: InstructionSet):
    out = tmp_path / "out"
    rows = [{"response": IMG.format(0), "image_list": [r]} for r in range(15)]
    rows[4] = {"response": IMG.format(1), "image_list": [4]}
    write_rows(out / "i_format_border.jsonl", rows)
    with pytest.raises(MMMGLayoutError):
        list(MMMGImporter(out, instructions).lines())


@pytest.mark.parametrize("entry", ["abc", None, [3]])
def test_non_integer_media_numbers_are_a_layout_error(tmp_path: Path, entry):
    """A row whose image_list holds something that is not a number is a broken output folder."""
    with pytest.raises(MMMGLayoutError):
        response_parts(IMG.format(0), {"image_list": [entry]}, "i_structure", tmp_path)
