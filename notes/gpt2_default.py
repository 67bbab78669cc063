import torch, ember, transformers
from transformers import GPT2Config, GPT2LMHeadModel
torch.manual_seed(0)
cfg = GPT2Config(n_layer=2, n_head=4, n_embd=64, vocab_size=128, n_positions=64)
m = GPT2LMHeadModel(cfg).eval()
ids = torch.randint(0, 128, (2, 16))
out = ember.explain(m)(ids)
print(out.graph_count, len(out.break_reasons))
seen=set()
for b in out.break_reasons:
    k=(b.reason[:200], )
    if k in seen: continue
    seen.add(k); print("-", b.reason[:300], "|", getattr(b,'filename',''), getattr(b,'lineno',''))
