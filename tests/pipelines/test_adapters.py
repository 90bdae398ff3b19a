"""Each adapter called exactly as its framework calls it.

TRL, verl and Flow-GRPO are not installed here (verl pulls Ray and another transformers; TRL's
trainer needs datasets/pyarrow and a model), so their call sites are reproduced line for line from
the released sources: TRL 1.16 ``GRPOTrainer._calculate_rewards``, verl 0.9
``NaiveRewardManager.__call__`` / ``BatchRewardManager`` / the reward loop's key stacking /
``get_custom_reward_fn``, and Flow-GRPO's ``reward_fn(images, prompts, metadata)`` with its tensor
conversion.
"""

from __future__ import annotations

import asyncio
import functools
import importlib
import inspect
import io
import json
import math
import pickle
import random
from collections import defaultdict
from typing import Any, Mapping

import numpy as np
import pytest
from PIL import Image

from mmverify.pipelines.adapters import (
    AsyncTRLReward,
    FlowGRPOReward,
    TRLReward,
    compute_score,
    compute_score_batch,
    completion_parts,
    openrlhf_items,
    openrlhf_response,
    reward_func,
)
from mmverify.pipelines.openrlhf import END_TOKENS, strip_end_tokens
from mmverify.pipelines.reward import Reward, RewardError
from tests.pipelines.conftest import bordered

GREEN = bordered("green")
RED = bordered("red")


# -- TRL ---------------------------------------------------------------------------------------------


def _is_async_callable(func: Any) -> bool:  # trl.trainer.utils.is_async_callable
    while isinstance(func, functools.partial):
        func = func.func
    return inspect.iscoroutinefunction(func) or inspect.iscoroutinefunction(func.__call__)


def _callable_name(func: Any) -> str:  # trl.trainer.utils.get_callable_name
    while isinstance(func, functools.partial):
        func = func.func
    return getattr(func, "__name__", type(func).__name__)


def trl_rewards(reward_func_: Any, inputs: list[dict], completions: list[Any]) -> tuple[list[float], dict]:
    """GRPOTrainer._calculate_rewards for one custom reward function (TRL 1.16)."""
    prompts = [x["prompt"] for x in inputs]
    metrics: dict[str, list[float]] = defaultdict(list)
    keys = [key for key in inputs[0] if key not in ["prompt", "completion", "completion_ids"]]
    reward_kwargs: dict[str, Any] = {key: [example[key] for example in inputs] for key in keys}
    reward_kwargs["trainer_state"] = object()
    reward_kwargs["log_extra"] = lambda column, values: None
    reward_kwargs["log_metric"] = lambda name, value: metrics[name].append(value)
    completion_ids_list = [[1, 2, 3] for _ in completions]
    if _is_async_callable(reward_func_):
        async def invoke() -> list:
            return await reward_func_(prompts=prompts, completions=completions, completion_ids=completion_ids_list, **reward_kwargs)

        output = asyncio.run(invoke())
    else:
        output = reward_func_(prompts=prompts, completions=completions, completion_ids=completion_ids_list, **reward_kwargs)
    output = [reward if reward is not None else math.nan for reward in output]
    assert len(output) == len(prompts)
    return output, dict(metrics)


def test_trl_text_completions_standard_and_conversational():
    rows = [
        {"prompt": "Write text only.", "instance": json.dumps({"order": ["t"]})},
        {"prompt": "Write text only.", "instance": json.dumps({"order": ["t"]})},
        {"prompt": "Bad row.", "instance": json.dumps({"no_order": 1})},
    ]
    func = TRLReward("i_structure")
    assert _callable_name(func) == "mmverify" and not _is_async_callable(func)
    rewards, metrics = trl_rewards(func, rows, ["plain text", "more text", "text"])
    assert rewards[:2] == [1.0, 1.0] and math.isnan(rewards[2])
    assert metrics == {"mmverify/error_rate": [1 / 3]}

    conversational = [[{"role": "assistant", "content": "plain text"}], [{"role": "assistant", "content": [{"type": "text", "text": "x"}]}]]
    prompts = [{"prompt": [{"role": "user", "content": "hi"}], "instance": {"order": ["t"]}}] * 2
    assert trl_rewards(func, prompts, conversational)[0] == [1.0, 1.0]


