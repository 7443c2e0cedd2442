#!/usr/bin/env python3
"""Regenerates the trimmed API schemas in this folder from the vendors' API descriptions.

    python3 tests/conformance/generate.py [--out DIR] [SPECS_DIR]

SPECS_DIR defaults to $CONFORMANCE_SPECS, then ../shared/conformance/specs beside the
repository; DIR (where the files are written) defaults to this folder. Needs PyYAML. The output (openai.json, anthropic.json, gemini.json, ollama.json) is
committed, so the tests need neither this script nor the specs; run it again when a vendor's
description changes, and review the diff.

Each output file holds one self-contained JSON Schema (draft 2020-12) per kind of body upkeep
sends or reads: "request", "stream_chunk" (one event's data), "response" (a whole, non-streamed
answer) and "error". Only the definitions those reach are kept, without descriptions and
examples.

- OpenAI: CreateChatCompletionRequest, CreateChatCompletionStreamResponse,
  CreateChatCompletionResponse and ErrorResponse from openapi.yaml (OpenAPI 3.1; its leftover
  `nullable: true` is turned into a null alternative).
- Anthropic: messages.schema.json's request (MessageCreateParamsNonStreaming, with `stream`
  turned to `true`: the SDK's MessageCreateParamsStreaming differs in that field alone), its
  Message and ErrorResponse. The stream events are not in that file; they are written here from
  the same SDK's RawMessageStreamEvent types (raw_message_start_event.py,
  raw_content_block_{start,delta,stop}_event.py, raw_message_delta_event.py,
  message_delta_usage.py, raw_message_stop_event.py, text_delta.py and the other deltas), plus
  the `ping` and `error` events of the streaming documentation, around the file's Message.
- Gemini: GenerateContentRequest and GenerateContentResponse derived from the protos under the
  proto3 JSON mapping: lowerCamelCase names (the proto name is accepted too), enums as names or
  numbers, 64-bit integers as numbers or strings, well-known types as their JSON forms, unknown
  fields refused (as Google's API does), `REQUIRED` fields required in requests, at most one
  field of a oneof. `model` is bound to the URL path, so it is not part of the request body.
- Ollama: ChatRequest, ChatStreamEvent, ChatResponse and ErrorResponse from openapi.yaml.
"""

import copy
import json
import os
import re
import sys
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
DRAFT = "https://json-schema.org/draft/2020-12/schema"
DROPPED_KEYS = {"description", "example", "examples", "title", "deprecated", "x-oaiMeta", "x-stainless-const"}


def arguments():
    """(specs folder given, output folder)."""
    args = sys.argv[1:]
    out = HERE
    if len(args) >= 2 and args[0] == "--out":
        out = Path(args[1])
        args = args[2:]
    return (Path(args[0]) if args else None), out


def specs_dir(given):
    if given is not None:
        return given
    if os.environ.get("CONFORMANCE_SPECS"):
        return Path(os.environ["CONFORMANCE_SPECS"])
    return HERE.parent.parent.parent / "shared" / "conformance" / "specs"


# Keywords whose value maps names (of properties, definitions) to schemas: their keys are
# names, not keywords, and are kept whatever they are called.
NAMED_SCHEMAS = {"properties", "$defs", "definitions", "patternProperties", "dependentSchemas"}


def strip(node):
    """Drops documentation keys and vendor extensions from every schema, recursively."""
    if isinstance(node, dict):
        kept = {}
        for key, value in node.items():
            if key in DROPPED_KEYS or key.startswith("x-"):
                continue
            if key in NAMED_SCHEMAS and isinstance(value, dict):
                kept[key] = {name: strip(schema) for name, schema in value.items()}
            else:
                kept[key] = strip(value)
        return kept
    if isinstance(node, list):
        return [strip(item) for item in node]
    return node


def refs(node, found):
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str):
            found.add(ref.rsplit("/", 1)[-1])
        for value in node.values():
            refs(value, found)
    elif isinstance(node, list):
        for item in node:
            refs(item, found)


def closure(defs, roots):
    """The names of `roots` and of every definition they reach."""
    seen, todo = set(), list(roots)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        found = set()
        refs(defs[name], found)
        todo.extend(found - seen)
    return sorted(seen)


def document(defs, root):
    """A self-contained schema for `root` with the definitions it reaches."""
    names = closure(defs, [root])
    return {"$schema": DRAFT, "$defs": {name: defs[name] for name in names}, "$ref": f"#/$defs/{root}"}


# --- OpenAPI (OpenAI, Ollama) ------------------------------------------------------------------


