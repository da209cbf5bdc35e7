"""`python -m lmstudy`: the study's command from a clone (lmstudy.command)."""

from lmstudy.command import run

if __name__ == "__main__":
    run()
