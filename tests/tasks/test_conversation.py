"""a_consistency_conversation on published row 0 (order Alice, Bob, Charlie, Alice, Bob; Charlie must
start with "I disagree", Bob's last turn must include "compromise" and "suggestion").

Transcripts are scripted; voices are real espeak-ng voices embedded by resemblyzer's bundled encoder.
Measured cosines on these turns: same voice, different sentence 0.91-0.94; different voices <= 0.80.
The published 0.93 threshold (set for WavLM-SV on natural speech) would fail most same-voice pairs
here, so these tests use 0.84, which separates the two groups with margin on both sides.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from mmverify.api import score_items
from mmverify.tasks.conversation import Conversation
from mmverify.verifiers.speech.text_metrics import english_normalizer_name
from tests.conftest import espeak

from .speech_task_fixtures import (  # noqa: F401  (fixtures)
    NO_MODELS,
    ScriptedTranscriber,
    item,
    rows,
    score_direct,
    speech_instructions,
    tiny_models,
    use_models,
)

pytest.importorskip("resemblyzer")

THRESHOLD = 0.84
VOICES = {0: "en-us+m3", 1: "en-us+f3", 2: "en+m7"}  # speaker id -> espeak voice
TURNS = [  # about 6 s each: shorter turns make resemblyzer's same-voice cosines spread down to ~0.79
    "Let us go hiking in the mountains this weekend. The trails near the lake should be quiet and beautiful.",
    "I would rather visit the new museum in the city. They opened an exhibition about ancient ships last month.",
    "I disagree, the weather will be perfect for hiking. It would be a shame to spend a sunny day indoors.",
    "Then we should leave early on Saturday morning. I can drive if everyone meets at my house by seven.",
    "My compromise is a short hike on Saturday and the museum on Sunday, and that is my suggestion.",
]
SPEECH = NO_MODELS.replace("wavlm-sv@/nonexistent/wavlm", "resemblyzer")


@pytest.fixture(scope="module")
def row(mmmg_instructions) -> dict:
    data = rows(mmmg_instructions, "a_consistency_conversation")[0]
    assert data["order"] == [0, 1, 2, 0, 1] and set(data["constraint"]) == {"2", "4"}
    return data


@pytest.fixture(scope="module")
def turn_clips(tmp_path_factory, row) -> dict[tuple[int, str], Path]:
    """(turn, voice) -> clip: every turn in its speaker's voice, plus the variants the tests swap in."""
    folder = tmp_path_factory.mktemp("turns")
    wanted = {(t, VOICES[s]) for t, s in enumerate(row["order"])} | {(3, VOICES[1])} | {(t, VOICES[0]) for t in range(5)}
    clips = {}
    for turn, voice in sorted(wanted):
        clips[(turn, voice)] = folder / f"{turn}-{voice}.wav"
        espeak(TURNS[turn], clips[(turn, voice)], voice=voice)
    return clips


def _clips(turn_clips, row, **voice_of_turn: str) -> list[Path]:
    return [turn_clips[(t, voice_of_turn.get(f"t{t}", VOICES[s]))] for t, s in enumerate(row["order"])]


def _score(task, row, paths, tmp_path, monkeypatch, transcripts=TURNS):  # type: ignore[no-untyped-def]
    use_models(monkeypatch, tmp_path / "cache", SPEECH, transcriber=ScriptedTranscriber(transcripts))
    return score_direct(task, row, paths, "a_consistency_conversation")


def test_right_voices_and_constraints_score_one(tmp_path, monkeypatch, row, turn_clips):
    check = _score(Conversation(speaker_threshold=THRESHOLD), row, _clips(turn_clips, row), tmp_path, monkeypatch)
    assert check.score == 1.0
    c = check.components
    assert (c["turn_2"], c["turn_4"], c["constraint_score"], c["same_speaker_ok"], c["distinct_speakers_ok"]) == (1.0, 1.0, 1.0, 1.0, 1.0)
    assert c["min_same_speaker_similarity"] > THRESHOLD > c["max_cross_speaker_similarity"]
    assert [t["transcript"] for t in check.evidence["turns"]] == TURNS
    assert len(check.evidence["similarities"]) == 10


