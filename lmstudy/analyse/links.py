"""No file of a run is read, or of a report written, through a link that leaves its folder.

A run's folder may come from elsewhere (copied in to compare or re-render
it), and the report job may run as root: a figure that is a symbolic link to
/etc/shadow would otherwise be copied into the report, readable by anyone.
So before the report or a comparison reads a run, every symbolic link inside
the run's folder must point inside it, and the folders a report writes into
must be folders of their own, not links; anything else is refused with one
sentence naming the link. Links that stay inside (a file linked beside
another) are harmless and kept.
"""

from __future__ import annotations

import os
from pathlib import Path

from lmstudy.errors import UserError


def _inside(target: str, root: str) -> bool:
    return target == root or target.startswith(root.rstrip(os.sep) + os.sep)


def check_links_inside(folder: str | Path) -> None:
    """Raise UserError for the first symbolic link under `folder` whose target lies outside it.

    The folder itself may be a link (a run kept elsewhere and linked into
    results/ by its owner); what is inside must stay inside where it leads.
    """
    folder = Path(folder)
    root = os.path.realpath(folder)
    for where, dirs, files in os.walk(folder, followlinks=False):
        for name in (*dirs, *files):
            path = os.path.join(where, name)
            if not os.path.islink(path):
                continue
            target = os.path.realpath(path)
            if not _inside(target, root):
                raise UserError(
                    f"{path} is a symbolic link to {os.readlink(path)}, outside {folder}/, and files of a "
                    f"run are read only from the run's own folder: replace the link by a copy of the file "
                    f"it should be (or delete it and rerun the job that makes it)."
                )


def check_writable_folder(folder: str | Path) -> None:
    """Raise UserError when `folder` (or a folder of it that the report writes into) is a symbolic link."""
    folder = Path(folder)
    for path in (folder, folder / "tables", folder / "figures"):
        if path.is_symlink():
            raise UserError(
                f"{path} is a symbolic link to {os.readlink(path)}, and a report writes only into "
                f"folders of its own: delete the link ({path}) and run the same command again."
            )
