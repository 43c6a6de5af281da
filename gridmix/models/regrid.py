"""A trained model on another grid: its token mixers through their declared resolution change, its
learned absolute positions resampled, everything else carried over unchanged.

:func:`regrid_model` takes the trained model and the same model freshly built on the new grid (so
every structure that follows the grid, a ViT's patch grid, a transformer's token count, a mask, is
the new grid's) and moves the trained state into the fresh one:

- every token mixer, found by the registered mixer's name a module carries (``MixerSpec.layer``, the
  one way from a registered mixer to a model, tags what it builds:
  :data:`gridmix.mixers.contract.MIXER_TAG`), is replaced by the trained mixer moved with that
  mixer's declared ``regrid(module, grid)`` (the concentration mixer's is
  :meth:`~gridmix.ConcentrationMixer.regrid`); a mixer that declares none cannot change grid, and
  neither can the model;
- a learned parameter named ``pos_embed`` (timm's name for learned absolute positions, of shape
  ``(1, P + N, C)`` with ``P`` prefix tokens first) whose token count changes is resampled by
  :func:`resample_positions`;
- every other parameter and buffer is copied as it is; one whose shape differs between the two grids
  (a head over all N tokens, MLP-Mixer's token MLP) depends on the grid, and the model cannot change
  grid. A buffer that is not learned and changes shape keeps the fresh model's value, which was
  built for the new grid.

A model that cannot change grid raises :class:`CannotRegrid` with the reason in one line. Modules
gridmix does not know as token mixers move by their state dict, which is right for parameters that
do not depend on the grid and refused where a shape does.

Shape legend:
    P: prefix tokens, N: grid tokens (n_1·…·n_d), C: channels
"""

from __future__ import annotations

import copy
from collections import Counter
from collections.abc import Callable, Mapping

import torch
import torch.nn.functional as F
from timm.layers import resample_abs_pos_embed
from torch import nn

from gridmix.core.grid import Grid, GridLike
from gridmix.mixers.contract import MIXER_TAG

POSITIONS = "pos_embed"  # the name (last component) of a learned absolute-position parameter

Regrid = Callable[[nn.Module, Grid], nn.Module]


class CannotRegrid(ValueError):
    """The model cannot change to the asked grid; the message says why, in one line."""


def resample_positions(
    positions: torch.Tensor, old: GridLike, new: GridLike, *, num_prefix_tokens: int = 0
) -> torch.Tensor:
    """Learned absolute positions (1, P + N, C) on ``old`` resampled to (1, P + N', C) on ``new``;
    the P prefix positions are kept. On 2-d grids timm's ``resample_abs_pos_embed`` (bicubic,
    antialiased), on other ranks linear interpolation along each axis in turn
    (``align_corners=False``, as ``F.interpolate``). ``positions`` itself when the grids are
    equal."""
    old, new = Grid.parse(old), Grid.parse(new)
    if old.ndim != new.ndim:
        raise CannotRegrid(
            f"positions of the {old.ndim}-d grid {old} cannot move to the {new.ndim}-d grid {new}"
        )
    P = num_prefix_tokens
    if positions.ndim != 3 or positions.shape[0] != 1 or positions.shape[1] != P + old.numel:
        raise CannotRegrid(
            f"positions of shape {tuple(positions.shape)}; expected (1, {P} + {old.numel}, C) on "
            f"{old}"
        )
    if old == new:
        return positions
    if old.ndim == 2:
        return resample_abs_pos_embed(
            positions,
            new_size=list(new.shape),
            old_size=list(old.shape),
            num_prefix_tokens=P,
            interpolation="bicubic",
            antialias=True,
        )
    C = positions.shape[-1]
    work = torch.promote_types(positions.dtype, torch.float32)  # interpolate in float32 at least
    values = positions[0, P:].to(work).T.reshape(C, *old.shape)  # (C, *old)
    for axis, (n_old, n_new) in enumerate(zip(old, new)):
        if n_old == n_new:
            continue
        lines = values.movedim(axis + 1, -1)  # (C, …, n_old)
        moved = F.interpolate(
            lines.reshape(-1, 1, n_old), size=n_new, mode="linear", align_corners=False
        )
        values = moved.reshape(*lines.shape[:-1], n_new).movedim(-1, axis + 1)  # (C, …, n_new, …)
    grid_part = values.reshape(C, new.numel).T.unsqueeze(0).to(positions.dtype)  # (1, N', C)
    return torch.cat([positions[:, :P], grid_part], dim=1)  # (1, P + N', C)


