"""Build-time hooks of the documentation site (named in ``mkdocs.yml``).

- The protocol reference is written from ``openapi.yaml`` at every build: the page's
  ``<!-- openapi -->`` marker becomes one section per operation (parameters, request
  body, responses, examples) and one per schema (a table of its fields, or of a tagged
  union's members), with links between them. A response with several media types names
  each; a stream (``text/event-stream``, whose schema describes each of its events, as
  OpenAPI 3.1 has it) shows that schema, its rules and a whole example stream (the
  schema's description) and its examples, single events, as their frames' lines. The
  renderer is plain Markdown, so the page needs no script, no CDN and works offline;
  search indexes it like any page. :func:`render_openapi` is importable on its own
  (``tests/docs`` checks what it writes).
- The API reference is read from the sources by mkdocstrings. The protocol's names that
  ``evalport.client`` exports again are documented once, under ``evalport.protocol``
  (:func:`reexported`): two entries of one class make every reference to it ambiguous. The packages live in
  ``protocol/``, ``server/`` and ``client/`` but import as ``evalport.*``, so the build
  links them under ``build/docs-api/evalport`` for the docstring collector.
"""

from __future__ import annotations

import ast
import json
import os
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent
MARKER = "<!-- openapi -->"
METHODS = ("get", "post", "put", "patch", "delete")


def link_packages() -> None:
    """Link the three packages under ``build/docs-api/evalport`` for mkdocstrings.

    Done when MkDocs loads this module, before any plugin's ``on_config``: mkdocstrings
    reads its search paths there, and a path that does not exist yet is not searched."""
    package = ROOT / "build" / "docs-api" / "evalport"
    package.mkdir(parents=True, exist_ok=True)
    for part in ("protocol", "server", "client"):
        link = package / part
        if not link.is_symlink():
            os.symlink(ROOT / part, link)


link_packages()


CLIENT = "::: evalport.client\n"


def reexported() -> list[str]:
    """The names ``evalport.client`` imports from ``evalport.protocol`` and exports again
    (its errors, ``ToolFault``, ``TracePolicy``), read from its source."""
    tree = ast.parse((ROOT / "client" / "__init__.py").read_text(encoding="utf-8"))
    return sorted(
        alias.asname or alias.name
        for node in tree.body
        if isinstance(node, ast.ImportFrom) and node.module == "evalport.protocol"
        for alias in node.names
        if not (alias.asname or alias.name).startswith("_")
    )


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """Put the rendered ``openapi.yaml`` where a page has the marker; document the
    protocol's names that ``evalport.client`` exports again once, under the protocol (two
    entries of one class make every reference to it ambiguous)."""
    if CLIENT in markdown:
        names = reexported()
        options = f'    options:\n      filters: ["!^_", "!^({"|".join(names)})$"]\n'
        again = ", ".join(f"[`{name}`][evalport.protocol.{name}]" for name in names)
        markdown = markdown.replace(
            CLIENT,
            CLIENT + options + f"\nIt also exports, from `evalport.protocol`: {again}.\n",
        )
    if MARKER not in markdown:
        return markdown
    spec = yaml.safe_load((ROOT / "openapi.yaml").read_text(encoding="utf-8"))
    return markdown.replace(MARKER, render_openapi(spec))


def render_openapi(spec: dict[str, Any]) -> str:
    """The operations and schemas of an OpenAPI 3.1 document, as Markdown."""
    components = spec.get("components", {})
    out: list[str] = ["## Operations", ""]
    for path, item in spec["paths"].items():
        shared = item.get("parameters", [])
        for method in METHODS:
            if method in item:
                out += _operation(method, path, item[method], shared, components)
    out += ["## Schemas", ""]
    for name, schema in components.get("schemas", {}).items():
        out += _schema(name, schema)
    return "\n".join(out)


def _resolve(node: Any, components: dict[str, Any]) -> Any:
    while isinstance(node, dict) and "$ref" in node:
        _, _, kind, name = node["$ref"].split("/")
        node = components[kind][name]
    return node


def _anchor(text: str) -> str:
    """The id of a heading as the ``toc`` extension writes it (slugified)."""
    keep = [c if c.isalnum() else "-" for c in text.lower()]
    slug = "".join(keep)
    while "--" in slug:
        slug = slug.replace("--", "-")
    return slug.strip("-")


def _schema_link(node: Any) -> str:
    if isinstance(node, dict) and "$ref" in node:
        name = node["$ref"].rsplit("/", 1)[1]
        return f"[`{name}`](#{_anchor('schema ' + name)})"
    return _type(node)


