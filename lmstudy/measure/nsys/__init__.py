"""Profiling on the device (section 2); reading the profiles is lmstudy.analyse.nsys.

- `capture`: warm-up and capture of each pass (imports torch);
- `program`: the profiled program, on the job's spec as a JSON file;
- `job`: one profiling job: runs the program under nsys (or torch.profiler)
  and writes the tidy kernel table;
- `executable`: finding and versioning nsys (no torch).
"""
