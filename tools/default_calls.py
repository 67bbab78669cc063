"""Graph/break counts of the transformers models' default calls, Ember vs Dynamo.
PYTHONPATH=python .venv/bin/python tools/default_calls.py [gpt2 llama t5 bert] [--dynamo]"""
import sys, torch, ember
from ember.bench import models_workloads as mw


def build(name):
    w = mw.build(name)
    if name == "t5":
        from transformers import T5Config, T5ForConditionalGeneration
        torch.manual_seed(mw.SEED)
        c = T5Config(num_layers=mw.LAYERS, d_model=mw.HIDDEN, num_heads=mw.HEADS, d_kv=mw.HIDDEN // mw.HEADS,
                     d_ff=4 * mw.HIDDEN, vocab_size=mw.VOCAB, decoder_start_token_id=0)
        m = T5ForConditionalGeneration(c).eval()
        return m, w.args, {"decoder_input_ids": w.kwargs["decoder_input_ids"]}
    return w.model, w.args, {}


names = [a for a in sys.argv[1:] if not a.startswith("--")] or ["gpt2", "llama", "t5", "bert"]
for name in names:
    m, args, kwargs = build(name)
    with torch.no_grad():
        ember.reset()
        e = ember.explain(m)(*args, **kwargs)
        print(name, "ember", e.graph_count, len(e.break_reasons), flush=True)
        seen = set()
        for b in e.break_reasons:
            if b.reason[:150] in seen:
                continue
            seen.add(b.reason[:150])
            print("   -", b.reason[:300], "|", b.filename, b.lineno)
        if "--dynamo" in sys.argv:
            import torch._dynamo
            torch._dynamo.reset()
            d = torch._dynamo.explain(m)(*args, **kwargs)
            print(name, "dynamo", d.graph_count, d.graph_break_count, flush=True)
