"""Tasks (SWE-bench schema), repositories, and the offline default task set.

Stages get their tasks with ``profile_tasks(cfg, split)``; everything here is importable from
``codegrep.data`` too.
"""
from codegrep.data.tasks import (Task, evaluation_instance_ids, filter_tasks, load_tasks, patch_files, profile_tasks,
                                 read_tasks, task_split)

__all__ = ["Task", "evaluation_instance_ids", "filter_tasks", "load_tasks", "patch_files", "profile_tasks", "read_tasks",
           "task_split"]
