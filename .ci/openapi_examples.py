"""Check that every example in openapi.yaml conforms to the schema it illustrates.

openapi-spec-validator checks the document's structure, not that its examples are
true; a wrong example teaches every client generator and reader the wrong shape.
Run by .ci/check-openapi inside its virtual environment (PyYAML, jsonschema, referencing).
"""
from __future__ import annotations

import sys

import jsonschema
import yaml
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012


def main(path: str) -> int:
    with open(path, encoding="utf-8") as f:
        doc = yaml.safe_load(f)
    registry = Registry().with_resource("urn:sheetd", Resource(contents=doc, specification=DRAFT202012))
    components = doc.get("components", {})
    failures: list[str] = []
    checked = 0

    def resolve(obj):
        while isinstance(obj, dict) and "$ref" in obj and obj["$ref"].startswith("#/components/"):
            node = doc
            for part in obj["$ref"][2:].split("/"):
                node = node[part]
            obj = node
        return obj

    def check(where: str, schema, value) -> None:
        nonlocal checked
        checked += 1
        wrapped = {"$schema": "https://json-schema.org/draft/2020-12/schema", "$ref": "urn:sheetd#/x"}
        reg = registry.with_resource(
            "urn:sheetd",
            Resource(contents={**doc, "x": schema}, specification=DRAFT202012),
        )
        validator = jsonschema.Draft202012Validator(wrapped, registry=reg, format_checker=jsonschema.FormatChecker())
        for err in validator.iter_errors(value):
            failures.append(f"{where}: {err.message} at {list(err.absolute_path)}")

    def media(where: str, content: dict) -> None:
        for mt, m in (content or {}).items():
            schema = m.get("schema")
            if schema is None:
                continue
            if "example" in m and mt != "text/event-stream":
                check(f"{where} {mt} example", schema, m["example"])
            for name, ex in (m.get("examples") or {}).items():
                ex = resolve(ex)
                if "value" in ex:
                    check(f"{where} {mt} examples.{name}", schema, ex["value"])

    for route, item in doc["paths"].items():
        for method, op in item.items():
            if method == "parameters":
                continue
            where = f"{method.upper()} {route}"
            body = resolve(op.get("requestBody") or {})
            media(f"{where} request", body.get("content"))
            for status, resp in op.get("responses", {}).items():
                if "$ref" in resp:
                    continue  # a shared response: checked once below, under components.responses
                media(f"{where} {status}", resp.get("content"))
                for hname, h in (resp.get("headers") or {}).items():
                    h = resolve(h)
                    if "example" in h:
                        check(f"{where} {status} header {hname}", h["schema"], h["example"])
            for p in list(item.get("parameters", [])) + list(op.get("parameters", [])):
                p = resolve(p)
                if "example" in p:
                    check(f"{where} parameter {p['name']}", p["schema"], p["example"])
    for rname, resp in components.get("responses", {}).items():
        media(f"components.responses.{rname}", resp.get("content"))
        for hname, h in (resp.get("headers") or {}).items():
            h = resolve(h)
            if "example" in h:
                check(f"components.responses.{rname} header {hname}", h["schema"], h["example"])
    for hname, h in components.get("headers", {}).items():
        if "example" in h:
            check(f"components.headers.{hname}", h["schema"], h["example"])
    for sname, schema in components.get("schemas", {}).items():
        for i, ex in enumerate(schema.get("examples", []) or []):
            check(f"components.schemas.{sname}.examples[{i}]", {"$ref": f"#/components/schemas/{sname}"}, ex)

    for f in failures:
        print(f"example does not match its schema: {f}", file=sys.stderr)
    print(f"examples: {checked} checked, {len(failures)} wrong")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "openapi.yaml"))
