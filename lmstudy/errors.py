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


def damaged_sentence(path, what: str, made_by: str) -> str:
    """How a bad result file is said, wherever it is read: what is wrong, who writes it, how to redo it."""
    return (f"{path} is damaged or not a result file ({what}); {made_by}: delete it (rm '{path}') "
            "and run the same snakemake command again to redo it and what depends on it.")


def failed_jobs_sentences(log, limit: int = 5) -> list[str]:
    """Each failed job's own sentence (the last "error: ..." line of its log), as "<rule>: <sentence>",
    from the run's Snakemake log (`log`, the path onerror gives): Snakemake prints them amid tens of
    lines, and a run's end repeats them. A job whose log holds no such line is left out; at most
    `limit`, then how many more."""
    import re

    text = ""
    for path in log if isinstance(log, (list, tuple)) else [log]:  # Snakemake gives a list
        try:
            with open(path, errors="replace") as file:
                text += file.read()
        except (OSError, TypeError):
            continue
    said: list[str] = []
    seen: set[str] = set()
    for block in re.split(r"\n(?=Error in rule )", text)[1:]:
        rule = block.split(":", 1)[0].removeprefix("Error in rule ").strip()
        found = re.search(r"^\s+log: (\S+)", block, re.MULTILINE)
        if not found:
            continue
        try:
            with open(found.group(1), errors="replace") as file:
                lines = [line.strip() for line in file if line.startswith("error: ")]
        except OSError:
            continue
        if lines and lines[-1] not in seen:
            seen.add(lines[-1])
            said.append(f"{rule}: {lines[-1].removeprefix('error: ')}")
    if len(said) > limit:
        said = [*said[:limit], f"and {len(said) - limit} more (their logs say which)"]
    return said
