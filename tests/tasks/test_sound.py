"""Sound and music tasks scored by CLAP against reference sets, on real MMMG rows.

A tiny random-init CLAP makes similarity *values* meaningless, so the semantics are tested by
construction: a reference class whose clips hold exactly the samples of the part a task should cut
scores a top-10 similarity of 1.0, and thresholds close to 1 tell the right part from any other.
Each class also gets two unrelated clips, which a mean over all references would count and the
top-10 mean must not.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import mmmg_data
import soundfile as sf

from mmverify.api import score_items
from mmverify.core.decoding import INLINE
from mmverify.core.media import DEFAULT_LIMITS, DecodedAudio
from mmverify.core.types import Instance
from mmverify.tasks.response import ResolvedPart, Response
from mmverify.verifiers.audio.segments import split_on_silence
from tests.models.test_clap import build_tiny_clap

SR = 22_050
def esc50_csv() -> Path:
    """The published ESC-50 metadata, found (or, with CI=true, required) by the shared locator."""
    return mmmg_data("references/dataset.csv")
OPENMIC_CLASSES = {
    "accordion", "banjo", "bass", "cello", "clarinet", "cymbals", "drums", "flute", "guitar", "mallet_percussion",
    "mandolin", "organ", "piano", "saxophone", "synthesizer", "trombone", "trumpet", "ukulele", "violin", "voice",
}  # fmt: skip
ESC50_TASKS = {"a_sound_begin_end": ("start", "end"), "a_sound_include": ("target",), "a_sound_cot": ("target",), "a_sound_silence": ("start", "end")}


def task_class(task_id: str) -> type:
    """A task's class by id: the whole-clip tasks are catalog rows of the WholeClip family."""
    from mmverify.tasks.catalog import TASK_REGISTRY

    return TASK_REGISTRY.get(task_id)


def whole_clip_tasks() -> tuple[type, ...]:
    """The classes of a_sound_cot, a_music_instrument, a_music_exclude and a_music_genre."""
    return tuple(task_class(t) for t in ("a_sound_cot", "a_music_instrument", "a_music_exclude", "a_music_genre"))


# -- synthetic media ----------------------------------------------------------------------------
def tone(seconds: float, freq: float, seed: int = 0) -> np.ndarray:
    """A harmonic tone pulsing at 3 Hz with a little noise (different per freq and seed)."""
    rng = np.random.default_rng(seed)
    t = np.arange(round(seconds * SR)) / SR
    pulse = 0.6 + 0.4 * np.cos(2 * np.pi * 3 * t)
    wave = sum(np.sin(2 * np.pi * k * freq * t) / k for k in (1, 2, 3))
    return (0.3 * pulse * wave + 0.01 * rng.standard_normal(t.size)).astype(np.float32)


def sweep(seconds: float, f0: float, f1: float) -> np.ndarray:
    """A rising tone: no two stretches of it sound alike, so no shorter cut of it repeats into it."""
    t = np.arange(round(seconds * SR)) / SR
    return (0.3 * np.sin(2 * np.pi * (f0 * t + (f1 - f0) * t**2 / (2 * seconds)))).astype(np.float32)


def noise(seconds: float, seed: int) -> np.ndarray:
    return (0.2 * np.random.default_rng(seed).standard_normal(round(seconds * SR))).astype(np.float32)


def silence(seconds: float) -> np.ndarray:
    return np.zeros(round(seconds * SR), dtype=np.float32)


def write(path: Path, audio: np.ndarray) -> Path:
    """32-bit float WAV: decoding gives back exactly these samples, so segments and references match."""
    path.parent.mkdir(parents=True, exist_ok=True)
    sf.write(path, audio, SR, subtype="FLOAT")
    return path


def decoded(path: Path) -> np.ndarray:
    return sf.read(path, dtype="float32")[0]


def refs(content: np.ndarray, copies: int = 10, unrelated: int = 2) -> list[np.ndarray]:
    """``copies`` references equal to ``content`` plus unrelated noise that the top-10 mean ignores."""
    return [content] * copies + [noise(len(content) / SR, seed=100 + i) for i in range(unrelated)]


