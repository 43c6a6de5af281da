"""An example third-party token mixer: PoolFormer's pooling (Yu et al. 2022), ``y = AvgPool(x) − x``
on the grid."""

import torch.nn.functional as F
from torch import nn

from gridmix import MixerSpec, hookimpl


class Pooling(nn.Module):
    def __init__(self, grid, pool_size=3):
        super().__init__()
        self.grid, self.pool_size = tuple(grid), pool_size

    # x: (B, N, C), the grid's tokens in row-major order
    def forward(self, x, attn_mask=None, is_causal=False):
        B, N, C = x.shape
        tokens = x.transpose(1, 2).reshape(B, C, *self.grid)  # (B, C, *grid)
        pool = (F.avg_pool1d, F.avg_pool2d, F.avg_pool3d)[len(self.grid) - 1]
        pooled = pool(
            tokens, self.pool_size, stride=1, padding=self.pool_size // 2, count_include_pad=False
        )
        return (pooled - tokens).reshape(B, C, N).transpose(1, 2)  # (B, N, C)


def build(dim, grid, *, num_heads, causal_axes=(), num_prefix_tokens=0, pool_size=3, **timm_kwargs):
    return Pooling(grid, pool_size)


@hookimpl
def gridmix_mixers():
    return [
        MixerSpec(
            "pooling",
            build,
            description="average pooling minus identity (PoolFormer)",
            reference="Yu et al. 2022",
            grid_ranks=(1, 2, 3),
        )
    ]
