"""Cartesian token grids: parsing and validating grid specs such as ``"64"``, ``"32x32"``,
``"8x16x16"``.

A grid is the shape ``(n_1, …, n_d)`` that tokens live on, in row-major order (last axis fastest,
as ``reshape`` gives): a sequence is ``d = 1``, an image ``d = 2``, a video ``d = 3`` (time, height,
width). See docs/design.md section 2.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

_ACCEPTED = "positive integers joined by 'x' with no spaces, e.g. '64', '32x32' or '8x16x16'"
# whole text only (fullmatch): no space is guessed away
_SPEC = re.compile(r"[0-9]+(x[0-9]+)*", re.IGNORECASE)


@dataclass(frozen=True)
class Grid:
    """An immutable grid shape; build one with :meth:`Grid.parse` from any grid-like value."""

    shape: tuple[int, ...]

    def __post_init__(self) -> None:
        if len(self.shape) == 0:
            raise ValueError(f"grid {self.shape!r} has no axes; expected {_ACCEPTED}")
        for n in self.shape:
            if isinstance(n, bool) or not isinstance(n, int) or n < 1:
                raise ValueError(
                    f"grid {self.shape!r} has an invalid axis size {n!r}; expected {_ACCEPTED}"
                )

    @classmethod
    def parse(cls, spec: Grid | str | int | Sequence[int]) -> Grid:
        """Parse ``"32x32"``, ``"64"``, ``64``, ``(8, 16, 16)`` or a :class:`Grid`; ``ValueError``
        otherwise."""
        if isinstance(spec, Grid):
            return spec
        if isinstance(spec, bool):
            raise ValueError(f"invalid grid {spec!r}; expected {_ACCEPTED}")
        if isinstance(spec, int):
            spec = str(spec)
        if isinstance(spec, str):
            if not _SPEC.fullmatch(spec):
                raise ValueError(f"invalid grid {spec!r}; expected {_ACCEPTED}")
            shape = tuple(int(part) for part in spec.lower().split("x"))
        elif isinstance(spec, Sequence):
            if not all(isinstance(n, int) and not isinstance(n, bool) for n in spec):
                raise ValueError(f"invalid grid {spec!r}; expected {_ACCEPTED}")
            shape = tuple(spec)
        else:
            raise ValueError(
                f"invalid grid {spec!r} of type {type(spec).__name__}; expected {_ACCEPTED}"
            )
        if not shape or min(shape) < 1:
            raise ValueError(
                f"invalid grid {spec!r}: every axis needs at least 1 token; expected {_ACCEPTED}"
            )
        return cls(shape)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def numel(self) -> int:
        """Number of tokens ``N = n_1·…·n_d``."""
        return math.prod(self.shape)

    def __iter__(self) -> Iterator[int]:
        return iter(self.shape)

    def __len__(self) -> int:
        return len(self.shape)

    def __getitem__(self, axis: int) -> int:
        return self.shape[axis]

    def __str__(self) -> str:
        return "x".join(str(n) for n in self.shape)


GridLike = Grid | str | int | Sequence[int]
"""Anything :meth:`Grid.parse` accepts."""
