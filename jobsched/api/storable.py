"""What a stored value may be: DynamoDB's limits, checked before anything is written.

A payload the API accepted but DynamoDB then refused would be a 500 after a half-done request; the
request models call :func:`check_storable` so such a payload is a 422 naming the offending value.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

#: DynamoDB stores at most 32 levels of nesting and numbers of at most 38 significant digits with a
#: magnitude between 1e-130 and 9.99e125; a payload beyond that could be accepted here and then fail
#: on write, so it is refused up front with the path of the offending value.
MAX_NESTING = 32
_MAX_MAGNITUDE = Decimal("9.9999999999999999999999999999999999999E+125")
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
        digits = len(number.as_tuple().digits)  # as written: 10**45 has 46 digits to store
        if number != 0 and (abs(number) > _MAX_MAGNITUDE or abs(number) < _MIN_MAGNITUDE or digits > 38):
            raise ValueError(
                f"{where}: the number {value!r} cannot be stored (at most 38 significant digits, "
                "magnitude 1e-130 to 9.9e125); send it as a string"
            )
        return
    if isinstance(value, dict):
        for key, item in value.items():
            check_storable(item, f"{path}.{key}" if path else str(key), depth + 1)
        return
    if isinstance(value, list):
        for index, item in enumerate(value):
            check_storable(item, f"{path}[{index}]", depth + 1)
