"""Every MMMG task: id, paper name, modality group, method, what it needs, where its data lives.

The catalog is plain data so that ``mmverify tasks`` and planning never import scoring code.  A task
is scored either by its own class (``impl``) or by a family class with arguments (``family``,
``args``, ``version``: the tasks that differ from their siblings only in settings); a task with
neither produces ``not_implemented`` error rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping

from ..core.registry import Registry, import_object


JUDGE_NEED = "judge"  # a vision-language judge; "judge:ROLE" names another role (judge:llm)

Args = tuple[tuple[str, Any], ...]  # a family row's arguments: (name, value) pairs, see task_args


def judge_role(need: str) -> str | None:
    """The judge role a need asks for ("judge" -> "default", "judge:llm" -> "llm"); None for a model."""
    if need == JUDGE_NEED:
        return "default"
    return need.split(":", 1)[1] if need.startswith(JUDGE_NEED + ":") else None


def task_args(**values: Any) -> Args:
    """A family row's arguments, written as keywords: ``task_args(component="objects_absent")``."""
    return tuple(sorted(values.items()))


@dataclass(frozen=True)
class TaskInfo:
    id: str
    name: str
    group: str  # image | image-text | audio | audio-text
    method: str
    needs: tuple[str, ...] = ()  # what beyond programs: model hub capabilities (audio_text, transcriber, ...) and judges
    sources: tuple[str, ...] = ()  # instruction files (stems); defaults to (id,)
    select: str | None = None  # only rows carrying this field belong to the task
    aggregate: str = "mean"  # "mean" over rows, or "mean_of_sources" (equal weight per source file)
    impl: str | None = None  # "module:Class", a task class of its own
    family: str | None = None  # "module:Class", a family class the task sets ``args`` on
    args: Args = ()  # the family's class attributes this task sets (see task_args)
    version: int = 1  # a family task's version (bump it whenever its scores can change)

    def __post_init__(self) -> None:
        if self.impl and self.family:
            raise ValueError(f"task {self.id!r}: give impl (a class of its own) or family, not both")
        if not self.family and (self.args or self.version != 1):
            raise ValueError(f"task {self.id!r}: args and version belong to family rows (a class has its own version)")
        try:
            hash(self.args)  # rows are immutable data: a list or dict argument fails here, not at first use
        except TypeError as exc:
            raise ValueError(f"task {self.id!r}: args must be (name, value) pairs of immutable values ({exc})") from None

    @property
    def capabilities(self) -> tuple[str, ...]:
        """The model hub capabilities among the needs (the judges left out)."""
        return tuple(need for need in self.needs if judge_role(need) is None)

    @property
    def source_files(self) -> tuple[str, ...]:
        return self.sources or (self.id,)

    @property
    def implemented(self) -> bool:
        return self.impl is not None or self.family is not None

    @property
    def scoring_class(self) -> str | None:
        """``module:Class`` of the code that scores the task: its own class or its family."""
        return self.impl or self.family

    def accepts(self, row: Mapping[str, Any]) -> bool:
        return self.select is None or row.get(self.select) is not None

    def strata(self, instance_ids: Iterable[str]) -> dict[str, str] | None:
        """For a ``mean_of_sources`` task, the source file of each instance: its id's prefix as the
        instruction sets and ``import-mmmg`` name them (``i_ocr_chinese/12``); ids that name none of
        this task's files (inline instances) share one stratum.  None for a plain mean."""
        if self.aggregate != "mean_of_sources":
            return None
        return {name: prefix if (prefix := name.rpartition("/")[0]) in self.source_files else "" for name in instance_ids}


_T = "mmverify.tasks"
_VLM_EXIST = "VLM existence question per object (CoT, Yes/No last); mean"
# families shared by several rows
_SCENE_OBJECTS = f"{_T}.image_judged:SceneObjects"
_EXISTENCE = f"{_T}.image_judged:Existence"
_OBJECT_EDIT = f"{_T}.editing:ObjectEdit"
_TEXT_EDIT = f"{_T}.editing:TextEdit"
_REFERENCE_EDIT = f"{_T}.editing:ReferenceEdit"
_OBJECT_SEQUENCE = f"{_T}.consistency_objects:ObjectSequence"
_VIEWS = f"{_T}.consistency_views:ViewConsistency"
_ORDER = f"{_T}.structure:OrderTask"
_WHOLE_CLIP = f"{_T}.sound:WholeClip"