def test_trl_completions_carrying_images_and_a_task_column():
    inputs = [
        {"prompt": "A green border.", "task": "i_format_border", "instance": json.dumps({"color": "green"})},
        {"prompt": "A green border.", "task": "i_format_border", "instance": json.dumps({"color": "green"})},
        {"prompt": "Image then text.", "task": "i_structure", "instance": json.dumps({"order": ["it"]})},
    ]
    completions = [
        [{"role": "assistant", "content": [{"type": "image", "image": Image.fromarray(GREEN)}]}],
        [{"role": "assistant", "content": [{"type": "image", "image": RED}]}],
        [{"role": "assistant", "content": [{"type": "image", "image": GREEN}, {"type": "text", "text": "caption"}]}],
    ]
    rewards, _ = trl_rewards(TRLReward(), inputs, completions)
    expected = Reward()([({"color": "green"}, [GREEN]), ({"color": "green"}, [RED]), ({"order": ["it"]}, [GREEN, "caption"])],
                        tasks=["i_format_border", "i_format_border", "i_structure"]).scores  # fmt: skip
    assert rewards == expected and rewards[0] > 0.9 and rewards[1] == 0.0 and rewards[2] == 1.0


def test_trl_async_variant_gives_the_same_rewards():
    inputs = [{"prompt": "p", "instance": {"order": ["t"]}}, {"prompt": "p", "instance": {"order": ["it"]}}]
    func = AsyncTRLReward("i_structure", name="structure")
    assert _is_async_callable(func) and _callable_name(func) == "structure"
    async_rewards, async_metrics = trl_rewards(func, inputs, ["a", "b"])
    sync_rewards, _ = trl_rewards(TRLReward("i_structure"), inputs, ["a", "b"])
    assert async_rewards == sync_rewards == [1.0, 0.0]
    assert async_metrics == {"structure/error_rate": [0.0]}
    # TRL before is_async_callable asks inspect.iscoroutinefunction of the object itself, also after
    # the reward travelled to another process
    for candidate in (func, pickle.loads(pickle.dumps(func))):
        assert inspect.iscoroutinefunction(candidate) and not inspect.iscoroutinefunction(TRLReward("i_structure"))
        assert list(inspect.signature(candidate).parameters) == ["prompts", "completions", "kwargs"]
        assert asyncio.run(candidate(prompts=["p"], completions=["a"], instance=[{"order": ["t"]}])) == [1.0]


def test_trl_configuration_errors_are_loud():
    with pytest.raises(ValueError, match="'instance' column"):
        trl_rewards(TRLReward("i_structure"), [{"prompt": "p", "annotation": "{}"}], ["x"])
    with pytest.raises(ValueError, match="no fixed task"):
        trl_rewards(TRLReward(), [{"prompt": "p", "instance": "{}"}], ["x"])
    func = pickle.loads(pickle.dumps(TRLReward("i_structure")))  # reward functions travel to workers
    assert trl_rewards(func, [{"prompt": "p", "instance": {"order": ["t"]}}], ["x"])[0] == [1.0]


def test_completion_shapes():
    assert completion_parts("x") == ["x"]
    assert completion_parts({"role": "assistant", "content": "x"}) == ["x"]
    messages = [{"role": "assistant", "content": "a"}, {"role": "tool", "content": "t"}, {"role": "assistant", "content": "b"}]
    assert completion_parts(messages) == ["a", "b"]
    assert completion_parts(["a", GREEN])[0] == "a"


# -- verl --------------------------------------------------------------------------------------------


