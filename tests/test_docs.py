"""The generated reference pages are current, and their renderers read models and
OpenAPI documents correctly (checked on small hand-made inputs)."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Any, Literal

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from support import load_script

ROOT = Path(__file__).resolve().parent.parent


def _load() -> ModuleType:
    return load_script("gen_docs")


gen = _load()


def test_generated_pages_are_current() -> None:
    wanted = gen.pages()
    assert set(wanted) == {Path("docs/configuration.md"), Path("docs/rest-reference.md")}
    for path, text in wanted.items():
        current = (ROOT / path).read_text(encoding="utf-8") if (ROOT / path).exists() else None
        assert current == text, f"{path} is stale: run python scripts/gen_docs.py"


def test_pages_are_deterministic() -> None:
    assert gen.pages() == gen.pages()


def test_stale_pages_names_missing_and_changed_pages(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "same.md").write_text("same\n")
    (tmp_path / "docs" / "old.md").write_text("old\n")
    wanted = {
        Path("docs/same.md"): "same\n",
        Path("docs/old.md"): "new\n",
        Path("docs/missing.md"): "x\n",
    }
    assert gen.stale_pages(wanted, tmp_path) == [Path("docs/old.md"), Path("docs/missing.md")]


def test_check_mode_reports_a_stale_page_and_writing_fixes_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(gen, "ROOT", tmp_path)
    monkeypatch.setattr(gen, "pages", lambda: {Path("docs/a.md"): "a\n"})
    assert gen.main(["--check"]) == 1
    assert "docs/a.md is stale: run python scripts/gen_docs.py" in capsys.readouterr().err
    assert not (tmp_path / "docs" / "a.md").exists()  # --check writes nothing
    (tmp_path / "docs").mkdir()
    assert gen.main([]) == 0
    assert (tmp_path / "docs" / "a.md").read_text() == "a\n"
    assert gen.main(["--check"]) == 0


# -- configuration -----------------------------------------------------------------------------


class _Sample(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="SAMPLE_", extra="ignore")

    llm_model: str | None = Field(default=None, description="The model | or none.")
    longterm_max_facts: int = Field(default=100, ge=10, le=500)
    worker: Literal["auto", "off"] = "auto"
    recall_index: bool = True
    zebra_stripes: float = Field(default=0.5, gt=0, description="A field no group claims.")


def test_fields_are_grouped_by_whole_name_prefixes() -> None:
    assert gen.group_of("llm_model") == "LLM"
    assert gen.group_of("db") == "Core"
    assert gen.group_of("embedder") == "Recall and embeddings"
    assert gen.group_of("embed_model_dir") == "Recall and embeddings"
    assert gen.group_of("blob_timeout_s") == "Blobs and S3"
    assert gen.group_of("dbx") == "Other"  # a prefix counts only up to an underscore
    assert gen.group_of("porter") == "Other"


def test_configuration_page_lists_every_field_with_type_default_and_constraints() -> None:
    page = gen.render_configuration([_Sample])
    rows = {line.split(" | ")[0][2:]: line for line in page.splitlines() if line.startswith("| `")}
    assert set(rows) == {
        "`SAMPLE_LLM_MODEL`",
        "`SAMPLE_LONGTERM_MAX_FACTS`",
        "`SAMPLE_WORKER`",
        "`SAMPLE_RECALL_INDEX`",
        "`SAMPLE_ZEBRA_STRIPES`",
    }
    assert rows["`SAMPLE_LLM_MODEL`"] == (
        "| `SAMPLE_LLM_MODEL` | string or unset | unset |  | The model \\| or none. |"
    )
    assert "| integer | `100` | >= 10, <= 500 |" in rows["`SAMPLE_LONGTERM_MAX_FACTS`"]
    assert "| string | `auto` | one of `auto`, `off` |" in rows["`SAMPLE_WORKER`"]
    assert "| boolean | `true` |" in rows["`SAMPLE_RECALL_INDEX`"]
    assert "| number | `0.5` | > 0 | A field no group claims. |" in rows["`SAMPLE_ZEBRA_STRIPES`"]
    headings = [line for line in page.splitlines() if line.startswith("## ")]
    assert headings == [
        "## LLM",
        "## Recall and embeddings",
        "## Long-term memory",
        "## Redis and worker",
        "## Other",
    ]


def test_real_settings_page_names_every_field() -> None:
    from memstrata.config import Settings
    from memstrata.embeddings.registry import EmbedSettings

    page = gen.render_configuration([Settings, EmbedSettings])
    for model in (Settings, EmbedSettings):
        for name in model.model_fields:
            assert f"| `MEMSTRATA_{name.upper()}` |" in page


@given(st.text())
def test_a_table_cell_is_one_line_with_every_pipe_escaped(text: str) -> None:
    out = gen.cell(text)
    assert "\n" not in out
    assert "\r" not in out
    assert out.count("|") == out.count("\\|") == text.count("|")


# -- REST reference ----------------------------------------------------------------------------


def _doc() -> dict[str, Any]:
    ref = "#/components/schemas/"
    problem = {"content": {"application/problem+json": {"schema": {"$ref": ref + "Problem"}}}}
    return {
        "info": {"title": "t", "version": "1", "description": "The API."},
        "paths": {
            "/v1/things/{tid}": {
                "delete": {"summary": "Drop it", "responses": {"204": {"description": "Gone"}}},
                "get": {
                    "summary": "Read it",
                    "security": [{"apiKey": []}],
                    "parameters": [
                        {
                            "name": "tid",
                            "in": "path",
                            "required": True,
                            "schema": {"type": "string"},
                        },
                        {
                            "name": "limit",
                            "in": "query",
                            "description": "Page size",
                            "schema": {
                                "anyOf": [{"type": "integer", "minimum": 1.0}, {"type": "null"}],
                                "default": 50,
                            },
                        },
                    ],
                    "responses": {
                        "404": {"description": "Not here", **problem},
                        "200": {
                            "description": "OK",
                            "content": {"application/json": {"schema": {"$ref": ref + "ThingOut"}}},
                        },
                    },
                },
            },
            "/v1/things": {
                "post": {
                    "summary": "Make one",
                    "requestBody": {
                        "content": {
                            "application/json": {
                                "schema": {"anyOf": [{"$ref": ref + "ThingIn"}, {"type": "null"}]}
                            }
                        },
                    },
                    "responses": {"201": {"description": "Made"}},
                },
            },
        },
        "components": {
            "schemas": {
                "Kind": {"enum": ["a", "b"], "type": "string"},
                "Tag": {
                    "type": "object",
                    "properties": {"label": {"type": "string"}},
                    "required": ["label"],
                },
                "ThingIn": {
                    "type": "object",
                    "properties": {
                        "name": {"type": "string", "maxLength": 10, "description": "Its name"},
                        "kind": {"$ref": ref + "Kind", "default": "a"},
                        "tags": {"type": "array", "items": {"$ref": ref + "Tag"}},
                    },
                    "required": ["name"],
                },
                "ThingOut": {
                    "type": "object",
                    "properties": {"id": {"type": "string"}},
                    "required": ["id"],
                },
                "Problem": {"type": "object", "properties": {"code": {"type": "string"}}},
                "Unused": {"type": "object", "properties": {"x": {"type": "string"}}},
            }
        },
    }


def test_operations_are_in_path_order_and_fixed_method_order() -> None:
    ops = [(m, p) for m, p, _ in gen.operations(_doc())]
    assert ops == [
        ("post", "/v1/things"),
        ("get", "/v1/things/{tid}"),
        ("delete", "/v1/things/{tid}"),
    ]


def test_rest_page_resolves_refs_into_fields_and_links_nested_schemas() -> None:
    page = gen.render_rest_reference(_doc())
    post = page[page.index("## POST /v1/things") : page.index("## GET /v1/things/{tid}")]
    assert "Request body (`application/json`, optional): `ThingIn`." in post
    assert "| `name` | string | yes | Its name. Constraints: length <= 10. |" in post
    assert "| `kind` | one of `a`, `b` | no | Default: `a`. |" in post
    assert "| `tags` | array of [Tag](#tag) | no |  |" in post
    assert "Authentication: none." in post
    get = page[page.index("## GET /v1/things/{tid}") : page.index("## DELETE")]
    assert "Authentication: API key (`Authorization: Bearer`)." in get
    assert "| `tid` | path | yes | string |  |" in get
    assert (
        "| `limit` | query | no | integer or null | Page size. Default: `50`. Constraints: >= 1. |"
        in get
    )
    # Responses sorted by status, each with its body.
    assert get.index("| `200` | OK | [ThingOut](#thingout) |") < get.index(
        "| `404` | Not here | [Problem](#problem) |"
    )
    # Schemas: what responses and body fields reach; not the inline body, enums or unused ones.
    schemas = page[page.index("## Schemas") :]
    headings = [line for line in schemas.splitlines() if line.startswith("### ")]
    assert headings == ["### Problem", "### Tag", "### ThingOut"]
    assert "<" not in page.replace("<=", "")  # plain Markdown, no HTML


def test_a_ref_outside_the_components_or_a_cycle_is_refused() -> None:
    with pytest.raises(ValueError, match="unsupported"):
        gen.resolve({"$ref": "other.json#/X"}, {})
    with pytest.raises(ValueError, match="cycle"):
        gen.resolve({"$ref": "#/components/schemas/A"}, {"A": {"$ref": "#/components/schemas/A"}})
