"""Issue 27 dev check (off the 86): the copier's turn-1 grep hits ranked (a) by the ranked line (heuristic),
(b) BM25 on the whole repo, (c) BM25 restricted to the hit files, (d) rank fusion of heuristic and BM25 among hits."""
import sys, json, math
from pathlib import Path
from codegrep.config import load_profile, section
from codegrep.retrievers.entrypoints import load_task_source
from codegrep.retrievers.scripted import first_calls
from codegrep.retrievers.lexical import BM25Retriever, BM25Config
from codegrep.retrievers.heuristic import HeuristicRetriever
from codegrep.agent.protocol import AgentConfig, apply_turn, tool_call_text, call_term, visible_issue
from codegrep.env.pool import WorktreePool
from codegrep.env.tools import ToolConfig, RepoToolEnvironment
src, out = sys.argv[1], sys.argv[2]
repos = sys.argv[3] if len(sys.argv) > 3 else None
cfg = load_profile('smoke'); env = section(cfg, 'env')
tasks, res = load_task_source(src, repos)
agent = AgentConfig.from_dict(cfg.get('agent'), 'agent')
import dataclasses
_b = section(cfg, 'retrievers')['bm25']
bcfg = BM25Config(**{k: (tuple(v) if isinstance(v, list) else v) for k, v in _b.items() if k in {f.name for f in dataclasses.fields(BM25Config)}})
print(bcfg, file=sys.stderr)
bm = BM25Retriever(bcfg)
pool, tools = WorktreePool.from_config(env), ToolConfig.from_dict(env)
rows = []
for i, task in enumerate(tasks):
    row = {'instance_id': task.instance_id, 'gold': task.gold_files}
    git_dir = Path(res.resolve(task.repo, task.base_commit))
    with pool.acquire(git_dir, task.base_commit) as checkout:
        index = bm.index_for(task, Path(checkout))
        allb = dict(index.search(task.problem_statement, 100000, bcfg.mention_boost, bcfg.definition_boost))
        row['bm25_first'] = max(allb, key=lambda f: allb[f]) if allb else None
        with RepoToolEnvironment(checkout, tools, snapshot=True) as e:
            for nterms in (6, 8):
                calls = first_calls(task.problem_statement, agent, nterms, 0)
                t1 = apply_turn(tool_call_text(calls), 1, agent, e.run_turn, task.problem_statement)
                terms, kept = [], []
                for c, r in zip(t1.calls, t1.results):
                    if c.name in ('grep', 'glob'):
                        kind = 'path' if c.name == 'glob' else 'word' if c.arguments.get('ignore_case') else 'ident'
                        terms.append((call_term(c), kind)); kept.append(r)
                h = HeuristicRetriever()
                sc, why = h.score(terms, kept)
                sc = h.boost_mentions(task.problem_statement, sc, why)
                hrank = sorted(sc, key=lambda p: (-sc[p], p))
                brank = sorted(sc, key=lambda p: (-allb.get(p, 0.0), p))
                row[f'h_{nterms}'] = hrank[:5]
                row[f'bh_{nterms}'] = brank[:5]
                row[f'nhits_{nterms}'] = len(sc)
                row[f'gold_in_hits_{nterms}'] = any(g in sc for g in task.gold_files)
                hr = {p: k for k, p in enumerate(hrank)}; br = {p: k for k, p in enumerate(brank)}
                for K in (5, 20):
                    f = sorted(sc, key=lambda p: (-(1/(K+hr[p]) + 1/(K+br[p])), hr[p]))
                    row[f'rrf{K}_{nterms}'] = f[:5]
                # product of normalised scores
                hm = max(sc.values(), default=0) or 1; bmx = max([allb.get(p, 0) for p in sc] + [1e-9])
                for a in (0.5, 1.0):
                    f = sorted(sc, key=lambda p: (-((sc[p]/hm) * (1e-3 + allb.get(p, 0)/bmx) ** a), hr[p]))
                    row[f'prod{a}_{nterms}'] = f[:5]
    rows.append(row)
    print(i + 1, len(tasks), file=sys.stderr, flush=True)
keys = [k for k in rows[0] if k.endswith(('_6', '_8')) and isinstance(rows[0][k], list)]
summ = {'bm25': sum(r['bm25_first'] in r['gold'] for r in rows)}
for k in keys:
    summ[k] = sum(bool(r[k]) and r[k][0] in r['gold'] for r in rows)
for n in (6, 8):
    summ[f'gold_in_hits_{n}'] = sum(r[f'gold_in_hits_{n}'] for r in rows)
    base = [bool(r[f'h_{n}']) and r[f'h_{n}'][0] in r['gold'] for r in rows]
    for k in keys:
        if k.endswith(f'_{n}'):
            v = [bool(r[k]) and r[k][0] in r['gold'] for r in rows]
            summ[k + '_won_lost_vs_h'] = (sum(a and not b for a, b in zip(v, base)), sum(b and not a for a, b in zip(v, base)))
json.dump({'n': len(rows), 'summary': summ, 'rows': rows}, open(out, 'w'), indent=1)
print(json.dumps(summ, indent=0))
