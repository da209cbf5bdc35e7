"""Recording CUDA memory snapshots on the device (section 4); reading them is lmstudy.analyse.memory.

- ``capture``: the GPU job that records a snapshot (imports torch).
"""
