"""TF Serving's version layout, published atomically, and the serving graph's notion of a blank line."""
import os
import sys

import pytest
import tensorflow as tf

from t2t_lite.errors import UserError
from t2t_lite.export import layout
from t2t_lite.export.serving import BLANK_PATTERN


def write_marker(path: str) -> None:
    with open(os.path.join(path, "saved_model.pb"), "w") as f:
        f.write("complete")


def test_new_version_is_one_more_than_the_highest_integer_name(tmp_path):
    model_dir = layout.make_model_dir(str(tmp_path), "translate")
    assert layout.publish(model_dir, write_marker) == os.path.join(model_dir, "1")
    for name in ("7", "notes", ".tmp-export-abandoned"):
        os.mkdir(os.path.join(model_dir, name))
    path = layout.publish(model_dir, write_marker)
    assert path == os.path.join(model_dir, "8")
    with open(os.path.join(path, "saved_model.pb")) as f:
        assert f.read() == "complete"
    assert layout.versions(model_dir) == [1, 7, 8]


def test_version_is_invisible_until_complete(tmp_path):
    model_dir = layout.make_model_dir(str(tmp_path), "translate")

    def write(path):
        # While the export is written, TF Serving sees no version: only a non-integer name.
        assert layout.versions(model_dir) == []
        assert os.path.basename(path).startswith(layout.STAGING_PREFIX)
        write_marker(path)

    layout.publish(model_dir, write)
    assert layout.versions(model_dir) == [1]


@pytest.mark.parametrize("error", [RuntimeError("disk full"), KeyboardInterrupt()])
def test_failed_or_interrupted_export_leaves_nothing(tmp_path, error):
    model_dir = layout.make_model_dir(str(tmp_path), "translate")

    def write(path):
        write_marker(path)
        raise error

    with pytest.raises(type(error)):
        layout.publish(model_dir, write)
    assert os.listdir(model_dir) == []


def test_concurrent_export_taking_the_number_first_is_skipped(tmp_path, monkeypatch):
    model_dir = layout.make_model_dir(str(tmp_path), "translate")
    real_versions = layout.versions
    calls = []

    def racing_versions(directory):
        # Another exporter publishes version 1 between our listing and our rename.
        found = real_versions(directory)
        if not calls:
            calls.append(True)
            os.mkdir(os.path.join(directory, "1"))
            write_marker(os.path.join(directory, "1"))
        return found

    monkeypatch.setattr(layout, "versions", racing_versions)
    assert layout.publish(model_dir, write_marker) == os.path.join(model_dir, "2")


def test_unwritable_export_dir_is_a_user_error(tmp_path):
    (tmp_path / "a_file").write_text("")
    with pytest.raises(UserError, match="cannot write to `export_dir` .*a_file/exports.*Not a directory"):
        layout.make_model_dir(str(tmp_path / "a_file" / "exports"), "translate")


@pytest.mark.parametrize("name", ["translate", "wmt_ende-base.v2", "m1"])
def test_good_model_names(name):
    layout.check_model_name(name)


@pytest.mark.parametrize("name", ["", "../up", "a/b", ".hidden", "-flag", "sp ace", "caf\u00e9"])
def test_bad_model_names_are_user_errors(name):
    with pytest.raises(UserError, match="`model_name` must be"):
        layout.check_model_name(name)


def test_blank_pattern_is_exactly_pythons_isspace_over_all_of_unicode():
    """The graph must call a line blank exactly when t2t-lite-decoder (line.strip()) does."""
    characters = [chr(c) for c in range(sys.maxunicode + 1) if not 0xD800 <= c < 0xE000]  # no lone surrogates
    matches = tf.strings.regex_full_match([c.encode("utf-8") for c in characters], BLANK_PATTERN).numpy()
    assert {c for c, blank in zip(characters, matches) if blank} == {c for c in characters if c.isspace()}
