"""Counts and ranges as a sentence says them: "1 node" but "2 nodes", and a range whose ends meet as one number."""

from __future__ import annotations


def counted(count: int, noun: str) -> str:
    """``count`` ``noun``s, the noun singular for one (every noun the tools count takes a plain -s)."""
    return f"{count:,} {noun}" if count == 1 else f"{count:,} {noun}s"


def span(low: int, high: int) -> str:
    """``low to high``, or the one number where they are equal."""
    return f"{low:,}" if low == high else f"{low:,} to {high:,}"
