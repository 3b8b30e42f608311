"""Atomic file writes: write a ``.tmp`` sibling, then rename over the target.

A reader (or a resumed run, or DVC) never sees half a file, and a killed writer leaves only a ``.tmp``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


def write_bytes_atomic(path: str | Path, data: bytes) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def write_json_atomic(path: str | Path, payload: Any) -> None:
    """Indented, key-sorted JSON: the same payload always gives the same bytes."""
    write_bytes_atomic(path, (json.dumps(payload, indent=2, sort_keys=True) + "\n").encode())
