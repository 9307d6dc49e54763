"""Which language pair (and sources) made the loss spikes of the one-pair run: the batch plan's groups need no lengths."""
# Usage (repository root): python studies/vocab-extend/spikes.py   (about a minute, 1 core)
import collections
import json

import numpy as np

from edge_xsent.config import TrainConfig
from edge_xsent.train.loop import load_texts
from edge_xsent.data.corpus import pair_langs
from edge_xsent.train.batches import BatchPlan
cfg = TrainConfig.from_toml("train/shipped.toml")
rows = load_texts(cfg, "train")
langs = pair_langs(rows); lid = {l: i for i, l in enumerate(langs)}
groups = np.array([lid[r.lang_a] * 1000 + lid[r.lang_b] for r in rows])
plan = BatchPlan(np.ones(len(rows)), cfg.batch_size, cfg.seed, groups=groups)
log = [json.loads(l) for l in open("/root/edge-xsent-runs/m1-extend-bypair/log.jsonl") if l.startswith('{"step"')]
log = [r for r in log if "total" in r]
by = collections.defaultdict(list)
for r in log:
    idx = plan.indices(r["step"] - 1)  # the logged step counts after the update
    g = groups[idx[0]]; assert (groups[idx] == g).all()
    by[(langs[g // 1000], langs[g % 1000])].append((r["total"], r["align"], collections.Counter(rows[i].source for i in idx).most_common(2)))
spiky = sorted(by.items(), key=lambda kv: -np.mean([t for t, _, _ in kv[1]]))
for k, v in spiky[:10]:
    print(k, len(v), "mean total %.2f align %.2f" % (np.mean([t for t,_,_ in v]), np.mean([a for _,a,_ in v])), "spikes>10:", sum(t > 10 for t,_,_ in v), v[0][2])
print("all spikes:", collections.Counter(k for k, v in by.items() for t,_,_ in v if t > 10).most_common(10))
top = collections.defaultdict(lambda: [0, 0])  # a batch's most common source: [logged steps, spikes]
for v in by.values():
    for t, _, src in v:
        top[src[0][0]][0] += 1
        top[src[0][0]][1] += t > 10
print("by the batch's main source (logged steps, spikes > 10):",
      sorted(((s, n, k) for s, (n, k) in top.items()), key=lambda x: -x[2])[:8])
