"""The communication section: all-reduce time and bandwidth by tensor size, backend and number of
processes, beside the limit of the link between the GPUs.

jobs.py declares what it measures (lmstudy.registry); section.py builds its part of the report.
"""
