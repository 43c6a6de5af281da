"""A record's named values as a dict: :func:`pick`, for the ``to_dict`` methods whose keys are the
record's own attribute names and for the constructors fed from another record's attributes."""

from __future__ import annotations


def pick(record: object, *names: str) -> dict:
    """``{name: getattr(record, name)}`` for each of ``names``, in the order named: fields and
    properties alike, each value as it is (not copied or converted, unlike
    :func:`dataclasses.asdict`)."""
    return {name: getattr(record, name) for name in names}
