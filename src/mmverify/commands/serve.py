"""``mmverify serve``: rewards over HTTP for RL trainers (loopback by default)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from . import options
from .common import check_limit_option, console, fail


def serve_command(
    host: str = typer.Option("127.0.0.1", help="Interface to bind (loopback by default; anything else should have --token)."),
    port: int = typer.Option(8000, min=0, max=65535, help="Port (0: any free port; the chosen one is logged)."),
    token: Optional[str] = typer.Option(
        None, envvar="MMVERIFY_SERVER_TOKEN", help="Require 'Authorization: Bearer TOKEN' (prefer the env variable: argv is visible)."
    ),
    data_root: Optional[Path] = typer.Option(None, help="Media paths resolve under this folder; without it only inline media are accepted."),
    instructions: Optional[Path] = typer.Option(None, help="Instruction set folder, for items that give an instance_id instead of an inline instance."),
    thresholds: Optional[Path] = typer.Option(None, exists=True, dir_okay=False, help="Thresholds JSON from `calibrate`."),
    tasks: Optional[str] = typer.Option(None, help="Comma-separated task ids this server scores (default: every implemented task)."),
    timeout: float = typer.Option(60.0, min=0.0, help="Per-item time limit in seconds (0: none)."),
    request_timeout: float = typer.Option(300.0, min=0.001, help="A request not answered within this many seconds gets 504."),
    max_body_mb: float = typer.Option(32.0, min=0.001, help="Larger request bodies get 413."),
    max_items: int = typer.Option(256, min=1, help="Requests with more items get 413."),
    batch_wait_ms: float = typer.Option(2.0, min=0.0, help="How long the micro-batcher collects concurrent requests."),
    max_batch: int = typer.Option(64, min=1, help="Most items scored as one batch."),
    decode_processes: int = options.DECODE_PROCESSES,
    workers: int = typer.Option(
        1, min=1, rich_help_panel="Execution",
        help="1: score in the server's process; N>1: N worker processes, kept for the server's life, score each micro-batch.",
    ),
    model_process: bool = options.MODEL_PROCESS,
    on_error: str = typer.Option("raise", help="/get_reward for items that cannot be scored: raise (HTTP 500) or zero (OpenRLHF needs a number)."),
    offline: bool = options.OFFLINE,
    model: list[str] = options.MODEL,
    references: list[str] = options.REFERENCES,
    device: Optional[str] = options.DEVICE,
    precision: Optional[str] = options.PRECISION,
    vlm_base_url: Optional[str] = options.VLM_BASE_URL,
    vlm_model: Optional[str] = options.VLM_MODEL,
    vlm_role: list[str] = options.VLM_ROLE,
    vlm_concurrency: Optional[int] = options.VLM_CONCURRENCY,
    vlm_api_key_env: Optional[str] = options.VLM_API_KEY_ENV,
    profile: str = typer.Option("mmmg", help="Scoring rules: mmmg (published evaluator) or strict (this project's corrections)."),
    max_json_values: int = typer.Option(200_000, min=1, help="Bodies holding more JSON values get 413, checked before decoding."),
    max_inflight_mb: float = typer.Option(64.0, min=0.001, help="Request bodies held in memory at once; further requests wait for room."),
    max_waiting: int = typer.Option(256, min=0, help="Requests that may wait for memory room; more get 429 with Retry-After."),
    header_timeout: float = typer.Option(10.0, min=0.001, help="Seconds allowed for a request's headers; slower connections are closed."),
    body_timeout: float = typer.Option(30.0, min=0.001, help="Seconds allowed for a request's body after its headers (408 after)."),
    keep_alive_timeout: float = typer.Option(30.0, min=0.001, help="Idle seconds before a kept-alive connection closes."),
    shutdown_timeout: float = typer.Option(10.0, min=0.0, help="On SIGINT/SIGTERM, seconds requests being scored get before the process exits."),
) -> None:
    """Serve rewards over HTTP: POST /score, POST /get_reward (OpenRLHF), GET /healthz, GET /tasks."""
    try:
        from ..pipelines.server import ServerConfig, run
    except ImportError as exc:
        fail(f"the server needs starlette and uvicorn ({exc}); pip install \"mmverify[serve]\"")
    if data_root is not None and not data_root.is_dir():
        fail(f"--data-root {data_root} is not a folder")
    if instructions is not None and not instructions.is_dir():
        fail(f"--instructions {instructions} is not a folder")
    check_limit_option("--timeout", timeout)
    if host not in ("127.0.0.1", "::1", "localhost") and not token:
        console.print(f"[yellow]warning:[/yellow] serving on {host} without --token: anyone who can reach it can use it")
    try:
        import uvicorn  # noqa: F401  (fail before binding, with the extra's name)
        import starlette  # noqa: F401

        config = ServerConfig(
            host=host, port=port, token=token or None, data_root=data_root, instructions=instructions,
            thresholds=thresholds, tasks=[t.strip() for t in tasks.split(",") if t.strip()] if tasks else None,
            item_timeout=timeout or None, request_timeout=request_timeout, max_body_bytes=int(max_body_mb * 1024 * 1024),
            max_items=max_items, batch_wait_ms=batch_wait_ms, max_batch_items=max_batch, on_error=on_error,
            reward_options={
                "models": model or None, "references": references or None, "device": device, "offline": offline or None,
                "profile": profile, "precision": precision, "decode_processes": decode_processes,
                "workers": workers, "model_process": model_process,
                "judge": options.judge_options(vlm_base_url, vlm_model, vlm_role, vlm_concurrency, vlm_api_key_env),
            },
            max_json_values=max_json_values, max_inflight_bytes=int(max_inflight_mb * 1024 * 1024), max_waiting=max_waiting,
            header_timeout=header_timeout, body_timeout=body_timeout, keep_alive_timeout=keep_alive_timeout,
            shutdown_timeout=shutdown_timeout,
        )  # fmt: skip
        run(config)
    except ImportError as exc:
        fail(f"the server needs starlette and uvicorn ({exc}); pip install \"mmverify[serve]\"")
    except (ValueError, OSError) as exc:
        fail(str(exc))
