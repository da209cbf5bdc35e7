#!/usr/bin/env python
"""What a fresh measuring process costs before its first step, by the way it is started.

A cold start (STUDY.md) is CUDA initialisation, the model build and the
first steps; the interpreter's start and `import torch` are not part of it.
Three ways to get a process that starts cold, each timed from the request to
the child's result, with the child's own CUDA initialisation and build apart:

- fork: a child forked from this process, which imported torch and never
  touched CUDA (lmstudy.measure.fresh_process, the project's way);
- forkserver: multiprocessing's fork server, its imports preloaded (torch,
  the measuring modules), started once before the timed children;
- spawn: a new interpreter that imports torch itself (multiprocessing's spawn).

Every method builds the same model in its child and initialises CUDA there.
The methods take turns (fork, forkserver, spawn, then spawn, forkserver,
fork, ...), so that a drift of the machine falls on all of them.

    python scripts/bench_process_start.py --out start.csv --sizes small 2.7B --repeats 5
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from lmstudy.cli import run_main
from lmstudy.measure.fresh_process import mark_forking_parent

mark_forking_parent()
SIZES = {
    "small": dict(d_model=768, d_ff=3072, num_layers=12, num_heads=12),
    "2.7B": dict(d_model=2560, d_ff=10240, num_layers=32, num_heads=32),
}
METHODS = ("fork", "forkserver", "spawn")
PRELOAD = ["torch", "lmstudy.measure.bench_process", "lmstudy.measure.steps"]


def _started(connection, requested_at: float, spec: dict) -> None:
    """A multiprocessing child: its start, then the cold start, back as JSON (no pickled results)."""
    started = time.time()
    from lmstudy.measure.bench_process import cold_start
    from lmstudy.measure.fresh_process import become_measuring_process

    become_measuring_process()  # the script's top level ran again here (spawn, forkserver)

    imported = time.time()
    result = cold_start(spec)
    result.update(start_s=started - requested_at, imports_s=imported - started)
    connection.send_bytes(json.dumps(result).encode())
    connection.close()


def _in_multiprocessing(context, spec: dict) -> dict:
    receive, send = context.Pipe(duplex=False)
    child = context.Process(target=_started, args=(send, time.time(), spec))
    child.start()
    send.close()
    result = json.loads(receive.recv_bytes())
    child.join()
    return result


def _forked(spec: dict) -> dict:
    from lmstudy.measure.bench_process import cold_start
    from lmstudy.measure.fresh_process import run_forked

    result = run_forked(cold_start, spec, what="the forked process")
    result.update(start_s=result.pop("fork_s"), imports_s=0.0)
    return result


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--sizes", nargs="+", default=["small", "2.7B"], choices=list(SIZES))
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    p.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    args = p.parse_args(argv)
    import multiprocessing

    import pandas as pd
    import torch  # noqa: F401 - the forked children start with it imported

    from lmstudy.atomic import write_csv
    from lmstudy.measure.steps import import_lazy_modules

    import_lazy_modules()  # the forked children inherit it, as the timing jobs' do
    contexts = {}
    if "forkserver" in args.methods:
        contexts["forkserver"] = multiprocessing.get_context("forkserver")
        contexts["forkserver"].set_forkserver_preload(PRELOAD)
    if "spawn" in args.methods:
        contexts["spawn"] = multiprocessing.get_context("spawn")
    rows = []
    for size in args.sizes:
        spec = {**SIZES[size], "device": args.device}
        if "forkserver" in contexts:  # the server's own start (its imports), paid once per job, apart
            start = time.perf_counter()
            _in_multiprocessing(contexts["forkserver"], spec)
            rows.append({"size": size, "method": "forkserver (server start)", "repeat": -1,
                         "process_s": time.perf_counter() - start})
        for repeat in range(args.repeats):
            order = args.methods if repeat % 2 == 0 else list(reversed(args.methods))
            for method in order:
                start = time.perf_counter()
                result = _forked(spec) if method == "fork" else _in_multiprocessing(contexts[method], spec)
                wall = time.perf_counter() - start
                rows.append({"size": size, "method": method, "repeat": repeat, "process_s": wall, **result})
                print(json.dumps(rows[-1]), flush=True)
    table = pd.DataFrame(rows)
    write_csv(args.out, table)
    timed = table[table["repeat"] >= 0]
    summary = timed.groupby(["size", "method"])[
        ["process_s", "start_s", "imports_s", "cuda_init_s", "build_s"]].median().round(3)
    summary["before_cold_start_s"] = (summary["start_s"] + summary["imports_s"]).round(3)
    print(summary.to_string())


if __name__ == "__main__":
    run_main(main)