def esc50_tree(root: Path, classes: dict[str, list[np.ndarray]], underscores: bool = False) -> Path:
    """An ESC-50 release layout with the published metadata rows of ``classes`` and these clips."""
    with open(esc50_csv(), newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        header, rows = reader.fieldnames, list(reader)
    picked = []
    for category, clips in classes.items():
        matching = [row for row in rows if row["category"] == category][: len(clips)]
        assert len(matching) == len(clips), f"ESC-50 has no {len(clips)} clips of {category!r}"
        for row, clip in zip(matching, clips):
            write(root / "audio" / row["filename"], clip)
            picked.append({**row, "category": category.replace(" ", "_") if underscores else category})
    (root / "meta").mkdir(parents=True, exist_ok=True)
    with open(root / "meta" / "esc50.csv", "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=header)
        writer.writeheader()
        writer.writerows(picked)
    return root


def folder_tree(root: Path, classes: dict[str, list[np.ndarray]]) -> Path:
    """One folder per class (OpenMIC / GTZAN style)."""
    for name, clips in classes.items():
        for i, clip in enumerate(clips):
            write(root / name / f"{name}.{i:05d}.wav", clip)
    return root


def instruction_rows(mmmg_instructions: Path, source: str) -> list[dict]:
    return [json.loads(line) for line in (mmmg_instructions / f"{source}.jsonl").read_text().splitlines()]


# -- configuration ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def tiny_clap(tmp_path_factory) -> Path:
    return build_tiny_clap(tmp_path_factory.mktemp("tiny-clap"))


@pytest.fixture
def configure(tmp_path, monkeypatch, tiny_clap):
    """Point the hub at the tiny CLAP and MMVERIFY_REFERENCES at the given sets (fresh process state)."""
    from mmverify.models import hub
    from mmverify.references import sets

    monkeypatch.setenv(hub.ENV_VAR, f"audio_text=clap-hf@{tiny_clap}")
    monkeypatch.setenv("MMVERIFY_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv(sets.ENV_VAR, raising=False)
    monkeypatch.setattr(hub, "_HUB", None)
    sets.clear_memo()

    def apply(**roots: Path) -> None:
        monkeypatch.setenv(sets.ENV_VAR, ",".join(f"{name}={root}" for name, root in roots.items()))

    yield apply
    sets.clear_memo()


def audio_item(task: str, *paths: Path, instance_id: str | None = None, instance: dict | None = None) -> dict:
    item: dict = {"task": task, "parts": [{"type": "audio", "path": str(p)} for p in paths]}
    if instance is not None:
        item["instance"] = instance
    if instance_id is not None:
        item["instance_id"] = instance_id
    return item


def score(items: list[dict], tmp_path: Path, mmmg_instructions: Path | None = None, profile: str = "mmmg") -> list[dict]:
    return score_items(items, base_dir=tmp_path, instructions=mmmg_instructions, profile=profile)


def direct(task, data: dict, *paths: Path):
    """Score with a task object built here (custom parameters), bypassing the pipeline."""
    parts = [ResolvedPart("audio", media=p, label=p.name) for p in paths]
    return task.score(Instance("test/0", data), Response(parts))


# -- the annotation data ------------------------------------------------------------------------
def test_every_published_class_is_a_reference_class(mmmg_instructions):
    with open(esc50_csv(), newline="", encoding="utf-8") as handle:
        categories = {row["category"] for row in csv.DictReader(handle)}
    for source, fields in ESC50_TASKS.items():
        named = [row[f] for row in instruction_rows(mmmg_instructions, source) for f in fields if row.get(f)]
        assert named and set(named) <= categories, (source, set(named) - categories)
    instruments = [row["instrument"] for s in ("a_music_exclude", "a_music_attribute") for row in instruction_rows(mmmg_instructions, s) if row.get("instrument")]
    assert instruments and set(instruments) <= OPENMIC_CLASSES
    begin_end = instruction_rows(mmmg_instructions, "a_sound_begin_end")
    assert {tuple(f for f in ("start", "end") if f in row) for row in begin_end} == {("start",), ("end",), ("start", "end")}


def test_defaults_are_the_published_ones_and_parameters_are_validated():
    from mmverify.tasks.sound import SoundBeginEnd, SoundInclude, SoundSilence

    SoundCot, MusicInstrument, MusicExclude, MusicGenre = whole_clip_tasks()

    assert [cls().threshold for cls in (SoundBeginEnd, SoundInclude, SoundCot, SoundSilence)] == [0.68] * 4
    assert (MusicInstrument().threshold, MusicExclude().threshold, MusicGenre().threshold) == (0.62, 0.62, 0.69)
    assert MusicExclude().params()["direction"] == "<" and MusicInstrument().params()["direction"] == ">"
    assert SoundBeginEnd().params()["max_seconds"] == 4 and SoundCot().params()["top_k"] == 10
    assert SoundSilence().params()["top_db"] == 40.0 and SoundSilence().params()["min_gap_s"] == 1.0
    assert MusicGenre().params()["layout"] == "gtzan-thirds" and SoundCot().params()["layout"] == "esc50"
    assert SoundCot(threshold=0.7).params() != SoundCot().params()  # thresholds are part of the result key
    for bad in (dict(threshold=1.5), dict(threshold=float("nan")), dict(threshold=True), dict(top_k=0), dict(layout="gtzan")):
        with pytest.raises(ValueError):
            SoundCot(**bad)
    with pytest.raises(ValueError):
        SoundBeginEnd(max_seconds=0)
    with pytest.raises(ValueError):
        SoundSilence(top_db=-1)
    assert MusicGenre(layout="gtzan").layout == "gtzan"


# -- a_sound_begin_end -------------------------------------------------------------------------
def test_begin_end_compares_each_edge_with_its_own_segment(tmp_path, configure, mmmg_instructions):
    from mmverify.tasks.sound import SoundBeginEnd

    rows = instruction_rows(mmmg_instructions, "a_sound_begin_end")
    both = next(i for i, r in enumerate(rows) if r.get("start") and r.get("end") and r["start"] != r["end"])
    only_start = next(i for i, r in enumerate(rows) if r.get("start") and not r.get("end"))
    only_end = next(i for i, r in enumerate(rows) if r.get("end") and not r.get("start"))
    a, b = sweep(4, 300, 1500), noise(4, seed=7) * np.linspace(1, 0.2, 4 * SR, dtype=np.float32)
    starts, ends = {rows[both]["start"], rows[only_start]["start"]}, {rows[both]["end"], rows[only_end]["end"]}
    assert not starts & ends
    configure(esc50=esc50_tree(tmp_path / "ESC-50", {**{c: refs(a) for c in starts}, **{c: refs(b) for c in ends}}))

    # 10 s: the edges are min(4, 10 // 2) = 4 whole seconds; a different sound fills the middle.
    middle = tone(2, 900, seed=1)
    right = write(tmp_path / "ab.wav", np.concatenate([a, middle, b]))
    items = [audio_item("a_sound_begin_end", right, instance_id=f"a_sound_begin_end/{i}") for i in (both, only_start, only_end)]
    got = score(items, tmp_path, mmmg_instructions)
    assert [r["score"] for r in got] == [1.0, 1.0, 1.0], got
    assert all(r["passed"] is True for r in got)
    assert set(got[0]["components"]) == {"sim_start", "sim_end"} and got[0]["components"]["sim_start"] == pytest.approx(1.0, abs=1e-5)
    assert set(got[1]["components"]) == {"sim_start"} and set(got[2]["components"]) == {"sim_end"}
    evidence = got[0]["evidence"]
    assert evidence["segments_s"] == {"start": [0.0, 4.0], "end": [6.0, 10.0]}
    assert evidence["classes"] == {"start": rows[both]["start"], "end": rows[both]["end"]}
    assert evidence["references"] == {rows[both]["start"]: 12, rows[both]["end"]: 12}
    assert evidence["reference_set"] == {"name": "esc50", "layout": "esc50"} and evidence["backend"].startswith("clap-hf:")

    # A threshold just under 1 accepts only the exact segment: swapped and repeated sounds fail.
    tight = SoundBeginEnd(threshold=0.9999)
    classes = {"start": rows[both]["start"], "end": rows[both]["end"]}
    assert direct(tight, classes, right).score == 1.0
    swapped = direct(tight, classes, write(tmp_path / "ba.wav", np.concatenate([b, middle, a])))
    assert swapped.score == 0.0 and swapped.passed is False
    half = direct(tight, classes, write(tmp_path / "aa.wav", np.concatenate([a, middle, a])))
    assert half.score == 0.5 and half.passed is False and half.evidence["holds"] == {"start": True, "end": False}
    # 6.5 s: edges shrink to 3 whole seconds, so the 4 s references no longer match exactly.
    short = direct(tight, classes, write(tmp_path / "short.wav", np.concatenate([a[: 3 * SR], middle[: SR // 2], b[-3 * SR :]])))
    assert short.evidence["segments_s"] == {"start": [0.0, 3.0], "end": [3.5, 6.5]} and short.score == 0.0
    assert max(short.components.values()) < 0.9999


def test_begin_end_clip_under_two_seconds_is_cut_as_published(tmp_path, configure, mmmg_instructions):
    """Under 2 s the published slices are ``audio[:0]`` (empty: 10 s of silence once zero-padded)
    and ``audio[-0:]`` (the whole clip); the strict profile fails such a clip instead."""
    rows = instruction_rows(mmmg_instructions, "a_sound_begin_end")
    index = next(i for i, r in enumerate(rows) if r.get("start") and r.get("end") and r["start"] != r["end"])
    short = tone(1.9, 330)
    configure(esc50=esc50_tree(tmp_path / "ESC-50", {rows[index]["start"]: refs(silence(5)), rows[index]["end"]: refs(short)}))
    clip = write(tmp_path / "short.wav", short)
    item = audio_item("a_sound_begin_end", clip, instance_id=f"a_sound_begin_end/{index}")
    [row] = score([item], tmp_path, mmmg_instructions)
    assert row["status"] == "scored" and row["evidence"]["segments_s"] == {"start": [0.0, 0.0], "end": [0.0, 1.9]}, row
    # The empty first edge is the silence the silent references are; the last edge is the clip itself.
    assert row["components"] == {"sim_start": pytest.approx(1.0, abs=1e-5), "sim_end": pytest.approx(1.0, abs=1e-5)}
    assert row["score"] == 1.0 and row["evidence"]["front_end"] == {"padding": "zero", "reference_load_rate": 22_050}

    [strict] = score([item], tmp_path, mmmg_instructions, profile="strict")
    assert (strict["status"], strict["score"], strict["reason"], strict["passed"]) == ("scored", 0.0, "audio_too_short", False)


def test_empty_parts_are_silence_under_mmmg_and_fail_under_strict(tmp_path, configure):
    from mmverify.tasks.sound import SoundInclude

    configure(esc50=esc50_tree(tmp_path / "ESC-50", {"cow": refs(silence(5))}))
    clip = write(tmp_path / "tiny.wav", tone(3 / SR, 440))  # 3 samples: round(0.5 * 3) == round(0.6 * 3) == 2
    data = {"target": "cow", "range": [0.5, 0.6]}
    published = direct(SoundInclude.build("mmmg"), data, clip)
    assert published.evidence["segments_s"] == {"target": [round(2 / SR, 4)] * 2}
    assert published.components["sim_target"] == pytest.approx(1.0, abs=1e-5) and published.score == 1.0
    from mmverify.core.errors import GenerationFault

    with pytest.raises(GenerationFault) as fault:
        direct(SoundInclude.build("strict"), data, clip)
    assert fault.value.reason == "audio_too_short"


def test_profiles_choose_the_clap_front_end():
    from mmverify.tasks.sound import SoundBeginEnd, SoundInclude, SoundSilence

    SoundCot, MusicInstrument, MusicExclude, MusicGenre = whole_clip_tasks()

    for cls in (SoundBeginEnd, SoundInclude, SoundCot, SoundSilence, MusicInstrument, MusicExclude, MusicGenre):
        published, strict = cls.build("mmmg"), cls.build("strict")
        assert cls.version == 2 and published.verifier_id == f"{cls.id}@2:mmmg" and strict.verifier_id == f"{cls.id}@2:strict"
        assert (published.params()["padding"], published.params()["empty_parts"]) == ("zero", "silence")
        assert (strict.params()["padding"], strict.params()["empty_parts"]) == ("repeat", "fail")
        assert published.params()["reference_load_rate"] == strict.params()["reference_load_rate"] == 22_050
        assert published.threshold == strict.threshold == cls().threshold
    with pytest.raises(ValueError, match="padding"):
        SoundCot(padding="reflect")
    with pytest.raises(ValueError, match="empty_parts"):
        SoundCot(empty_parts="skip")


def test_mmmg_zero_pads_and_strict_repeat_pads(tmp_path, configure):
    """A 2 s sound against a reference holding that sound and then 8 s of silence: the same waveform
    as the zero-padded clip, so identical under mmmg; strict tiles the clip, which the reference is not."""
    SoundCot = task_class("a_sound_cot")

    fade = np.hanning(2 * SR).astype(np.float32)  # starts and ends at zero: no edge where padding begins
    sound = tone(2, 440, seed=3) * fade
    configure(esc50=esc50_tree(tmp_path / "ESC-50", {"cow": refs(np.concatenate([sound, silence(8)]))}))
    clip = write(tmp_path / "two.wav", sound)
    published = direct(SoundCot.build("mmmg"), {"target": "cow"}, clip).components["sim_target"]
    strict = direct(SoundCot.build("strict"), {"target": "cow"}, clip).components["sim_target"]
    assert published == pytest.approx(1.0, abs=1e-4) and strict < published - 1e-3


# -- a_sound_include and a_sound_cot ------------------------------------------------------------
def test_include_scores_the_range_fraction(tmp_path, configure, mmmg_instructions):
    from mmverify.tasks.sound import SoundInclude

    rows = instruction_rows(mmmg_instructions, "a_sound_include")
    index = next(i for i, r in enumerate(rows) if 0 < r["range"][0] and r["range"][1] < 1)  # room on both sides
    a, b = rows[index]["range"]
    n = 8 * SR
    lo, hi = round(a * n), round(b * n)
    clip = tone(8, 200, seed=2)
    target = tone((hi - lo) / SR, 700, seed=3)
    assert len(target) == hi - lo
    clip[lo:hi] = target
    path = write(tmp_path / "clip.wav", clip)
    configure(esc50=esc50_tree(tmp_path / "ESC-50", {rows[index]["target"]: refs(target)}))
    [row] = score([audio_item("a_sound_include", path, instance_id=f"a_sound_include/{index}")], tmp_path, mmmg_instructions)
    assert row["score"] == 1.0 and row["passed"] is True, row
    assert row["evidence"]["segments_s"] == {"target": [round(lo / SR, 4), round(hi / SR, 4)]}
    assert row["components"]["sim_target"] == pytest.approx(1.0, abs=1e-5)
    # The same sound one range later is not in the asked fraction.
    moved = tone(8, 200, seed=2)
    shift = min(hi - lo, n - hi)
    moved[lo + shift : hi + shift] = target[: hi - lo]
    assert direct(SoundInclude(threshold=0.999), rows[index], write(tmp_path / "moved.wav", moved)).score == 0.0


def test_cot_scores_the_whole_clip_and_thresholds_are_strict(tmp_path, configure, mmmg_instructions):
    SoundCot, MusicExclude = task_class("a_sound_cot"), task_class("a_music_exclude")

    rows = instruction_rows(mmmg_instructions, "a_sound_cot")
    target = rows[0]["target"]
    whole = tone(5, 440, seed=4)
    configure(esc50=esc50_tree(tmp_path / "ESC-50", {target: refs(whole)}), openmic=folder_tree(tmp_path / "openmic", {"piano": refs(whole)}))
    [row] = score([audio_item("a_sound_cot", write(tmp_path / "same.wav", whole), instance_id="a_sound_cot/0")], tmp_path, mmmg_instructions)
    assert row["score"] == 1.0 and row["evidence"]["segments_s"] == {"target": [0.0, 5.0]}

    # A different clip: whatever its similarity s, "> s" fails and "> just below s" passes; "<" mirrors it.
    other = write(tmp_path / "other.wav", tone(5, 523, seed=5))
    sim = direct(SoundCot(), {"target": target}, other).components["sim_target"]
    assert -1.0 < sim < 0.999
    assert direct(SoundCot(threshold=sim), {"target": target}, other).score == 0.0
    assert direct(SoundCot(threshold=float(np.nextafter(sim, -np.inf))), {"target": target}, other).score == 1.0
    assert direct(MusicExclude(threshold=sim), {"instrument": "piano"}, other).score == 0.0
    assert direct(MusicExclude(threshold=float(np.nextafter(sim, np.inf))), {"instrument": "piano"}, other).score == 1.0


class ShippingDecoder:
    """Decodes here, but ships the whole clip at the rates asked for and resamples the parts it is
    given, as decoding processes do (with ``resample``, untouched by the test's counting); records
    what it was asked."""

    def __init__(self, resample) -> None:
        self.asked: list[tuple[int, ...]] = []
        self.parts: list[tuple[int, int, int]] = []
        self._resample = resample

    def clip(self, source, sample_rate=None, limits=DEFAULT_LIMITS, whole_at=()):
        self.asked.append(tuple(whole_at))
        decoded = INLINE.clip(source, sample_rate, limits)
        return DecodedAudio(decoded.samples, decoded.rate, {rate: self._resample(decoded.samples, decoded.rate, rate) for rate in whole_at})

    def resample(self, signals, orig_sr, target_sr):
        self.parts += [(len(signal), orig_sr, target_sr) for signal in signals]
        return [self._resample(signal, orig_sr, target_sr) for signal in signals]


def test_clap_tasks_leave_resampling_to_decoding(tmp_path, configure, monkeypatch):
    """A whole-clip task asks decoding for the clip at CLAP's rate and embeds what it ships; an edge
    task asks for nothing and has its decoder resample the two edges; neither resamples anything
    itself, and the components are those of resampling here."""
    from mmverify.core import media
    from mmverify.tasks import sound

    whole = tone(5, 440, seed=4)
    configure(esc50=esc50_tree(tmp_path / "ESC-50", {"dog": refs(whole), "rain": refs(noise(5, seed=1))}))
    path = write(tmp_path / "clip.wav", whole)
    parts = [ResolvedPart("audio", media=path, label=path.name)]
    resample = media.resample
    edges = [(2 * SR, SR, 48_000)] * 2  # 5 s: two edges of min(4, 5 // 2) = 2 s
    cases = (
        (task_class("a_sound_cot")(), {"target": "dog"}, (48_000,), []),
        (sound.SoundBeginEnd(), {"start": "dog", "end": "rain"}, (), edges),
    )
    for task, data, asked, parts_asked in cases:
        here = task.score(Instance("test/0", data), Response(parts))  # references indexed, resampling here
        shipping, made_here = ShippingDecoder(resample), []
        monkeypatch.setattr(media, "resample", lambda signal, *rates: made_here.append((len(signal), *rates)) or resample(signal, *rates))
        shipped = task.score(Instance("test/0", data), Response(parts, decoder=shipping))
        monkeypatch.setattr(media, "resample", resample)
        assert shipping.asked == [asked] and shipping.parts == parts_asked, task.id
        assert made_here == [] and shipped.components == here.components, (task.id, made_here)


# -- a_sound_silence --------------------------------------------------------------------------
def test_silence_needs_exactly_two_segments_start_then_end(tmp_path, configure, mmmg_instructions):
    from mmverify.tasks.sound import SoundSilence

    row = instruction_rows(mmmg_instructions, "a_sound_silence")[0]
    a, b = tone(2, 330), tone(2, 1200, seed=6)
    two = write(tmp_path / "two.wav", np.concatenate([a, silence(2), b]))
    samples = decoded(two)
    (s0, e0), (s1, e1) = split_on_silence(samples, SR, top_db=40, min_gap_s=1.0)
    configure(esc50=esc50_tree(tmp_path / "ESC-50", {row["start"]: refs(samples[s0:e0]), row["end"]: refs(samples[s1:e1])}))

    clips = {
        0: write(tmp_path / "zero.wav", silence(6)),
        1: write(tmp_path / "one.wav", tone(6, 330)),
        2: two,
        3: write(tmp_path / "three.wav", np.concatenate([a[: 3 * SR // 2], silence(1.5), b[: 3 * SR // 2], silence(1.5), a[: 3 * SR // 2]])),
    }
    got = score([audio_item("a_sound_silence", p, instance_id="a_sound_silence/0") for p in clips.values()], tmp_path, mmmg_instructions)
    for count, row_out in zip(clips, got):
        if count == 2:
            assert row_out["score"] == 1.0 and row_out["passed"] is True, row_out
            assert row_out["evidence"]["segments_s"] == {"start": [round(s0 / SR, 4), round(e0 / SR, 4)], "end": [round(s1 / SR, 4), round(e1 / SR, 4)]}
        else:
            assert (row_out["score"], row_out["reason"], row_out["passed"]) == (0.0, "wrong_segment_count", False), row_out
            assert row_out["evidence"]["segment_count"] == count
    # The sounds in the other order: each segment meets the other class's references.
    reversed_clip = write(tmp_path / "reversed.wav", np.concatenate([b, silence(2), a]))
    assert direct(SoundSilence(threshold=0.999), row, reversed_clip).score == 0.0


# -- instruments and genre ----------------------------------------------------------------------
def test_instrument_inclusion_and_exclusion(tmp_path, configure, mmmg_instructions):
    MusicExclude = task_class("a_music_exclude")

    exclude_rows = instruction_rows(mmmg_instructions, "a_music_exclude")
    attribute_rows = instruction_rows(mmmg_instructions, "a_music_attribute")
    inc = next(i for i, r in enumerate(attribute_rows) if r.get("instrument"))
    exc = next(i for i, r in enumerate(exclude_rows) if r["instrument"] == attribute_rows[inc]["instrument"])
    music = tone(6, 262, seed=8)
    configure(openmic=folder_tree(tmp_path / "openmic", {attribute_rows[inc]["instrument"]: refs(music), "violin": refs(tone(6, 660))}))
    clip = write(tmp_path / "music.wav", music)
    text_only = {"task": "a_music_exclude", "instance_id": f"a_music_exclude/{exc}", "parts": [{"type": "text", "text": "no audio here"}]}
    got = score(
        [
            audio_item("a_music_instrument", clip, instance_id=f"a_music_attribute/{inc}"),
            audio_item("a_music_exclude", clip, instance_id=f"a_music_exclude/{exc}"),
            text_only,
            audio_item("a_music_exclude", clip, clip, instance_id=f"a_music_exclude/{exc}"),
        ],
        tmp_path,
        mmmg_instructions,
    )
    assert (got[0]["score"], got[0]["passed"]) == (1.0, True) and "sim_instrument" in got[0]["components"]
    assert (got[1]["score"], got[1]["passed"]) == (0.0, False)  # the excluded instrument is there
    assert (got[2]["score"], got[2]["passed"], got[2]["reason"]) == (0.0, False, "no_audio")  # no audio fails, as published
    assert (got[3]["score"], got[3]["reason"]) == (0.0, "wrong_audio_count")
    other = write(tmp_path / "other.wav", tone(6, 392, seed=9))
    passed = direct(MusicExclude(threshold=0.999), exclude_rows[exc], other)
    assert passed.score == 1.0 and passed.passed is True and passed.evidence["direction"] == "<"


def test_genre_against_gtzan_windows(tmp_path, configure):
    MusicGenre = task_class("a_music_genre")

    jazz = [sweep(21, 200, 2000), sweep(21, 2500, 300)]  # sweeps: every 10 s window sounds different
    root = folder_tree(tmp_path / "GTZAN", {"jazz": jazz, "hiphop": [tone(21, 150, seed=12)]})
    configure(gtzan=root)
    first_ten = write(tmp_path / "first.wav", jazz[0][: 10 * SR])
    items = [audio_item("a_music_genre", first_ten, instance={"genre": g}) for g in ("jazz", "Hip-Hop")]
    jazz_row, hiphop_row = score(items, tmp_path)
    assert jazz_row["status"] == "scored" and "sim_genre" in jazz_row["components"], jazz_row
    assert jazz_row["evidence"]["references"] == {"jazz": 6} and jazz_row["evidence"]["reference_set"]["layout"] == "gtzan-thirds"
    assert hiphop_row["status"] == "scored" and hiphop_row["evidence"]["references"] == {"hiphop": 3}

    # Each published window of a reference file is a reference of its own: with top_k=1 a clip equal
    # to the first 10 s, the 10-20 s or the last 10 s finds it (~1: the file was resampled whole).
    nearest = MusicGenre(top_k=1)
    windows = {"first": jazz[0][: 10 * SR], "middle": jazz[0][10 * SR : 20 * SR], "last": jazz[0][-10 * SR :]}
    for name, clip in windows.items():
        sim = direct(nearest, {"genre": "jazz"}, write(tmp_path / f"{name}.wav", clip)).components["sim_genre"]
        assert sim > 0.999, (name, sim)
    offset = direct(nearest, {"genre": "jazz"}, write(tmp_path / "offset.wav", jazz[0][5 * SR : 15 * SR])).components["sim_genre"]
    assert offset < 0.999
    whole = direct(MusicGenre(layout="gtzan"), {"genre": "jazz"}, first_ten)
    assert whole.evidence["references"] == {"jazz": 2} and whole.evidence["reference_set"]["layout"] == "gtzan"


# -- errors ---------------------------------------------------------------------------------------
def test_missing_references_are_model_unavailable(tmp_path, configure, mmmg_instructions):
    clip = write(tmp_path / "a.wav", tone(5, 440))
    [row] = score([audio_item("a_sound_cot", clip, instance_id="a_sound_cot/0")], tmp_path, mmmg_instructions)
    assert row["status"] == "error" and row["error"]["code"] == "model_unavailable" and row["score"] is None
    assert "MMVERIFY_REFERENCES" in row["error"]["message"] and "meta/esc50.csv" in row["error"]["message"]

    configure(esc50=tmp_path / "nowhere")
    got = score([audio_item("a_sound_cot", clip, instance_id="a_sound_cot/0"), audio_item("a_music_exclude", clip, instance_id="a_music_exclude/0")], tmp_path, mmmg_instructions)
    assert [r["error"]["code"] for r in got] == ["model_unavailable", "model_unavailable"]
    assert "not usable" in got[0]["error"]["message"] and "'openmic' is not configured" in got[1]["error"]["message"]


def test_class_names_resolve_across_spellings_and_unknown_ones_are_invalid(tmp_path, configure, mmmg_instructions):
    rows = instruction_rows(mmmg_instructions, "a_sound_include")
    index = next(i for i, r in enumerate(rows) if r["target"] == "chirping birds")
    clip = tone(5, 440)
    # The ESC-50 release spells categories with underscores; MMMG's annotations with spaces.
    configure(esc50=esc50_tree(tmp_path / "ESC-50", {"chirping birds": refs(clip, copies=2)}, underscores=True))
    path = write(tmp_path / "a.wav", clip)
    got = score(
        [
            audio_item("a_sound_include", path, instance_id=f"a_sound_include/{index}"),
            audio_item("a_sound_cot", path, instance={"target": "chirping bird"}),
            audio_item("a_sound_include", path, instance={"target": "chirping birds", "range": [0.5, 0.2]}),
            audio_item("a_sound_cot", path, instance={"instruction": "no target"}),
        ],
        tmp_path,
        mmmg_instructions,
    )
    assert got[0]["status"] == "scored" and got[0]["evidence"]["references"] == {"chirping_birds": 4}, got[0]
    assert got[0]["evidence"]["classes"] == {"target": "chirping birds"}
    assert [r["error"]["code"] for r in got[1:]] == ["invalid_instance"] * 3
    assert "Did you mean 'chirping_birds'" in got[1]["error"]["message"]
    assert "range" in got[2]["error"]["message"] and "'target'" in got[3]["error"]["message"]


# -- the index is built once per process and reused across runs ----------------------------------
def test_reference_index_is_built_once_and_reused(tmp_path, configure, mmmg_instructions, monkeypatch):
    from mmverify.models import hub
    from mmverify.references import sets

    clip = tone(5, 440)
    configure(esc50=esc50_tree(tmp_path / "ESC-50", {"cow": refs(clip, copies=3)}))
    embedded: list[int] = []

    def counting_backend():
        backend = hub.get_hub().backend("audio_text")
        original = type(backend).embed_audio

        def embed_audio(self, clips, padding=None):
            embedded.append(len(clips))
            return original(self, clips, padding)

        monkeypatch.setattr(backend, "embed_audio", embed_audio.__get__(backend))

    counting_backend()
    item = audio_item("a_sound_cot", write(tmp_path / "a.wav", clip), instance={"target": "cow"})
    first = score([item], tmp_path)
    assert embedded == [5, 1], embedded  # 5 references, then the clip
    second = score([item], tmp_path)
    assert embedded == [5, 1, 1] and second == first

    # A new process (fresh memo and hub) loads the stored index instead of embedding the references.
    sets.clear_memo()
    monkeypatch.setattr(hub, "_HUB", None)
    counting_backend()
    assert score([item], tmp_path) == first and embedded == [5, 1, 1, 1]
    assert (tmp_path / "cache" / "references").is_dir()


def test_score_cli_references_option(tmp_path, configure, tiny_clap, monkeypatch):
    from typer.testing import CliRunner

    from mmverify.cli import app
    from mmverify.references import sets

    clip = tone(5, 440)
    root = esc50_tree(tmp_path / "ESC-50", {"cow": refs(clip, copies=3)})
    write(tmp_path / "a.wav", clip)
    manifest = tmp_path / "manifest.jsonl"
    manifest.write_text(json.dumps(audio_item("a_sound_cot", Path("a.wav"), instance={"target": "cow"})) + "\n")
    monkeypatch.setenv(sets.ENV_VAR, "")  # restored after the test: the command sets it
    runner = CliRunner()
    result = runner.invoke(app, ["score", str(manifest), "--out", str(tmp_path / "run"), "--references", f"esc50={root}", "-q"])
    assert result.exit_code == 0, result.output
    [row] = [json.loads(line) for line in (tmp_path / "run" / "results.jsonl").read_text().splitlines()]
    assert row["status"] == "scored" and row["score"] == 1.0, row
    wrong = runner.invoke(app, ["score", str(manifest), "--out", str(tmp_path / "run2"), "--references", f"esc5={root}"])
    assert wrong.exit_code == 2 and "esc50" in wrong.output


def test_references_build_command_indexes_every_configured_set(tmp_path, configure, tiny_clap):
    from typer.testing import CliRunner

    from mmverify.cli import app

    root = esc50_tree(tmp_path / "esc50", {"dog": refs(tone(2.0, 440.0), copies=2, unrelated=1), "rain": [noise(2.0, 3)]})
    result = CliRunner().invoke(app, ["references", "build", "--references", f"esc50={root}"])
    assert result.exit_code == 0, result.output
    assert "esc50 (esc50, mmmg): 2 classes" in " ".join(result.output.split())
    assert len(list((tmp_path / "cache" / "references").rglob("embeddings.npy"))) == 1
    both = CliRunner().invoke(app, ["references", "build", "--references", f"esc50={root}", "--profile", "mmmg", "--profile", "strict"])
    assert both.exit_code == 0, both.output
    assert "esc50 (esc50, strict): 2 classes" in " ".join(both.output.split())
    assert len(list((tmp_path / "cache" / "references").rglob("embeddings.npy"))) == 2  # one index per padding
    missing = CliRunner().invoke(app, ["references", "build"], env={"MMVERIFY_REFERENCES": ""})
    assert missing.exit_code == 2 and "no reference sets configured" in missing.output
    gone = CliRunner().invoke(app, ["references", "build", "--references", f"esc50={tmp_path / 'gone'}"])
    assert gone.exit_code == 2 and f"reference folder not found: esc50={tmp_path / 'gone'}" in " ".join(gone.output.split())
