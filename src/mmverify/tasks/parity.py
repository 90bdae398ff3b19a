"""How each task relates to the published MMMG evaluator, as data.

One entry per catalog task: where the published rule lives (file:class.method at the commit read),
whether the ``mmmg`` profile reproduces it, and every deviation of each profile with its reason.
``docs/PARITY.md`` is generated from these entries and ``mmverify tasks --explain TASK`` prints one
(both rendered by :mod:`.parity_docs`); a test keeps both in step with the catalog and checks that
the named evidence tests exist.
"""

from __future__ import annotations

from dataclasses import dataclass

from .catalog import task_info

# Published evaluator files at the commits the entries were checked against.
COMMITS = {
    "eval_image.py": "0473209a",
    "eval_interleaved.py": "d341665a",
    "eval_audio.py": "0473209a",
    "utils.py": "ecf3dfea",
}
STATUSES = ("identical", "deviation", "not verifiable")


@dataclass(frozen=True)
class Deviation:
    """A rule where a profile departs from the published evaluator."""

    profile: str  # "mmmg", "strict" or "both"
    rule: str
    reason: str


@dataclass(frozen=True)
class Parity:
    task: str
    official: str  # "eval_image.py:IObjectCount.evaluate"
    status: str  # one of STATUSES, for the default (mmmg) profile
    evidence: tuple[str, ...]  # test files (or file::test) that prove the status
    deviations: tuple[Deviation, ...] = ()
    note: str = ""

    @property
    def module(self) -> str:
        return (task_info(self.task).scoring_class or "").replace(":", ".")

    @property
    def official_file(self) -> str:
        return self.official.split(":", 1)[0]


def _d(profile: str, rule: str, reason: str) -> Deviation:
    return Deviation(profile, rule, reason)


# Deviations shared by many tasks, worded once.
_CROSS_ITEM = _d(
    "both",
    "a generation that breaks the task's shape (no image, several images where one is asked) is scored 0 "
    "with a reason; scorer problems (judge down, unreadable reply) are error rows",
    "the published scripts count every failure as 0; `--aggregate as_zero` reproduces their means",
)
_STRICT_JUDGE_PARSE = _d(
    "both",
    "a judge reply whose verdict cannot be read is a judge_unparseable error row",
    "the published parsers turn such replies into 'no' (0); counting them would reward or punish the "
    "generator for the judge's failure",
)

_READ_FROM_END = _d(
    "both",
    "verdicts are read from the end of the reply (the final Yes/No or `Answer:` letter)",
    "the published parsers look for 'yes'/'no' anywhere in the last 20 characters or take the first "
    "`Answer:` match, which misreads replies such as 'not yes' or a reasoning step that quotes an option",
)
_OWN_WORDING = _d(
    "both",
    "questions are hand-written, with the published criteria; template versions are in the key",
    "the published prompts are not redistributed; decisions are compared by meaning with scripted judges",
)
_JUDGED = (_READ_FROM_END, _STRICT_JUDGE_PARSE, _OWN_WORDING)
_STRICT_CLAP_PADDING = _d(
    "strict",
    "clips under 10 s are repeat-padded (the checkpoint's own `repeatpad`); clips that leave an empty "
    "window fail (`audio_too_short` / empty range)",
    "zero-padding compares a short clip as mostly silence, so similarity follows length rather than content; "
    "the 0.68/0.62/0.69 thresholds were fitted on zero-padded scores, so recalibrate before trusting strict "
    "verdicts near a threshold",
)
_CLAP_CROP = _d(
    "both",
    "clips over 10 s are cropped at a position seeded by the clip's content",
    "the published feature extractor crops at random, so the same clip could score differently on reruns; "
    "rewards must be deterministic",
)
_CLAP = (_CLAP_CROP, _STRICT_CLAP_PADDING)
_IMG = "tests/reference/mmmg_image_test.py"
_IMG_TASKS = "tests/tasks/test_image_judged.py"
_EDIT = "tests/tasks/test_editing.py"
_INTER = "tests/tasks/test_coherence.py"
_CLAP_REF = "tests/reference/mmmg_clap_test.py"
_SOUND = "tests/tasks/test_sound.py"
_OCR_NORM = _d(
    "strict",
    "Unicode-aware normalisation: every punctuation mark and symbol separates words (NFKD); German umlauts "
    "and their digraphs fold together",
    "the published normalisation deletes only ASCII punctuation and joins 'e-mail' into 'email' while "
    "keeping typographic quotes, so the same rendering scores differently with straight or curly quotes",
)
_OCR_SPACES = _d(
    "both",
    "any whitespace inside a reading separates words",
    "the published WER tokeniser keeps a lone line break inside a word, an artefact rather than a rule",
)


