"""The scripted copier (the expert the warm start imitates) on this folder's 49 tasks, through the real turn
(`codegrep.retrievers.scripted.ceiling`, the smoke profile's agent section): its ranked line's first file
(`first-listed`, 6 terms) and the gold file its observation showed (`oracle-shown`, a bound). Run from the
repository root:

    python docs/results/transfer_30/drivers/copier.py docs/results/transfer_30/tasks.jsonl.gz DIR copier.json
"""
import json
import sys

from codegrep.agent.protocol import AgentConfig
from codegrep.config import load_profile, section
from codegrep.env.pool import WorktreePool
from codegrep.env.tools import ToolConfig
from codegrep.retrievers.entrypoints import load_task_source
from codegrep.retrievers.scripted import ceiling

source, repos, out = sys.argv[1:4]
cfg = load_profile("smoke")
env = section(cfg, "env")
tasks, resolver = load_task_source(source, repos)
rows = ceiling(tasks, resolver, WorktreePool.from_config(env), {"profile": AgentConfig.from_dict(cfg.get("agent"), "agent")},
               strategies=(("first-listed", 6, 1), ("oracle-shown", 6, 1)), env_mode=env.get("mode", "objects"),
               tool_config=ToolConfig.from_dict(env))
json.dump({"what": "scripted copier on the untouched transfer set (smoke agent section)", "tasks": source, "rows": rows},
          open(out, "w"), indent=1)
print(json.dumps(rows))
