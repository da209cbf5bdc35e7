"""On the device: the model, the steps, timing, nsys and snapshot capture, attention, precision,
compile, ladder.

The modules here import torch (or run on the GPU node beside modules that do).
Importing this package itself imports nothing, so a torch-free module here
(fresh_process, gpu_monitor, rung_support, nsys.executable) stays torch-free.
They may use lmstudy.analyse (torch-free) and the top-level helpers, never
lmstudy.report.
"""