_AUDIO_REF = "tests/verifiers/audio/test_reference_parity.py"
_SPEECH = "tests/tasks/test_speech.py"
_RESAMPLER = _d(
    "both",
    "audio is resampled with scipy's polyphase filter",
    "the published code resamples with librosa (soxr) or torchaudio; results are close, not bit-identical",
)
_STRICT_LANGUAGE = _d(
    "strict",
    "Whisper detects the language and transcribes the whole clip",
    "forcing English makes Whisper translate other languages into a match, and the first 30 s hide the rest",
)
_STRICT_WORDS = _d(
    "strict",
    "keywords, starts and ends match at word boundaries, case-insensitively",
    "raw substrings let 'cat' satisfy 'concatenate' and miss 'Cat'",
)
_STRICT_NO_AUDIO = _d(
    "strict",
    "a response without exactly one clip scores 0",
    "an empty transcript passes exclusion and '<' length constraints without any speech",
)


def _existence(task: str) -> Parity:
    return Parity(task, "eval_image.py:IObjectInclude.evaluate", "identical", (_IMG, _IMG_TASKS), _JUDGED)


ENTRIES: tuple[Parity, ...] = (
    # -- image ---------------------------------------------------------------------------------------
    Parity("i_object_include", "eval_image.py:IObjectInclude.compute_accuracy", "identical", (_IMG, _IMG_TASKS), _JUDGED,
           note="scene question gates the mean of the object-presence answers"),
    Parity("i_object_exclude", "eval_image.py:IObjectExclude.compute_accuracy", "identical", (_IMG, _IMG_TASKS), _JUDGED,
           note="the presence question is asked and inverted (both profiles: a judge's yes-bias cannot pass "
                "a hallucinated absence)"),
    Parity("i_object_count", "eval_image.py:IObjectCount.instruction_func", "identical", (_IMG, _IMG_TASKS),
           _JUDGED + (
               _d("strict", "the 3-6 question is always asked first; counts above 6 must answer 'more than 6' and "
                  "then name the count in the 7-10 question",
                  "choosing the question from the annotated count tells the judge the expected range"),
               _d("both", "counts outside 3-10 are invalid_instance rows", "no published option names them"),
           ),
           note="one multiple-choice question chosen by the annotated count (options for 3-6, or for 7-10); the "
                "option naming the count is required (the published letter rule count-2 / count-6). The "
                "published prompt texts are not in any stored prompt.py"),
    _existence("i_object_attribute"),
    _existence("i_object_cot"),
    _existence("i_object_commonsense"),
    _existence("i_relation_two"),
    _existence("i_relation_all"),
    Parity("i_spacial_relative", "eval_image.py:ISpacialRelative.evaluate", "identical", (_IMG, _IMG_TASKS),
           _JUDGED + (_d("strict", "one exactly-one question per object instead of one joint question",
                         "a joint question lets the judge answer for the pair without checking each object"),),
           note="exactly-one gate, then left/right or above/below with a 'neither' option; gates and question "
                "go to role spatial_relative; the product over constraints (published rows have one)"),
    Parity("i_spacial_absolute", "eval_image.py:ISpacialAbsolute.evaluate", "identical", (_IMG, _IMG_TASKS), _JUDGED,
           note="exactly-one gate per object, then the quadrant question; product; role spatial_absolute"),
    Parity("i_format_background", "eval_image.py:IFormatBackground.evaluate", "identical",
           ("tests/verifiers/image/test_fill.py", "tests/reference/fill_skimage.py"),
           note="colour gate on the region's truncated mean colour, SSIM against the flat colour, minus the "
                "adjacent band's over-fill"),
    Parity("i_format_border", "eval_image.py:IFormatBorder.evaluate", "identical",
           ("tests/verifiers/image/test_fill.py", "tests/reference/fill_skimage.py")),
    Parity("i_ocr", "eval_image.py:IOCR.evaluate", "identical", (_IMG, _IMG_TASKS),
           _JUDGED + (_OCR_NORM, _OCR_SPACES),
           note="reads the main text on the row's `object`; published normalisation; 1 - min(WER, 1)"),
    Parity("i_ocr_two", "eval_image.py:IOCRTwo.evaluate", "identical", (_IMG, _IMG_TASKS),
           _JUDGED + (_OCR_NORM, _OCR_SPACES)),
    Parity("i_ocr_multi_lingual", "eval_image.py:IOCRMultiLingual.compute_accuracy", "deviation",
           (_IMG, _IMG_TASKS),
           _JUDGED + (
               _d("both", "Chinese: the characters both readers saw keep the first reader's order",
                  "the published code intersects two Python sets, whose order is arbitrary: a two-character word "
                  "scored 1 or 0 by chance"),
               _d("both", "the second reader must be a different model (role ocr_second), else model_unavailable",
                  "one model read twice makes the intersection safeguard do nothing"),
               _d("strict", "Chinese readings intersect as multisets after normalisation; German umlauts fold",
                  "a character read twice by both readers counts twice"),
           ),
           note="mean of the Chinese (1 - CER on the two readers' common characters) and German (as i_ocr) files"),
    # -- interleaved image-text ----------------------------------------------------------------------
    Parity("i_edit_object_add", "eval_image.py:IEdit.evaluate", "identical", (_IMG, _EDIT), _JUDGED,
           note="SSIM outside the box widened by size//20 (blacked out in both) x existence on the crop; the "
                "product is floored at 0"),
    Parity("i_edit_object_remove", "eval_image.py:IEditObjectRemove", "identical", (_IMG, _EDIT), _JUDGED,
           note="presence asked on the crop and inverted"),
    Parity("i_edit_object_modify", "eval_image.py:IEditObjectModify", "identical", (_IMG, _EDIT), _JUDGED),
    Parity("i_edit_object_attribute", "eval_image.py:IEditObjectAttribute", "identical", (_IMG, _EDIT), _JUDGED),
    Parity("i_edit_text_add", "eval_image.py:IEditTextAdd", "identical", (_IMG, _EDIT), _JUDGED + (_OCR_NORM,)),
    Parity("i_edit_text_alter", "eval_image.py:IEditTextAlter", "identical", (_IMG, _EDIT), _JUDGED + (_OCR_NORM,)),
    Parity("i_edit_add", "eval_image.py:IEditAdd.evaluate", "identical", (_IMG, _EDIT),
           note="SSIM outside the box widened by size//10 against the reference result x DreamSim of the crops"),
    Parity("i_edit_color", "eval_image.py:IEditColor", "identical", (_IMG, _EDIT)),
    Parity("i_consistency_semantic", "eval_interleaved.py:IConsistencySemantic.evaluate", "identical",
           ("tests/tasks/test_consistency_objects.py",), _JUDGED),
    Parity("i_consistency_compose", "eval_interleaved.py:IConsistencyCompose", "identical",
           ("tests/tasks/test_consistency_objects.py",), _JUDGED),
    Parity("i_consistency_decompose", "eval_interleaved.py:IConsistencyDecompose", "identical",
           ("tests/tasks/test_consistency_objects.py",), _JUDGED),
    Parity("i_consistency_3d_object", "eval_interleaved.py:IConsistency3DObject.evaluate", "identical",
           ("tests/tasks/test_consistency_views.py",)),
    Parity("i_consistency_3d_scene", "eval_interleaved.py:IConsistency3DScene", "identical",
           ("tests/tasks/test_consistency_views.py",)),
    Parity("it_coherence_count", "eval_interleaved.py:ITCoherenceCount.model_process_data", "deviation", (_INTER,),
           _JUDGED + (
               _d("both", "the whole number in `<count>N</count>` is read",
                  "the published pattern keeps only the last digit (`<count>14</count>` reads as 4)"),
               _d("strict", "the tag may differ in case and spacing", "formatting noise is not the claim"),
           )),
    Parity("it_coherence_color", "eval_interleaved.py:ITCoherenceColor.model_process_data", "identical", (_INTER,),
           _JUDGED + (_d("strict", "up to 64 JSON objects are tried; names match ignoring case",
                         "the first brace span may be prose; case is not the claim"),)),
    Parity("it_coherence_size", "eval_interleaved.py:ITCoherenceSize.model_process_data", "identical", (_INTER,),
           _JUDGED + (_d("strict", "the ranking must be an exact permutation; comparative words say area, volume "
                         "and height explicitly", "a partial list or a loose comparison passes otherwise"),)),
    Parity("it_coherence_spacial_relative", "eval_interleaved.py:ITCoherenceSpacialRelative.model_process_data",
           "identical", (_INTER,), _JUDGED + (_d("strict", "one exactly-one question per distinct object",
                                                "a joint gate lets the judge answer for the pair"),),
           note="gates and questions go to role spatial_relative"),
    Parity("it_coherence_spacial_absolute", "eval_interleaved.py:ITCoherenceSpacialAbsolute.model_process_data",
           "identical", (_INTER,), _JUDGED, note="gates and questions go to role spatial_absolute"),
    Parity("it_coherence_ocr", "eval_interleaved.py:ITCoherenceOCR.model_process_data", "identical", (_INTER,),
           _JUDGED + (_OCR_NORM, _d("both", "blank claimed text never scores",
                                   "published: spaces-only text and an empty reading scored 1"),
                      _d("strict", "words counted as real words, not pieces between single spaces",
                         "double spaces otherwise change the 5-10 word check")),
           note="the text after the image, `<text>...</text>`, 5-10 words, OCR of `object`, 1 - min(WER, 1)"),
    Parity("it_coherence_math", "eval_interleaved.py:ITCoherenceMath.evaluate", "identical",
           ("tests/tasks/test_reasoning.py",), _JUDGED + (_d("strict", "`<<pattern>>` may span lines",
                                                             "a line break is formatting, not the answer"),),
           note="LLM judges the `<<pattern>>` text against the ground truth; the last image judged by a VLM "
                "(several patterns or a question mark mean No); product"),
    Parity("it_coherence_code", "eval_interleaved.py:ITCoherenceCode.evaluate", "identical",
           ("tests/tasks/test_reasoning.py",),
           _JUDGED + (_d("both", "only the last VERDICT line decides", "published: 'VERDICT: PASS' anywhere, "
                         "including a quoted example in the reasoning"),
                      _d("both", "rows with `object` instead of `caption` are accepted; malformed `criteria` are "
                         "invalid_instance rows", "the published code raises KeyError/TypeError")),
           note="description from `caption` or `object`; `criteria` rows judged to VERDICT: PASS, others by "
                "existence; x DreamSim of the last image against the reference rendering"),
    Parity("i_structure", "eval_interleaved.py:IStructure.evaluate", "identical",
           ("tests/verifiers/test_structure.py", "tests/data/test_mmmg_import.py")),
    # -- sound and music -----------------------------------------------------------------------------
    Parity("a_sound_begin_end", "eval_audio.py:ASoundBeginEnd._evaluate", "identical", (_CLAP_REF, _SOUND),
           _CLAP + (_d("both", "a response with no or several clips scores 0 for that row only",
                       "the published code appends to the wrong list there and misaligns every later row"),),
           note="first/last min(4, len // 2 s) whole seconds; under 2 s the first window is empty (scored as 10 s "
                "of silence) and the last is the whole clip, as published"),
    Parity("a_sound_include", "eval_audio.py:ASoundInclude._evaluate", "identical", (_CLAP_REF, _SOUND), _CLAP),
    Parity("a_sound_cot", "eval_audio.py:ASoundCoT._evaluate", "identical", (_CLAP_REF, _SOUND), _CLAP),
    Parity("a_sound_silence", "eval_audio.py:ASoundSilence._evaluate", "identical", (_CLAP_REF, _SOUND), _CLAP,
           note="silence split (top_db 40, gaps of at least 1 s) into exactly 2 segments"),
    Parity("a_music_instrument", "eval_audio.py:AMusicAttribute.evaluate", "identical", (_CLAP_REF, _SOUND),
           _CLAP + (_d("both", "fewer than 10 reference clips: the mean of those there are",
                       "published topk(10) raises"),),
           note="OpenMIC pool: files 0-99 of the instrument folder; > 0.62"),
    Parity("a_music_exclude", "eval_audio.py:AMusicExclude.evaluate", "identical", (_CLAP_REF, _SOUND), _CLAP,
           note="< 0.62; no audio fails"),
    Parity("a_music_genre", "eval_audio.py (genre field)", "not verifiable", (_SOUND,), _CLAP,
           note="no published instruction file or evaluator version with genre scoring was found; GTZAN thirds, "
                "> 0.69 as described by the paper"),
    Parity("a_music_tempo", "eval_audio.py:AMusicAttribute.evaluate_tempo", "identical", (_AUDIO_REF, "tests/tasks/test_music.py"),
           (_d("both", "the offline librosa-beats tracker estimates BPM from its fitted beat period",
               "no published rule exists for that tracker; with the beats x 60 / duration formula it under-counts "
               "edge beats (a clean 120 BPM drum track read 114); within 0.5 BPM from 60 to 180 BPM now"),
            _d("strict", "every tracker's BPM comes from the fitted beat period",
               "the count formula misses by up to 10 BPM on drum tracks even with a good tracker")),
           note="beat_this: beats x 60 / silence-trimmed duration, pass if |BPM - tempo| < 5"),
    Parity("a_music_intensity", "eval_audio.py:AMusicIntensity.evaluate", "identical", (_AUDIO_REF, "tests/tasks/test_music.py"),
           (_d("both", "flat loudness, no peaks or an empty start window fail the clip", "the published code raises"),
            _d("strict", "at least 3 regression points; clips under 2 s have no measurable trend",
               "a two-point fit has zero standard error and passes any steady fade; the published end window of a "
               "short clip is the whole clip")),
           note="two-point fits are accepted and a short clip's end window is the whole clip, as published"),
    # -- speech and interleaved audio-text -----------------------------------------------------------
    Parity("a_speech_attribute", "eval_audio.py:ASpeechAttribute.evaluate", "identical", (_AUDIO_REF, _SPEECH),
           (_RESAMPLER, _STRICT_LANGUAGE,
            _d("both", "gender is judged on the row's own clip; an unvoiced clip scores pitch 0",
               "the published code opens clips by their position among filtered rows, and crashes on unvoiced audio")),
           note="English forced, first 30 s; max(1 - WER, 0) x gender (first 5 s, zero-padded) x pitch band of the "
                "predicted gender x words per minute on trimmed audio"),
    Parity("a_speech_chinese", "eval_audio.py:ASpeechChinese", "identical", (_AUDIO_REF, _SPEECH),
           (_RESAMPLER, _STRICT_LANGUAGE,
            _d("strict", "CER and character rate over letters, digits and CJK characters only",
               "the published normalisation keeps punctuation in the transcript only, so a perfect transcript with "
               "one comma in 15 characters scores 0.933")),
           note="published CER normalisation reproduced (a perfect transcript with punctuation is not 1.0)"),
    Parity("a_speech_imitate", "eval_audio.py:ASpeechImitate.evaluate", "identical", (_SPEECH,), (_RESAMPLER, _STRICT_LANGUAGE),
           note="max(1 - WER, 0) x [speaker cosine to the reference > 0.93]"),
    Parity("a_speech_constraint", "eval_audio.py:ASpeechModify.evaluate", "identical",
           (_AUDIO_REF, "tests/verifiers/text/test_mmmg_semantics.py"), (_STRICT_LANGUAGE, _STRICT_WORDS, _STRICT_NO_AUDIO),
           note="constraints checked on the transcript; a response without exactly one clip is checked as an empty "
                "transcript, which passes exclusions and '<' word counts, as published; relations parsed, never eval-ed"),
    Parity("a_speech_modify", "eval_audio.py:ASpeechModify.evaluate", "identical",
           (_AUDIO_REF, "tests/verifiers/text/test_mmmg_semantics.py"), (_STRICT_LANGUAGE, _STRICT_WORDS, _STRICT_NO_AUDIO)),
    Parity("a_consistency_conversation", "eval_interleaved.py:AConsistencyConversation.evaluate", "identical",
           (_AUDIO_REF, "tests/tasks/test_conversation.py"),
           (_STRICT_LANGUAGE, _STRICT_WORDS,
            _d("strict", "different speakers must also not be similar (every different-speaker pair <= 0.93)",
               "otherwise one voice for every turn passes a multi-speaker conversation")),
           note="one clip per entry of `order`; mean of the per-turn constraints x [every same-speaker pair > 0.93]"),
    Parity("a_speech_translate", "eval_audio.py:ASpeechTranslate", "not verifiable", (_SPEECH,), (_STRICT_LANGUAGE,),
           note="transcription (English forced, 30 s) and transcript-only normalisation as published; the BLEU helper "
                "is in no released file, so sacrebleu sentence BLEU / 100 is used. Forcing English makes Whisper "
                "translate source-language speech: repeating the input scores 1.0 under mmmg, < 0.05 under strict"),
    Parity("a_speech_retrieve", "eval_audio.py:ASpeechRetrieve", "identical", (_SPEECH,), (_STRICT_LANGUAGE,),
           note="max(1 - WER, 0) against the answer span"),
    Parity("a_structure", "eval_interleaved.py:AStructure", "identical",
           ("tests/verifiers/test_structure.py", "tests/data/test_mmmg_import.py")),
)


def entries() -> dict[str, Parity]:
    return {entry.task: entry for entry in ENTRIES}


if __name__ == "__main__":  # python -m mmverify.tasks.parity > docs/PARITY.md
    from .parity_docs import markdown

    print(markdown(), end="")