def _load_verl_custom_fn(reward_kwargs: dict) -> Any:
    """verl's get_custom_reward_fn for custom_reward_function.path=pkg://mmverify.pipelines.adapters."""
    module_path = "pkg://mmverify.pipelines.adapters"
    raw_fn = getattr(importlib.import_module(module_path[len("pkg://"):].replace("/", ".")), "compute_score")

    def _call_with_kwargs(raw_fn, extra_kwargs, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003
        merged_kwargs = {**kwargs, **extra_kwargs}
        return raw_fn(*args, **merged_kwargs)

    assert not inspect.iscoroutinefunction(raw_fn)
    return functools.partial(_call_with_kwargs, raw_fn, reward_kwargs)


def naive_reward_manager(compute_score_fn: Any, samples: list[dict]) -> tuple[list[float], dict[str, list]]:
    """The per-sample loop of verl's NaiveRewardManager (decoded strings instead of token ids)."""
    rewards, reward_extra_info = [], defaultdict(list)
    for sample in samples:
        extra_info = dict(sample.get("extra_info", {}))
        extra_info["num_turns"] = None
        extra_info["rollout_reward_scores"] = {}
        score = compute_score_fn(
            data_source=sample["data_source"],
            solution_str=sample["response"],
            ground_truth=sample["reward_model"]["ground_truth"],
            extra_info=extra_info,
        )
        if isinstance(score, dict):
            reward = score["score"]
            for key, value in score.items():
                reward_extra_info[key].append(value)
        else:
            reward = score
        rewards.append(reward)
    return rewards, dict(reward_extra_info)


def validation_metrics(extra: Mapping[str, list]) -> dict[str, float]:
    """verl's validation step over the reward's extra keys: a key whose first value is a string is
    skipped, every other is averaged with numpy (None there raises)."""
    return {key: float(np.mean(values)) for key, values in extra.items() if not isinstance(values[0], str)}


VERL_SAMPLES = [
    {"data_source": "i_structure", "response": "text only", "reward_model": {"ground_truth": json.dumps({"order": ["t"]})}},
    {"data_source": "i_structure", "response": "text only", "reward_model": {"ground_truth": {"order": ["it"]}}},
    {
        "data_source": "i_format_border",
        "response": "Here it is.",
        "reward_model": {"ground_truth": {"color": "green"}},
        "extra_info": {"parts": [{"type": "response"}, {"type": "image", "path": "green.png"}]},
    },
]


@pytest.fixture
def green_png(tmp_path):
    Image.fromarray(GREEN).save(tmp_path / "green.png")
    return tmp_path


def test_verl_naive_manager_with_reward_kwargs(green_png):
    fn = _load_verl_custom_fn({"data_root": str(green_png), "component_keys": ["ssim"]})
    rewards, extra = naive_reward_manager(fn, VERL_SAMPLES)
    assert rewards[:2] == [1.0, 0.0] and rewards[2] > 0.9
    assert len({len(v) for v in extra.values()}) == 1  # every key for every sample: verl stacks them
    assert extra["valid"] == [1.0, 1.0, 1.0] and extra["error"] == ["", "", ""]
    assert extra["passed"][:2] == [1.0, 0.0] and math.isnan(extra["passed"][2])  # no threshold, no verdict
    assert all(math.isnan(v) for v in extra["ssim"][:2]) and extra["ssim"][2] > 0.9
    assert set(validation_metrics(extra)) == {"score", "valid", "passed", "ssim"}  # strings are skipped
    assert json.loads(extra["components"][2])["color_ok"] == 1.0
    # verl's reward loop stacks the first sample's keys across the batch
    infos = [compute_score(s["data_source"], s["response"], s["reward_model"]["ground_truth"], s.get("extra_info"), data_root=str(green_png)) for s in VERL_SAMPLES]
    stacked = {key: np.array([info[key] for info in infos]) for key in infos[0]}
    assert stacked["score"].shape == (3,)


def test_verl_parts_read_from_parquet_keep_their_media_and_unusable_ones_are_refused(green_png):
    """datasets hands Parquet lists over as numpy object arrays; parts of any other shape, or a
    response that is not text, must cost the sample a row rather than score it without its media."""
    sample = VERL_SAMPLES[2]
    parts = sample["extra_info"]["parts"]

    def score(parts_value, response=sample["response"]):
        return compute_score(sample["data_source"], response, sample["reward_model"]["ground_truth"], {"parts": parts_value},
                             data_root=str(green_png), on_error="zero")  # fmt: skip

    as_list = score(parts)
    assert as_list["valid"] == 1.0 and as_list["score"] > 0.9
    assert score(np.array(parts, dtype=object)) == as_list and score(tuple(parts)) == as_list
    for unusable in ({"type": "image", "path": "green.png"}, "green.png", np.array([parts, parts], dtype=object)):
        assert score(unusable)["error"] == "malformed_line"
    assert score(parts, response=None)["error"] == "malformed_line"


def test_verl_errors_raise_by_default_and_zero_on_request():
    bad = [{"data_source": "i_structure", "response": "x", "reward_model": {"ground_truth": {"no_order": 1}}}]
    with pytest.raises(RewardError, match="invalid_instance"):
        naive_reward_manager(_load_verl_custom_fn({}), bad)
    rewards, extra = naive_reward_manager(_load_verl_custom_fn({"on_error": "zero"}), bad + VERL_SAMPLES[:1])
    assert rewards == [0.0, 1.0] and extra["valid"] == [0.0, 1.0] and extra["error"] == ["invalid_instance", ""]
    assert validation_metrics(extra)["valid"] == 0.5  # an error row's extra keys average too
    assert compute_score("no_such_task", "x", {}, on_error="zero")["error"] == "unknown_task"
    with pytest.raises(ValueError, match="on_error"):
        compute_score("i_structure", "x", {"order": ["t"]}, on_error="none")


def test_verl_batch_manager_convention(green_png):
    results = compute_score_batch(
        data_sources=[s["data_source"] for s in VERL_SAMPLES],
        solution_strs=[s["response"] for s in VERL_SAMPLES],
        ground_truths=[s["reward_model"]["ground_truth"] for s in VERL_SAMPLES],
        extra_infos=[s.get("extra_info", {}) for s in VERL_SAMPLES],
        data_root=str(green_png),
        reward_router_address=None,  # verl's own keywords are ignored
    )
    fn = _load_verl_custom_fn({"data_root": str(green_png)})
    assert [r["score"] for r in results] == naive_reward_manager(fn, VERL_SAMPLES)[0]


# -- Flow-GRPO / DDPO --------------------------------------------------------------------------------


def test_flow_grpo_accepts_every_image_form():
    torch = pytest.importorskip("torch")
    metadata = [{"task": "i_format_border", "instance": {"color": "green"}}, {"task": "i_format_border", "instance": {"color": "green"}}]
    batch_uint8 = np.stack([GREEN, RED])  # NHWC uint8
    batch_float = torch.from_numpy(batch_uint8).permute(0, 3, 1, 2).float() / 255.0  # NCHW in [0, 1]
    reward_fn = FlowGRPOReward()
    expected = Reward()([({"color": "green"}, [GREEN]), ({"color": "green"}, [RED])], tasks=["i_format_border"] * 2).scores
    for images in (batch_uint8, batch_float, [Image.fromarray(a) for a in batch_uint8], batch_float.numpy(), list(batch_float)):
        scores, info = reward_fn(images, ["a green border"] * 2, metadata, only_strict=True)
        assert scores.dtype == np.float64 and scores.tolist() == expected
        assert info["valid"].tolist() == [True, True] and len(info["rows"]) == 2
    # Flow-GRPO's own conversion of a float tensor gives the same pixels we score
    converted = (batch_float * 255).round().clamp(0, 255).to(torch.uint8).cpu().numpy().transpose(0, 2, 3, 1)
    assert np.array_equal(converted, batch_uint8)
    fixed = FlowGRPOReward("i_format_border", layout="NCHW")
    assert fixed(batch_float, ["p", "p"], [{"color": "green"}, {"color": "green"}])[0].tolist() == expected


def test_flow_grpo_errors():
    with pytest.raises(RewardError):
        FlowGRPOReward("i_format_border")(np.stack([GREEN]), ["p"], [{"colour_missing": 1}])
    scores, info = FlowGRPOReward("i_format_border", on_error="nan")(np.stack([GREEN]), ["p"], [{"colour_missing": 1}])
    assert math.isnan(scores[0]) and info["error"] == ["invalid_instance"]
    with pytest.raises(ValueError, match="4-D"):
        FlowGRPOReward("i_format_border")(GREEN, ["p"], [{}])
    with pytest.raises(ValueError, match="layout"):
        FlowGRPOReward("i_format_border", layout="CHW")


# -- OpenRLHF ----------------------------------------------------------------------------------------


def _png_b64(array: np.ndarray) -> str:
    import base64

    buffer = io.BytesIO()
    Image.fromarray(array).save(buffer, format="PNG")
    return base64.b64encode(buffer.getvalue()).decode()


def test_openrlhf_body_and_reply():
    body = {
        "query": ["<user>Say it.</user>just text", "<user>Draw.</user>Here:"],
        "prompts": ["<user>Say it.</user>", "<user>Draw.</user>"],
        "labels": [
            json.dumps({"task": "i_structure", "instance": {"order": ["t"]}}),
            json.dumps({"task": "i_structure", "instance": {"order": ["ti"]},
                        "parts": [{"type": "response"}, {"type": "image", "data": _png_b64(GREEN)}]}),
        ],
    }  # fmt: skip
    items = openrlhf_items(body)
    assert items[0]["parts"] == [{"type": "text", "text": "just text"}]
    reply = openrlhf_response(Reward().rows(items))
    assert reply["rewards"] == [1.0, 1.0] and reply["scores"] == [1.0, 1.0]
    assert reply["extra_logs"] == {"mmverify_valid": [1.0, 1.0]} and len(reply["results"]) == 2

    bad = openrlhf_items({"query": ["x", "y"], "labels": ["not json", {"task": "i_structure", "instance": {"bad": 1}}]})
    rows = Reward().rows(bad)
    assert [r["error"]["code"] for r in rows] == ["malformed_line", "invalid_instance"]
    with pytest.raises(RewardError):
        openrlhf_response(rows)
    assert openrlhf_response(rows, "zero")["rewards"] == [0.0, 0.0]
    for broken in ({"query": "x"}, {"query": ["x"], "labels": []}, {"labels": ["{}"]}, []):
        with pytest.raises(ValueError):
            openrlhf_items(broken)  # type: ignore[arg-type]


def test_openrlhf_queries_decoded_with_special_tokens_keep_only_the_response():
    """OpenRLHF decodes prompt + response with special tokens: left padding before the prompt and
    the stop token after the response are not the model's text."""
    from mmverify.pipelines.adapters import response_text

    prompt = "<|im_start|>user\nDraw.<|im_end|>\n<|im_start|>assistant\n"
    assert response_text("<|endoftext|>" * 3 + prompt + "Here it is.<|im_end|>", prompt) == "Here it is."
    assert response_text(prompt + "line one\n<|im_end|>\n<|endoftext|>", prompt) == "line one\n"
    assert response_text(prompt + "no stop token", prompt) == "no stop token"
    assert response_text("plain </s> inside</s>", None) == "plain </s> inside"
    label = json.dumps({"task": "i_structure", "instance": {"order": ["i"]}, "parts": [{"type": "image", "data": _png_b64(GREEN)}, {"type": "response"}]})
    reply = openrlhf_response(Reward().rows(openrlhf_items({"query": [prompt + "<|im_end|>"], "prompts": [prompt], "labels": [label]})))
    assert reply["rewards"] == [1.0]  # an image-only answer: the stop token is no text
    assert response_text("<pad> [PAD] " + prompt + "answer", prompt) == "answer"
    cut = openrlhf_items({"query": [prompt[:10] + "answer " + prompt + "quoted"], "prompts": [prompt], "labels": [label]})
    (row,) = Reward().rows(cut)  # cut short, the prompt only quoted later: not a response to score from there
    assert row["error"]["code"] == "malformed_line" and "does not start with its prompt" in row["error"]["message"]
    assert response_text("answer </s>\n", None) == "answer " and response_text("answer\t", None) == "answer\t"


def _strip_end_tokens_plainly(text: str) -> str:
    """The rule as stated: while the text, blanks aside, ends with an end token, drop both."""
    while True:
        trimmed = text.rstrip()
        token = next((end for end in END_TOKENS if trimmed.endswith(end)), None)
        if token is None:
            return text
        text = trimmed[: -len(token)]


@pytest.mark.parametrize("seed", range(200))
def test_end_tokens_are_stripped_as_the_plain_rule_strips_them(seed):
    rng = random.Random(seed)
    pieces = [*END_TOKENS, " ", "\n", "\t", "\u3000", "x", "<", "s>", "</", "end|>", "é"]
    text = "".join(rng.choices(pieces, k=rng.randint(0, 12)))
    assert strip_end_tokens(text) == _strip_end_tokens_plainly(text), repr(text)


def test_a_long_run_of_end_tokens_is_stripped_whole():
    assert strip_end_tokens("answer " + "</s> \n" * 20_000) == "answer "


def test_a_prompt_that_is_not_text_refuses_its_item():
    from mmverify.pipelines.adapters import response_text

    with pytest.raises(ValueError, match="each prompt must be a string, got int"):
        response_text("P: answer", 5)
    assert response_text("P: answer", None) == response_text("P: answer", "") == "P: answer"
    label = json.dumps({"task": "i_structure", "instance": {"order": ["t"]}})
    rows = Reward().rows(openrlhf_items({"query": ["P: text", "P: text"], "prompts": [5, "P:"], "labels": [label, label]}))
    assert [row["status"] for row in rows] == ["error", "scored"]
    assert rows[0]["error"]["code"] == "malformed_line" and "prompt must be a string" in rows[0]["error"]["message"]


def test_openrlhf_local_reward_func_returns_tensors():
    torch = pytest.importorskip("torch")
    out = reward_func(["p: text"], ["p: "], [json.dumps({"task": "i_structure", "instance": {"order": ["t"]}})])
    assert torch.equal(out["rewards"], torch.tensor([1.0])) and torch.equal(out["scores"], torch.tensor([1.0]))
    assert set(out["extra_logs"]) == {"mmverify_valid"}


# -- the README's "Use as an RL reward" snippets -----------------------------------------------------


def _readme_section() -> str:
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    start = text.index("## Use as an RL reward\n")
    return text[start : text.index("\n## ", start + 5)]


def _blocks(section: str, language: str) -> list[str]:
    import re

    return re.findall(rf"```{language}\n(.*?)```", section, flags=re.S)


def test_readme_python_snippets_run(monkeypatch, tmp_path):
    """Every Python snippet runs as written; TRL/datasets are stand-ins that call the reward function
    exactly as GRPOTrainer does, and the server snippet talks to a real server."""
    import sys
    import types

    pytest.importorskip("starlette")
    from mmverify.pipelines.server import BackgroundServer, ServerConfig, create_app

    calls: dict[str, Any] = {}

    class GRPOTrainer:
        def __init__(self, model, reward_funcs, args, train_dataset):  # noqa: ANN001
            completions = ["A text-only answer." for _ in train_dataset]
            calls["trl"] = [trl_rewards(func, list(train_dataset), completions)[0] for func in reward_funcs]

    trl = types.ModuleType("trl")
    trl.GRPOTrainer, trl.GRPOConfig = GRPOTrainer, lambda **kwargs: kwargs  # type: ignore[attr-defined]
    datasets = types.ModuleType("datasets")
    datasets.Dataset = types.SimpleNamespace(from_list=list)  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "trl", trl)
    monkeypatch.setitem(sys.modules, "datasets", datasets)
    monkeypatch.setenv("MMVERIFY_SERVER_TOKEN", "readme-token")
    monkeypatch.chdir(tmp_path)

    section = _readme_section()
    snippets = _blocks(section, "python")
    assert len(snippets) == 5
    namespace: dict[str, Any] = {}
    with BackgroundServer(create_app(ServerConfig(token="readme-token"))) as server:
        for code in snippets:
            exec(compile(code.replace("http://127.0.0.1:8000", server.url), "README.md", "exec"), namespace)  # noqa: S102
    assert namespace["batch"].scores == [1.0]
    assert calls["trl"] == [[1.0]]
    assert (namespace["result"]["score"], namespace["result"]["valid"]) == (1.0, 1.0)
    assert namespace["scores"].shape == (2,) and len(namespace["info"]["rows"]) == 2
    assert namespace["rows"][0]["score"] == 1.0


