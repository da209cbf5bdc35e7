"""Section 4: CUDA memory snapshots and their analysis.

- ``snapshot``: read a ``torch.cuda.memory._dump_snapshot`` pickle and rebuild
  every allocation, those made before recording began included, and the
  allocated-bytes timeline;
- ``phases``: the forward/backward/optimizer ranges recorded in the snapshot;
- ``kinds``: what each live allocation is (parameters, gradients, ...);
- ``sources``: the user-code lines that made the largest allocations;
- ``summary``: one snapshot's summary files, and the section's table;
- ``plain_pickle``: the restricted unpickler a snapshot is read with;
- ``table``: the section's table across snapshots.

Recording a snapshot on the device is lmstudy.measure.memory.capture. No torch here.
"""
