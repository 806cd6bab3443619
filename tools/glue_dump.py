"""Every glued text of a build's executed pages, to compare two builds (a refactoring must not move a glued value).

    python tools/glue_dump.py book/_generated > before.json      # after a build
    python tools/glue_dump.py book/_generated --diff before.json  # after the change: the keys whose text moved

Reads each `*.ipynb` under the folder (workshop pages included) and collects myst-nb glue records (outputs whose
metadata has `scrapbook.name`), keyed `<page>::<key>`. Figures are compared by their glued text only: a figure's PNG
bytes depend on the matplotlib build, its caption is in the page's text.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def glue_texts(folder: Path) -> dict[str, str]:
    out: dict[str, str] = {}
    for path in sorted(folder.rglob("*.ipynb")):
        notebook = json.loads(path.read_text(encoding="utf-8"))
        page = path.relative_to(folder).with_suffix("").as_posix()
        for cell in notebook.get("cells", []):
            for output in cell.get("outputs", []):
                meta = output.get("metadata", {}).get("scrapbook")
                if not meta:
                    continue
                prefix = meta.get("mime_prefix", "")
                data = {k[len(prefix):]: v for k, v in output.get("data", {}).items()}
                text = data.get("text/plain", "")
                out[f"{page}::{meta['name']}"] = "".join(text) if isinstance(text, list) else text
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path, help="the executed pages (e.g. book/_generated)")
    parser.add_argument("--diff", type=Path, help="a dump of another build: print the keys whose text differs")
    args = parser.parse_args(argv)
    if not args.folder.is_dir():
        parser.error(f"{args.folder} is not a folder of executed pages (build the book first)")
    now = glue_texts(args.folder)
    if args.diff is None:
        json.dump(now, sys.stdout, indent=1, ensure_ascii=False, sort_keys=True)
        return 0
    before = json.loads(args.diff.read_text(encoding="utf-8"))
    moved = sorted(k for k in before.keys() & now.keys() if before[k] != now[k])
    for key in moved:
        print(f"{key}\n  before: {before[key]}\n  after:  {now[key]}")
    print(f"{len(before.keys() & now.keys())} keys in both: {len(moved)} moved; only before: "
          f"{len(before.keys() - now.keys())}; only after: {len(now.keys() - before.keys())}")
    for key in sorted(before.keys() ^ now.keys()):
        print(("  - " if key in before else "  + ") + key)
    return 1 if moved else 0


if __name__ == "__main__":
    raise SystemExit(main())
