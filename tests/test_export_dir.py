"""The one reader of what an export is: its format from its files, its spec and export entry, or not an export."""
import json

import pytest

from t2t_lite import config
from t2t_lite.errors import UserError
from t2t_lite.export_format import CTRANSLATE2, SAVED_MODEL
from t2t_lite.inference.export_reader import find_export, read_export
from t2t_lite.run_dir import HPARAMS_FILE, RunSpec, spec_json

SPEC = RunSpec("translate_files", "transformer_tiny", "beam_size=3", config.HParams())


def write(directory, files: dict) -> str:
    for name, text in files.items():
        (directory / name).parent.mkdir(parents=True, exist_ok=True)
        (directory / name).write_text(text, encoding="utf-8")
    return str(directory)


def test_each_format_is_read_with_its_spec_entry_and_vocabulary(tmp_path):
    ct2 = write(tmp_path / "ct2", {"model.bin": "", HPARAMS_FILE: spec_json(SPEC, export={
        "format": "ctranslate2", "max_positions": 64})})
    export = read_export(ct2)
    assert (export.format, export.info["max_positions"], export.spec) == (CTRANSLATE2, 64, SPEC)
    assert export.vocab_path == f"{ct2}/vocab.model"
    saved = write(tmp_path / "saved", {"saved_model.pb": "", f"assets/{HPARAMS_FILE}": spec_json(SPEC, export={
        "model_name": "m"})})
    export = read_export(saved)
    assert (export.format, export.info) == (SAVED_MODEL, {"model_name": "m"})
    assert export.decode_hparams == SPEC.hparams.decode
    assert export.vocab_path == f"{saved}/assets/vocab.model"


@pytest.mark.parametrize("files", [
    {},  # an empty directory
    {"model.bin": ""},  # a CTranslate2 model t2t-lite did not write
    {"model.bin": "", HPARAMS_FILE: spec_json(SPEC)},  # ... beside a run's hparams.json
    {HPARAMS_FILE: spec_json(SPEC, export={"format": "ctranslate2"})},  # the model missing
    {"saved_model.pb": ""},  # a SavedModel t2t-lite did not write
    {f"assets/{HPARAMS_FILE}": spec_json(SPEC)},  # a SavedModel's assets without its graph
    {HPARAMS_FILE: spec_json(SPEC)},  # a run directory
])
def test_what_is_not_an_export_is_refused_in_one_line(tmp_path, files):
    path = write(tmp_path, files)
    assert find_export(path) is None
    with pytest.raises(UserError, match=f"^'{tmp_path}' is not a t2t-lite export .* t2t-lite-exporter printed$"):
        read_export(path)


def test_an_unreadable_hparams_file_is_one_user_error(tmp_path):
    path = write(tmp_path, {"model.bin": "", HPARAMS_FILE: json.dumps({"export": {"format": "ctranslate2"}})[:-3]})
    with pytest.raises(UserError, match="hparams.json is unreadable or not a t2t-lite hparams file"):
        find_export(path)
