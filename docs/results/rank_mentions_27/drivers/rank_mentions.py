"""Issue 27 dev check (off the 86): the scripted copier through the real turn function, its ranked line with and
without the issue-mention boost (agent.rank_mentions), per task; on the 55 Lite sympy train tasks and the transfer
check's 106 rows of seven other repositories."""
import sys, json, platform, subprocess, datetime
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
settings = {'rank_mentions': agent, 'no_rank_mentions': replace(agent, rank_mentions=False)}
pool, tools = WorktreePool.from_config(env), ToolConfig.from_dict(env)
rows = []
for i, task in enumerate(tasks):
    row = {'instance_id': task.instance_id, 'gold': task.gold_files}
    with open_environment(task, res, pool, env.get('mode', 'objects'), tools) as e:
        for name, a in settings.items():
            for terms in (6, 8):
                ep = play('first-listed', task, e, a, terms=terms, size=1)
                row[f'{name}_{terms}'] = ep.submitted[0] if ep.submitted else None
    rows.append(row)
    print(i + 1, len(tasks), file=sys.stderr, flush=True)
summary = {}
for terms in (6, 8):
    on = [r[f'rank_mentions_{terms}'] in r['gold'] for r in rows]
    off = [r[f'no_rank_mentions_{terms}'] in r['gold'] for r in rows]
    summary[f'{terms}_terms'] = {'rank_mentions': sum(on), 'no_rank_mentions': sum(off),
                                 'won': sum(a and not b for a, b in zip(on, off)),
                                 'lost': sum(b and not a for a, b in zip(on, off))}
commit = subprocess.run(['git', 'rev-parse', '--short', 'HEAD'], capture_output=True, text=True).stdout.strip()
json.dump({'what': __doc__, 'tasks': src, 'n_tasks': len(rows), 'date': str(datetime.date.today()),
           'commit_base': commit, 'cpu': platform.processor() or platform.machine(),
           'strategy': 'first-listed: the expert copier (first N issue terms, then the ranked line first file)',
           'p_at_1_hits': summary, 'per_task': rows}, open(out, 'w'), indent=1)
print(json.dumps(summary))
