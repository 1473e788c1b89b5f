"""What a stored value may be: DynamoDB's limits, checked before anything is written.

A payload the API accepted but DynamoDB then refused would be a 500 after a half-done request; the
request models call :func:`check_storable` so such a payload is a 422 naming the offending value.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

#: DynamoDB stores at most 32 levels of nesting and numbers of at most 38 significant digits with a
#: magnitude between 1e-130 and 9.99e125; a payload beyond that could be accepted here and then fail
#: on write, so it is refused up front with the path of the offending value. A map key is at least one
#: character long (an empty one made the embedded mode's DynamoDB emulator return items that botocore
#: cannot parse, failing every later listing of the tenant). The rule is stated on the
#: number, not on how it was written, so that a JSON Schema can say it (the OpenAPI document does,
#: ``StorableValue``) and every client's encoder gets the same answer: an integral number is at most
#: 38 digits long, i.e. of magnitude below 10**38 (``10**38`` and ``1e38`` alike are refused,
#: ``10**38 - 1`` is fine), and a fraction is of magnitude at least 1e-130 (a double's fraction has at
#: most 17 significant digits, and is below 2**53).
MAX_NESTING = 32
#: Integral numbers are of magnitude below this (at most 38 digits). The OpenAPI document states it as
#: an exclusive bound, ``1e+38``: a bound a double spells exactly in decimal, so a client or fuzzer that
#: reads bounds as doubles reads the same number (decision 0025).
INTEGER_LIMIT = 10**38
_MIN_MAGNITUDE = Decimal("1E-130")


def check_storable(value: Any, path: str = "", depth: int = 0) -> None:
    """Raise ``ValueError`` naming (by its path inside the checked value) the first value a DynamoDB
    item cannot hold."""
    where = f"the value at {path}" if path else "the value"
    if depth >= MAX_NESTING:
        raise ValueError(f"{where} is nested more than {MAX_NESTING} levels deep")
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return
    if isinstance(value, int | float):
        number = Decimal(str(value))
        integral = number == number.to_integral_value()
        magnitude = number.copy_abs()  # exact: abs() would round to the context's 28 digits
        if (integral and magnitude >= INTEGER_LIMIT) or (not integral and magnitude < _MIN_MAGNITUDE):
            raise ValueError(
                f"{where}: the number {value!r} cannot be stored (an integer of at most 38 digits, or "
                "a fraction of magnitude at least 1e-130); send it as a string"
            )
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if key == "":
                raise ValueError(f"{where} has an empty key: a key needs at least one character")
            check_storable(item, f"{path}.{key}" if path else str(key), depth + 1)
        return
    if isinstance(value, list):
        for index, item in enumerate(value):
            check_storable(item, f"{path}[{index}]", depth + 1)
