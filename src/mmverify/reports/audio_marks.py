"""What an audio verifier looked at, drawn over the clip's envelope.

* segments (``evidence.segments_s``: the silence split of a_sound_silence, the edges of
  a_sound_begin_end, the range of a_sound_include) as shaded spans;
* a_music_intensity: the analysed window, its normalised RMS envelope, the regression points and
  the fitted line, recomputed from the clip with the verifier's own window rule and defaults
  (the slope and standard error shown in the caption are the row's);
* beats (``evidence.beat_times``, seconds on the silence-trimmed clip) as ticks, shifted by the
  trimmed lead-in.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from ..verifiers.audio.intensity import IntensityParams, analysis_window
from .figures import ACCENT, BAD, GOOD, AudioFigure, peak_envelope

ENVELOPE_COLUMNS = 240
SPAN_COLOURS = (GOOD, "#8e44ad", "#d35400", ACCENT)
TEMPO_TRIM_DB = 60.0  # a_music_tempo trims silence at this level before tracking beats


@dataclass(frozen=True)
class IntensityTrace:
    start_s: float
    end_s: float
    curve: list[tuple[float, float]]
    points: list[tuple[float, float]]
    line: tuple[float, float, float, float] | None


def _pair(value: Any) -> tuple[float, float] | None:
    if isinstance(value, (list, tuple)) and len(value) == 2 and all(isinstance(v, (int, float)) for v in value):
        return float(value[0]), float(value[1])
    return None


def segment_spans(evidence: Mapping[str, Any]) -> list[tuple[float, float, str, str]]:
    """``segments_s`` as (start, end, label, colour): a mapping label -> [start, end], or a list."""
    raw = evidence.get("segments_s")
    if isinstance(raw, Mapping):
        named = [(str(k), _pair(v)) for k, v in raw.items()]
    elif isinstance(raw, list):
        named = [(f"segment {i + 1}", _pair(v)) for i, v in enumerate(raw)]
    else:
        return []
    spans = [(span[0], span[1], label) for label, span in named if span is not None]
    return [(s, e, label, SPAN_COLOURS[i % len(SPAN_COLOURS)]) for i, (s, e, label) in enumerate(spans)]


def _regression_points(norm: np.ndarray, params: IntensityParams) -> list[int]:
    from scipy.signal import find_peaks

    peaks = [int(p) for p in find_peaks(norm, distance=params.peak_distance)[0]]
    if not peaks:
        return []
    if peaks[0] >= params.edge_frames:
        peaks.insert(0, 0)
    if peaks[-1] < len(norm) - params.edge_frames:
        peaks.append(len(norm) - 1)
    return peaks


def intensity_trace(samples: np.ndarray, rate: int, position: str, params: IntensityParams = IntensityParams()) -> IntensityTrace | None:
    """The window, envelope and fit of the intensity check at ``position``; None when nothing is measurable."""
    import librosa

    if position not in ("start", "end") or samples.size == 0:
        return None
    trimmed, (lead, _) = librosa.effects.trim(samples, top_db=params.trim_top_db)
    window = analysis_window(trimmed, rate, position, params)
    if len(window) == 0:
        return None
    offset = (int(lead) + (0 if position == "start" else len(trimmed) - len(window))) / rate
    rms = librosa.feature.rms(y=window)[0]
    spread = float(rms.max() - rms.min())
    if spread <= 0:
        return None
    norm = (rms - rms.min()) / spread
    times = librosa.frames_to_time(np.arange(len(norm)), sr=rate)
    peaks = _regression_points(norm, params)
    line = None
    if len(peaks) >= 2:
        slope, intercept = np.polyfit(times[peaks], norm[peaks], 1)
        t0, t1 = float(times[0]), float(times[-1])
        line = (offset + t0, float(intercept + slope * t0), offset + t1, float(intercept + slope * t1))
    return IntensityTrace(
        start_s=offset,
        end_s=offset + len(window) / rate,
        curve=[(offset + float(t), float(v)) for t, v in zip(times, norm)],
        points=[(offset + float(times[p]), float(norm[p])) for p in peaks],
        line=line,
    )


def _intensity_caption(evidence: Mapping[str, Any], components: Mapping[str, Any]) -> str:
    text = f"{evidence.get('position')}: measured {evidence.get('measured') or 'no trend'}, expected {evidence.get('expected')}"
    slope, stderr = components.get("slope"), components.get("stderr")
    if isinstance(slope, (int, float)) and isinstance(stderr, (int, float)):
        text += f"; slope {slope:+.3f}/s, stderr {stderr:.3f}"
    note = evidence.get("note")
    return f"{text} ({note})" if note else text


def _add_intensity(figure: AudioFigure, samples: np.ndarray, rate: int, row: Mapping[str, Any]) -> None:
    evidence, components = row.get("evidence") or {}, row.get("components") or {}
    trace = intensity_trace(samples, rate, str(evidence.get("position")))
    figure.caption = _intensity_caption(evidence, components)
    if trace is None:
        return
    figure.spans.append((trace.start_s, trace.end_s, "analysed window", ACCENT))
    figure.curve, figure.points, figure.line = trace.curve, trace.points, trace.line


def _add_beats(figure: AudioFigure, samples: np.ndarray, rate: int, evidence: Mapping[str, Any]) -> None:
    import librosa

    beats = evidence.get("beat_times")
    if not isinstance(beats, list):
        return
    _, (lead, _) = librosa.effects.trim(samples, top_db=TEMPO_TRIM_DB)
    shift = int(lead) / rate
    figure.ticks = [(shift + float(t), BAD) for t in beats if isinstance(t, (int, float))]


def _tempo_caption(row: Mapping[str, Any]) -> str:
    evidence, components = row.get("evidence") or {}, row.get("components") or {}
    bpm = components.get("bpm")
    measured = f"{bpm:.1f} BPM" if isinstance(bpm, (int, float)) else "no tempo"
    text = f"{measured} from {evidence.get('beats', '?')} beats ({evidence.get('estimator', '?')}), target {evidence.get('target_bpm')} BPM"
    return text if isinstance(evidence.get("beat_times"), list) else text + "; beat times not recorded in the row"


def audio_figure(row: Mapping[str, Any], samples: np.ndarray, rate: int) -> AudioFigure:
    """The clip's envelope with the marks the row's task and evidence call for."""
    evidence = row.get("evidence") or {}
    figure = AudioFigure(duration=len(samples) / rate, envelope=peak_envelope(samples, ENVELOPE_COLUMNS))
    figure.spans = segment_spans(evidence)
    if figure.spans:
        figure.caption = "segments: " + ", ".join(f"{label} {start:.2f}–{end:.2f} s" for start, end, label, _ in figure.spans)
    task = row.get("task")
    if task == "a_music_intensity" and row.get("status") == "scored":
        _add_intensity(figure, samples, rate, row)
    if task == "a_music_tempo" or "beat_times" in evidence:
        _add_beats(figure, samples, rate, evidence)
        figure.caption = _tempo_caption(row)
    return figure
