"""Writing a generated file, or checking it is current (``--check``), for the scripts
that generate files from the catalogue."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def write_or_check(out: Path, text: str, argv: list[str], script: str) -> int:
    """``--check`` in ``argv``: exit status 1 (and say so) if ``out`` is not ``text``;
    else write it."""
    if "--check" in argv:
        if not out.exists() or out.read_text(encoding="utf-8") != text:
            print(f"{out.relative_to(ROOT)} is not current: python scripts/{script}")
            return 1
        return 0
    out.write_text(text, encoding="utf-8")
    print(f"wrote {out.relative_to(ROOT)}")
    return 0