TASKS: tuple[TaskInfo, ...] = (
    # -- image (15) -------------------------------------------------------------------------------
    TaskInfo(
        "i_object_include", "Object inclusion", "image", "VLM scene check x mean(object present)", ("judge",),
        family=_SCENE_OBJECTS, args=task_args(component="objects_present"),
    ),
    TaskInfo(
        "i_object_exclude", "Object exclusion", "image", "VLM scene check x mean(object absent)", ("judge",),
        family=_SCENE_OBJECTS, args=task_args(component="objects_absent", inverted=True), version=2,
    ),
    TaskInfo("i_object_count", "Object counting", "image", "VLM count MCQ chosen by the count (3-6 or 7-10 options; strict: 3-6 first, then 7-10); exact option; binary", ("judge",), impl=f"{_T}.image_judged:ObjectCount"),
    TaskInfo("i_object_attribute", "Object attribute", "image", _VLM_EXIST, ("judge",), family=_EXISTENCE),
    TaskInfo("i_object_cot", "Object reasoning (knowledge)", "image", _VLM_EXIST, ("judge",), family=_EXISTENCE),
    TaskInfo("i_object_commonsense", "Commonsense objects", "image", _VLM_EXIST, ("judge",), family=_EXISTENCE),
    TaskInfo("i_relation_two", "Comparison relation", "image", _VLM_EXIST, ("judge",), family=_EXISTENCE),
    TaskInfo("i_relation_all", "Universal relation", "image", _VLM_EXIST, ("judge",), family=_EXISTENCE),
    TaskInfo(
        "i_spacial_relative", "Relative position", "image",
        "VLM exactly-one gates, then left/right or above/below MCQ; binary", ("judge",),
        impl=f"{_T}.image_spatial:SpacialRelative",
    ),
    TaskInfo(
        "i_spacial_absolute", "Absolute position", "image",
        "VLM exactly-one gates, then quadrant MCQ; product over constraints", ("judge",),
        impl=f"{_T}.image_spatial:SpacialAbsolute",
    ),
    TaskInfo(
        "i_format_background", "Solid background region", "image",
        "colour gate, SSIM vs flat mean colour minus over-fill of adjacent band", (),
        impl=f"{_T}.format_fill:FormatBackground",
    ),
    TaskInfo(
        "i_format_border", "Solid border", "image",
        "colour gate, SSIM of the 10% strips vs flat mean colour minus inner over-fill", (),
        impl=f"{_T}.format_fill:FormatBorder",
    ),
    TaskInfo("i_ocr", "Text rendering", "image", "VLM OCR list; 1 - min(WER, 1)", ("judge",), impl=f"{_T}.image_ocr:Ocr"),
    TaskInfo(
        "i_ocr_two", "Two-object text rendering", "image", "existence gate, OCR per object; corpus WER", ("judge",),
        impl=f"{_T}.image_ocr:OcrTwo",
    ),
    TaskInfo(
        "i_ocr_multi_lingual", "Multilingual text rendering", "image",
        "OCR: Chinese 1 - CER on two judges' intersection, German 1 - WER; mean of the two", ("judge",),
        sources=("i_ocr_chinese", "i_ocr_german"), aggregate="mean_of_sources", impl=f"{_T}.image_ocr:OcrMultiLingual",
    ),
    # -- interleaved image-text (22) -------------------------------------------------------------
    TaskInfo("i_edit_object_add", "Object adding", "image-text", "SSIM outside widened bbox x VLM existence on crop", ("judge",), family=_OBJECT_EDIT),
    TaskInfo(
        "i_edit_object_remove", "Object removing", "image-text", "SSIM outside widened bbox x VLM absence on crop", ("judge",),
        family=_OBJECT_EDIT, args=task_args(component="objects_absent", inverted=True), version=2,
    ),
    TaskInfo("i_edit_object_modify", "Object replacing", "image-text", "SSIM outside widened bbox x VLM existence on crop", ("judge",), family=_OBJECT_EDIT),
    TaskInfo("i_edit_object_attribute", "Object altering", "image-text", "SSIM outside widened bbox x VLM existence on crop", ("judge",), family=_OBJECT_EDIT),
    TaskInfo("i_edit_text_add", "Text adding", "image-text", "SSIM outside widened bbox x VLM OCR 1 - WER on crop", ("judge",), family=_TEXT_EDIT, version=2),
    TaskInfo("i_edit_text_alter", "Text altering", "image-text", "SSIM outside widened bbox x VLM OCR 1 - WER on crop", ("judge",), family=_TEXT_EDIT, version=2),
    TaskInfo("i_edit_add", "Interleaved adding", "image-text", "SSIM outside widened bbox x DreamSim of crops vs reference", ("image_similarity",), family=_REFERENCE_EDIT),
    TaskInfo("i_edit_color", "Interleaved colour altering", "image-text", "SSIM outside widened bbox x DreamSim of crops vs reference", ("image_similarity",), family=_REFERENCE_EDIT),
    TaskInfo("i_consistency_semantic", "Semantic consistency", "image-text", "image count = len(object); existence per image; product", ("judge",), family=_OBJECT_SEQUENCE),
    TaskInfo("i_consistency_compose", "Compositional consistency", "image-text", "image count = len(object); existence per image; product", ("judge",), family=_OBJECT_SEQUENCE),
    TaskInfo("i_consistency_decompose", "Decompositional consistency", "image-text", "image count = len(object); existence per image; product", ("judge",), family=_OBJECT_SEQUENCE),
    TaskInfo(
        "i_consistency_3d_object", "Multi-angle consistency", "image-text",
        "mean SSIM(generated view i, reference view i)", (), family=_VIEWS,
    ),
    TaskInfo(
        "i_consistency_3d_scene", "Multi-view consistency", "image-text",
        "mean SSIM(generated view i, reference view i)", (), family=_VIEWS,
    ),
    TaskInfo("it_coherence_count", "Count coherence", "image-text", "<count>N</count> (2<N<7) must match VLM count MCQ", ("judge",), impl=f"{_T}.coherence:CoherenceCount"),
    TaskInfo("it_coherence_color", "Colour coherence", "image-text", "JSON object->colour map must match; VLM confirms each; product", ("judge",), impl=f"{_T}.coherence:CoherenceColor"),
    TaskInfo("it_coherence_size", "Size coherence", "image-text", "ranking list; VLM checks every pair; product", ("judge",), impl=f"{_T}.coherence:CoherenceSize"),
    TaskInfo("it_coherence_spacial_relative", "Relative position coherence", "image-text", "model's letters vs VLM answers after exactly-one gates; product", ("judge",), impl=f"{_T}.coherence:CoherenceSpacialRelative"),
    TaskInfo("it_coherence_spacial_absolute", "Absolute position coherence", "image-text", "model's letters vs VLM answers after exactly-one gates; product", ("judge",), impl=f"{_T}.coherence:CoherenceSpacialAbsolute"),
    TaskInfo("it_coherence_ocr", "Text coherence", "image-text", "model's own text vs VLM OCR of its image; 1 - WER", ("judge",), impl=f"{_T}.coherence:CoherenceOcr"),
    TaskInfo("it_coherence_math", "Math reasoning", "image-text", "<<pattern>> judged by an LLM x last image judged by a VLM", ("judge:llm", "judge"), impl=f"{_T}.reasoning:CoherenceMath"),
    TaskInfo("it_coherence_code", "Code reasoning", "image-text", "DreamSim(last image, rendered reference SVG) x existence", ("image_similarity", "judge"), impl=f"{_T}.reasoning:CoherenceCode"),
    TaskInfo(
        "i_structure", "Interleaved image-text order", "image-text",
        "modality sequence (t/i, text merged) must be one of `order`; binary", (), family=_ORDER,
    ),
    # -- sound and music (9) ----------------------------------------------------------------------
    TaskInfo(
        "a_sound_begin_end", "Sound begin-end", "audio", "CLAP top-10 vs ESC-50 class on first/last min(4 s, half); > 0.68", ("audio_text",),
        impl=f"{_T}.sound:SoundBeginEnd",
    ),
    TaskInfo(
        "a_sound_include", "Sound inclusion", "audio", "CLAP top-10 vs ESC-50 class on the `range` fraction; > 0.68", ("audio_text",),
        impl=f"{_T}.sound:SoundInclude",
    ),
    TaskInfo(
        "a_sound_cot", "Sound reasoning (knowledge)", "audio", "CLAP top-10 vs ESC-50 class on the whole clip; > 0.68", ("audio_text",),
        family=_WHOLE_CLIP, args=task_args(reference_set="esc50", fields=("target",), default_threshold=0.68), version=2,
    ),
    TaskInfo(
        "a_sound_silence", "Sound-silence-sound", "audio", "silence split into exactly 2 segments; CLAP start/end; > 0.68", ("audio_text",),
        impl=f"{_T}.sound:SoundSilence",
    ),
    TaskInfo(
        "a_music_instrument", "Instrument inclusion", "audio", "CLAP top-10 vs OpenMIC instrument; > 0.62", ("audio_text",),
        sources=("a_music_attribute",), select="instrument",
        family=_WHOLE_CLIP, args=task_args(reference_set="openmic", fields=("instrument",), default_threshold=0.62), version=2,
    ),
    TaskInfo(
        "a_music_exclude", "Instrument exclusion", "audio", "CLAP top-10 vs OpenMIC instrument; < 0.62", ("audio_text",),
        family=_WHOLE_CLIP, args=task_args(reference_set="openmic", fields=("instrument",), default_threshold=0.62, absent=True), version=2,
    ),
    TaskInfo(
        "a_music_tempo", "Tempo", "audio", "beat tracking on trimmed audio; abs(BPM - tempo) < 5", ("beat_tracker",),
        sources=("a_music_attribute",), select="tempo", impl=f"{_T}.music:MusicTempo",
    ),
    TaskInfo(
        "a_music_intensity", "Intensity trend", "audio", "RMS peaks, linear fit: fade in/out by slope and stderr", (),
        impl=f"{_T}.music:MusicIntensity",
    ),
    TaskInfo(
        "a_music_genre", "Music genre", "audio", "CLAP top-10 vs GTZAN genre; > 0.69", ("audio_text",), select="genre",
        family=_WHOLE_CLIP, args=task_args(reference_set="gtzan", fields=("genre",), default_threshold=0.69), version=2,
    ),
    # -- speech and interleaved audio-text (9) ------------------------------------------------------
    TaskInfo("a_speech_attribute", "Voice attributes", "audio-text", "(1 - WER) x gender x pitch band x speaking rate", ("transcriber", "gender"), impl=f"{_T}.speech:SpeechAttribute"),
    TaskInfo("a_speech_chinese", "Chinese voice attributes", "audio-text", "(1 - CER) x gender x pitch band x speaking rate", ("transcriber_zh", "gender"), impl=f"{_T}.speech:SpeechChinese"),
    TaskInfo("a_speech_imitate", "Voice imitation", "audio-text", "(1 - WER) x [speaker similarity > 0.93]", ("transcriber", "speaker"), impl=f"{_T}.speech:SpeechImitate"),
    TaskInfo("a_speech_constraint", "Transcript constraints", "audio-text", "IFEval-style checks on the transcript; binary", ("transcriber",), impl=f"{_T}.speech:SpeechConstraint"),
    TaskInfo(
        "a_speech_modify", "Transcript modification", "audio-text", "IFEval-style checks on the transcript; binary", ("transcriber",),
        family=f"{_T}.speech:SpeechConstraint", version=2,  # audio_list names the input speech, not scored
    ),
    TaskInfo(
        "a_consistency_conversation", "Conversation consistency", "audio-text",
        "per-turn constraints x same-speaker similarity > 0.93 (distinct speakers reported)", ("transcriber", "speaker"),
        impl=f"{_T}.conversation:Conversation",
    ),
    TaskInfo("a_speech_translate", "Speech translation", "audio-text", "sentence BLEU / 100 of the transcript", ("transcriber",), impl=f"{_T}.speech:SpeechTranslate"),
    TaskInfo("a_speech_retrieve", "Speech retrieval", "audio-text", "1 - WER of the transcript", ("transcriber",), impl=f"{_T}.speech:SpeechRetrieve"),
    TaskInfo(
        "a_structure", "Interleaved audio-text order", "audio-text",
        "modality sequence (t/a, text merged) must be one of `order`; binary", (), family=_ORDER,
    ),
)

