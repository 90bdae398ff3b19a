"""Every model backend: capability, default checkpoint, where its code lives.

Defaults are the checkpoints the MMMG paper used; every entry also accepts a local path
(``MMVERIFY_<NAME>_SOURCE`` or ``--model capability=name@path``).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..core.registry import Registry


@dataclass(frozen=True)
class BackendInfo:
    name: str
    capability: str
    default_source: str | None
    description: str
    impl: str  # "module:Class"
    default_for: bool = False  # the capability's default backend


_M = "mmverify.models"

BACKENDS: tuple[BackendInfo, ...] = (
    BackendInfo("clap-hf", "audio_text", "laion/clap-htsat-unfused", "CLAP via transformers ClapModel, 48 kHz, deterministic 10 s crop", f"{_M}.clap_hf:HFClap", True),
    BackendInfo("laion-clap", "audio_text", None, "original laion_clap package and .pt checkpoints (extra [laion-clap])", f"{_M}.clap_laion:LaionClap"),
    BackendInfo("dreamsim", "image_similarity", "ensemble", "DreamSim 1 - distance, 224x224 bicubic", f"{_M}.dreamsim:DreamSimBackend", True),
    BackendInfo("whisper-hf", "transcriber", "openai/whisper-large-v3", "Whisper via transformers (HF-format checkpoints)", f"{_M}.whisper:HFWhisper", True),
    BackendInfo("whisper-hf-zh", "transcriber_zh", "BELLE-2/Belle-whisper-large-v3-zh", "Chinese Whisper fine-tune via transformers", f"{_M}.whisper:HFWhisperChinese", True),
    BackendInfo("whisper-openai", "transcriber", "large-v3", "openai-whisper package (model name or local .pt)", f"{_M}.whisper_openai:OpenAIWhisper"),
    BackendInfo("wavlm-sv", "speaker", "microsoft/wavlm-base-sv", "WavLM x-vector speaker verification via transformers", f"{_M}.speaker:WavLMSpeaker", True),
    BackendInfo("ecapa", "speaker", "speechbrain/spkrec-ecapa-voxceleb", "speechbrain ECAPA-TDNN (local hparams folder)", f"{_M}.speaker:EcapaSpeaker"),
    BackendInfo("resemblyzer", "speaker", "bundled", "GE2E encoder shipped inside the resemblyzer wheel (works offline)", f"{_M}.speaker:ResemblyzerSpeaker"),
    BackendInfo("gender-w2v2", "gender", "alefiury/wav2vec2-large-xlsr-53-gender-recognition-librispeech", "wav2vec2 gender classifier, first 5 s at 16 kHz", f"{_M}.gender:Wav2Vec2Gender", True),
    BackendInfo("beat-this", "beat_tracker", "final0", "beat_this transformer beat tracker", f"{_M}.beats:BeatThisTracker", True),
    BackendInfo("librosa-beats", "beat_tracker", None, "librosa dynamic-programming beat tracker (no weights)", f"{_M}.beats:LibrosaBeatTracker"),
    BackendInfo("silero-vad", "vad", "bundled", "Silero VAD shipped inside the silero-vad wheel", f"{_M}.vad:SileroVAD", True),
)

BACKEND_INFO: dict[str, BackendInfo] = {b.name: b for b in BACKENDS}
BACKEND_REGISTRY: Registry[type] = Registry("model backend", default_namespace="model")
for _b in BACKENDS:
    BACKEND_REGISTRY.register(_b.name, _b.impl)

CAPABILITIES: dict[str, str] = {b.capability: b.name for b in BACKENDS if b.default_for}
