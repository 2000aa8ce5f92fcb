"""The mapping TOML is validated against its schema (issue 22, bug 10): every table, key and
type of the user's file, unknown keys refused with a did-you-mean, placeholders checked; each
message names the file, the table and the key (released/mapping.py)."""

from __future__ import annotations

import pytest

from pytest_duplexact.released.mapping import MappingError, load_mapping

CASES = {
    "audio action not a table": ('[audio]\nwait = "input"\n', "audio.wait", "must be a table"),
    "conditions not a table": ('conditions = "x"\n', "conditions", "must be a table"),
    "conditions action not a table": ('[conditions]\nwait = "x"\n', "conditions.wait",
                                      "must be a table"),
    "condition synonym a list": ('[conditions.wait]\nfoo = ["x"]\n', "conditions.wait.foo",
                                 "must be a string"),
    "scenario not a table": ('scenario = "x"\n', "scenario", "must be a table"),
    "scenario values a number": ("[scenario]\nvalues = 3\n", "scenario.values",
                                 "must be a table"),
    "corpus values a string": ('[corpus]\nvalues = "x"\n', "corpus.values", "must be a table"),
    "id not a table": ("id = 5\n", "id", "must be a table"),
    "text with a number": ('[text]\nuser = ["transcript", 1]\n', "text.user[1]",
                           "must be a string"),
    "unknown placeholder": ('[source]\nfiles = ["{config}/{other}.parquet"]\n',
                            "source.files[0]", "unknown placeholder {other}"),
    "positional placeholder": ('[source]\nfiles = ["{config}/{0}.parquet"]\n',
                               "source.files[0]", "unknown placeholder {0}"),
    "lone brace": ('[source]\nfiles = ["{config}/{.parquet"]\n', "source.files[0]",
                   "not a valid pattern"),
    "format spec": ('[source]\nfiles = ["{config:>9}/x.parquet"]\n', "source.files[0]",
                    "only {config} and {split}"),
    "unit typo": ('[annotations]\nuser_start = [{ key = "times.user_onset_ms", units = "ms" }]'
                  "\n", "annotations.user_start[0].units",
                  "unknown key; did you mean 'unit'?"),
    "id keys a string": ('[id]\nkeys = "sample_id"\n', "id.keys",
                         "must be a list of strings, got a string"),
    "unknown table": ('[annotation]\nuser_start = []\n', "annotation",
                      "unknown table; did you mean 'annotations'?"),
    "unknown annotation": ('[annotations]\nuser_stat = []\n', "annotations.user_stat",
                           "did you mean 'user_start'?"),
    "unknown role": ('[audio.wait]\nusr = ["input"]\n', "audio.wait.usr",
                     "did you mean 'user'?"),
    "unknown column key": ('[columns]\ncorpora = "dataset"\n', "columns.corpora",
                           "did you mean 'corpus'?"),
    "unknown source key": ('[source]\nrevision = "main"\n', "source.revision", "unknown key"),
    "bad rate": ('[annotations]\ncue_start = [{ key = "c", unit = "samples", rate = true }]\n',
                 "annotations.cue_start[0].rate", "'source' or a positive number of Hz"),
    "candidate not a table": ('[annotations]\nuser_start = ["user_start"]\n',
                              "annotations.user_start[0]", "must be a table"),
    "corpus source key": ('[corpus.source]\nAMl = "real"\n', "corpus.source.AMl",
                          "did you mean 'AMI'?"),
    "version": ("version = 2\n", "version", "must be 1"),
    "config value": ('[configs]\nwait = 3\n', "configs.wait", "must be a string"),
    "empty files": ('[source]\nfiles = []\n', "source.files", "at least one pattern"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_schema_errors_name_file_table_and_key(tmp_path, case):
    text, field_, why = CASES[case]
    f = tmp_path / "my-mapping.toml"
    f.write_text(text, encoding="utf-8")
    with pytest.raises(MappingError) as e:
        load_mapping(f)
    msg = str(e.value)
    assert msg.startswith(f"{f}: "), msg
    assert f"field '{field_}'" in msg and why in msg, msg


def test_a_file_that_is_not_utf8_is_refused_naming_it(tmp_path):
    f = tmp_path / "latin1.toml"
    f.write_bytes('[conditions.wait]\n"pause café" = "inter_sentential_pause"\n'.encode("latin-1"))
    with pytest.raises(MappingError, match=rf"^{f}: not UTF-8 text \(byte 28: "):
        load_mapping(f)


def test_the_bundled_mapping_and_a_complete_user_file_pass(tmp_path):
    from tests.released.snapshot_builder import TEST_MAPPING

    f = tmp_path / "m.toml"
    f.write_text(TEST_MAPPING + '\n[corpus.values]\n"ami corpus" = "AMI"\n')
    m = load_mapping(f)
    assert m.annotation_candidates("user_start")[0].unit == "ms"
    assert m.corpus("AMI Corpus") == "AMI"
    assert m.id_keys == ["sample_id"]
