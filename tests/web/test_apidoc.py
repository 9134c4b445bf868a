"""The /docs page's reading of an OpenAPI document: types in words, schemas linked, every operation."""

from __future__ import annotations

from tracker.surfaces.web.apidoc import Part, operations, schemas, type_of


def text(parts: tuple[Part, ...]) -> str:
    return "".join(f"[{p.text}]({p.href})" if p.schema else p.text for p in parts)


def test_types_read_as_words_with_each_named_schema_linked():
    assert text(type_of({"$ref": "#/components/schemas/RepoOut"})) == "[RepoOut](#schema-RepoOut)"
    assert text(type_of({"type": "array", "items": {"$ref": "#/components/schemas/RepoOut"}})) == \
        "array of [RepoOut](#schema-RepoOut)"
    assert text(type_of({"anyOf": [{"type": "string", "maxLength": 40}, {"type": "null"}]})) == \
        "string (at most 40 characters) or null"
    assert text(type_of({"type": "integer", "minimum": 1, "maximum": 2147483647})) == "integer (1 to 2147483647)"
    assert text(type_of({"type": "object", "additionalProperties": {"type": "string"}})) == "object of string → string"
    assert text(type_of({"type": "string", "enum": ["a", "b"], "default": "a"})) == "string (one of a, b, default a)"
    assert text(type_of({"type": "boolean", "default": True})) == "boolean (default true)"
    assert text(type_of({})) == text(type_of(None)) == "any JSON"
    deep: dict = {"type": "string"}
    for _ in range(10):
        deep = {"type": "array", "items": deep}
    assert text(type_of(deep)).endswith("array of …")


DOCUMENT = {
    "paths": {
        "/v1/watch/{owner}": {
            "delete": {"summary": "Unwatch", "description": "Stop `watching`.", "security": [{"bearer": []}],
                       "parameters": [{"name": "owner", "in": "path", "required": True, "schema": {"type": "string"}}],
                       "responses": {"200": {"description": "ok", "content": {"application/json": {
                           "schema": {"$ref": "#/components/schemas/RemovedOut"}}}}}},
            "post": {"summary": "Watch", "requestBody": {"required": True, "content": {"application/json": {
                "schema": {"$ref": "#/components/schemas/WatchIn"}}}}, "responses": {"204": {"description": "done"}}},
        },
    },
    "components": {"schemas": {"WatchIn": {"type": "object", "required": ["repo"], "properties": {
        "repo": {"type": "string", "description": "owner/name"}, "every": {"type": "string"}}}}},
}


def test_every_operation_has_its_parameters_body_and_responses():
    post, delete = operations(DOCUMENT)  # methods in HTTP's order, whatever the document's
    assert (post.method, post.anchor, delete.method, delete.anchor) == (
        "POST", "op-post-v1-watch-owner", "DELETE", "op-delete-v1-watch-owner")
    assert post.request is not None and (post.request.media_type, text(post.request.type)) == (
        "application/json", "[WatchIn](#schema-WatchIn)")
    assert [(r.status, r.description, r.media_type, r.type) for r in post.responses] == [("204", "done", "", ())]
    assert delete.secured and not post.secured and delete.description == "Stop `watching`."
    assert [(p.name, p.where, p.required, text(p.type)) for p in delete.parameters] == [
        ("owner", "path", True, "string")]
    assert text(delete.responses[0].type) == "[RemovedOut](#schema-RemovedOut)"
    (watch_in,) = schemas(DOCUMENT)
    assert (watch_in.anchor, [(f.name, f.required, text(f.type), f.description) for f in watch_in.fields]) == (
        "schema-WatchIn", [("repo", True, "string", "owner/name"), ("every", False, "string", "")])
