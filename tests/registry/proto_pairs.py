"""Generated Protobuf schema pairs (see `format_pairs.py`): a random message and one
evolution with its verdict in each direction."""

from __future__ import annotations

import copy
import random
from collections.abc import Callable
from dataclasses import dataclass

from .format_pairs import Pair

GROUPS = [["int32", "int64", "uint32", "uint64", "bool"], ["sint32", "sint64"],
          ["string", "bytes"], ["fixed32", "sfixed32"], ["fixed64", "sfixed64"], ["float"],
          ["double"]]
SCALARS = [kind for group in GROUPS for kind in group]


@dataclass
class Field:
    kind: str
    name: str
    number: int
    repeated: bool = False
    oneof: str | None = None
    required: bool = False

    def label(self, proto2: bool) -> str:
        if self.kind.startswith("map<"):
            return ""
        if self.repeated:
            return "repeated "
        if self.required:
            return "required "
        return "optional " if proto2 else ""


@dataclass
class Message:
    package: str
    fields: list[Field]
    extra_messages: list[str]
    proto2: bool = False

    def render(self) -> str:
        lines = ['syntax = "proto2";' if self.proto2 else 'syntax = "proto3";',
                 f"package {self.package};", "message M {"]
        oneofs: dict[str, list[Field]] = {}
        for f in self.fields:
            if f.oneof:
                oneofs.setdefault(f.oneof, []).append(f)
                continue
            lines.append(f"  {f.label(self.proto2)}{f.kind} {f.name} = {f.number};")
        for name, members in oneofs.items():
            lines.append(f"  oneof {name} {{")
            lines += [f"    {f.kind} {f.name} = {f.number};" for f in members]
            lines.append("  }")
        lines.append("}")
        for name in self.extra_messages:
            label = "optional " if self.proto2 else ""
            lines.append(f"message {name} {{ {label}string note = 1; }}")
        lines.append("enum Colour { RED = 0; GREEN = 1; }")
        return "\n".join(lines) + "\n"


def _proto_message(rng: random.Random) -> Message:
    count = rng.randint(3, 7)
    fields = [Field(rng.choice(SCALARS), f"f{i}", i + 1, repeated=rng.random() < 0.2)
              for i in range(count)]
    proto2 = rng.random() < 0.15
    if proto2:
        fields.append(Field("int32", "id", 99, required=True))
    return Message(package=rng.choice(["mill", "mill.v1", "a.b.c"]), fields=fields,
                   extra_messages=["Extra", "Other"], proto2=proto2)


def _plain(rng: random.Random, m: Message, repeated: bool | None = False) -> Field:
    choices = [f for f in m.fields if f.oneof is None and not f.required and (
        repeated is None or f.repeated == repeated)]
    if not choices:
        f = Field("int32", "extra_plain", 50)
        m.fields.append(f)
        return f
    return rng.choice(choices)


ProtoChange = Callable[[random.Random, Message, Message], None]


def _same_field(change: Callable[[random.Random, Field], None],
                kinds: list[str] | None = None, repeated: bool | None = False) -> ProtoChange:
    def apply(rng: random.Random, old: Message, new: Message) -> None:
        field = _plain(rng, old, repeated)
        if kinds is not None:
            field.kind = rng.choice(kinds)
        twin = next(f for f in new.fields if f.number == field.number)
        twin.kind, twin.repeated = field.kind, field.repeated
        change(rng, twin)

    return apply


def _in_group(rng: random.Random, f: Field) -> None:
    group = next(g for g in GROUPS if f.kind in g)
    f.kind = rng.choice([k for k in group if k != f.kind])


def _across_group(rng: random.Random, f: Field) -> None:
    group = next(g for g in GROUPS if f.kind in g)
    f.kind = rng.choice([k for k in SCALARS if k not in group])


def _sync(old: Message, new: Message) -> None:
    new.fields = copy.deepcopy(old.fields)


def _add_field(rng: random.Random, old: Message, new: Message) -> None:
    new.fields.append(Field(rng.choice(SCALARS), "added", 40))


def _remove_field(rng: random.Random, old: Message, new: Message) -> None:
    victim = _plain(rng, old, None)
    new.fields = [f for f in new.fields if f.number != victim.number]


def _renumber(rng: random.Random, old: Message, new: Message) -> None:
    victim = _plain(rng, old, None)
    next(f for f in new.fields if f.number == victim.number).number = 60


