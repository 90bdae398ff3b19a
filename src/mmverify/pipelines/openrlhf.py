"""OpenRLHF's remote reward protocol: the body ``{"query", "prompts", "labels"}`` as reward items,
and the rows as the reply ``{"rewards", "scores", "extra_logs"}`` (the server's ``POST /get_reward``;
:func:`mmverify.pipelines.adapters.reward_func` is the same for OpenRLHF's local reward file)."""

from __future__ import annotations

import re
from typing import Any, Mapping, Sequence

from ..core.errors import ErrorCode
from .adapter_items import check_policy, decode_json, guarded_item, with_response
from .reward_batch import Item, Refused, scores_from_rows
from .reward_json import JsonBudget


# End-of-sequence tokens a decode with special tokens leaves after the response (OpenRLHF decodes
# its queries so, and vLLM keeps the stop token).
END_TOKENS = ("<|im_end|>", "<|endoftext|>", "<|eot_id|>", "<|end|>", "<end_of_turn>", "<eos>", "</s>")


def strip_end_tokens(text: str) -> str:
    """``text`` without the :data:`END_TOKENS` that end it and the blanks after each; the response's
    own trailing blanks, before the first of them, stay.  Linear in the text's length: only the
    end moves, nothing is copied until it stops."""
    end = len(text)
    while True:
        stop = end
        while stop and text[stop - 1].isspace():  # what str.rstrip() strips
            stop -= 1
        token = next((token for token in END_TOKENS if text.endswith(token, 0, stop)), None)
        if token is None:
            return text[:end]
        end = stop - len(token)


# What may precede the prompt in a query: padding, decoded as special tokens (``<|endoftext|>``,
# ``<pad>``, ``[PAD]`` ...) and blanks.
_PADDING = re.compile(r"(?:\s|<[^<>\s]{1,64}>|\[[A-Z_]{1,16}\])*")


def response_text(query: Any, prompt: Any) -> str:
    """The response in an OpenRLHF query (prompt + response, decoded with special tokens): what
    follows the prompt, after any padding, without the end tokens after it.  A query that does not
    start with its prompt (one cut at the prompt length, or a tokenizer that does not decode it
    back) is refused rather than scored prompt and all, or from a quote of the prompt on; so is a
    prompt that is not text.  A missing (None) or empty prompt leaves the whole query."""
    if not isinstance(query, str):
        raise ValueError(f"each query must be a string, got {type(query).__name__}")
    if prompt is not None and not isinstance(prompt, str):  # not a prompt to strip: refused, not ignored
        raise ValueError(f"each prompt must be a string, got {type(prompt).__name__}")
    text = query
    if prompt:
        start = text.find(prompt)  # the first place: a quote of the prompt comes after the prompt
        if start < 0 or _PADDING.fullmatch(text, 0, start) is None:
            raise ValueError("the query does not start with its prompt, so the response cannot be told apart")
        text = text[start + len(prompt) :]
    return strip_end_tokens(text)


def _label_item(label: Any, query: Any, prompt: Any, budget: JsonBudget | None) -> Item:
    text = response_text(query, prompt)
    decoded = decode_json(label, budget)
    if not isinstance(decoded, Mapping):
        return Refused(ErrorCode.MALFORMED_LINE, 'each label must be a JSON object {"task": ..., "instance": {...}}', label)
    item = {key: decoded[key] for key in ("task", "instance", "instance_id", "sample", "model") if key in decoded}
    if "instance" in item:
        item["instance"] = decode_json(item["instance"], budget)
    item["parts"] = with_response(decoded.get("parts"), text)
    return item


def openrlhf_items(body: Mapping[str, Any], budget: JsonBudget | None = None) -> list[Item]:
    """Items for an OpenRLHF body ``{"query": [...], "prompts": [...], "labels": [...]}``.

    ``query[i]`` is prompt + response (:func:`response_text` keeps the response); ``labels[i]`` is a JSON string (or object) ``{"task": ..., "instance": {...}}``
    with optional ``parts`` (media the rollout produced, by path or base64; ``{"type":
    "response"}`` marks where the response text goes -- without ``parts`` the response is the text).
    Raises ``ValueError`` for a body of the wrong shape.  ``budget`` (the server's) bounds the JSON
    the labels' strings decode to, as the body's own (TooManyValues past it).
    """
    if not isinstance(body, Mapping):
        raise ValueError("the body must be a JSON object")
    queries = body.get("query")
    if isinstance(queries, str):
        queries = [queries]
    if not isinstance(queries, list):
        raise ValueError("'query' must be a list of strings")
    labels = body.get("labels")
    if labels is None:
        raise ValueError("'labels' is required: each label names the task and the instance annotation")
    if not isinstance(labels, list) or len(labels) != len(queries):
        raise ValueError(f"'labels' must be a list as long as 'query' ({len(queries)})")
    prompts = body.get("prompts")
    if prompts is None:
        prompts = [None] * len(queries)
    if not isinstance(prompts, list) or len(prompts) != len(queries):
        raise ValueError(f"'prompts' must be a list as long as 'query' ({len(queries)})")
    return [guarded_item(None, _label_item, label, query, prompt, budget) for query, prompt, label in zip(queries, prompts, labels)]


def openrlhf_response(rows: Sequence[Mapping[str, Any]], on_error: str = "raise") -> dict[str, Any]:
    """The reply body: ``rewards`` and ``scores`` (both the scores in [0, 1]), ``extra_logs``
    (per-sample ``mmverify_valid``), and ``results`` (the full rows).  Raises
    :class:`~mmverify.pipelines.reward.RewardError` under "raise" when any item errored."""
    scores = scores_from_rows(rows, check_policy(on_error, ("raise", "zero")))  # OpenRLHF takes no null
    return {
        "rewards": scores,
        "scores": scores,
        "extra_logs": {"mmverify_valid": [1.0 if r["status"] == "scored" else 0.0 for r in rows]},
        "results": [dict(r) for r in rows],
    }
