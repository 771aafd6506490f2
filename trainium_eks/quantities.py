"""Kubernetes resource quantities (``"250m"``, ``"1k"``, ``"1Gi"``, ``"1e3"``, ``2``) read as the API server reads them.

The grammar is apimachinery's ``resource.Quantity`` (k8s.io/apimachinery pkg/api/resource/quantity.go): a signed
decimal number (``1``, ``1.5``, ``1.``, ``.5``) and at most one suffix, either binary SI (Ki, Mi, Gi, Ti, Pi, Ei:
powers of 1024), decimal SI (n, u, m, "", k, M, G, T, P, E: powers of 1000) or a decimal exponent (``e3``,
``E-2``). ``Quantity.UnmarshalJSON`` takes a JSON string or number and trims surrounding white space first.
Values are exact fractions, so ``"1280000m"`` is exactly 1280.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

SUFFIXES = {
    "n": Fraction(1, 10**9), "u": Fraction(1, 10**6), "m": Fraction(1, 10**3), "k": Fraction(10**3),
    "M": Fraction(10**6), "G": Fraction(10**9), "T": Fraction(10**12), "P": Fraction(10**15), "E": Fraction(10**18),
    "Ki": Fraction(2**10), "Mi": Fraction(2**20), "Gi": Fraction(2**30), "Ti": Fraction(2**40), "Pi": Fraction(2**50),
    "Ei": Fraction(2**60),
}  # fmt: skip
# [0-9], not \d (which takes any Unicode digit); fullmatch, so nothing (a newline) may follow.
QUANTITY = re.compile(
    r"(?P<number>[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))(?:(?P<suffix>[KMGTPE]i|[numkMGTPE])|[eE](?P<exponent>[+-]?[0-9]+))?"
)
# Bounds that keep the arithmetic small: no resource comes near them, and a value beyond them is not read.
MAX_DIGITS = 40
MAX_EXPONENT = 100
WHITE_SPACE = " \t\n\v\f\r"  # what Go's strings.TrimSpace removes, in ASCII


def quantity(value) -> Fraction | None:
    """``value`` (a JSON string or number) as a Kubernetes quantity; None when the API server would refuse it or it
    lies beyond this reader's bounds."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        finite = isinstance(value, int) or math.isfinite(value)
        return Fraction(value) if finite and abs(value) < 10**MAX_EXPONENT else None
    if not isinstance(value, str):
        return None
    match = QUANTITY.fullmatch(value.strip(WHITE_SPACE))
    if match is None or len(match["number"]) > MAX_DIGITS:
        return None
    number = Fraction(match["number"].rstrip(".") or "0")
    if match["exponent"] is not None:
        exponent = int(match["exponent"]) if len(match["exponent"]) <= 4 else MAX_EXPONENT + 1
        return number * Fraction(10) ** exponent if abs(exponent) <= MAX_EXPONENT else None
    return number * SUFFIXES.get(match["suffix"] or "", 1)
