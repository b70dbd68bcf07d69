"""Typed parameters: declared bounds and the ceiling of every int are checked by name."""

from typing import Annotated

import pytest

from values_seg.params import MAX_INT, Range, params_of, validate


def factory(count: Annotated[int, Range(1, 10)] = 2, rate: Annotated[float, Range(0, 1)] = 0.5,
            size: int = 3, sizes: list[int] | None = None, name: str = "x"):
    return count, rate, size, sizes, name


PARAMS = params_of(factory)


def test_bounds_are_read_from_annotated_and_described():
    by_name = {p.name: p for p in PARAMS}
    assert by_name["count"].annotation is int and by_name["count"].bounds == Range(1, 10)
    assert by_name["size"].bounds is None
    assert by_name["count"].describe() == "count: int in [1, 10] = 2"


@pytest.mark.parametrize("given, message", [
    ({"count": 11}, r"f: parameter 'count' must lie in \[1, 10\], got 11"),
    ({"count": "0"}, r"parameter 'count' must lie in \[1, 10\], got 0"),  # coerced first, then bounded
    ({"rate": 1.5}, r"parameter 'rate' must lie in \[0, 1\], got 1.5"),
    ({"size": MAX_INT + 1}, rf"parameter 'size' must lie in \[-{MAX_INT}, {MAX_INT}\]"),
    ({"size": 1e30}, r"parameter 'size' must lie in"),  # an integral float
    ({"sizes": [1, 10**20]}, r"parameter 'sizes' must lie in"),
])
def test_out_of_range_values_are_refused_by_name(given, message):
    with pytest.raises(ValueError, match=message):
        validate("f", PARAMS, given)


def test_values_within_bounds_pass_coerced():
    assert validate("f", PARAMS, {"count": "10", "rate": 0, "size": -MAX_INT, "sizes": [MAX_INT]}) == {
        "count": 10, "rate": 0.0, "size": -MAX_INT, "sizes": [MAX_INT]}