def _to_oneof(count: int, existing: bool) -> ProtoChange:
    def apply(rng: random.Random, old: Message, new: Message) -> None:
        plain = [f for f in old.fields if f.oneof is None and not f.repeated and not f.required]
        while len(plain) < count + (1 if existing else 0):
            extra = Field("int32", f"pad{len(plain)}", 70 + len(plain))
            old.fields.append(extra)
            plain.append(extra)
        if existing:
            plain[-1].oneof = "choice"
            plain = plain[:-1]
        _sync(old, new)
        movers = {f.number for f in rng.sample(plain, count)}
        for f in new.fields:
            if f.number in movers:
                f.oneof = "choice"

    return apply


def _oneof_gains(rng: random.Random, old: Message, new: Message) -> None:
    old.fields.append(Field("string", "either", 80, oneof="choice"))
    old.fields.append(Field("int64", "or_else", 81, oneof="choice"))
    _sync(old, new)
    new.fields.append(Field("bytes", "third", 82, oneof="choice"))


def _drop_message(rng: random.Random, old: Message, new: Message) -> None:
    new.extra_messages = ["Extra"]


def _kind_to_message(rng: random.Random, old: Message, new: Message) -> None:
    victim = _plain(rng, old)
    next(f for f in new.fields if f.number == victim.number).kind = "Extra"


def _named_type(rng: random.Random, old: Message, new: Message) -> None:
    old.fields.append(Field("Extra", "ref", 90))
    _sync(old, new)
    new.fields[-1].kind = "Other"


def _package(rng: random.Random, old: Message, new: Message) -> None:
    new.package = "moved.elsewhere"


def _rename(rng: random.Random, old: Message, new: Message) -> None:
    victim = _plain(rng, old, None)
    next(f for f in new.fields if f.number == victim.number).name = "renamed"


def _map_value(kinds_same: bool) -> ProtoChange:
    def apply(rng: random.Random, old: Message, new: Message) -> None:
        value = rng.choice(["int32", "string", "sint64", "fixed32"])
        old.fields.append(Field(f"map<string, {value}>", "tags", 95))
        _sync(old, new)
        group = next(g for g in GROUPS if value in g)
        other = [k for k in group if k != value] if kinds_same else [
            k for k in SCALARS if k not in group]
        new.fields[-1].kind = f"map<string, {rng.choice(other)}>"

    return apply


def _add_required(rng: random.Random, old: Message, new: Message) -> None:
    old.proto2 = new.proto2 = True
    new.fields.append(Field("int32", "must", 45, required=True))


# (rule, change, backward, forward)
PROTO_EVOLUTIONS: list[tuple[str, ProtoChange, bool, bool]] = [
    ("field renamed", _rename, True, True),
    ("scalar changed within its group",
     _same_field(_in_group, [k for g in GROUPS if len(g) > 1 for k in g]), True, True),
    ("scalar changed across groups", _same_field(_across_group), False, False),
    ("field added", _add_field, True, True),
    ("field removed", _remove_field, True, True),
    ("field renumbered", _renumber, True, True),
    ("string or bytes became repeated",
     _same_field(lambda r, f: setattr(f, "repeated", True), ["string", "bytes"]), True, True),
    ("number became repeated",
     _same_field(lambda r, f: setattr(f, "repeated", True), ["int32", "double", "sint64"]),
     False, False),
    ("scalar became a message", _kind_to_message, False, False),
    ("message removed", _drop_message, False, True),
    ("one field moved into a new oneof", _to_oneof(1, existing=False), True, True),
    ("two fields moved into a new oneof", _to_oneof(2, existing=False), False, True),
    ("field moved into an existing oneof", _to_oneof(1, existing=True), False, True),
    ("oneof gained a field", _oneof_gains, True, False),
    ("message field names another message", _named_type, False, False),
    ("package changed", _package, True, True),
    ("map value within its group", _map_value(True), True, True),
    ("map value across groups", _map_value(False), False, False),
    ("proto2 required field added", _add_required, False, False),
]


def proto_pair(seed: int) -> Pair:
    rng = random.Random(seed)
    rule, change, backward, forward = PROTO_EVOLUTIONS[seed % len(PROTO_EVOLUTIONS)]
    old = _proto_message(rng)
    new = copy.deepcopy(old)
    change(rng, old, new)
    return Pair(rule, old.render(), new.render(), backward, forward)
