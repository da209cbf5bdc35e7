"""Starting and placing jobs: the GPU lease, the CPU cores a job runs on, the job server.

Stdlib-only, and nothing in lmstudy imports it: the scripts that wrap a job's
command do (scripts/gpu_lease.py, scripts/run_script.py). What a job learns
from its launcher reaches it as data, through environment variables named in
lmstudy.job_process, the one module outside this package that it imports
(tests/test_import_graph.py).
"""
