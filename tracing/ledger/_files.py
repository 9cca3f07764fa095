"""Files we write hold model- and tool-written text: they are created private to the user.

A new directory is made ``0700`` and a new file ``0600`` (SQLite gives its ``-wal`` and ``-shm``
files the mode of the database file). Files that already exist keep the mode they have.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Final

FILE_MODE: Final = 0o600
DIR_MODE: Final = 0o700


def private_dir(path: Path) -> None:
    """Create ``path`` (and missing parents) as directories only the user may enter."""
    missing: list[Path] = []
    current = path
    while not current.exists() and current != current.parent:
        missing.append(current)
        current = current.parent
    for directory in reversed(missing):
        try:
            directory.mkdir(mode=DIR_MODE)
        except FileExistsError:
            continue


def create_private(path: Path) -> None:
    """Create ``path`` empty with mode ``0600`` unless it exists (its directory too)."""
    private_dir(path.parent)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
    except FileExistsError:
        return
    os.close(fd)
