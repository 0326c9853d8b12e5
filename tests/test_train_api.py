"""t2t_lite.train: a run trained from Python is a run like the command's, opened without --data_dir."""
import json

import pytest

import t2t_lite
from t2t_lite.errors import UserError
from cli_helpers import run_tool
from trained_runs import multi30k_lines


def test_a_run_trained_by_t2t_lite_train_decodes_the_same_through_translator_and_the_decoder(multi30k_run,
                                                                                            tmp_path):
    # multi30k_run is trained by t2t_lite.train (trained_runs.train); nothing wrote its hparams.json by hand.
    with open(f"{multi30k_run['output_dir']}/hparams.json", encoding="utf-8") as f:
        spec = json.load(f)
    assert spec["data_dir"] == multi30k_run["data_dir"] and spec["problem"] == "translate_files"
    sources = multi30k_lines("val", "en", 12)
    (tmp_path / "src.en").write_text(sources, encoding="utf-8")
    # no data_dir: the run's own
    translator = t2t_lite.Translator.from_run(multi30k_run["output_dir"], mixed_precision="none")
    in_python = translator.translate(sources.splitlines())
    decoded = run_tool("decoder", f"--output_dir={multi30k_run['output_dir']}",
                       f"--decode_from_file={tmp_path / 'src.en'}", f"--decode_to_file={tmp_path / 'out.de'}",
                       "--mixed_precision=none")
    assert decoded.returncode == 0, decoded.stderr[-3000:]
    assert (tmp_path / "out.de").read_text(encoding="utf-8").splitlines() == in_python
    assert len(set(in_python)) > 1  # input-dependent outputs, so the comparison can fail


def test_train_refuses_unknown_settings_and_bad_values_before_writing_anything(tmp_path):
    with pytest.raises(UserError, match="unknown training setting trian_steps; known: train_steps, "):
        t2t_lite.train(problem="algorithmic_reverse", hparams_set="transformer_tiny", output_dir=str(tmp_path / "a"),
                       trian_steps=5)
    with pytest.raises(UserError, match="`save_checkpoints_steps` must be at least 1, got 0"):
        t2t_lite.train(problem="algorithmic_reverse", hparams_set="transformer_tiny", output_dir=str(tmp_path / "b"),
                       save_checkpoints_steps=0)
    with pytest.raises(UserError, match="`problem` and `hparams_set` are required for a new `output_dir`"):
        t2t_lite.train(output_dir=str(tmp_path / "c"), train_steps=1)
    assert not any(tmp_path.iterdir())


def test_a_moved_data_dir_is_named_and_a_given_one_wins(multi30k_run, tmp_path):
    import shutil

    from t2t_lite.run import RunRequest, open_run
    from t2t_lite.run_dir import RunDir, load_spec, save_spec

    run = tmp_path / "run"
    shutil.copytree(multi30k_run["output_dir"], run)
    spec = load_spec(RunDir(str(run)))
    save_spec(RunDir(str(run)), type(spec)(**{**spec.__dict__, "data_dir": str(tmp_path / "gone")}))
    with pytest.raises(UserError, match="trained on `data_dir` .*gone', which no longer exists; pass `data_dir`="):
        open_run(RunRequest(output_dir=str(run)))
    assert open_run(RunRequest(output_dir=str(run), data_dir=multi30k_run["data_dir"])).problem.vocab_size > 0
