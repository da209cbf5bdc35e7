"""Profiling on the device (section 2); reading the profiles is lmstudy.analyse.nsys.

- `capture`: the profiled program (imports torch);
- `job`: one profiling job: runs the program under nsys (or torch.profiler)
  and writes the tidy kernel table;
- `executable`: finding and versioning nsys (no torch).
"""
