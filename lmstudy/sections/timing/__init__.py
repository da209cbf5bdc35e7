"""The end-to-end timing section: tables, figures and findings.

jobs.py declares what the section measures (its jobs, their specs and result files:
lmstudy.registry), torch- and pandas-free, so the workflow reads it at parse time; section.py builds
its part of the report (its SectionContract). This file imports neither.
"""
