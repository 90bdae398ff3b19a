"""The MMMG tasks: annotation parsing, response-shape checks and score combination."""

from .catalog import CATALOG, TASKS, TaskInfo, task_info

__all__ = ["CATALOG", "TASKS", "TaskInfo", "task_info"]
