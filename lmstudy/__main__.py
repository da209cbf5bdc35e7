"""`python -m lmstudy`: the study's command from a clone (lmstudy.entry)."""

from lmstudy.entry import run

if __name__ == "__main__":
    run()
