"""Errors a user can fix. No torch here: scripts report these before importing it."""


class UserError(Exception):
    """A mistake the user can fix; its message is one sentence naming the fix."""
