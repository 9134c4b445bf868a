"""Finding references: Python by its syntax tree, notebooks cell by cell, YAML/JSON/TOML by key; what is skipped."""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

import pytest

from tests.scan.conftest import FIXTURE
from tracker.pipeline.scan import find_references
from tracker.pipeline.scan.files import MAX_BYTES
from tracker.pipeline.scan.model import SourceKind

SHA = "0123456789abcdef0123456789abcdef01234567"


def write(root: Path, files: dict[str, str | bytes]) -> Path:
    for name, content in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(textwrap.dedent(content).lstrip("\n"), "utf-8")
    return root


def found(root: Path) -> list[tuple[str, int, int | None, str, str | None]]:
    return [(r.file, r.line, r.column, r.repo, r.ref) for r in find_references(root).references]


def test_the_fixture_codebase_as_written(tmp_path):
    # The placeholders are not shas: every pin reads as floating here; the places are what matter.
    refs = find_references(FIXTURE).references
    assert [(r.file, r.line, r.column, r.repo, r.ref, r.source, r.via) for r in refs] == [
        ("configs/eval.toml", 2, 9, "acme/risky", None, SourceKind.TOML, "model"),
        ("configs/eval.toml", 6, 12, "acme/chat-model", "@CHAT_R5@", SourceKind.TOML, "model_id"),
        ("configs/serve.json", 3, 12, "acme/encoder", "@ENC_R0@", SourceKind.JSON, "model"),
        ("configs/serve.json", 6, 17, "acme/missing", None, SourceKind.JSON, "model_id"),
        ("configs/train.yaml", 2, 21, "acme/chat-model", "@CHAT_R0@", SourceKind.YAML, "model_name_or_path"),
        ("configs/train.yaml", 4, 17, "acme/chat-model", "@CHAT_R0@", SourceKind.YAML, "tokenizer_name"),
        ("configs/train.yaml", 7, 12, "acme/encoder", None, SourceKind.YAML, "model"),
        ("notebooks/explore.ipynb", 22, 40, "acme/chat-model", "@CHAT_R3@", SourceKind.NOTEBOOK,
         "AutoModel.from_pretrained"),
        ("notebooks/explore.ipynb", 65, 44, "acme/risky", None, SourceKind.NOTEBOOK, "AutoModel.from_pretrained"),
        ("src/app.py", 10, 50, "acme/chat-model", "@CHAT_R1@", SourceKind.PYTHON,
         "AutoModelForCausalLM.from_pretrained"),
        ("src/app.py", 11, 47, "acme/chat-model", None, SourceKind.PYTHON, "AutoTokenizer.from_pretrained"),
        ("src/embed.py", 10, 35, "acme/encoder", None, SourceKind.PYTHON, "SentenceTransformer"),
        ("src/embed.py", 11, 38, "acme/encoder", "@ENC_R0@", SourceKind.PYTHON, "hf_hub_download"),
        ("src/embed.py", 17, 49, "acme/encoder", "main", SourceKind.PYTHON, "pipeline"),
        ("src/embed.py", 20, 29, "acme/risky", None, SourceKind.PYTHON, "snapshot_download"),
    ]
    assert not any(r.pinned for r in refs)


# -- Python ---------------------------------------------------------------------------------------


