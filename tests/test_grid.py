"""Grid specs: the accepted forms parse, malformed ones are one-line ValueErrors quoting the
input."""

import pytest

from gridmix import Grid


@pytest.mark.parametrize(
    "spec,shape",
    [
        ("64", (64,)),
        ("32x32", (32, 32)),
        ("8x16x16", (8, 16, 16)),
        ("2X3", (2, 3)),
        (64, (64,)),
        ((8, 4), (8, 4)),
        ([1, 2, 3, 4], (1, 2, 3, 4)),
    ],
)
def test_accepted_forms(spec, shape):
    grid = Grid.parse(spec)
    assert grid.shape == shape and Grid.parse(grid) is grid
    assert grid.ndim == len(shape) and len(grid) == len(shape)
    assert grid.numel == __import__("math").prod(shape)
    assert Grid.parse(str(grid)) == grid


@pytest.mark.parametrize(
    "spec",
    [
        "32xabc",
        "8 x 8",
        " 4x5",
        "4x5 ",
        "8x\t8",
        "0x5",
        "-3",
        "",
        "x",
        "32x",
        "3.5",
        (0, 4),
        (),
        [2, "a"],
        True,
        2.0,
    ],
)
def test_malformed_specs_quote_the_input(spec):
    with pytest.raises(ValueError) as info:
        Grid.parse(spec)
    message = str(info.value)
    assert repr(spec) in message or repr(tuple(spec)) in message
    assert "e.g. '64', '32x32'" in message
    assert "\n" not in message
