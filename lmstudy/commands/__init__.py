"""The CPU side's commands, `python -m lmstudy <command>`: one module each, whose `main(argv)` parses
its arguments and calls the library (lmstudy.entry lists and runs them). One module a command, so
that a rule's code version (lmstudy.code_version) follows its own command and nothing else."""
