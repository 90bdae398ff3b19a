"""The model and judge options ``score`` and ``serve`` share, and the scoring context they build."""

from __future__ import annotations

from typing import Optional, Sequence

import typer

from ..pipelines.context import JudgeOptions, ScoringContext, install
from .common import fail

OFFLINE = typer.Option(False, help="Never touch the network (sets HF_HUB_OFFLINE).", rich_help_panel="Models")
MODEL = typer.Option(
    [], "--model", rich_help_panel="Models",
    help="Backend for a capability: capability=backend, then optionally @hub-id-or-path and ?batch_size=N&... (repeatable).",
)  # fmt: skip
REFERENCES = typer.Option(
    [], "--references", help="Reference set folder: esc50|openmic|gtzan=/path (repeatable; overrides MMVERIFY_REFERENCES).", rich_help_panel="Models"
)
DEVICE = typer.Option(None, help="Model device (cpu, cuda, cuda:1, mps); default: best available.", rich_help_panel="Models")
PRECISION = typer.Option(
    None, help="Precision of the CLAP, transformers Whisper, WavLM speaker and gender backends: fp32 (default, "
    "published parity), bf16 or fp16 (GPU only); overrides MMVERIFY_PRECISION.", rich_help_panel="Models",
)  # fmt: skip
DECODE_PROCESSES = typer.Option(
    0, "--decode-processes", min=0, rich_help_panel="Execution",
    help="Processes that decode the media of items scored together, so that the device thread waits less for the "
    "interpreter lock (0: each item decodes in its own thread; with --workers N, per worker). The same rows either way.",
)  # fmt: skip
MODEL_PROCESS = typer.Option(
    False, "--model-process", rich_help_panel="Execution",
    help="With --workers N: one more process holds the models (local VLM judges included: "
    "docs/GPU.md) on the device and computes every worker's batches, while the workers do the per-item work. "
    "The same rows.",
)  # fmt: skip
VLM_BASE_URL = typer.Option(
    None, "--vlm-base-url", help="OpenAI-compatible endpoint of the VLM judge, e.g. http://127.0.0.1:8000/v1.", rich_help_panel="Judge"
)
VLM_MODEL = typer.Option(
    None, "--vlm-model", help="Judge model at that endpoint, or transformers:<path-or-hub-id> to run one in-process.", rich_help_panel="Judge"
)
VLM_ROLE = typer.Option(
    [], "--vlm-role", help=(
        "Judge for one role: ROLE=MODEL\\[@URL] (repeatable). Roles: default (every role left unset), spatial (fallback of spatial_relative and "
        "spatial_absolute), spatial_relative, spatial_absolute, ocr, ocr_second (a different model that also reads "
        "Chinese text), llm. Unset settings come from the parent role, then the default judge."
    ), rich_help_panel="Judge"
)  # fmt: skip
VLM_CONCURRENCY = typer.Option(
    None, "--vlm-concurrency", help="Judge requests in flight per endpoint and process (default 8).", rich_help_panel="Judge"
)
VLM_API_KEY_ENV = typer.Option(
    None, "--vlm-api-key-env", help="Environment variable holding the judge's API key (default OPENAI_API_KEY).", rich_help_panel="Judge"
)


def judge_options(
    base_url: Optional[str], model: Optional[str], roles: Sequence[str], concurrency: Optional[int], api_key_env: Optional[str]
) -> JudgeOptions:
    return JudgeOptions(base_url, model, tuple(roles), concurrency, api_key_env)


def apply_context(
    model: Sequence[str], references: Sequence[str], device: Optional[str], precision: Optional[str], offline: bool,
    vlm_base_url: Optional[str], vlm_model: Optional[str], vlm_role: Sequence[str], vlm_concurrency: Optional[int],
    vlm_api_key_env: Optional[str],
) -> ScoringContext:
    """Build the scoring context from the command's options (over the environment's settings) and
    install it; one clear line on a bad value."""
    judge = judge_options(vlm_base_url, vlm_model, vlm_role, vlm_concurrency, vlm_api_key_env)
    try:
        context = ScoringContext(
            models=model, references=references, device=device, precision=precision, offline=offline, judge=judge
        )
    except ValueError as exc:
        fail(str(exc))
    install(context)
    return context