def _type(node: Any) -> str:
    if not isinstance(node, dict):
        return "any"
    if "$ref" in node:
        return _schema_link(node)
    for key in ("anyOf", "oneOf"):
        if key in node:
            return " or ".join(_type(option) for option in node[key])
    kind = node.get("type")
    if isinstance(kind, list):
        return " or ".join(f"`{k}`" for k in kind)
    if kind == "array":
        return f"array of {_type(node.get('items', {}))}"
    if kind == "object" and "additionalProperties" in node:
        values = node["additionalProperties"]
        if isinstance(values, dict):
            return f"map of {_type(values)}"
    if "enum" in node:
        return " \\| ".join(f"`{value}`" for value in node["enum"])
    if "const" in node:
        return f"`{node['const']}`"
    return f"`{kind}`" if kind else "any"


def _cell(text: Any) -> str:
    return " ".join(str(text or "").split()).replace("|", "\\|")


def _operation(
    method: str,
    path: str,
    operation: dict[str, Any],
    shared: list[Any],
    components: dict[str, Any],
) -> list[str]:
    out = [f"### `{method.upper()} {path}`", "", f"**{operation.get('summary', '')}**", ""]
    if operation.get("description"):
        out += [operation["description"].strip(), ""]
    parameters = [_resolve(p, components) for p in [*shared, *operation.get("parameters", [])]]
    if parameters:
        out += ["| parameter | in | required | meaning |", "|---|---|---|---|"]
        for parameter in parameters:
            out.append(
                f"| `{parameter['name']}` | {parameter['in']} | "
                f"{'yes' if parameter.get('required') else 'no'} | "
                f"{_cell(parameter.get('description'))} |"
            )
        out.append("")
    body = operation.get("requestBody")
    if body:
        for media, content in _resolve(body, components).get("content", {}).items():
            out += [f"Request body (`{media}`): {_schema_link(content.get('schema'))}", ""]
            out += _examples(media, content, components)
    out += ["| status | meaning | body |", "|---|---|---|"]
    examples: list[str] = []
    for status, response in operation.get("responses", {}).items():
        response = _resolve(response, components)
        content = response.get("content", {})
        bodies = [
            _body(media, item) if len(content) > 1 else _body_type(media, item)
            for media, item in content.items()
        ]
        body_type = "; ".join(bodies) or "-"
        out.append(f"| {status} | {_cell(response.get('description'))} | {body_type} |")
        if str(status).startswith("2"):
            for media, item in content.items():
                examples += _rules(media, item)
                examples += _examples(media, item, components)
    out += ["", *examples]
    return out


_STREAM = "text/event-stream"


def _body_type(media: str, content: dict[str, Any]) -> str:
    """What a media type's body is: its schema, or, for a stream, its events' schema."""
    schema = content.get("schema")
    if media == _STREAM and isinstance(schema, dict):
        return f"a stream of {_schema_link(schema.get('allOf', [schema])[0])}"
    return _schema_link(schema)


def _body(media: str, content: dict[str, Any]) -> str:
    return f"`{media}`: {_body_type(media, content)}"


def _rules(media: str, content: dict[str, Any]) -> list[str]:
    """The description of a body's inline schema (a stream's rules), under its media type."""
    schema = content.get("schema")
    if not isinstance(schema, dict) or "$ref" in schema or not schema.get("description"):
        return []
    return [f"**`{media}`**", "", schema["description"].strip(), ""]


def _examples(media: str, content: dict[str, Any], components: dict[str, Any]) -> list[str]:
    out: list[str] = []
    for name, example in content.get("examples", {}).items():
        example = _resolve(example, components)
        value = example.get("value")
        if isinstance(value, dict) and media == _STREAM:
            # one event, as its frame goes on the wire
            language, text = "text", "\n".join(f"{key}: {item}" for key, item in value.items())
        else:
            language, text = "json", json.dumps(value, indent=2, ensure_ascii=False)
        summary = example.get("summary") or name
        out += [f"Example: {_cell(summary)}", "", f"```{language}", text, "```", ""]
    return out


def _schema(name: str, schema: dict[str, Any]) -> list[str]:
    out = [f"### Schema {name}", ""]
    if schema.get("description"):
        out += [schema["description"].strip(), ""]
    properties = schema.get("properties")
    mapping = schema.get("discriminator", {}).get("mapping")
    if not properties and mapping:
        tag = schema["discriminator"]["propertyName"]
        out += [f"| `{tag}` | schema |", "|---|---|"]
        for value, ref in mapping.items():
            out.append(f"| `{value}` | {_schema_link({'$ref': ref})} |")
        out.append("")
        return out
    if not properties:
        out += [f"Type: {_type(schema)}", ""]
        return out
    required = set(schema.get("required", []))
    out += ["| field | type | required | meaning |", "|---|---|---|---|"]
    for field, node in properties.items():
        description = node.get("description", "") if isinstance(node, dict) else ""
        out.append(
            f"| `{field}` | {_type(node)} | {'yes' if field in required else 'no'} | "
            f"{_cell(description)} |"
        )
    out.append("")
    return out
