"""What the official MMMG evaluators read from an output folder, restated directly.

Independent of mmverify's importer: a plain re-statement of the published pipeline's reading of
``<dir>/<source>.jsonl`` (eval.py ``EvalUnit.load``; eval_image.py, eval_audio.py and
eval_interleaved.py evaluators), used as the yardstick for the importer's parity tests.

* ``load``: every entry ``n`` of a row's ``image_list`` / ``audio_list`` is opened as
  ``<dir>/image/<source>_{n}.png`` / ``<dir>/audio/<source>_{n}.wav``, in list order.
* list evaluators (image, edit, consistency, sound, music, speech, conversation) use those lists.
* coherence evaluators split the response on ``<image_start><image_\\d+><image_end>``; the row is
  evaluated only when the split gives exactly two pieces (reasoning tasks: at least two) and the
  image list has exactly one image (reasoning tasks: at least one); the text parsed is what follows
  the image (reasoning tasks: the pieces joined).
* order evaluators split the response on ``<(image|audio)_start><(image|audio)_\\d+><(image|audio)_end>``,
  find ``<(image|audio)_\\d+>`` tokens, give up (score 0) when the counts disagree, and build the
  letter string: ``t`` first unless the first piece is exactly empty, then per token ``i``/``a``
  followed by ``t`` when the next piece is not blank.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

_SPLIT_IMAGE = r"<image_start><image_\d+><image_end>"
_SPLIT_ANY = r"<(?:image|audio)_start><(?:image|audio)_\d+><(?:image|audio)_end>"
_TOKEN = r"<((?:image|audio)_\d+)>"


def loaded_files(folder: Path, source: str, row: dict[str, Any], kind: str) -> list[Path]:
    """The files ``EvalUnit.load`` opens for one row and one kind, in list order."""
    suffix = "png" if kind == "image" else "wav"
    return [folder / kind / f"{source}_{entry}.{suffix}" for entry in row.get(f"{kind}_list", [])]


def coherence_reading(response: str, images: list[Path], several: bool) -> tuple[str, bool]:
    """``(text the evaluator parses, whether the row is evaluated at all)``."""
    texts = re.split(_SPLIT_IMAGE, response)
    if several:  # math and code parse all the text
        return "".join(texts), len(texts) >= 2 and len(images) >= 1
    evaluated = len(texts) == 2 and len(images) == 1
    return (texts[1] if evaluated else "".join(texts)), evaluated  # the newest evaluator reads what follows the image


def order_letters(response: str) -> str | None:
    """The published order string of a response, or None when the evaluator gives up (score 0)."""
    texts = re.split(_SPLIT_ANY, response)
    tokens = re.findall(_TOKEN, response)
    if len(texts) != len(tokens) + 1:
        return None
    letters = "" if texts[0] == "" else "t"
    for text, token in zip(texts[1:], tokens):
        letters += "i" if token.startswith("image") else "a"
        if text.strip() != "":
            letters += "t"
    return letters


def order_score(response: str, allowed: list[str]) -> float:
    letters = order_letters(response)
    return 0.0 if letters is None else float(letters in allowed)
