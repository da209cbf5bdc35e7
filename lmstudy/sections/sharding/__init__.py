"""The optimizer-state sharding section: memory and step time of AdamW with its state whole on every
rank or sharded across the ranks (ZeRO stage 1).

jobs.py declares what it measures (lmstudy.registry); section.py builds its part of the report.
"""