def openapi_to_json_schema(node):
    """`#/components/schemas/X` -> `#/$defs/X`; `nullable: true` -> a null alternative."""
    if isinstance(node, list):
        return [openapi_to_json_schema(item) for item in node]
    if not isinstance(node, dict):
        return node
    node = {key: openapi_to_json_schema(value) for key, value in node.items()}
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/components/schemas/"):
        node["$ref"] = "#/$defs/" + ref.rsplit("/", 1)[-1]
    if node.pop("nullable", False) is True:
        if isinstance(node.get("type"), str):
            node["type"] = [node["type"], "null"]
            if "enum" in node and None not in node["enum"]:
                node["enum"] = node["enum"] + [None]
        else:
            node = {"anyOf": [node, {"type": "null"}]}
    return node


def openapi_defs(path):
    spec = yaml.safe_load(path.read_text())
    return {name: openapi_to_json_schema(strip(schema)) for name, schema in spec["components"]["schemas"].items()}


def openai(specs):
    defs = openapi_defs(specs / "openai" / "openapi.yaml")
    return {
        "$comment": "Generated by generate.py from openai/openapi.yaml; do not edit.",
        "request": document(defs, "CreateChatCompletionRequest"),
        "stream_chunk": document(defs, "CreateChatCompletionStreamResponse"),
        "response": document(defs, "CreateChatCompletionResponse"),
        "error": document(defs, "ErrorResponse"),
    }


def ollama(specs):
    defs = openapi_defs(specs / "ollama" / "openapi.yaml")
    return {
        "$comment": "Generated by generate.py from ollama/openapi.yaml; do not edit.",
        "request": document(defs, "ChatRequest"),
        "stream_chunk": document(defs, "ChatStreamEvent"),
        "response": document(defs, "ChatResponse"),
        "error": document(defs, "ErrorResponse"),
    }


# --- Anthropic ---------------------------------------------------------------------------------


def anthropic(specs):
    derived = json.loads((specs / "anthropic" / "messages.schema.json").read_text())
    request = strip(copy.deepcopy(derived["request"]))
    request["properties"]["stream"] = {"type": "boolean", "const": True}
    request["$schema"] = DRAFT

    message = strip(copy.deepcopy(derived["response"]))
    defs = message.pop("$defs")
    defs["Message"] = message
    content_block = message["properties"]["content"]["items"]
    nullable_int = {"anyOf": [{"type": "integer"}, {"type": "null"}]}

    def event(kind, properties, required=()):
        return {
            "type": "object",
            "properties": {"type": {"type": "string", "const": kind}, **properties},
            "required": ["type", *required],
        }

    def delta(kind, field):
        return event(kind, {field: {"type": "string"}}, [field])

    defs.update(
        {
            "MessageStartEvent": event("message_start", {"message": {"$ref": "#/$defs/Message"}}, ["message"]),
            "ContentBlockStartEvent": event(
                "content_block_start",
                {"index": {"type": "integer"}, "content_block": content_block},
                ["index", "content_block"],
            ),
            "ContentBlockDeltaEvent": event(
                "content_block_delta",
                {
                    "index": {"type": "integer"},
                    "delta": {
                        "anyOf": [
                            delta("text_delta", "text"),
                            delta("input_json_delta", "partial_json"),
                            delta("thinking_delta", "thinking"),
                            delta("signature_delta", "signature"),
                            event("citations_delta", {"citation": {"type": "object"}}, ["citation"]),
                        ]
                    },
                },
                ["index", "delta"],
            ),
            "ContentBlockStopEvent": event("content_block_stop", {"index": {"type": "integer"}}, ["index"]),
            "MessageDeltaEvent": event(
                "message_delta",
                {
                    "delta": {
                        "type": "object",
                        "properties": {
                            "stop_reason": message["properties"]["stop_reason"],
                            "stop_sequence": {"anyOf": [{"type": "string"}, {"type": "null"}]},
                        },
                    },
                    "usage": {
                        "type": "object",
                        "properties": {
                            "output_tokens": {"type": "integer"},
                            "input_tokens": nullable_int,
                            "cache_creation_input_tokens": nullable_int,
                            "cache_read_input_tokens": nullable_int,
                        },
                        "required": ["output_tokens"],
                    },
                },
                ["delta", "usage"],
            ),
            "MessageStopEvent": event("message_stop", {}),
            "PingEvent": event("ping", {}),
        }
    )
    error = strip(copy.deepcopy(derived["error"]))
    error_defs = error.pop("$defs", {})
    defs.update(error_defs)
    defs["ErrorResponse"] = error
    events = [
        "MessageStartEvent",
        "ContentBlockStartEvent",
        "ContentBlockDeltaEvent",
        "ContentBlockStopEvent",
        "MessageDeltaEvent",
        "MessageStopEvent",
        "PingEvent",
        "ErrorResponse",
    ]
    stream_defs = {name: defs[name] for name in closure(defs, events)}
    return {
        "$comment": "Generated by generate.py from anthropic/messages.schema.json; do not edit.",
        "request": request,
        "stream_chunk": {"$schema": DRAFT, "$defs": stream_defs, "anyOf": [{"$ref": f"#/$defs/{e}"} for e in events]},
        "response": {"$schema": DRAFT, "$defs": {n: defs[n] for n in closure(defs, ["Message"])}, "$ref": "#/$defs/Message"},
        "error": {"$schema": DRAFT, "$defs": error_defs, **error},
    }


