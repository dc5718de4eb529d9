"""Issue 27 dev check (off the 86): the scripted copier through the real turn function (scripted.play), its
ranked line with and without agent.rank_relevance 1.0, per task, 6 and 8 terms."""
import sys, json, time
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
settings = {'off': replace(agent, rank_relevance=0.0), 'rel1': replace(agent, rank_relevance=1.0)}
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
summary = {}
for terms in (6, 8):
    on = [r[f'rel1_{terms}'] in r['gold'] for r in rows]
    off = [r[f'off_{terms}'] in r['gold'] for r in rows]
    summary[f'{terms}_terms'] = {'rank_relevance_1': sum(on), 'off': sum(off),
                                 'won': sum(a and not b for a, b in zip(on, off)),
                                 'lost': sum(b and not a for a, b in zip(on, off))}
json.dump({'what': __doc__, 'tasks': src, 'n_tasks': len(rows), 'seconds': round(time.time() - t0, 1),
           'p_at_1_hits': summary, 'per_task': rows}, open(out, 'w'), indent=1)
print(json.dumps(summary))
