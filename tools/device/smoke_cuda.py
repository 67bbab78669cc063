"""CUDA smoke checks of capture on the GPU machine: outputs vs eager, one compile, cache hits."""
import torch
import torch.nn as nn
import torch.nn.functional as F

import ember

dev = "cuda"
torch.manual_seed(0)
failures = []


def check(name, fn, *args):
    ember.reset()
    c = ember.compile(fn)
    got = c(*args)
    got = c(*args)
    exp = fn(*args)
    s = ember.stats()
    try:
        torch.testing.assert_close(got, exp)
        ok = s["frames_compiled"] == 1 and s["cache_hits"] == 1 and s["eager_frames"] == 0
    except AssertionError as e:
        ok = False
        print(e)
    print(f"{name}: {'ok' if ok else 'FAIL'} {s}")
    if not ok:
        failures.append(name)
        print(ember.explain(fn)(*args))


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.l1, self.l2, self.ln = nn.Linear(64, 256), nn.Linear(256, 64), nn.LayerNorm(64)

    def forward(self, x):
        return self.ln(x + self.l2(F.gelu(self.l1(x))))


x = torch.randn(8, 64, device=dev)
check("pointwise", lambda a: (a * 2 + 1).relu(), x)
check("mlp", MLP().to(dev), x)
check("factory", lambda a: a + torch.zeros(a.shape[0], 64, device=a.device) + torch.arange(64, device=a.device), x)
check("mixed_cpu_scalar", lambda a: a * torch.tensor(2.0), x)
check("to_cpu", lambda a: (a + 1).cpu() * 2, x)
q = torch.randn(2, 4, 16, 32, device=dev, dtype=torch.float16)
check("sdpa_f16", lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True), q, q, q)
check("bf16_mm", lambda a, b: (a @ b).float().softmax(-1), torch.randn(16, 32, device=dev, dtype=torch.bfloat16),
      torch.randn(32, 8, device=dev, dtype=torch.bfloat16))
print("CUDA smoke failures:", failures)