def test_python_constants_scopes_and_call_forms(tmp_path):
    write(tmp_path, {"m.py": f'''
        from transformers import AutoModel, AutoTokenizer, pipeline
        from huggingface_hub import hf_hub_download, hf_hub_url, snapshot_download
        from peft import PeftModel

        ORG = "acme"
        NAME = f"{{ORG}}/base"
        REV = "{SHA}"
        ALIAS = NAME
        PAIR_REPO, PAIR_REV = "acme/pair", "v2"
        TWICE = "acme/one"
        TWICE = "acme/two"
        GLOBAL = "acme/global"

        AutoModel.from_pretrained(NAME, revision=REV)
        AutoModel.from_pretrained(pretrained_model_name_or_path=ALIAS, revision=None)
        AutoTokenizer.from_pretrained(ORG + "/tok", revision=REV[:7])
        pipeline("fill-mask", "acme/positional")
        hf_hub_url(PAIR_REPO, "config.json", revision=PAIR_REV)
        hf_hub_download("acme/dataset", "x", repo_type="dataset")
        hf_hub_download("acme/typed", "x", repo_type="model")
        snapshot_download("acme/space", repo_type=SPACE_TYPE)
        AutoModel.from_pretrained(TWICE)
        AutoModel.from_pretrained(GLOBAL)
        AutoModel.from_pretrained("gpt2")
        AutoModel.from_pretrained(*["acme/starred"])
        from_pretrained("acme/bare-name-is-not-the-method")

        def rebind():
            global GLOBAL
            GLOBAL = "acme/other"

        def load(NAME, revision=REV):
            local = "acme/local"
            AutoModel.from_pretrained(local, revision=revision)
            AutoModel.from_pretrained(NAME)
            return PeftModel.from_pretrained(NAME, "acme/adapter")

        class Holder:
            CLASS_LEVEL = "acme/class-level"
            model = AutoModel.from_pretrained(CLASS_LEVEL)

            def method(self):
                return AutoModel.from_pretrained(CLASS_LEVEL)
        '''})
    refs = find_references(tmp_path).references
    assert [(r.line, r.column, r.repo, r.ref, r.revision_expr) for r in refs] == [
        (14, 27, "acme/base", SHA, None),
        (15, 57, "acme/base", None, None),  # revision=None: floating
        (16, 31, "acme/tok", None, "REV[:7]"),  # a slice needs running the code
        (17, 23, "acme/positional", None, None),
        (18, 12, "acme/pair", "v2", None),
        (20, 17, "acme/typed", None, None),
        (34, 31, "acme/local", None, "revision"),
        (36, 44, "acme/adapter", None, None),
        (40, 39, "acme/class-level", None, None),
    ]
    assert refs[0].pinned and not refs[4].pinned
    assert [r.via for r in refs] == [
        "AutoModel.from_pretrained", "AutoModel.from_pretrained", "AutoTokenizer.from_pretrained", "pipeline",
        "hf_hub_url", "hf_hub_download", "AutoModel.from_pretrained", "PeftModel.from_pretrained",
        "AutoModel.from_pretrained"]


def test_python_is_parsed_never_run(tmp_path):
    marker = tmp_path / "ran"
    write(tmp_path, {"src/boom.py": f'''
        import pathlib
        pathlib.Path({str(marker)!r}).write_text("ran")
        raise SystemExit(3)
        from transformers import AutoModel
        AutoModel.from_pretrained("acme/model")
        '''})
    assert found(tmp_path) == [("src/boom.py", 5, 27, "acme/model", None)]
    assert not marker.exists()


def test_python_files_that_do_not_parse_are_skipped_with_the_reason(tmp_path):
    write(tmp_path, {
        "py2.py": 'print "from_pretrained"\n',
        "latin.py": b'# -*- coding: latin-1 -*-\nx = "\xe9"; AutoModel.from_pretrained("acme/latin")\n',
        "bad_escape.py": 'x = "\\d"; AutoModel.from_pretrained("acme/escape")\n',
        "no_calls.py": 'print "this is not Python 3, and never parsed"\n',
    })
    result = find_references(tmp_path)
    assert [(r.file, r.line, r.column, r.repo) for r in result.references] == [
        ("bad_escape.py", 1, 37, "acme/escape"), ("latin.py", 2, 36, "acme/latin")]
    assert [(s.file, s.reason) for s in result.skipped] == [
        ("py2.py", "not valid Python 3 (line 1: Missing parentheses in call to 'print'. Did you mean print(...)?)")]
    assert result.files_read == 3


# -- notebooks ------------------------------------------------------------------------------------


def notebook(*cells: list[str] | str, cell_type: str = "code") -> str:
    return json.dumps({"cells": [{"cell_type": cell_type, "metadata": {}, "outputs": [], "source": c}
                                 for c in cells], "metadata": {}, "nbformat": 4, "nbformat_minor": 5},
                      indent=1)


