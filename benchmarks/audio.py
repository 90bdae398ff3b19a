"""Audio throughput: the program verifiers on 30 s clips, and a_sound_cot end to end.

Part 1 times each program verifier on in-memory 30 s clips at 22050 Hz (the rate every published
audio check loads at): edge segments, fraction segment, silence split, intensity trend, tempo with
the librosa beat tracker (on the silence-trimmed clip, as a_music_tempo does), Praat pitch and
speaking rate.

Part 2 scores a_sound_cot through the pipeline (``score_items``) with a default-size random-init
CLAP (~153 M parameters, the unfused checkpoint's preprocessing) and a synthetic ESC-50 class of
``--refs`` 44.1 kHz clips: mmverify builds the reference index once, then needs one embedding per
clip; the published approach reloads CLAP and re-encodes every reference for every clip.

    .venv/bin/python benchmarks/audio.py [--clips 12] [--published-clips 3] [--refs 40] [--seconds 5] [--skip-clap]
"""

from __future__ import annotations

import argparse
import csv
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

import numpy as np
import soundfile as sf

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from clap_reference import FILE_SR, Clock, save_random_clap, synth, topk_mean, torch_threads  # noqa: E402

from mmverify.core.media import load_audio, resample  # noqa: E402
from mmverify.verifiers.audio import PUBLISHED_SAMPLE_RATE as SR  # noqa: E402

ESC50_CSV = REPO.parent / "shared" / "mmmg" / "references" / "dataset.csv"
TARGET = "cow"


# -- part 1: program verifiers ------------------------------------------------------------------
def music_clip(seconds: float = 30.0) -> np.ndarray:
    """A pulsing chord at 120 BPM with a fade-in, a 2 s silence in the middle and noise."""
    rng = np.random.default_rng(0)
    t = np.arange(int(seconds * SR)) / SR
    beat = np.exp(-((t * 2.0) % 1.0) * 8.0)  # an accent every 0.5 s
    chord = sum(np.sin(2 * np.pi * f * t) for f in (220.0, 277.2, 329.6)) / 3
    audio = 0.4 * np.clip(t / 4.0, 0.05, 1.0) * (0.3 + 0.7 * beat) * chord + 0.005 * rng.standard_normal(t.size)
    gap = (t > seconds / 2 - 1) & (t < seconds / 2 + 1)
    audio[gap] = 0.0
    return audio.astype(np.float32)


def voice_clip(seconds: float = 30.0) -> np.ndarray:
    """A voiced, speech-like signal: 150 Hz glottal harmonics with vibrato, syllable-rate gating."""
    t = np.arange(int(seconds * SR)) / SR
    f0 = 150.0 * (1 + 0.05 * np.sin(2 * np.pi * 0.7 * t))
    phase = 2 * np.pi * np.cumsum(f0) / SR
    voiced = sum(np.sin(k * phase) / k for k in range(1, 10))
    syllables = (np.sin(2 * np.pi * 4.0 * t) > -0.3).astype(np.float64)
    return (0.3 * voiced * syllables).astype(np.float32)


def items_per_second(run: Callable[[], object], min_seconds: float = 2.0, min_runs: int = 3) -> tuple[float, float]:
    """(items/s wall, items per CPU-second) over at least ``min_runs`` runs and ``min_seconds``."""
    run()  # warm-up: imports, numba/JIT caches, FFT plans
    clock = Clock()
    runs, wall = 0, 0.0
    start = time.perf_counter()
    while runs < min_runs or wall < min_seconds:
        run()
        runs += 1
        wall = time.perf_counter() - start
    span = clock.lap(runs)
    return 1 / span.wall, 1 / span.cpu


def bench_programs() -> None:
    import librosa

    from mmverify.models.beats import LibrosaBeatTracker
    from mmverify.verifiers.audio.intensity import envelope_trend
    from mmverify.verifiers.audio.segments import edge_segment, fraction_segment, split_on_silence
    from mmverify.verifiers.audio.tempo import bpm_from_beat_count
    from mmverify.verifiers.speech.prosody import dominant_pitch_mel, speaking_rate

    music, voice = music_clip(), voice_clip()
    tracker = LibrosaBeatTracker()
    tracker.ensure_loaded()

    def tempo() -> float:
        trimmed, _ = librosa.effects.trim(music, top_db=60.0)
        return bpm_from_beat_count(tracker.beats(trimmed, SR), len(trimmed) / SR)

    cases: dict[str, Callable[[], object]] = {
        "edge segments (start + end)": lambda: (edge_segment(music, SR, "start"), edge_segment(music, SR, "end")),
        "fraction segment [0.25, 0.5]": lambda: fraction_segment(music, [0.25, 0.5]),
        "split_on_silence (40 dB, 1 s)": lambda: split_on_silence(music, SR),
        "intensity trend (start)": lambda: envelope_trend(music, SR, "start"),
        "tempo: trim + librosa-beats": tempo,
        "pitch: dominant_pitch_mel": lambda: dominant_pitch_mel(voice, SR),
        "speaking_rate": lambda: speaking_rate(75, voice, SR),
    }
    print(f"program verifiers on 30 s clips at {SR} Hz (items/s wall | per CPU-second):")
    for name, run in cases.items():
        wall, cpu = items_per_second(run)
        print(f"  {name:32s} {wall:12.1f} | {cpu:12.1f}")
    print(f"  (outputs: {len(split_on_silence(music, SR))} sound segments; {tempo():.1f} BPM by the published beat-count "
          f"estimator for a 120 BPM clip whose 2 s gap has no beats; pitch {dominant_pitch_mel(voice, SR):.0f} mel)")


