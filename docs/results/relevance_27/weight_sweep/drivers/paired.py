import json,sys
def bm(path):
    return {r['instance_id']: (r['ranked'] or r['files'] or [None])[0] for r in map(json.loads, open(path))}
for tag, files, bmp in (('train', ['copier_w1-3_lite_train.json','copier_w3-10_lite_train.json'], '../../name_bonus_27/lite_train/bm25.jsonl'),
                        ('transfer', ['copier_w1-3_transfer.json','copier_w3-10_transfer.json'], '../../transfer_27/bm25.jsonl')):
    rows = {}
    for f in files:
        for r in json.load(open(f))['per_task']:
            rows.setdefault(r['instance_id'], {}).update(r)
    b = bm(bmp)
    for w in ('w1.5','w2.0','w3.0'):
        for t in (6,8):
            a=[r[f'{w}_{t}'] in r['gold'] for r in rows.values()]; o=[r[f'w1.0_{t}'] in r['gold'] for r in rows.values()]
            bb=[b.get(i) in r['gold'] for i,r in rows.items()]
            print(tag,w,t,'hits',sum(a),'vs w1 won/lost',sum(x and not y for x,y in zip(a,o)),sum(y and not x for x,y in zip(a,o)),
                  'vs bm25',sum(bb),sum(x and not y for x,y in zip(a,bb)),sum(y and not x for x,y in zip(a,bb)))
