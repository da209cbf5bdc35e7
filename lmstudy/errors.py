"""Errors a user can fix. No torch here: scripts report these before importing it."""


class UserError(Exception):
    """A mistake the user can fix; its message is one sentence naming the fix."""


class IncompleteSpec(UserError):
    """A job's spec lacks settings: a job takes its spec complete, and `lmstudy spec` completes one."""

    def __init__(self, missing, job: str = "<job>") -> None:
        self.missing = sorted(missing)
        super().__init__(
            f"the spec lacks {', '.join(self.missing)}: a job takes its spec complete, as the workflow "
            f"gives it; `lmstudy spec {job} ...` completes a partial one from config.yaml."
        )