def mixer_name(module: nn.Module) -> str | None:
    """The registered mixer ``module`` was built as (its :data:`MIXER_TAG`); ``None`` for a module
    no registered mixer built."""
    tagged = getattr(module, MIXER_TAG, None)
    return tagged if isinstance(tagged, str) else None


def regrid_model(
    trained: nn.Module,
    fresh: nn.Module,
    old: GridLike,
    new: GridLike,
    *,
    regrids: Mapping[str, Regrid | None],
) -> tuple[nn.Module, str]:
    """``fresh`` (the same model built on ``new``, on the trained model's device) holding
    ``trained``'s learned state moved from ``old`` to ``new`` (module docstring), and how it moved,
    in words. ``regrids``: every registered mixer's declared ``regrid`` by name (``None``: it
    declares none). ``trained`` is left as it was. Raises :class:`CannotRegrid` when the model
    cannot change grid."""
    old, new = Grid.parse(old), Grid.parse(new)
    if old.ndim != new.ndim:
        raise CannotRegrid(
            f"a model of the {old.ndim}-d grid {old} cannot move to the {new.ndim}-d grid {new}"
        )
    trained = copy.deepcopy(trained)
    modules, fresh_modules = dict(trained.named_modules()), dict(fresh.named_modules())
    mixers: dict[str, str] = {}  # module path → registered mixer name (outermost mixers only)
    for path, module in modules.items():
        name = mixer_name(module)
        if name is not None and not any(_inside(path, outer) for outer in mixers):
            mixers[path] = name
    for path, name in mixers.items():
        if path not in fresh_modules or path == "":
            raise CannotRegrid(
                f"the model built on {new} has no module {path or '(root)'} where the trained one "
                f"holds mixer {name!r}"
            )
        if name not in regrids:
            raise CannotRegrid(
                f"its mixer {name!r} ({path}) is not registered, so its resolution change is "
                "unknown"
            )
        if regrids[name] is None:
            raise CannotRegrid(f"its mixer {name!r} declares no resolution change")
        try:
            moved = regrids[name](modules[path], new)
        except ValueError as error:
            raise CannotRegrid(f"its mixer {name!r} cannot change to {new}: {error}") from None
        fresh.set_submodule(path, moved)
    resampled = _move_state(trained, fresh, old, new, mixers)
    return fresh.eval(), _how(mixers, resampled)


def _inside(path: str, outer: str) -> bool:
    return outer == "" or path.startswith(outer + ".")


def _move_state(
    trained: nn.Module, fresh: nn.Module, old: Grid, new: Grid, mixers: dict[str, str]
) -> list[str]:
    """Copy every parameter and buffer outside the mixers from ``trained`` into ``fresh``; returns
    the positions it resampled. :class:`CannotRegrid` for a learned tensor whose shape depends on
    the grid."""
    source, target = trained.state_dict(), fresh.state_dict()
    learned = {name for name, _ in trained.named_parameters()}
    outside = [
        key for key in {**source, **target} if not any(_inside(key, path) for path in mixers)
    ]
    state, resampled = dict(target), []
    for key in outside:
        if key not in source or key not in target:
            where = new if key not in source else old
            raise CannotRegrid(
                f"{key} exists only on {where}: the model's structure depends on the grid"
            )
        value, wanted = source[key], target[key].shape
        if value.shape == wanted:
            state[key] = value
        elif key.rsplit(".", 1)[-1] == POSITIONS and key in learned:
            prefix = value.shape[1] - old.numel if value.ndim == 3 else -1
            if prefix < 0 or wanted != (1, prefix + new.numel, value.shape[-1]):
                raise CannotRegrid(
                    f"{key} of shape {tuple(value.shape)} on {old} and {tuple(wanted)} on {new}: "
                    "not (1, prefix + grid tokens, C) on both"
                )
            state[key] = resample_positions(value, old, new, num_prefix_tokens=prefix)
            resampled.append(key)
        elif key in learned:
            raise CannotRegrid(
                f"its parameter {key} has shape {tuple(value.shape)} on {old} but {tuple(wanted)} "
                f"on {new}: it depends on the grid"
            )
    fresh.load_state_dict(state)
    return resampled


def _how(mixers: dict[str, str], resampled: list[str]) -> str:
    """How the model moved, in words: its mixers by name and count, and the positions it
    resampled."""
    parts = [f"{count} × {name} by its regrid" for name, count in Counter(mixers.values()).items()]
    parts += [f"{key} resampled" for key in resampled]
    return "; ".join(parts) or "no grid-dependent state"
