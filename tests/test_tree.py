"""The repository's own text files carry no leftover of an unresolved merge."""

import os
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SKIP = {".git", ".venv", "build", "dist", "runs", "mlruns", "__pycache__", "node_modules"}
TEXT = {".md", ".py", ".toml", ".json", ".jsonl", ".txt", ".yaml", ".yml", ".cfg", ".ini", ""}
MARKER = re.compile(r"^(<{7}|>{7})( |$)", re.M)


def text_files():
    for folder, dirs, files in os.walk(ROOT):
        dirs[:] = [d for d in dirs if d not in SKIP and not d.endswith(".egg-info")]
        for name in files:
            path = Path(folder, name)
            if path.suffix in TEXT and path.stat().st_size < 5_000_000:
                yield path


def test_no_file_keeps_a_merge_conflict_marker():
    found = []
    for path in text_files():
        text = path.read_text(errors="replace")
        found += [f"{path.relative_to(ROOT)}:{text.count(chr(10), 0, m.start()) + 1}" for m in MARKER.finditer(text)]
    assert not found, "conflict markers left at " + ", ".join(found)
