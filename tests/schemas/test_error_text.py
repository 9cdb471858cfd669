"""`error_text`: a third party's error message, kept in an event, with secrets redacted and a bound."""

from __future__ import annotations

import pytest

from membench.schemas.events import error_text

KEY = "sk-proj-a1b2c3d4e5f6g7h8"


@pytest.mark.parametrize("raw, kept", [
    (f"Incorrect API key provided: {KEY}.", "Incorrect API key provided: [redacted]."),
    ("header was Authorization: Bearer abcdefgh12345678", "header was Authorization: Bearer [redacted]"),
    ("retrying with Bearer abcdefgh12345678", "retrying with Bearer [redacted]"),
    ('{"api_key": "hunter2hunter2"} refused', '{"api_key": "[redacted]"} refused'),
    ("POST https://user:s3cretpw@db.example/v1 failed", "POST https://user:[redacted]@db.example/v1 failed"),
    ("vector db down", "vector db down"),  # ordinary words pass unchanged
])
def test_secrets_are_redacted_and_the_message_kept(raw, kept):
    assert error_text(raw) == kept


def test_a_known_secret_of_any_shape_is_redacted_and_the_bound_is_marked():
    assert error_text("the key plainvalue42 was refused", ("plainvalue42",)) == "the key [redacted] was refused"
    assert "plainvalue42" in error_text("the key plainvalue42 was refused")  # control: unknown, not key-shaped
    long = error_text("x" * 900, bound=500)
    assert long.startswith("x" * 500) and long.endswith("… [400 more characters]")
    # redaction happens before the cut: a key straddling the bound is not half kept
    assert KEY[:10] not in error_text("y" * 495 + KEY, bound=500)