# --- Gemini: protobuf to JSON Schema under the proto3 JSON mapping -----------------------------

TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[A-Za-z_][A-Za-z0-9_.]*|-?\d+|[{}\[\]()<>;=,]')
SCALARS = {
    "double": {"type": "number"},
    "float": {"type": "number"},
    "int32": {"type": "integer"},
    "uint32": {"type": "integer"},
    "sint32": {"type": "integer"},
    "fixed32": {"type": "integer"},
    "sfixed32": {"type": "integer"},
    "int64": {"type": ["integer", "string"]},
    "uint64": {"type": ["integer", "string"]},
    "sint64": {"type": ["integer", "string"]},
    "fixed64": {"type": ["integer", "string"]},
    "sfixed64": {"type": ["integer", "string"]},
    "bool": {"type": "boolean"},
    "string": {"type": "string"},
    "bytes": {"type": "string"},
}
WELL_KNOWN = {
    "google.protobuf.Struct": {"type": "object"},
    "google.protobuf.Value": {},
    "google.protobuf.ListValue": {"type": "array"},
    "google.protobuf.Duration": {"type": "string", "pattern": r"^-?\d+(\.\d+)?s$"},
    "google.protobuf.Timestamp": {"type": "string"},
    "google.protobuf.FieldMask": {"type": "string"},
    "google.protobuf.Empty": {"type": "object", "additionalProperties": False},
    "google.protobuf.Any": {"type": "object", "required": ["@type"]},
}


def tokens(text):
    text = re.sub(r"//[^\n]*", "", text)
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    return TOKEN.findall(text)


class Proto:
    def __init__(self):
        self.messages = {}  # full name -> {"fields": [...], "oneofs": {...}}
        self.enums = {}  # full name -> [value names]

    def load(self, path):
        toks = tokens(path.read_text())
        package = ""
        i = 0
        while i < len(toks):
            tok = toks[i]
            if tok == "package":
                package = toks[i + 1]
                i += 3
            elif tok in ("syntax", "import", "option"):
                i = toks.index(";", i) + 1
            elif tok == "message":
                i = self.message(toks, i, package)
            elif tok == "enum":
                i = self.enum(toks, i, package)
            elif tok == "service":
                i = skip_block(toks, toks.index("{", i))
            else:
                i += 1

    def enum(self, toks, i, scope):
        name = f"{scope}.{toks[i + 1]}"
        i += 3
        values = []
        while toks[i] != "}":
            if toks[i] in ("option", "reserved"):
                i = toks.index(";", i) + 1
                continue
            values.append(toks[i])
            i = toks.index(";", i) + 1
        self.enums[name] = values
        return i + 1

    def message(self, toks, i, scope):
        name = f"{scope}.{toks[i + 1]}"
        info = {"fields": [], "oneofs": {}, "scope": name}
        self.messages[name] = info
        i += 3
        oneof = None
        while True:
            tok = toks[i]
            if tok == "}":
                if oneof is not None:
                    oneof = None
                    i += 1
                    continue
                return i + 1
            if tok == "message":
                i = self.message(toks, i, name)
            elif tok == "enum":
                i = self.enum(toks, i, name)
            elif tok in ("option", "reserved", "extensions"):
                i = toks.index(";", i) + 1
            elif tok == "oneof":
                oneof = toks[i + 1]
                info["oneofs"][oneof] = []
                i += 3
            else:
                i = self.field(toks, i, info, oneof)

    def field(self, toks, i, info, oneof):
        label = None
        if toks[i] in ("optional", "repeated"):
            label = toks[i]
            i += 1
        if toks[i] == "map":
            key, value = toks[i + 2], toks[i + 4]
            kind = ("map", key, value)
            i += 6
        else:
            kind = toks[i]
            i += 1
        name = toks[i]
        end = toks.index(";", i)
        options = toks[i:end]
        required = "REQUIRED" in options and "field_behavior" in " ".join(options)
        info["fields"].append({"name": name, "kind": kind, "label": label, "required": required})
        if oneof is not None:
            info["oneofs"][oneof].append(name)
        return end + 1

    def resolve(self, kind, scope):
        """The full name of type `kind` used inside `scope`, by protobuf's scoping rules."""
        if kind in WELL_KNOWN:
            return kind
        parts = scope.split(".")
        while parts:
            candidate = ".".join(parts + [kind])
            if candidate in self.messages or candidate in self.enums:
                return candidate
            parts.pop()
        if kind in self.messages or kind in self.enums:
            return kind
        raise KeyError(f"unknown type {kind} in {scope}")


