"""A value the forward writes in place after making it (autograd/partition.cpp, written_storage): the backward
reads the written storage, saved, never a recomputation of its producer. timm's ConViT fills its
relative-position table by setitem into torch.zeros inside the forward; the partitioner recomputed the cheap
zeros in the backward, and pos_proj's weight gradient came out zero (a wrong gradient, no error)."""
import copy

import pytest
import torch
import torch.nn as nn

import ember

pytestmark = pytest.mark.usefixtures("fresh")


class RelativeTable(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(3, 4)

    def forward(self, x):
        table = torch.zeros(1, 5, 5, 3)
        ind = torch.arange(5, dtype=torch.float32)
        table[:, :, :, 0] = ind.view(1, -1) - ind.view(-1, 1)
        table[:, :, :, 1] = 1.0
        table[..., 2].add_(ind)  # through a view
        score = self.proj(table.expand(x.shape[0], -1, -1, -1)).permute(0, 3, 1, 2)
        return (score.softmax(-1) * x).sum()


def test_backward_reads_the_written_table():
    model, x = RelativeTable(), torch.randn(2, 4, 5, 5)
    compiled = copy.deepcopy(model)
    model(x).backward()
    ember.compile(compiled)(x).backward()
    assert ember.stats()["backward_graphs_compiled"] == 1
    torch.testing.assert_close(compiled.proj.weight.grad, model.proj.weight.grad)
    torch.testing.assert_close(compiled.proj.bias.grad, model.proj.bias.grad)
