"""Training steps through BatchNorm (train()) and ReLU over few values per channel (issue 13: torchvision's MNASNet
at 2x2 with a batch of two, judged wrong by the zoo's float32 rule).

Ember's gradients there are right: in float64 a MNASNet-shaped network (stride-2 stem, inverted residuals with
depthwise 3x3/5x5 convolutions and a residual add, BatchNorm with MNASNet's momentum 1 - 0.9997, down to 2x2) matches eager's float64 step to rounding. Its float32 step is ill-conditioned: a BatchNorm over 8 values has
outputs within float32 rounding of zero, and the ReLU bit that flips moves whole channels' gradients (eager's own
float32 step does it on an input changed by 1e-6). The zoo therefore asks the compiler for a float64 step before
calling a float32 step wrong (zoo_row.recheck_in_float64), tested here with Ember.
"""
import copy

import torch
import torch.nn as nn

import ember
from ember.bench import zoo_row, zoo_train
from ember.bench.models_workloads import Workload

MOMENTUM = 1 - 0.9997  # torchvision's _BN_MOMENTUM


def conv_bn(cin, cout, k, stride=1, groups=1, relu=True):
    layers = [nn.Conv2d(cin, cout, k, stride, k // 2, groups=groups, bias=False), nn.BatchNorm2d(cout, momentum=MOMENTUM)]
    return layers + [nn.ReLU(inplace=True)] if relu else layers


class InvertedResidual(nn.Module):
    def __init__(self, cin, cout, k, stride, expand):
        super().__init__()
        mid = cin * expand
        self.residual = cin == cout and stride == 1
        self.layers = nn.Sequential(*conv_bn(cin, mid, 1), *conv_bn(mid, mid, k, stride, mid),
                                    *conv_bn(mid, cout, 1, relu=False))

    def forward(self, x):
        return self.layers(x) + x if self.residual else self.layers(x)


def mnasnet_like():
    torch.manual_seed(0)
    body = nn.Sequential(*conv_bn(3, 8, 3, 2), InvertedResidual(8, 16, 5, 2, 3), InvertedResidual(16, 24, 3, 2, 6),
                         InvertedResidual(24, 24, 5, 1, 6), *conv_bn(24, 32, 1))
    return nn.Sequential(body, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 10)).train()


def workload():
    # 16x16 -> 8, 4, 2: BatchNorm over 8 values per channel in the last blocks, a residual add there
    x = torch.randn(2, 3, 16, 16, generator=torch.Generator().manual_seed(1))
    return Workload(mnasnet_like(), (x,), {}, "MNASNet-shaped, batch 2")


class _Ember:
    family = "ember"


def recheck(w, reference, result):
    zoo_row.recheck_in_float64(result, lambda: zoo_train.float64_step(_Ember(), w), [t for _, t in reference])


def test_float64_step_matches_eager_and_clears_a_rounding_verdict():
    w = workload()
    reference = zoo_train.float64_judged(w)
    result = {"wrong": True}
    recheck(w, reference, result)  # Ember's float64 step against eager's
    assert ember.stats()["backward_graphs_compiled"] == 1
    assert result["float64_error"] < 1e-9 * max(t.abs().max().item() for _, t in reference)
    assert result["ill_conditioned"] and not result["wrong"]


def test_float64_recheck_keeps_a_wrong_verdict():
    w = workload()
    reference = copy.deepcopy(zoo_train.float64_judged(w))
    reference[1][1].add_(1.0)  # a gradient off by 1: a wrong formula in float64 too
    result = {"wrong": True}
    recheck(w, reference, result)
    assert result["wrong"] and "ill_conditioned" not in result and result["float64_error"] >= 1.0 - 1e-9
