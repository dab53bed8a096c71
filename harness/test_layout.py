"""The source tree's layering (sandbox/README.md): every component's code
includes only its own headers and those of the components it may use, and
the table of allowed uses has no cycle."""

import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parent.parent
SANDBOX = ROOT / "sandbox"
INCLUDE = re.compile(r'^#include "sandbox/([a-z_]+)/', re.M)


def allowed_uses():
    """The arrows block of sandbox/README.md: {folder: {folders it may use}}."""
    text = (SANDBOX / "README.md").read_text()
    block = text.split("## Which component may use which", 1)[1].split("```")[1]
    uses = {}
    for line in block.strip().splitlines():
        name, _, rest = line.partition("->")
        name = name.split("<-")[0].strip()
        uses[name] = {u.strip() for u in rest.split(",") if u.strip()}
    return uses


def closure(uses, folder):
    seen, todo = set(), [folder]
    while todo:
        for used in uses.get(todo.pop(), ()):
            if used not in seen:
                seen.add(used)
                todo.append(used)
    return seen


def test_every_folder_is_in_the_table():
    folders = {p.name for p in SANDBOX.iterdir() if p.is_dir()} - {"testing"}
    assert folders == set(allowed_uses())


def test_the_table_has_no_cycle():
    uses = allowed_uses()
    for folder in uses:
        assert folder not in closure(uses, folder), f"{folder} uses itself through {closure(uses, folder)}"


def test_common_uses_nothing():
    assert allowed_uses()["common"] == set()


def test_every_include_follows_the_table():
    uses = allowed_uses()
    wrong = []
    for folder in uses:
        may = closure(uses, folder) | {folder}
        for source in sorted((SANDBOX / folder).glob("*")):
            if source.suffix not in (".h", ".cc") or source.stem.endswith(("_test", "_fuzz")):
                continue
            for used in INCLUDE.findall(source.read_text()):
                if used not in may:
                    wrong.append(f"{source.relative_to(ROOT)} includes sandbox/{used}/")
    assert wrong == []


def test_includes_are_written_from_the_repository_root():
    """A bare "name.h" could resolve to another folder's header once installed."""
    bare = []
    for source in sorted(SANDBOX.rglob("*")):
        if source.suffix not in (".h", ".cc"):
            continue
        for line in source.read_text().splitlines():
            m = re.match(r'#include "([^"]+)"', line)
            if m and not m.group(1).startswith(("sandbox/", "oarbank/")):
                bare.append(f"{source.relative_to(ROOT)}: {line}")
    assert bare == []


def test_no_source_is_over_700_lines():
    """One file, one responsibility: a source (tests apart) past 700 lines
    holds more than one and is split by them."""
    long = []
    for folder in (SANDBOX, ROOT / "harness", ROOT / "include"):
        for source in sorted(folder.rglob("*")):
            if source.suffix not in (".h", ".cc") or source.stem.endswith(("_test", "_fuzz")):
                continue
            lines = source.read_text().count("\n")
            if lines > 700:
                long.append(f"{source.relative_to(ROOT)}: {lines} lines")
    assert long == []
