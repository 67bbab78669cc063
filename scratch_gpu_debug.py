import sys, traceback, torch, transformers, ember, logging, os
print(sys.version, torch.__version__, transformers.__version__)
sys.path.insert(0, "python")
from ember.bench import models_workloads as mw
logging.basicConfig(level=logging.INFO)
os.environ["EMBER_LOGS"] = "graph_breaks,fallbacks"
w = mw.build("gpt2")
with torch.no_grad():
    ref = w.model(*w.args)[0]
    c = ember.compile(w.model, backend="eager")
    try:
        out = c(*w.args)[0]
        print("ok", (out - ref).abs().max())
    except Exception:
        traceback.print_exc(limit=-4)
