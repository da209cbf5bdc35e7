"""The data-parallel section: step time of data-parallel training by hand (naive, flat, overlapped,
bucketed) beside PyTorch's DistributedDataParallel, and the share of it spent communicating.

jobs.py declares what it measures (lmstudy.registry); section.py builds its part of the report.
"""