CATALOG: dict[str, TaskInfo] = {info.id: info for info in TASKS}


def family_factory(info: TaskInfo) -> Callable[[], type]:
    """What the registry calls on first use of a family row: import the family, make the task class."""
    family = info.family
    if family is None:
        raise ValueError(f"task {info.id!r} names no family")

    def make() -> type:
        from .base import task_variant  # here, not at the top: listing the catalog imports no task code

        return task_variant(import_object(family), info.id, version=info.version, args=info.args, family_name=family)

    return make


TASK_REGISTRY: Registry[type] = Registry("task", default_namespace="task")
for _info in TASKS:
    if _info.impl:
        TASK_REGISTRY.register(_info.id, _info.impl)
    elif _info.family:
        TASK_REGISTRY.register(_info.id, family_factory(_info))


SOURCE_FILES: frozenset[str] = frozenset(source for info in TASKS for source in info.source_files)


def bare_task_id(task: str) -> str:
    """A task id without the ``task:`` prefix a manifest line may give it."""
    return task[len("task:") :] if task.startswith("task:") else task


def task_info(task_id: str) -> TaskInfo:
    """Catalog entry for ``task_id`` (bare or ``task:``-prefixed); did-you-mean on unknown ids."""
    key = bare_task_id(task_id)
    if key not in CATALOG:
        from ..core.registry import UnknownIdError

        raise UnknownIdError("task", task_id, list(CATALOG))
    return CATALOG[key]


def tasks_for_source(source: str, row: Mapping[str, Any]) -> list[TaskInfo]:
    """The tasks an instruction row of file ``source`` belongs to (a_music_attribute rows feed two)."""
    return [info for info in TASKS if source in info.source_files and info.accepts(row)]


def markdown_table(tasks: tuple[TaskInfo, ...] = TASKS) -> str:
    """The task table as Markdown (README's table is this output)."""
    lines = ["| task | paper name | group | method | needs | status |", "|---|---|---|---|---|---|"]
    for t in tasks:
        status = "implemented" if t.implemented else "planned"
        lines.append(f"| `{t.id}` | {t.name} | {t.group} | {t.method} | {', '.join(t.needs) or '—'} | {status} |")
    return "\n".join(lines) + "\n"
