"""The supported-ops listing, rendered from the specs (for `irrun ops` and the README)."""
from __future__ import annotations

from collections import defaultdict

from .registry import supported


def _by_type():
    types = defaultdict(list)
    categories = {}
    for (type_name, version), spec in supported().items():
        types[type_name].append(version)
        categories[type_name] = spec.category
    return types, categories


def ops_text() -> str:
    types, categories = _by_type()
    lines = [f"{t}-{v}" for t in sorted(types) for v in types[t]]
    lines.append(f"{len(lines)} operation versions ({len(types)} types)")
    return "\n".join(lines)


def ops_markdown() -> str:
    types, categories = _by_type()
    specs = supported()
    rows = ["| category | operation | versions | summary |", "|---|---|---|---|"]
    for t in sorted(types, key=lambda t: (categories[t], t)):
        summary = specs[(t, types[t][0])].summary
        rows.append(f"| {categories[t]} | {t} | {', '.join(str(v) for v in types[t])} | {summary} |")
    count = sum(len(v) for v in types.values())
    rows.append("")
    rows.append(f"{count} operation versions ({len(types)} types).")
    return "\n".join(rows)


def update_readme(path: str) -> None:
    """Rewrite the table between `<!-- ops:start -->` and `<!-- ops:end -->`."""
    import re
    from pathlib import Path

    readme = Path(path)
    text = readme.read_text(encoding="utf-8")
    block = "<!-- ops:start -->\n" + ops_markdown() + "\n<!-- ops:end -->"
    readme.write_text(re.sub(r"<!-- ops:start -->.*?<!-- ops:end -->", lambda _: block, text, flags=re.S),
                      encoding="utf-8")


if __name__ == "__main__":  # python -m irrun.opdocs README.md
    import sys

    update_readme(sys.argv[1] if len(sys.argv) > 1 else "README.md")
