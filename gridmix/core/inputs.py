"""What a user types as a list or a number (a command line option,
:func:`gridmix.orchestrate.plan.plan_study`'s comma-separated strings), checked before anything
heavy loads: this module imports no torch, so the command line refuses a bad value in a fraction of
a second (docs/guide.md, "Input checks").

One rule for every list: a list that is given names at least one item, has no empty item (``''``,
``','`` and ``'a,,b'`` are refused, naming the option) and names no item twice (``'1e-3,1e-3'``,
and after parsing ``'1e-3,0.001'``); spaces around the commas are ignored.
Leaving the option out is how to ask for its default. Learning rates are finite positive numbers;
grids follow :meth:`Grid.parse`."""

from __future__ import annotations

import math
from collections.abc import Sequence

from gridmix.core.grid import Grid


def refuse_repeats(values: Sequence, option: str, text: str) -> None:
    """``ValueError`` in one line, naming ``option`` and what was given (``text``), when an item of
    ``values`` equals an earlier one."""
    seen = []
    for value in values:
        if value in seen:
            raise ValueError(f"{option} {text!r} names {str(value)!r} twice; expected each once")
        seen.append(value)


def split_list(text: str, option: str, example: str) -> tuple[str, ...]:
    """The comma-separated items of ``text``, each stripped; ``ValueError`` in one line, naming
    ``option`` and an ``example`` of what it takes, when ``text`` names no item, holds an empty one
    or names one twice."""
    items = tuple(item.strip() for item in text.split(","))
    if not any(items):
        raise ValueError(
            f"{option} {text!r} names nothing; expected a comma-separated list such as "
            f"{example!r}, or leave the option out for its default"
        )
    if not all(items):
        raise ValueError(
            f"{option} {text!r} holds an empty item; expected a comma-separated list such as "
            f"{example!r}"
        )
    refuse_repeats(items, option, text)
    return items


def parse_rates(text: str, option: str = "--lrs") -> tuple[float, ...]:
    """Learning rates ``'1e-3,3e-3'`` as floats, each finite and positive and none repeated;
    ``ValueError`` in one line otherwise."""
    rates = []
    for item in split_list(text, option, "1e-3,3e-3"):
        try:
            rate = float(item)
        except ValueError:
            raise ValueError(
                f"{option} {text!r}: {item!r} is not a number; expected positive numbers such as "
                "'1e-3,3e-3'"
            ) from None
        if not (math.isfinite(rate) and rate > 0):
            raise ValueError(
                f"{option} {text!r}: {item!r} is not a finite positive number; expected learning "
                "rates such as '1e-3,3e-3'"
            )
        rates.append(rate)
    refuse_repeats(rates, option, text)  # '1e-3,0.001'
    return tuple(rates)


def parse_grids(text: str, option: str) -> tuple[Grid, ...]:
    """Grids ``'8x8,16x16'`` parsed by :meth:`Grid.parse` (no space inside a grid); ``ValueError``
    names ``option`` and the bad grid."""
    grids = []
    for item in split_list(text, option, "8x8,16x16"):
        try:
            grids.append(Grid.parse(item))
        except ValueError as error:
            raise ValueError(f"{option}: {error}") from None
    refuse_repeats(grids, option, text)  # '8x8,08x8'
    return tuple(grids)


def parse_names(text: str, option: str) -> tuple[str, ...]:
    """Names ``'vit,mlp-mixer'`` (models, mixers) as a tuple, by the list rule of
    :func:`split_list`."""
    return split_list(text, option, "vit,mlp-mixer")


def parse_over(
    assignments: Sequence[str], option: str = "--over", example: str = "grid=64,128,256"
) -> list[tuple[str, tuple[str, ...]]]:
    """``gridmix sweep --over`` (or another ``option`` of the same form, ``example`` its use):
    ``["grid=64,128", "embed_dim=32,64"]`` as ``[("grid", ("64", "128")), ("embed_dim", ("32",
    "64"))]``, each value list by the rule of :func:`split_list`; ``ValueError`` in one line
    otherwise."""
    over, values_example = [], example.partition("=")[2]
    for text in assignments:
        name, sep, values = text.partition("=")
        if not sep or not name.strip():
            raise ValueError(f"{option} {text!r}; expected NAME=V1,V2,…, e.g. {option} {example}")
        over.append((name.strip(), split_list(values, f"{option} {name.strip()}", values_example)))
    return over
