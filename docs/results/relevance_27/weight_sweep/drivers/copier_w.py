"""Issue 27 dev check (off the 86): the scripted copier through the real turn (scripted.play), its ranked line's first
file at each agent.rank_relevance exponent of $WEIGHTS (default 1,1.5,2,3), per task, 6 and 8 terms."""
import os, sys, json, time
from dataclasses import replace
from codegrep.config import load_profile, section
from codegrep.retrievers.entrypoints import load_task_source
from codegrep.retrievers.scripted import play
from codegrep.agent.protocol import AgentConfig
from codegrep.env.pool import WorktreePool
from codegrep.env.tools import ToolConfig, open_environment
src, out = sys.argv[1], sys.argv[2]
repos = sys.argv[3] if len(sys.argv) > 3 else None
cfg = load_profile('smoke'); env = section(cfg, 'env')
tasks, res = load_task_source(src, repos)
agent = AgentConfig.from_dict(cfg.get('agent'), 'agent')
settings = {f'w{w}': replace(agent, rank_relevance=w) for w in map(float, os.environ.get('WEIGHTS', '1,1.5,2,3').split(','))}
pool, tools = WorktreePool.from_config(env), ToolConfig.from_dict(env)
rows = []; t0 = time.time()
for i, task in enumerate(tasks):
    row = {'instance_id': task.instance_id, 'gold': task.gold_files}
    with open_environment(task, res, pool, env.get('mode', 'objects'), tools) as e:
        for name, a in settings.items():
            for terms in (6, 8):
                ep = play('first-listed', task, e, a, terms=terms, size=1)
                row[f'{name}_{terms}'] = ep.submitted[0] if ep.submitted else None
    rows.append(row)
    print(i + 1, len(tasks), round(time.time() - t0), file=sys.stderr, flush=True)
summary = {f'{n}_{t}': sum(r[f'{n}_{t}'] in r['gold'] for r in rows) for n in settings for t in (6, 8)}
json.dump({'what': 'copier weight sweep', 'tasks': src, 'summary': summary, 'per_task': rows}, open(out, 'w'), indent=1)
print(json.dumps(summary))
