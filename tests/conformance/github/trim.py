#!/usr/bin/env python3
"""Writes schemas.json beside this script: the request and response schemas of the GitHub REST
operations upkeep uses (and its test fake serves), cut from GitHub's published OpenAPI
description and turned into plain JSON Schema for the `jsonschema` crate.

Usage: python3 tests/conformance/github/trim.py [PATH/api.github.com(.trimmed).json]
(default: ../shared/conformance/specs/github/api.github.com.trimmed.json from the repository
root, or $CONFORMANCE_SPECS/github/...). Run it again when upkeep calls another operation.

OpenAPI 3.0 to JSON Schema: `#/components/schemas/X` becomes `#/$defs/X`; `nullable: true`
admits null (in `type` and in `enum`, or as an `anyOf` branch for references); vendor
extensions and examples are dropped. Nothing else changes: every field GitHub documents as
required stays required.
"""

import json
import os
import sys

OPERATIONS = [
    ("get", "/user"),
    ("get", "/repos/{owner}/{repo}/pulls"),
    ("post", "/repos/{owner}/{repo}/pulls"),
    ("get", "/repos/{owner}/{repo}/pulls/{pull_number}"),
    ("patch", "/repos/{owner}/{repo}/pulls/{pull_number}"),
    ("get", "/repos/{owner}/{repo}/pulls/{pull_number}/reviews"),
    ("get", "/repos/{owner}/{repo}/pulls/{pull_number}/comments"),
    ("post", "/repos/{owner}/{repo}/pulls/{pull_number}/comments/{comment_id}/replies"),
    ("get", "/repos/{owner}/{repo}/pulls/{pull_number}/commits"),
    ("get", "/repos/{owner}/{repo}/issues"),
    ("get", "/repos/{owner}/{repo}/issues/{issue_number}"),
    ("get", "/repos/{owner}/{repo}/issues/{issue_number}/comments"),
    ("post", "/repos/{owner}/{repo}/issues/{issue_number}/comments"),
    ("get", "/repos/{owner}/{repo}/commits"),
    ("post", "/repos/{owner}/{repo}/git/refs"),
    ("get", "/repos/{owner}/{repo}/git/commits/{commit_sha}"),
    ("get", "/repos/{owner}/{repo}/commits/{ref}/check-runs"),
    ("get", "/repos/{owner}/{repo}/commits/{ref}/status"),
    ("get", "/repos/{owner}/{repo}/check-runs/{check_run_id}/annotations"),
    ("get", "/repos/{owner}/{repo}/actions/jobs/{job_id}/logs"),
]

PREFIX = "#/components/schemas/"


def default_spec():
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    base = os.environ.get("CONFORMANCE_SPECS") or os.path.join(os.path.dirname(root), "shared", "conformance", "specs")
    return os.path.join(base, "github", "api.github.com.trimmed.json")


def convert(node, refs):
    if isinstance(node, list):
        return [convert(item, refs) for item in node]
    if not isinstance(node, dict):
        return node
    out = {}
    for key, value in node.items():
        if key.startswith("x-") or key in ("example", "examples", "discriminator", "nullable", "externalDocs"):
            continue
        if key == "$ref":
            name = value[len(PREFIX):]
            refs.add(name)
            out["$ref"] = "#/$defs/" + name
        else:
            out[key] = convert(value, refs)
    if node.get("nullable"):
        if "type" in out:
            out["type"] = [out["type"], "null"]
            if "enum" in out and None not in out["enum"]:
                out["enum"] = out["enum"] + [None]
        else:
            out = {"anyOf": [out, {"type": "null"}]}
    return out


def main():
    spec_path = sys.argv[1] if len(sys.argv) > 1 else default_spec()
    with open(spec_path) as f:
        spec = json.load(f)
    schemas = spec["components"]["schemas"]
    refs = set()
    operations = {}
    for method, path in OPERATIONS:
        op = spec["paths"][path][method]
        entry = {"operationId": op["operationId"], "responses": {}}
        body = op.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema")
        if body is not None:
            entry["request"] = convert(body, refs)
        for status, response in op["responses"].items():
            if status.startswith("3"):
                # A redirect has no body: the headers it must carry (`Location`). A 304 (not
                # modified) is no redirect.
                headers = sorted(response.get("headers", {}))
                if "Location" in headers:
                    entry.setdefault("redirects", {})[status] = headers
                continue
            if not status.startswith("2"):
                continue
            schema = response.get("content", {}).get("application/json", {}).get("schema")
            if schema is not None:
                entry["responses"][status] = convert(schema, refs)
        operations[f"{method.upper()} {path}"] = entry
    defs = {}
    pending = sorted(refs)
    while pending:
        name = pending.pop()
        if name in defs:
            continue
        found = set()
        defs[name] = convert(schemas[name], found)
        pending.extend(sorted(found - set(defs)))
    out = {
        "source": spec.get("x-trimmed", {}).get("from", os.path.basename(spec_path)),
        "generated_by": "tests/conformance/github/trim.py",
        "operations": operations,
        "$defs": dict(sorted(defs.items())),
    }
    target = os.path.join(os.path.dirname(os.path.abspath(__file__)), "schemas.json")
    with open(target, "w") as f:
        json.dump(out, f, indent=1, sort_keys=False)
        f.write("\n")
    print(f"{target}: {len(operations)} operations, {len(defs)} schemas")


if __name__ == "__main__":
    main()
