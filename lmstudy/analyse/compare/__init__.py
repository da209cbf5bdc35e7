"""Comparing two runs of the study (results/<A>/ and results/<B>/); report side, no torch."""