def test_notebook_cells_magics_and_locations(tmp_path):
    (tmp_path / "a.ipynb").write_text(notebook(
        ["%load_ext autoreload\n", "M = 'acme/nb'\n", "!pip install x\n", "AutoModel.from_pretrained(M)\n"],
        ["%%time\n", "AutoModel.from_pretrained('acme/timed')\n"],
        ["obj?\n", "AutoModel.from_pretrained('acme/help')\n"],
        "import x\nAutoModel.from_pretrained('acme/one-string', revision='v1')\n",
        ["AutoModel.from_pretrained(M)\n"],  # cells run in one kernel, but each is its own module here
        ["x = '\\t'; AutoModel.from_pretrained('acme/escaped')\n"],
    ))
    text = (tmp_path / "a.ipynb").read_text()
    result = find_references(tmp_path)
    refs = [(r.line, r.column, r.cell, r.repo, r.ref) for r in result.references]
    line_of = {needle: text[: text.index(needle)].count("\n") + 1
               for needle in ("AutoModel.from_pretrained(M)", "acme/one-string", "acme/escaped")}
    assert refs == [
        (line_of["AutoModel.from_pretrained(M)"], 32, 1, "acme/nb", None),
        (line_of["acme/one-string"], None, 4, "acme/one-string", "v1"),
        (line_of["acme/escaped"], None, 6, "acme/escaped", None),
    ]
    assert [s.reason for s in result.skipped] == [
        "cell 3: not valid Python (IPython syntax other than magics?)"]


def test_a_file_that_is_not_a_notebook_is_skipped(tmp_path):
    (tmp_path / "a.ipynb").write_text('{"from_pretrained": 1}')
    (tmp_path / "b.ipynb").write_text('from_pretrained: not json')
    result = find_references(tmp_path)
    assert result.references == ()
    assert [(s.file, s.reason.split(":")[0]) for s in result.skipped] == [
        ("a.ipynb", "no 'cells' list (only nbformat 4 notebooks are read)"), ("b.ipynb", "not valid JSON")]


# -- config files ---------------------------------------------------------------------------------


def test_yaml_keys_revisions_anchors_and_tags(tmp_path):
    write(tmp_path, {"c.yaml": f'''
        services:
          api:
            environment:
              MODEL_ID: acme/env-model
              MODEL_REVISION: {SHA}
        base: &base
          base_model: acme/base
          revision_of_model: v3
        copy: *base
        tokenizer: {{tokenizer_name: acme/tok, tokenizer_revision: null, revision: main}}
        stack: !Ref SomeThing
        weird: !!python/object:os.system "never constructed"
        ---
        model: acme/second-doc
        revision: ~
        ''',
        "bomb.yaml": 'a: &a ["model", "model"]\nb: &b [*a, *a, *a]\nc: &c [*b, *b, *b]\nd: [*c, *c, *c]\n'
                     "model: acme/after-aliases\n"})
    assert found(tmp_path) == [
        ("bomb.yaml", 5, 8, "acme/after-aliases", None),
        ("c.yaml", 4, 17, "acme/env-model", SHA),
        ("c.yaml", 7, 15, "acme/base", "v3"),
        ("c.yaml", 10, 29, "acme/tok", None),
        ("c.yaml", 14, 8, "acme/second-doc", None),
    ]


def test_json_and_toml_placed_by_their_own_occurrence(tmp_path):
    write(tmp_path, {
        "a.json": '{"runs": [{"model": "acme\\/escaped", "revision": "v1"}, {"model": "acme/same"},\n'
                  '  {"model": "acme/same", "revision": 7}], "Model_Name": "acme/case", "model": {"nested": 1}}',
        "b.toml": 'title = "x"\n[a]\nmodel = "acme/same"\n[b]\n"model" = \'acme/same\'\nrevision = "r"\n'
                  '[c]\nmodel.name = "not-a-key-we-know"\nnested = { model_id = """acme/inline""" }\n',
    })
    assert found(tmp_path) == [
        ("a.json", 1, 21, "acme/escaped", "v1"),
        ("a.json", 1, 67, "acme/same", None),
        ("a.json", 2, 13, "acme/same", "7"),
        ("a.json", 2, 57, "acme/case", None),
        ("b.toml", 3, 9, "acme/same", None),
        ("b.toml", 5, 11, "acme/same", "r"),
        ("b.toml", 9, 23, "acme/inline", None),
    ]


def test_config_files_that_do_not_parse_are_skipped(tmp_path):
    write(tmp_path, {"a.yaml": "model: [unclosed\n", "b.json": '{"model": "x", // comment\n}',
                     "c.toml": "model = \n", "d.yaml": "nothing: here\n"})
    result = find_references(tmp_path)
    assert [(s.file, s.reason.split(":")[0]) for s in result.skipped] == [
        ("a.yaml", "not valid YAML"), ("b.json", "not valid JSON"), ("c.toml", "not valid TOML")]
    assert result.files_read == 1


