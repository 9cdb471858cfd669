"""Errors the CLI turns into one-line messages and exit statuses."""

from __future__ import annotations

import click


class UsageError(click.ClickException):
    """Bad input from the user: exit status 2, one line naming the thing and the field."""

    exit_code = 2

    def format_message(self) -> str:  # keep it one line
        return " ".join(str(self.message).split())
