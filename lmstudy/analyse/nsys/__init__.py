"""Profiles of the model (section 2): Nsight Systems and torch.profiler.

Both backends are read into the same `events.Events` (ranges, launches,
GPU activities), and one attribution (`events.kernel_table`) turns them into
the tidy kernel table: one row per (innermost enclosing range, kernel).

- `sqlite`: an Nsight Systems report (.nsys-rep, exported) or its SQLite;
- `torch_trace`: the Chrome trace torch.profiler writes;
- `categories`: the one set of rules that sorts kernels into categories;
- `tables`: the section's derived tables;
- `aggregate`, `report_file`, `compare`: joining, opening and comparing profiles.

Capturing a profile on the device is lmstudy.measure.nsys.
"""
