"""How the suite writes a signed change, one way for the pages, the output and the explanations."""

from __future__ import annotations


def signed(value: float, digits: int = 1) -> str:
    """'+12.3' / '-4.0', and '0.0' for what rounds to zero: never '-0.0' nor '+0.0' beside a path as accepted."""
    text = f"{value:+.{digits}f}"
    return text[1:] if float(text) == 0 else text