def test_readme_commands_name_real_options_and_objects():
    import re

    from typer.main import get_command

    from mmverify.cli import app

    section = _readme_section()
    serve = get_command(app).commands["serve"]  # type: ignore[attr-defined]
    known = {opt for param in serve.params for opt in getattr(param, "opts", [])}
    named = set(re.findall(r"--[a-z][a-z_-]+", section))
    server_flags = {f for f in named if f not in ("--remote_rm_url", "--label_key")}
    assert {"--port", "--data-root", "--max-body-mb", "--max-items", "--request-timeout", "--timeout",
            "--batch-wait-ms", "--max-batch", "--on-error", "--host"} <= server_flags  # fmt: skip
    assert server_flags <= known, server_flags - known
    verl = next(block for block in _blocks(section, "bash") if "custom_reward_function" in block)
    module = re.search(r"custom_reward_function\.path=pkg://([\w.]+)", verl).group(1)  # type: ignore[union-attr]
    name = re.search(r"custom_reward_function\.name=(\w+)", verl).group(1)  # type: ignore[union-attr]
    fn = getattr(importlib.import_module(module), name)
    on_error = re.search(r"reward_kwargs\.on_error=(\w+)", verl).group(1)  # type: ignore[union-attr]
    assert fn("i_structure", "x", {"bad": 1}, on_error=on_error)["valid"] == 0.0
    assert "compute_score_batch" in section and callable(compute_score_batch)
