""".proto text to `FileDescriptorProto`s with protoc (grpcio-tools), in this process.

protoc reads files: the schema and every file it imports through references are written
to a fresh temporary directory under their import paths, and the well-known types
(`google/protobuf/*.proto`, shipped with grpcio-tools, `google/type/*.proto`, shipped
with googleapis-common-protos, and Confluent's `confluent/meta.proto` and
`confluent/type/decimal.proto`, written out from `CONFLUENT_FILES`) come from include paths
after it, so a reference of the same name wins. protoc writes its errors to file
descriptor 2; `_captured_stderr` points that descriptor at a file for the call (under a
lock: it is the process's), and whatever else the process wrote meanwhile is passed on to
the real stderr afterwards.
"""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
import threading
from collections.abc import Mapping
from pathlib import Path

from google.protobuf import descriptor_pb2
from google.protobuf.message import DecodeError

from registry.errors import invalid_schema

SCHEMA_FILE = "schema.proto"  # the name the registered schema itself is compiled under
_lock = threading.Lock()
_builtin_cache: dict[str, descriptor_pb2.FileDescriptorProto] = {}


_includes: list[str] = []

# Confluent's own imports, which its clients treat as built in (confluent-kafka's serializer
# registers no reference for anything under `confluent/`) and its Connect converter writes:
# `confluent.type.Decimal` for Connect's Decimal, and the `confluent.field_meta` option in
# which the field's precision and scale go. Declared here as Confluent declares them (same
# packages, names, numbers and types), so descriptors built from either agree on the wire.
CONFLUENT_FILES = {
    "confluent/meta.proto": """syntax = "proto3";
package confluent;
import "google/protobuf/descriptor.proto";
option go_package = "../confluent";
message Meta {
  string doc = 1;
  map<string, string> params = 2;
  repeated string tags = 3;
  repeated Rule rules = 4;
}
message Rule {
  string name = 1;
  string doc = 2;
  string expr = 3;
  string sql = 4;
}
extend google.protobuf.FileOptions { Meta file_meta = 1088; }
extend google.protobuf.MessageOptions { Meta message_meta = 1088; }
extend google.protobuf.FieldOptions { Meta field_meta = 1088; }
extend google.protobuf.EnumOptions { Meta enum_meta = 1088; }
extend google.protobuf.EnumValueOptions { Meta enum_value_meta = 1088; }
""",
    "confluent/type/decimal.proto": """syntax = "proto3";
package confluent.type;
option go_package = "../confluent/type";
// The unscaled number is `value`, big-endian two's complement; the number is
// value * 10^-scale, with `precision` digits.
message Decimal {
  bytes value = 1;
  uint32 precision = 2;
  int32 scale = 3;
}
""",
}


def include_paths() -> list[str]:
    """grpcio-tools' `google/protobuf/*.proto`, and a directory of this process holding
    only googleapis-common-protos' `google/type/*.proto` (its package directory holds
    everything else installed beside it, which an import must not reach) and
    `CONFLUENT_FILES`."""
    with _lock:
        if not _includes:
            import google.type
            import grpc_tools

            own = Path(tempfile.mkdtemp(prefix="millrace-proto-include-"))
            atexit.register(shutil.rmtree, own, ignore_errors=True)
            (own / "google" / "type").mkdir(parents=True)
            for source in Path(next(iter(google.type.__path__))).glob("*.proto"):
                shutil.copyfile(source, own / "google" / "type" / source.name)
            for name, text in CONFLUENT_FILES.items():
                (own / name).parent.mkdir(parents=True, exist_ok=True)
                (own / name).write_text(text, encoding="utf-8")
            _includes.extend([str(Path(grpc_tools.__file__).parent / "_proto"), str(own)])
    return list(_includes)


def is_builtin(name: str) -> bool:
    return name.startswith(("google/protobuf/", "google/type/")) or name in CONFLUENT_FILES


def compile_text(
    text: str, files: Mapping[str, str]
) -> tuple[descriptor_pb2.FileDescriptorProto, list[descriptor_pb2.FileDescriptorProto]]:
    """The schema's descriptor and those of every file it imports (dependencies first).

    `files` maps import paths to .proto text; a syntax or type error is a 42201 carrying
    protoc's message."""
    if not text.strip():
        raise invalid_schema("the schema is empty")
    includes = include_paths()
    with tempfile.TemporaryDirectory(prefix="millrace-proto-") as directory:
        root = Path(directory)
        main = SCHEMA_FILE if SCHEMA_FILE not in files else f"millrace-{SCHEMA_FILE}"
        for name, content in {**files, main: text}.items():
            if not name or name.endswith("/") or ".." in Path(name).parts or Path(
                    name).is_absolute():
                raise invalid_schema(f"import path {name!r} is not a relative file path")
            path = root / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(content, encoding="utf-8")
        out = root / "__descriptors__.pb"
        arguments = ["protoc", f"-I{root}", *(f"-I{p}" for p in includes),
                     f"--descriptor_set_out={out}", "--include_imports", str(root / main)]
        code, errors = _run(arguments)
        if code != 0:
            message = errors.replace(f"{root}/", "").strip() or "protoc failed"
            raise invalid_schema(message)
        found = descriptor_pb2.FileDescriptorSet()
        found.ParseFromString(out.read_bytes())
    *dependencies, schema = found.file
    return schema, dependencies


def builtin(name: str) -> descriptor_pb2.FileDescriptorProto:
    """The descriptor of a well-known file (`google/protobuf/timestamp.proto`), compiled once."""
    found = _builtin_cache.get(name)
    if found is None:
        if not is_builtin(name):
            raise invalid_schema(f"no reference for the import {name}")
        _, dependencies = compile_text(f'syntax = "proto3";\nimport "{name}";\n', {})
        for dependency in dependencies:
            _builtin_cache[dependency.name] = dependency
        found = _builtin_cache[name]
    return found


def decode(serialized: bytes) -> descriptor_pb2.FileDescriptorProto:
    descriptor = descriptor_pb2.FileDescriptorProto()
    try:
        descriptor.ParseFromString(serialized)
    except DecodeError as exc:
        raise invalid_schema(f"neither .proto text nor a FileDescriptorProto: {exc}") from exc
    return descriptor


def _run(arguments: list[str]) -> tuple[int, str]:
    """protoc's exit code and what it wrote to stderr; what other threads wrote to stderr
    meanwhile is written out again."""
    from grpc_tools import protoc

    with _lock, tempfile.TemporaryFile() as sink:
        saved = os.dup(2)
        os.dup2(sink.fileno(), 2)
        try:
            code = protoc.main(arguments)
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        sink.seek(0)
        written = sink.read().decode("utf-8", "replace").splitlines(keepends=True)
    written = [line for line in written if "absl::InitializeLog" not in line]  # absl's notice
    ours = [line for line in written if ".proto" in line or "protoc" in line]
    others = "".join(line for line in written if line not in ours)
    if others:
        sys.stderr.write(others)
    return int(code), "".join(ours)