# -- what is read -----------------------------------------------------------------------------------


def test_gitignore_environments_vendored_binary_large_and_links_are_not_read(tmp_path):
    ref = 'AutoModel.from_pretrained("acme/{}")\n'
    write(tmp_path, {
        ".gitignore": "/build/\n*.gen.py\n!keep.gen.py\n",
        ".git/info/exclude": "local-only/\n",
        "pkg/.gitignore": "secret.py\n!/sub/secret.py\n",
        "build/a.py": ref.format("build"),
        "pkg/build/a.py": ref.format("nested-build"),  # /build/ is anchored at the root
        "x.gen.py": ref.format("gen"),
        "keep.gen.py": ref.format("keep"),
        "local-only/a.py": ref.format("excluded"),
        "pkg/secret.py": ref.format("secret"),
        "pkg/sub/secret.py": ref.format("sub-secret"),
        "venv/a.py": ref.format("venv"),
        "tools/env/pyvenv.cfg": "home = /usr\n",
        "tools/env/a.py": ref.format("pyvenv"),
        "conda/conda-meta/history": "",
        "conda/a.py": ref.format("conda"),
        "node_modules/a/model.json": '{"model": "acme/node"}',
        ".git/a.py": ref.format("git"),
        "bin.py": b"\0\0" + ref.format("binary").encode(),
        "big.yaml": "model: acme/big\n" + "#" * MAX_BYTES[SourceKind.YAML],
        "README.md": ref.format("markdown"),
    })
    os.symlink(tmp_path / "keep.gen.py", tmp_path / "link.py")
    os.symlink(tmp_path / "pkg", tmp_path / "linked-dir")
    result = find_references(tmp_path)
    assert [(r.file, r.repo) for r in result.references] == [
        ("keep.gen.py", "acme/keep"), ("pkg/build/a.py", "acme/nested-build"),
        ("pkg/sub/secret.py", "acme/sub-secret")]
    assert [(s.file, s.reason) for s in result.skipped] == [
        ("big.yaml", f"larger than 2 MiB ({MAX_BYTES[SourceKind.YAML] + 16} bytes)"), ("bin.py", "binary")]


def test_a_single_file_and_local_folders(tmp_path):
    write(tmp_path, {"models/acme/local/config.json": "{}",
                     "src/app.py": 'AutoModel.from_pretrained("acme/local")\nAutoModel.from_pretrained("acme/hub")\n'
                                   'AutoModel.from_pretrained("./acme/hub")\n'})
    # models/acme/local is not what "acme/local" names from src/ or any folder above it.
    assert found(tmp_path / "src" / "app.py") == [("app.py", 1, 27, "acme/local", None),
                                                  ("app.py", 2, 27, "acme/hub", None)]
    (tmp_path / "acme" / "local").mkdir(parents=True)
    assert found(tmp_path / "src" / "app.py") == [("app.py", 2, 27, "acme/hub", None)]
    assert found(tmp_path) == [("src/app.py", 2, 27, "acme/hub", None)]


@pytest.mark.parametrize("name", ["a.PY", "b.Yml"])
def test_extensions_match_without_case(tmp_path, name):
    write(tmp_path, {name: 'model: acme/x\n' if name.endswith("Yml") else 'AutoModel.from_pretrained("acme/x")\n'})
    assert [r.repo for r in find_references(tmp_path).references] == ["acme/x"]


def test_deeply_nested_files_are_skipped_not_fatal(tmp_path):
    write(tmp_path, {"deep.py": "from_pretrained\nx = " + "+".join(["a"] * 100_000) + "\n",
                     "deep.json": '{"model": ' + "[" * 100_000 + "]" * 100_000 + "}",
                     "ok.py": 'AutoModel.from_pretrained("acme/fine")\n'})
    result = find_references(tmp_path)
    assert [r.repo for r in result.references] == ["acme/fine"]
    assert [(s.file, s.reason.split(":")[0]) for s in result.skipped] == [
        ("deep.json", "not valid JSON"), ("deep.py", "cannot parse")]