# -- part 2: a_sound_cot end to end ----------------------------------------------------------------
def esc50_class(root: Path, count: int, seconds: float) -> list[Path]:
    """An ESC-50 release layout holding ``count`` clips of one real category (real file names)."""
    with open(ESC50_CSV, newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        header, rows = reader.fieldnames, [row for row in reader if row["category"] == TARGET]
    rows = (rows * (count // len(rows) + 1))[:count]
    rows = [{**row, "filename": f"{i:03d}-{row['filename']}"} for i, row in enumerate(rows)]
    (root / "audio").mkdir(parents=True)
    (root / "meta").mkdir()
    paths = []
    for i, row in enumerate(rows):
        path = root / "audio" / row["filename"]
        sf.write(path, synth(seconds, 1000 + i), FILE_SR)
        paths.append(path)
    with open(root / "meta" / "esc50.csv", "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=header)
        writer.writeheader()
        writer.writerows(rows)
    return paths


def bench_sound_cot(clips: int, refs: int, seconds: float, batch_size: int, published_clips: int) -> None:
    if clips < 3 or published_clips < 1:
        raise SystemExit("--clips must be >= 3 and --published-clips >= 1")
    from mmverify.api import score_items
    from mmverify.models import hub
    from mmverify.models.clap_hf import HFClap
    from mmverify.references import sets

    with tempfile.TemporaryDirectory(prefix="audio-bench-") as tmp:
        work = Path(tmp)
        started = time.perf_counter()
        params = save_random_clap(work / "clap")
        print(f"\na_sound_cot end to end: random-init ClapModel {params / 1e6:.1f} M parameters "
              f"(saved in {time.perf_counter() - started:.1f} s)")
        ref_paths = esc50_class(work / "ESC-50", refs, seconds)
        generated = []
        for i in range(clips):
            generated.append(work / f"gen{i}.wav")
            sf.write(generated[-1], synth(seconds, i), FILE_SR)
        os.environ.update({
            hub.ENV_VAR: f"audio_text=clap-hf@{work / 'clap'}", sets.ENV_VAR: f"esc50={work / 'ESC-50'}",
            "MMVERIFY_CACHE_DIR": str(work / "cache"), "MMVERIFY_NO_OUTPUT_CACHE": "1",
        })  # fmt: skip
        hub._HUB = None
        sets.clear_memo()
        items = [{"task": "a_sound_cot", "instance": {"target": TARGET}, "parts": [{"type": "audio", "path": str(p)}]} for p in generated]

        # (a) mmverify: the first item loads CLAP and builds the index; the rest need one embedding each.
        # The second item is timed apart: torch's first batch-of-one forwards after the batched
        # reference embedding are slower (allocator and kernel warm-up).
        clock = Clock()
        first = score_items(items[:1])
        setup = clock.lap()
        second = score_items(items[1:2])
        warm_up = clock.lap()
        rest = score_items(items[2:])
        per_item = clock.lap(len(items) - 2)
        rows = first + second + rest
        assert all(row["status"] == "scored" for row in rows), rows
        index_dir = work / "cache" / "references"

        # (a') a new process with the index on disk: load CLAP, load the index, score.
        hub._HUB = None
        sets.clear_memo()
        clock.lap()
        score_items(items[:1])
        warm_start = clock.lap()

        # (b) published: per clip, reload CLAP and re-encode every reference and the clip.
        published = []
        for path in generated[:published_clips]:
            fresh = HFClap(source=str(work / "clap"), batch_size=batch_size)
            ref_rows = fresh.embed_audio([load_audio(p, sample_rate=fresh.sample_rate)[0] for p in ref_paths])
            clip = resample(load_audio(path, sample_rate=SR)[0], SR, fresh.sample_rate)
            published.append(topk_mean(fresh.embed_audio([clip])[0], ref_rows))
            del fresh
        per_item_b = clock.lap(len(published))

    delta = max(abs(row["components"]["sim_target"] - b) for row, b in zip(rows, published))
    print(f"{clips} clips x {refs} references of {TARGET!r}, {seconds:g} s each; {torch_threads()} torch threads; "
          f"index stored under {index_dir.name}/")
    print(f"  (a) mmverify, index built once:   {1 / per_item.wall:6.2f} items/s wall ({1 / per_item.cpu:.2f} per CPU-s)"
          f" over {clips - 2} items   [first item: {setup} = load CLAP + embed {refs} refs; second: {warm_up}]")
    print(f"  (a) new process, index on disk:   first item {warm_start}")
    print(f"  (b) reload + re-encode per clip:  {1 / per_item_b.wall:6.2f} items/s wall ({1 / per_item_b.cpu:.2f} per CPU-s)"
          f" over {len(published)} items")
    print(f"  speed-up (a) over (b): {per_item_b.ratio(per_item)}; max |similarity (a) - (b)| = {delta:.1e}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clips", type=int, default=12, help="generated clips scored end to end")
    parser.add_argument("--published-clips", type=int, default=3, help="of those, scored the published way (slow)")
    parser.add_argument("--refs", type=int, default=40, help="reference clips in the class (ESC-50 has 40)")
    parser.add_argument("--seconds", type=float, default=5.0, help="length of references and generated clips")
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--skip-clap", action="store_true", help="only the program verifiers")
    args = parser.parse_args()
    bench_programs()
    if not args.skip_clap:
        bench_sound_cot(args.clips, args.refs, args.seconds, args.batch_size, args.published_clips)


if __name__ == "__main__":
    main()
