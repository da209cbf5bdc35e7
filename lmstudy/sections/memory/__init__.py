"""The memory section: peaks, memory by kind, timelines and largest allocations.

jobs.py declares what the section measures (its jobs, their specs and result files:
lmstudy.registry), torch- and pandas-free, so the workflow reads it at parse time; section.py builds
its part of the report (its SectionContract). This file imports neither.
"""
