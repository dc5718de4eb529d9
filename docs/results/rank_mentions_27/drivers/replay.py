"""Replay the last ranked turn of saved agent episodes; rank its results with/without the issue-mention boost."""
import sys, json, glob
from pathlib import Path
from codegrep.config import load_profile
from codegrep.retrievers.entrypoints import load_task_source
from codegrep.retrievers.heuristic import HeuristicRetriever, HeuristicConfig
from codegrep.env.tools import ToolCall, ToolConfig
from codegrep.env.workdir import RepoToolEnvironment
from codegrep.env.pool import WorktreePool
from codegrep.agent.protocol import call_term
src, epdir = sys.argv[1], sys.argv[2]
repos = sys.argv[3] if len(sys.argv) > 3 and sys.argv[3] != '-' else None
boosts = [0.0, 0.5, 1.0]
cfg = load_profile('smoke')
tools = ToolConfig.from_dict(dict(cfg.get('env') or {}))
tasks, res = load_task_source(src, repos)
byid = {t.instance_id: t for t in tasks}
pool = WorktreePool()
hits = {b: 0 for b in boosts}; rec = 0; n = 0; match = 0
rows = []
for f in sorted(glob.glob(epdir + '/*.json')):
    ep = json.load(open(f)); t = byid.get(ep['instance_id'])
    if t is None: continue
    n += 1
    turns = [tu for tu in ep['turns'] if any(c['name'] in ('grep', 'glob') for c in tu.get('calls') or [])]
    gold = set(t.gold_files)
    rec += bool(ep['files'] and ep['files'][0] in gold)
    if not turns:
        rows.append((t.instance_id, None)); continue
    calls = [ToolCall(c['name'], c['arguments']) for c in turns[-1]['calls']]
    with pool.acquire(res.resolve(t.repo, t.base_commit), t.base_commit) as co:
        with RepoToolEnvironment(Path(co), tools) as env:
            results = env.run_turn(calls)
    terms, kept = [], []
    for c, r in zip(calls, results):
        if c.name in ('grep', 'glob'):
            terms.append((call_term(c), 'path' if c.name == 'glob' else 'word' if c.arguments.get('ignore_case') else 'ident'))
            kept.append(r)
    firsts = {}
    for b in boosts:
        h = HeuristicRetriever(HeuristicConfig(mention_boost=b))
        scores, why = h.score(terms, kept)
        scores = h.boost_mentions(t.problem_statement, scores, why)
        ranked = sorted(scores, key=lambda p: (-scores[p], p))
        firsts[b] = ranked[0] if ranked else None
        hits[b] += firsts[b] in gold
    match += firsts[0.0] == (ep['files'][0] if ep['files'] else None)
    rows.append((t.instance_id, firsts))
print('n', n, 'recorded first gold', rec, 'replay(no boost) first == recorded', match)
print({b: hits[b] for b in boosts})
gold_of = {t.instance_id: set(t.gold_files) for t in tasks}
for b in boosts[1:]:
    won = sum(1 for iid, f in rows if f and f[b] in gold_of[iid] and f[0.0] not in gold_of[iid])
    lost = sum(1 for iid, f in rows if f and f[0.0] in gold_of[iid] and f[b] not in gold_of[iid])
    print('boost', b, 'won', won, 'lost', lost)
json.dump({'n': n, 'recorded_first_gold': rec, 'replay_matches_recorded': match, 'hits': hits,
           'per_task': [{'instance_id': iid, 'first_by_boost': f} for iid, f in rows]}, open(sys.argv[4], 'w'), indent=1)