def test_score_is_the_mean_over_constrained_turns(tmp_path, monkeypatch, row, turn_clips):
    transcripts = TURNS[:4] + ["My compromise is a short hike on Saturday."]  # turn 4 lacks "suggestion"
    check = _score(Conversation(speaker_threshold=THRESHOLD), row, _clips(turn_clips, row), tmp_path, monkeypatch, transcripts)
    assert (check.components["turn_2"], check.components["turn_4"]) == (1.0, 0.0)
    assert check.score == 0.5 and check.components["same_speaker_ok"] == 1.0


def test_a_turn_in_the_wrong_voice_fails_the_same_speaker_check(tmp_path, monkeypatch, row, turn_clips):
    # Alice's second turn spoken in Bob's voice
    check = _score(Conversation(speaker_threshold=THRESHOLD), row, _clips(turn_clips, row, t3=VOICES[1]), tmp_path, monkeypatch)
    assert check.components["constraint_score"] == 1.0
    assert check.components["same_speaker_ok"] == 0.0 and check.score == 0.0
    assert check.components["distinct_speakers_ok"] == 0.0  # and it now matches Bob's turns


def test_one_voice_for_everyone_passes_version_1_but_not_the_distinct_speaker_check(tmp_path, monkeypatch, row, turn_clips):
    clips = _clips(turn_clips, row, **{f"t{t}": VOICES[0] for t in range(5)})
    published = _score(Conversation(speaker_threshold=THRESHOLD), row, clips, tmp_path, monkeypatch)
    assert published.components["same_speaker_ok"] == 1.0 and published.components["distinct_speakers_ok"] == 0.0
    assert published.score == 1.0  # the published check cannot tell one voice from three
    strict = _score(Conversation(speaker_threshold=THRESHOLD, require_distinct_speakers=True), row, clips, tmp_path, monkeypatch)
    assert strict.score == 0.0


def test_clip_count_must_match_the_speaking_order(tmp_path, monkeypatch, mmmg_instructions, row, turn_clips):
    use_models(monkeypatch, tmp_path / "cache", NO_MODELS)  # decided before any model runs
    clips = _clips(turn_clips, row)
    base = clips[0].parent
    results = score_items(
        [item("a_consistency_conversation", "a_consistency_conversation/0", *clips[:4], base=base),
         {"task": "a_consistency_conversation", "instance_id": "a_consistency_conversation/0", "parts": [{"type": "text", "text": "hi"}]}],
        base_dir=base, instructions=mmmg_instructions,
    )  # fmt: skip
    assert [(r["score"], r["reason"]) for r in results] == [(0.0, "wrong_audio_count"), (0.0, "no_audio")]
    assert results[0]["evidence"]["audio_count"] == 4 and results[0]["evidence"]["expected"] == 5


def test_parameters_are_validated():
    for bad in ({"speaker_threshold": 1.5}, {"require_distinct_speakers": "yes"}, {"semantics": "fuzzy"}):
        with pytest.raises(ValueError):
            Conversation(**bad)
    assert Conversation().params() == {
        "speaker_threshold": 0.93, "require_distinct_speakers": False, "semantics": "published",
        "transcription": {"force_language": True, "max_seconds": 30.0},
    }  # fmt: skip
    strict = Conversation.build("strict")
    assert (strict.require_distinct_speakers, strict.semantics) == (True, "word")
    assert strict.params()["transcription"] == {"force_language": False, "max_seconds": None}
    with pytest.raises(ValueError):
        Conversation(transcription=None)  # type: ignore[arg-type]


