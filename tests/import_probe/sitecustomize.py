"""Put on PYTHONPATH by the smoke run (tests/conftest.py): every Python process of it notes,
as it exits, which script it ran and whether torch was imported (tests/test_cpu_side_imports.py).

It writes only when LMSTUDY_IMPORT_PROBE names a folder; it changes nothing else.
"""

import atexit
import json
import os
import sys


def _note() -> None:
    folder = os.environ.get("LMSTUDY_IMPORT_PROBE")
    script = sys.argv[0] if sys.argv else ""
    if not folder or not script.endswith(".py"):
        return
    record = {"script": os.path.basename(script), "argv": sys.argv, "torch": "torch" in sys.modules}
    with open(os.path.join(folder, f"{os.getpid()}.json"), "w") as out:
        json.dump(record, out)


atexit.register(_note)