def skip_block(toks, i):
    depth = 0
    while True:
        if toks[i] == "{":
            depth += 1
        elif toks[i] == "}":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1


def camel(name):
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def def_name(full):
    return full.replace("google.ai.generativelanguage.v1beta.", "").replace(".", "_")


def gemini_document(proto, root, requests, drop_fields=()):
    defs = {}

    def type_schema(kind, scope):
        if isinstance(kind, tuple):
            return {"type": "object", "additionalProperties": type_schema(kind[2], scope)}
        if kind in SCALARS:
            return dict(SCALARS[kind])
        full = proto.resolve(kind, scope)
        if full in WELL_KNOWN:
            return dict(WELL_KNOWN[full])
        if full in proto.enums:
            return {"anyOf": [{"type": "string", "enum": proto.enums[full]}, {"type": "integer"}]}
        visit(full)
        return {"$ref": f"#/$defs/{def_name(full)}"}

    def visit(full):
        name = def_name(full)
        if name in defs:
            return
        defs[name] = {}
        info = proto.messages[full]
        properties, required = {}, []
        for field in info["fields"]:
            if full == root and field["name"] in drop_fields:
                continue
            schema = type_schema(field["kind"], full)
            if field["label"] == "repeated":
                schema = {"type": "array", "items": schema}
            json_name = camel(field["name"])
            properties[json_name] = schema
            if json_name != field["name"]:
                properties[field["name"]] = schema
            if requests and field["required"]:
                required.append(json_name)
        schema = {"type": "object", "properties": properties, "additionalProperties": False}
        if required:
            schema["required"] = required
        exclusive = []
        for members in info["oneofs"].values():
            names = [camel(member) for member in members]
            for a in range(len(names)):
                for b in range(a + 1, len(names)):
                    exclusive.append({"not": {"required": [names[a], names[b]]}})
        if exclusive:
            schema["allOf"] = exclusive
        defs[name] = schema

    visit(root)
    return {"$schema": DRAFT, "$defs": defs, "$ref": f"#/$defs/{def_name(root)}"}


def gemini(specs):
    proto = Proto()
    for path in sorted((specs / "gemini").rglob("*.proto")):
        proto.load(path)
    package = "google.ai.generativelanguage.v1beta"
    status = gemini_document(proto, "google.rpc.Status", requests=False)
    # AIP-193's JSON error adds `status`, the name of the google.rpc.Code in `code`.
    status["$defs"]["google_rpc_Status"]["properties"]["status"] = {"type": "string", "enum": proto.enums["google.rpc.Code"]}
    return {
        "$comment": "Generated by generate.py from the gemini/ protos (proto3 JSON mapping); do not edit.",
        "request": gemini_document(proto, f"{package}.GenerateContentRequest", requests=True, drop_fields=("model",)),
        "stream_chunk": gemini_document(proto, f"{package}.GenerateContentResponse", requests=False),
        "response": gemini_document(proto, f"{package}.GenerateContentResponse", requests=False),
        # AIP-193: the error body is {"error": google.rpc.Status plus `status`}.
        "error": {
            "$schema": DRAFT,
            "$defs": status["$defs"],
            "type": "object",
            "properties": {"error": {"$ref": status["$ref"]}},
            "required": ["error"],
            "additionalProperties": False,
        },
    }


def main():
    given, folder = arguments()
    specs = specs_dir(given)
    if not specs.is_dir():
        sys.exit(f"no API descriptions at {specs} (pass the folder, or set CONFORMANCE_SPECS)")
    for name, build in [("openai", openai), ("anthropic", anthropic), ("gemini", gemini), ("ollama", ollama)]:
        out = folder / f"{name}.json"
        out.write_text(json.dumps(build(specs), indent=1, sort_keys=True) + "\n")
        print(f"wrote {out} ({out.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
