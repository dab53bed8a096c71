"""The JSON documents' pages (docs/json/<kind>.md) as data, and a check of a
real document against its page, so that a page and the tools' output cannot
drift apart.

A page names its format in its title (`oarbank.<kind>/<n>`) and describes
each object in a section whose heading holds its path in backticks: `$` for
the document, `$.member` for an object member, `$.member[]` for the objects
of an array, `$.member.*` for the objects of a map. Each section has one
table, | member | type | present | meaning |, one row per member:

- type: `string`, `integer`, `number`, `boolean`, `null`, `object` (its
  own section), `array of T`, `map of T` (an object whose names are data),
  `policy` (a policy, oarbank-policy(5)), `any`; alternatives joined by
  ` or `.
- present: `always`, or the condition under which the member is there.

A document passes when every object it holds has its section, every
`always` member is there, no member is missing from its table, and each
value has its documented type. Adding a member to a tool's output is a
one-row change to its page.
"""
from __future__ import annotations

import pathlib
import re

DOCS = pathlib.Path(__file__).resolve().parent.parent / "docs" / "json"
_FORMAT = re.compile(r"`(oarbank\.[a-z-]+/\d+)`")
_PATH = re.compile(r"`(\$[^`]*)`")


class Page:
    def __init__(self, kind: str):
        self.path = DOCS / f"{kind}.md"
        text = self.path.read_text()
        first = text.splitlines()[0]
        m = _FORMAT.search(first)
        assert first.startswith("# ") and m, f"{self.path}: the title names no `oarbank.<kind>/<n>`"
        self.format = m.group(1)
        self.objects: dict[str, dict[str, tuple[str, str]]] = {}  # path -> member -> (type, present)
        self.seen: set[str] = set()  # the sections check() has met, and "path.member" of each member met
        section = None
        for line in text.splitlines():
            if line.startswith("#"):
                p = _PATH.search(line)
                section = p.group(1) if p else None
                if section is not None:
                    assert section not in self.objects, f"{self.path}: {section} described twice"
                    self.objects[section] = {}
                continue
            if section is None or not line.startswith("|"):
                continue
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if cells[0] in ("member", "") or set(cells[0]) <= set("-: "):
                continue
            assert len(cells) >= 4, f"{self.path}: {section}: a row needs member | type | present | meaning: {line}"
            name = cells[0].strip("`")
            assert name not in self.objects[section], f"{self.path}: {section}.{name} described twice"
            self.objects[section][name] = (cells[1], cells[2])
        assert "$" in self.objects, f"{self.path}: no section for the document itself (`$`)"
        assert self.objects["$"].get("format", ("", ""))[1] == "always", f"{self.path}: `format` must be always there"

    def check(self, doc) -> list[str]:
        """What in `doc` disagrees with the page (empty when nothing)."""
        problems: list[str] = []
        if not isinstance(doc, dict):
            return [f"the document is {type(doc).__name__}, not an object"]
        if doc.get("format") != self.format:
            problems.append(f"$.format is {doc.get('format')!r}, documented {self.format!r}")
        self._object("$", doc, problems)
        return problems

    def _object(self, path: str, obj: dict, problems: list[str]) -> None:
        members = self.objects.get(path)
        if members is None:
            problems.append(f"{path}: an object no section of {self.path.name} describes")
            return
        self.seen.add(path)
        self.seen.update(f"{path}.{name}" for name in obj)
        for name, (_, present) in members.items():
            if present == "always" and name not in obj:
                problems.append(f"{path}.{name}: documented as always there, missing")
        for name, value in obj.items():
            if name not in members:
                problems.append(f"{path}.{name}: not documented")
                continue
            self._value(f"{path}.{name}", members[name][0], value, problems)

    def _value(self, path: str, type_: str, value, problems: list[str]) -> None:
        for alt in (a.strip() for a in type_.split(" or ")):
            if self._matches(alt, value):
                self._descend(path, alt, value, problems)
                return
        problems.append(f"{path}: {type(value).__name__} {str(value)[:80]!r} is not {type_}")

    @staticmethod
    def _matches(alt: str, value) -> bool:
        if alt.startswith("array of "):
            return isinstance(value, list) and all(Page._matches(alt[len("array of "):], v) for v in value)
        if alt.startswith("map of "):
            return isinstance(value, dict) and all(Page._matches(alt[len("map of "):], v) for v in value.values())
        return {
            "string": lambda v: isinstance(v, str),
            "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
            "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
            "boolean": lambda v: isinstance(v, bool),
            "null": lambda v: v is None,
            "object": lambda v: isinstance(v, dict),
            "policy": lambda v: isinstance(v, dict),
            "any": lambda v: True,
        }.get(alt, lambda v: False)(value)

    def _descend(self, path: str, alt: str, value, problems: list[str]) -> None:
        if alt == "object":
            self._object(path, value, problems)
        elif alt.startswith("array of "):
            for v in value:
                self._descend(path + "[]", alt[len("array of "):], v, problems)
        elif alt.startswith("map of "):
            for v in value.values():
                self._descend(path + ".*", alt[len("map of "):], v, problems)


    def unseen(self) -> list[str]:
        """The sections and members no document check() met has held."""
        out = [p for p in self.objects if p not in self.seen]
        out += [f"{p}.{m}" for p, ms in self.objects.items() if p in self.seen for m in ms if f"{p}.{m}" not in self.seen]
        return out


def check(kind: str, doc, page: Page | None = None) -> None:
    """Asserts `doc` is what docs/json/<kind>.md describes."""
    page = page or Page(kind)
    problems = page.check(doc)
    assert not problems, f"{page.path.name}: " + "\n".join(problems)
