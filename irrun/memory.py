"""What memory this machine has: the default limit of a tensor, and what a load may still take."""
from __future__ import annotations

import os
from pathlib import Path


def physical_memory() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 8 << 30


def default_memory_limit() -> int:
    """Largest single tensor irrun will allocate by default: half of physical memory."""
    return physical_memory() // 2


def available_memory() -> int:
    """Bytes this process may still take without swapping: the kernel's MemAvailable, less where a
    cgroup (a container's limit) leaves less; half of physical memory where neither can be read."""
    found = _meminfo_available()
    limited = _cgroup_room()
    if limited is not None:
        found = limited if found is None else min(found, limited)
    return found if found is not None else physical_memory() // 2


def _meminfo_available() -> int | None:
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _cgroup_room() -> int | None:
    """memory.max less memory.current of this process's cgroup (v2), None where unlimited or unknown."""
    try:
        entry = Path("/proc/self/cgroup").read_text().splitlines()
        path = next(line.split(":", 2)[2] for line in entry if line.startswith("0::"))
        group = Path("/sys/fs/cgroup") / path.lstrip("/")
        limit = (group / "memory.max").read_text().strip()
        if limit == "max":
            return None
        return max(int(limit) - int((group / "memory.current").read_text()), 0)
    except (OSError, ValueError, StopIteration, IndexError):
        return None


def format_bytes(nbytes: int) -> str:
    """`nbytes` for a person: "3.2 GiB", "512.0 KiB", "100 bytes"."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if nbytes >= scale:
            return f"{nbytes / scale:.1f} {unit}"
    return f"{nbytes} bytes"
