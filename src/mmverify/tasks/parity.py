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

# Published evaluator files at the commits the entries were checked against.  eval_image.py:
# f7de1cf7 is 0473209a with the counting reader fixed (A read as 0, not 1) and dead code removed;
# the counting prompts (I_OBJECT_COUNT_PROMPT_LESS / _MORE) are those of prompt.py at d341665a.
COMMITS = {
    "eval_image.py": "f7de1cf7",
    "eval_interleaved.py": "d341665a",
    "eval_audio.py": "0473209a",
    "utils.py": "ecf3dfea",
    "prompt.py": "d341665a",
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


_ORDER_MEDIA = _d("strict", "each image and audio part must decode; one that does not scores 0 (unreadable_image / unreadable_audio)",
                  "the published rule reads only the parts' types, so a text file or zero bytes named as an image counts as one")


# Deviations shared by many tasks, worded once.
_CROSS_ITEM = _d(
    "both",
    "a generation that breaks the task's shape (no image, several images where one is asked) is scored 0 "
    "with a reason; scorer problems (judge down, unreadable reply) are error rows",
    "the published scripts count every failure as 0; `--aggregate as_zero` reproduces their means",
)
_STRICT_JUDGE_PARSE = _d(
    "both",
    "a judge reply whose yes/no verdict cannot be read is a judge_unparseable error row",
    "the published parsers turn such replies into 'no' (0); counting them would reward or punish the "
    "generator for the judge's failure",
)

_READ_FROM_END = _d(
    "both",
    "yes/no verdicts are read from the end of the reply (the final Yes/No)",
    "the published parsers look for 'yes'/'no' anywhere in the last 20 characters, which misreads replies "
    "such as 'not yes' or 'the snow'",
)
_OWN_WORDING = _d(
    "both",
    "questions are hand-written, with the published criteria and option layouts; template versions are in the key",
    "the published prompts are not redistributed; decisions are compared with scripted judges, from the raw "
    "reply where the published code parsed it its own way",
)
_JUDGED = (_READ_FROM_END, _STRICT_JUDGE_PARSE, _OWN_WORDING)
# option letters and OCR lists: mmmg reads them with the published readers (verifiers/vlm/published.py)
_STRICT_LETTER = _d(
    "strict",
    "the option letter is read from the final `Answer:` line (markdown removed, any case)",
    "the published readers take the first `Answer:` / `nswer: ` match, exact case: a reasoning step that "
    "quotes an option decides, and '**Answer:** B' or 'Answer:B' reads as no answer; mmmg reads as published",
)
_STRICT_LIST = _d(
    "strict",
    "the OCR reading is the JSON list that ends last in the reply, across lines",
    "the published reader takes the first `[...]` within one line and reads nothing when that is not JSON, "
    "so a list laid out over several lines, or a bracket in the reasoning, reads as no text; mmmg reads as "
    "published",
)
_STRICT_UNREADABLE = _d(
    "strict",
    "a reply without a final option letter (or OCR list) is a judge_unparseable error row",
    "published (and mmmg): a reply without a letter is a wrong answer and one without a list an empty reading, "
    "which charges the judge's failure to the generator",
)
_LIST_ITEMS = _d(
    "both",
    "numbers in the judge's list are read as their text; other non-text items make the reply judge_unparseable",
    "the published code crashes joining them",
)
_FLOOR = _d(
    "both",
    "a negative SSIM (or similarity) scores 0: the score is floored at 0",
    "scores lie in [0, 1]; the published code kept the raw value, so a row with negative SSIM lowered the "
    "published mean below what mmverify reports; the raw SSIM stays in `components`",
)
_LETTER_TASK = (_OWN_WORDING, _STRICT_LETTER, _STRICT_UNREADABLE)
_LIST_TASK = (_OWN_WORDING, _STRICT_LIST, _STRICT_UNREADABLE, _LIST_ITEMS)
_RESAMPLER = _d(
    "both",
    "audio is resampled with scipy's polyphase filter",
    "the published code resamples with librosa (soxr) or torchaudio; results are close, not bit-identical",
)
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
_CLAP = (_CLAP_CROP, _STRICT_CLAP_PADDING, _RESAMPLER)
_DREAMSIM_CLIP = _d(
    "both",
    "the DreamSim similarity (1 - distance) is clipped to [0, 1] and a negative product scores 0",
    "scores lie in [0, 1]; the published code kept 1 - distance raw (below 0 for distances over 1), so such "
    "rows lowered its mean, and for i_edit_add / i_edit_color a negative SSIM times a negative similarity "
    "scored above 0",
)
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
    Parity("i_object_count", "eval_image.py:IObjectCount.gpt_judge_process_func", "identical", (_IMG, _IMG_TASKS,
           "tests/tasks/test_published_readers.py"),
           _LETTER_TASK + (
               _d("strict", "the 3-6 question is always asked first; counts above 6 must answer 'more than 6' and "
                  "then name the count in the 7-10 question",
                  "choosing the question from the annotated count tells the judge the expected range"),
               _d("both", "counts outside 3-10 are invalid_instance rows", "no published option names them"),
           ),
           note="one multiple-choice question chosen by the annotated count, with the published option layouts "
                "(prompt.py I_OBJECT_COUNT_PROMPT_LESS / _MORE: A fewer than 3 [7] or blank, B-E 3-6 [7-10], F more "
                "than 6 [10]); mmmg reads the first `Answer:` followed by a capital A-F (none: wrong) and requires "
                "the published value count-2 / count-6 with A = 0, i.e. the option naming the count. The earlier "
                "0473209a read A as 1, which made the option below the count pass; f7de1cf7 fixed it"),
    _existence("i_object_attribute"),
    _existence("i_object_cot"),
    _existence("i_object_commonsense"),
    _existence("i_relation_two"),
    _existence("i_relation_all"),
    Parity("i_spacial_relative", "eval_image.py:ISpacialRelative.evaluate", "identical",
           (_IMG, _IMG_TASKS, "tests/tasks/test_published_readers.py"),
           _JUDGED + _LETTER_TASK[1:] + (_d("strict", "one exactly-one question per object instead of one joint question",
                                            "a joint question lets the judge answer for the pair without checking each "
                                            "object"),),
           note="exactly-one gate, then left/right or above/below with a 'neither' option, read in mmmg as the first "
                "`nswer: X` (one space, exact case; none: wrong); gates and question go to role spatial_relative; "
                "the product over constraints (published rows have one)"),
    Parity("i_spacial_absolute", "eval_image.py:ISpacialAbsolute.evaluate", "identical",
           (_IMG, _IMG_TASKS, "tests/tasks/test_published_readers.py"), _JUDGED + _LETTER_TASK[1:],
           note="exactly-one gate per object, then the quadrant question, read in mmmg as the first `nswer: X`; "
                "product; role spatial_absolute"),
    Parity("i_format_background", "eval_image.py:IFormatBackground.evaluate", "identical",
           ("tests/verifiers/image/test_fill.py", "tests/reference/fill_skimage.py"),
           note="colour gate on the region's truncated mean colour, SSIM against the flat colour, minus the "
                "adjacent band's over-fill"),
    Parity("i_format_border", "eval_image.py:IFormatBorder.evaluate", "identical",
           ("tests/verifiers/image/test_fill.py", "tests/reference/fill_skimage.py")),
    Parity("i_ocr", "eval_image.py:IOCR.evaluate", "identical", (_IMG, _IMG_TASKS, "tests/tasks/test_published_readers.py"),
           _LIST_TASK + (_OCR_NORM, _OCR_SPACES),
           note="reads the main text on the row's `object`; in mmmg the judge's list is the first one-line `[...]` "
                "(utils.extract_list; none or not JSON: an empty reading); published normalisation; 1 - min(WER, 1)"),
    Parity("i_ocr_two", "eval_image.py:IOCRTwo.evaluate", "identical", (_IMG, _IMG_TASKS, "tests/tasks/test_published_readers.py"),
           _JUDGED + _LIST_TASK[1:] + (_OCR_NORM, _OCR_SPACES)),
    Parity("i_ocr_multi_lingual", "eval_image.py:IOCRMultiLingual.compute_accuracy", "deviation",
           (_IMG, _IMG_TASKS),
           _LIST_TASK + (
               _d("both", "Chinese readings are the JSON list at the end of the reply",
                  "the published code keeps every CJK character anywhere in the reply, its reasoning included; the "
                  "German list is read as published in mmmg"),
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
    Parity("i_edit_object_add", "eval_image.py:IEdit.evaluate", "deviation", (_IMG, _EDIT), _JUDGED + (_FLOOR,),
           note="SSIM outside the box widened by size//20 (blacked out in both) x existence on the crop"),
    Parity("i_edit_object_remove", "eval_image.py:IEditObjectRemove", "deviation", (_IMG, _EDIT), _JUDGED + (_FLOOR,),
           note="presence asked on the crop and inverted"),
    Parity("i_edit_object_modify", "eval_image.py:IEditObjectModify", "deviation", (_IMG, _EDIT), _JUDGED + (_FLOOR,)),
    Parity("i_edit_object_attribute", "eval_image.py:IEditObjectAttribute", "deviation", (_IMG, _EDIT),
           _JUDGED + (_FLOOR,)),
    Parity("i_edit_text_add", "eval_image.py:IEditTextAdd", "deviation", (_IMG, _EDIT, "tests/tasks/test_published_readers.py"),
           _LIST_TASK + (_OCR_NORM, _FLOOR), note="in mmmg the judge's list is read as published (utils.extract_list)"),
    Parity("i_edit_text_alter", "eval_image.py:IEditTextAlter", "deviation", (_IMG, _EDIT, "tests/tasks/test_published_readers.py"),
           _LIST_TASK + (_OCR_NORM, _FLOOR), note="in mmmg the judge's list is read as published (utils.extract_list)"),
    Parity("i_edit_add", "eval_image.py:IEditAdd.evaluate", "deviation", (_IMG, _EDIT), (_FLOOR, _DREAMSIM_CLIP),
           note="SSIM outside the box widened by size//10 against the reference result x DreamSim of the crops"),
    Parity("i_edit_color", "eval_image.py:IEditColor", "deviation", (_IMG, _EDIT), (_FLOOR, _DREAMSIM_CLIP)),
    Parity("i_consistency_semantic", "eval_interleaved.py:IConsistencySemantic.evaluate", "identical",
           ("tests/tasks/test_consistency_objects.py",), _JUDGED),
    Parity("i_consistency_compose", "eval_interleaved.py:IConsistencyCompose", "identical",
           ("tests/tasks/test_consistency_objects.py",), _JUDGED),
    Parity("i_consistency_decompose", "eval_interleaved.py:IConsistencyDecompose", "identical",
           ("tests/tasks/test_consistency_objects.py",), _JUDGED),
    Parity("i_consistency_3d_object", "eval_interleaved.py:IConsistency3DObject.evaluate", "deviation",
           ("tests/tasks/test_consistency_views.py",), (_FLOOR,),
           note="mean SSIM over the views; the raw mean is kept as `evidence.mean_ssim`"),
    Parity("i_consistency_3d_scene", "eval_interleaved.py:IConsistency3DScene", "deviation",
           ("tests/tasks/test_consistency_views.py",), (_FLOOR,)),
    Parity("it_coherence_count", "eval_interleaved.py:ITCoherenceCount.model_process_response", "deviation",
           (_INTER, "tests/tasks/test_published_readers.py"),
           (_OWN_WORDING,
            _d("strict", "the judge's option is the final `Answer:` letter, and it must name the claimed count",
               "the published reader takes the first character of the reply (ord - 95 == N), so a reply that reasons "
               "first fails, and one that happens to start with 'B' ('Based on ...') confirms 3; mmmg reads as "
               "published"),
            _d("strict", "a reply without a final option letter is a judge_unparseable error row",
               "published (and mmmg): whatever the first character is decides"),
            _d("both", "an empty reply is a judge_unparseable error row", "the published code crashes on it"),
            _d("both", "the whole number in `<count>N</count>` is read",
               "the published pattern keeps only the last digit (`<count>14</count>` reads as 4)"),
            _d("strict", "the tag may differ in case and spacing", "formatting noise is not the claim"),
            ),
           note="the counting question with the published 3-6 layout; mmmg: the first character of the stripped, "
                "lower-cased reply must be the claimed count's letter (b = 3 ... e = 6)"),
    Parity("it_coherence_color", "eval_interleaved.py:ITCoherenceColor.model_process_data", "identical", (_INTER,),
           _JUDGED + (_d("strict", "up to 64 JSON objects are tried; names match ignoring case",
                         "the first brace span may be prose; case is not the claim"),)),
    Parity("it_coherence_size", "eval_interleaved.py:ITCoherenceSize.model_process_data", "identical", (_INTER,),
           _JUDGED + (_d("strict", "the ranking must be an exact permutation; comparative words say area, volume "
                         "and height explicitly", "a partial list or a loose comparison passes otherwise"),)),
    Parity("it_coherence_spacial_relative", "eval_interleaved.py:ITCoherenceSpacialRelative.model_process_data",
           "identical", (_INTER, "tests/tasks/test_published_readers.py"),
           _JUDGED + _LETTER_TASK[1:] + (_d("strict", "one exactly-one question per distinct object",
                                            "a joint gate lets the judge answer for the pair"),),
           note="gates and questions go to role spatial_relative; mmmg reads the option as the first `nswer: X`"),
    Parity("it_coherence_spacial_absolute", "eval_interleaved.py:ITCoherenceSpacialAbsolute.model_process_data",
           "identical", (_INTER, "tests/tasks/test_published_readers.py"), _JUDGED + _LETTER_TASK[1:],
           note="gates and questions go to role spatial_absolute; mmmg reads the option as the first `nswer: X`"),
    Parity("it_coherence_ocr", "eval_interleaved.py:ITCoherenceOCR.model_process_data", "identical",
           (_INTER, "tests/tasks/test_published_readers.py"),
           _LIST_TASK + (_OCR_NORM, _d("both", "blank claimed text never scores",
                                      "published: spaces-only text and an empty reading scored 1"),
                      _d("strict", "words counted as real words, not pieces between single spaces",
                         "double spaces otherwise change the 5-10 word check")),
           note="the text after the image, `<text>...</text>`, 5-10 words, OCR of `object`, 1 - min(WER, 1)"),
    Parity("it_coherence_math", "eval_interleaved.py:ITCoherenceMath.evaluate", "identical",
           ("tests/tasks/test_reasoning.py",), _JUDGED + (_d("strict", "`<<pattern>>` may span lines",
                                                             "a line break is formatting, not the answer"),),
           note="LLM judges the `<<pattern>>` text against the ground truth; the last image judged by a VLM "
                "(several patterns or a question mark mean No); product"),
    Parity("it_coherence_code", "eval_interleaved.py:ITCoherenceCode.evaluate", "deviation",
           ("tests/tasks/test_reasoning.py", "tests/tasks/test_published_readers.py"),
           _JUDGED + (_d("both", "only the last VERDICT line decides", "published: 'VERDICT: PASS' anywhere, "
                         "including a quoted example in the reasoning"),
                      _d("both", "rows with `object` instead of `caption` are accepted; malformed `criteria` are "
                         "invalid_instance rows", "the published code raises KeyError/TypeError"),
                      _d("strict", "a response without any text scores 0 (no_text)",
                         "the instruction asks for the code as well as the figure; the published shape check (and "
                         "mmmg) accepts images alone"),
                      _DREAMSIM_CLIP),
           note="description from `caption` or `object`; `criteria` rows judged to VERDICT: PASS, others by "
                "existence; x DreamSim of the last image against the reference rendering; a response of images "
                "only is scored in mmmg, as published"),
    Parity("i_structure", "eval_interleaved.py:IStructure.evaluate", "identical",
           ("tests/verifiers/test_structure.py", "tests/data/test_mmmg_import.py", "tests/tasks/test_structure_media.py"), (_ORDER_MEDIA,)),
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
           (_RESAMPLER,
            _d("both", "the offline librosa-beats tracker estimates BPM from its fitted beat period",
               "no published rule exists for that tracker; with the beats x 60 / duration formula it under-counts "
               "edge beats (a clean 120 BPM drum track read 114); within 0.5 BPM from 60 to 180 BPM now"),
            _d("strict", "every tracker's BPM comes from the fitted beat period",
               "the count formula misses by up to 10 BPM on drum tracks even with a good tracker")),
           note="beat_this: beats x 60 / silence-trimmed duration, pass if |BPM - tempo| < 5"),
    Parity("a_music_intensity", "eval_audio.py:AMusicIntensity.evaluate", "identical", (_AUDIO_REF, "tests/tasks/test_music.py"),
           (_RESAMPLER,
            _d("both", "flat loudness, no peaks or an empty start window fail the clip", "the published code raises"),
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
    Parity("a_speech_translate", "eval_audio.py:ASpeechTranslate", "not verifiable", (_SPEECH,),
           (_STRICT_LANGUAGE,
            _d("strict", "the reference is normalised like the transcript",
               "Whisper's normaliser writes number words as digits, so a perfect transcript of a reference with "
               "number words scores below 1 (17 of the 40 published references; 0.40 at worst)")),
           note="transcription (English forced, 30 s) and transcript-only normalisation as published; the BLEU helper "
                "is in no released file, so sacrebleu sentence BLEU / 100 is used. Forcing English makes Whisper "
                "translate source-language speech: repeating the input scores 1.0 under mmmg, < 0.05 under strict"),
    Parity("a_speech_retrieve", "eval_audio.py:ASpeechRetrieve", "identical", (_SPEECH,), (_STRICT_LANGUAGE,),
           note="max(1 - WER, 0) against the answer span"),
    Parity("a_structure", "eval_interleaved.py:AStructure", "identical",
           ("tests/verifiers/test_structure.py", "tests/data/test_mmmg_import.py", "tests/tasks/test_structure_media.py"), (_ORDER_MEDIA,)),
)


def entries() -> dict[str, Parity]:
    return {entry.task: entry for entry in ENTRIES}


if __name__ == "__main__":  # python -m mmverify.tasks.parity > docs/PARITY.md
    from .parity_docs import markdown

    print(markdown(), end="")