def test_profiles_differ_in_the_distinct_speaker_check_and_the_transcription(tmp_path, monkeypatch, row, turn_clips):
    """One voice for everyone: mmmg (published) passes it, strict does not; mmmg forces English on
    the first 30 s, strict detects the language on whole clips."""
    clips = _clips(turn_clips, row, **{f"t{t}": VOICES[0] for t in range(5)})
    for profile, score, language, seconds in (("mmmg", 1.0, "en", 30.0), ("strict", 0.0, "detect", None)):
        params = {**Conversation.profile_params(profile), "speaker_threshold": THRESHOLD}
        transcriber = ScriptedTranscriber(TURNS)
        use_models(monkeypatch, tmp_path / f"cache-{profile}", SPEECH, transcriber=transcriber)
        check = score_direct(Conversation(**params), row, clips, "a_consistency_conversation")
        assert check.score == score and check.components["distinct_speakers_ok"] == 0.0
        assert transcriber.languages == [language] and transcriber.max_seconds == [seconds]


class ScriptedSpeaker:
    """Returns the given unit rows as the clips' speaker embeddings."""

    sample_rate = 16_000
    name = "scripted"

    def __init__(self, rows: np.ndarray) -> None:
        self.rows = rows

    def ensure_loaded(self) -> None:
        pass

    def embed(self, clips):  # type: ignore[no-untyped-def]
        assert len(clips) == len(self.rows)
        return self.rows


@pytest.mark.skipif(english_normalizer_name() != "openai-whisper", reason="the reference needs openai-whisper's spelling map")
@pytest.mark.parametrize("seed", range(12))
def test_the_published_combination_on_random_conversations(tmp_path, monkeypatch, mmmg_instructions, seed):
    """Random speaking orders, per-turn verdicts and voice similarities against the re-derived
    published rule: mean of the per-turn checks x [every same-speaker pair > 0.93]."""
    from mmverify.core.types import Instance
    from mmverify.tasks.response import ResolvedPart, Response
    from tests.reference import mmmg_audio as ref

    rng = np.random.default_rng(seed)
    order = [int(x) for x in rng.integers(0, 3, int(rng.integers(2, 6)))]
    turns = sorted(rng.choice(len(order), int(rng.integers(1, len(order) + 1)), replace=False).tolist())
    said = [str(rng.choice(["we agree on a compromise", "no way", "i disagree with you"])) for _ in order]
    constraint = {str(t): ["keyword_include", "compromise"] for t in turns}
    voices = rng.normal(size=(3, 16))
    embeddings = np.array([voices[s] + (rng.normal(size=16) * (0.05 if rng.random() < 0.8 else 2.0)) for s in order])
    embeddings /= np.linalg.norm(embeddings, axis=1, keepdims=True)
    use_models(monkeypatch, tmp_path / "cache", NO_MODELS, transcriber=ScriptedTranscriber(said), speaker=ScriptedSpeaker(embeddings))
    clip = tmp_path / "t.wav"
    sf.write(clip, np.sin(np.arange(4000) / 10).astype(np.float32) * 0.2, 22050)
    instance = Instance(id="conv", data={"order": order, "constraint": constraint}, source="a_consistency_conversation")
    check = Conversation().score(instance, Response([ResolvedPart("audio", media=clip, label="t")] * len(order)))
    expected_turns = [ref.constraints_hold(said[t], ["keyword_include", "compromise"]) for t in turns]
    expected = ref.conversation_score(expected_turns, order, embeddings @ embeddings.T, len(order))
    assert check.score == pytest.approx(expected, abs=1e-12)


def test_runs_on_tiny_models_deterministically(tmp_path, monkeypatch, tiny_models, speech_instructions, row, turn_clips):
    clips = _clips(turn_clips, row)
    base = clips[0].parent
    items = [item("a_consistency_conversation", "a_consistency_conversation/0", *clips, base=base)]
    runs = []
    for attempt in range(2):
        monkeypatch.setenv("MMVERIFY_NO_OUTPUT_CACHE", "1")
        use_models(monkeypatch, tmp_path / f"cache{attempt}", tiny_models)
        runs.append(score_items(items, base_dir=base, instructions=speech_instructions))
    [first], [second] = runs
    assert first["status"] == "scored" and 0.0 <= first["score"] <= 1.0, first["error"]
    # default (published) threshold here; the real speaker encoder still tells the voices apart
    assert first["components"]["max_cross_speaker_similarity"] < THRESHOLD < first["components"]["min_same_speaker_similarity"]
    assert first == second
