"""The TF Serving export of a tiny Multi30k run, as TF Serving and its users would load it.

Same strings as t2t-lite-decoder, only core TensorFlow and tensorflow-text ops,
loadable by the session-based loader TF Serving uses, robust to odd text and to
concurrent calls; the exporter refuses bad input without writing anything.
"""
import concurrent.futures
import dataclasses
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

import t2t_lite.hparams  # noqa: F401
import t2t_lite.problems  # noqa: F401
from t2t_lite import config
from t2t_lite import Translator
from t2t_lite.bin.lines import DecodeFileRequest, decode_file
from t2t_lite.decoding.decoder import Decoder
from t2t_lite.errors import UserError
from t2t_lite.export.exporter import ExportRequest, check_lengths, export_run, text_vocabularies
from t2t_lite.export.warmup import WARMUP_BATCH_SIZES, WARMUP_SENTENCE, read_warmup_requests
from t2t_lite.registry import hparams_sets, problems
from t2t_lite.decoding.request import DecodeRequest, SamplingSettings
from t2t_lite.run import RunRequest
from t2t_lite.run_dir import HPARAMS_FILE, read_spec
from cli_helpers import run_forked, run_tool, run_tools
from saved_model_graph import graph_nodes
from trained_runs import multi30k_lines

# Both the exporter and the decoder get these, so their searches are the same: float32 on every CPU, so this
# module's figures do not depend on the CPU (test_export_precision.py checks the default precision and bfloat16).
DECODE_EXTRA_LENGTH = 10
DECODE_FLAGS = [f"--extra_length={DECODE_EXTRA_LENGTH}", "--mixed_precision=none"]
ENV = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}

# Run in a fresh interpreter: only TensorFlow and tensorflow-text, as a TF Serving user has. It also
# reads the ops each library registers from TensorFlow's global op registry (the C API's
# TF_GetAllOpList) with TensorFlow alone imported, then again after `import tensorflow_text`: the
# difference is exactly what tensorflow-text adds. One interpreter does both: each pays TensorFlow's start-up.
FRESH_PROCESS = """
import json, sys
import tensorflow as tf
from tensorflow.core.framework import op_def_pb2
from tensorflow.python.client import pywrap_tf_session

def registered():
    buffer = pywrap_tf_session.TF_GetAllOpList()
    return {op.name for op in op_def_pb2.OpList.FromString(pywrap_tf_session.TF_GetBuffer(buffer)).op}

core = registered()
import tensorflow_text  # registers the SentencePiece ops (TF Serving's model server links them)
text = registered() - core
model = tf.saved_model.load(sys.argv[1])
with open(sys.argv[2], encoding="utf-8") as f:
    lines = f.read().split("\\n")[:-1]
outputs = model.signatures["serving_default"](inputs=tf.constant(lines))["outputs"].numpy()
assert not [name for name in sys.modules if name.split(".")[0] == "t2t_lite"], "t2t_lite was imported"
print(json.dumps({"core": sorted(core), "text": sorted(text), "served": [t.decode("utf-8") for t in outputs]}))
"""


def saved_model_cli(with_tensorflow_text: bool, *argv: str) -> None:
    """saved_model_cli's main (what its console script runs) on argv, in a process forked by run_forked: the
    tool as a user runs it, without a fresh interpreter's ~5 s of TensorFlow start-up. with_tensorflow_text:
    import tensorflow-text first (saved_model_cli cannot load op libraries itself)."""
    if with_tensorflow_text:
        import tensorflow_text  # noqa: F401
    from tensorflow.python.tools.saved_model_cli import main

    sys.argv = ["saved_model_cli", *argv]
    main()


def python(*args, timeout=300):
    return subprocess.run([sys.executable, *args], check=False, capture_output=True, text=True, timeout=timeout, env=ENV)


@pytest.fixture(scope="module")
def run(multi30k_run, tmp_path_factory):
    """The shared tiny Multi30k run (read-only), and a directory of this module's own for what it writes."""
    return {**multi30k_run, "tmp": tmp_path_factory.mktemp("export")}


@pytest.fixture(scope="module")
def exported(run):
    """t2t-lite-exporter run as a user would and, while it runs, 40 Multi30k test sentences decoded as
    t2t-lite-decoder decodes them (decode_file, the library call the command makes)."""
    tmp = run["tmp"]
    sentences = tmp / "test.en"
    sentences.write_text(multi30k_lines("test_2016_flickr", "en", 40), encoding="utf-8")
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        exporter = pool.submit(run_tool, "exporter", f"--output_dir={run['output_dir']}", f"--data_dir={run['data_dir']}",
                               *DECODE_FLAGS, f"--export_dir={tmp / 'exports'}", "--model_name=multi30k")
        decode_file(DecodeFileRequest(RunRequest(output_dir=run["output_dir"], data_dir=run["data_dir"], decode=DecodeRequest(extra_length=DECODE_EXTRA_LENGTH, mixed_precision="none")),
                                      str(sentences), decode_to_file=str(tmp / "decoded.txt")))
        result = exporter.result()
    assert result.returncode == 0, result.stderr
    return {"path": result.stdout.strip(), "sentences": sentences, "decoded": tmp / "decoded.txt"}


@pytest.fixture(scope="module")
def loaded(exported):
    """The export loaded in this process, once for the module: each load restores and traces its functions anew."""
    return tf.saved_model.load(exported["path"])


@pytest.fixture(scope="module")
def serve(loaded):
    """The export's serving_default, loaded in this process: list of str -> (texts, scores)."""
    signature = loaded.signatures["serving_default"]

    def call(lines):
        result = signature(inputs=tf.constant(lines, tf.string))
        return [t.decode("utf-8") for t in result["outputs"].numpy()], result["scores"].numpy()

    return call


@pytest.fixture(scope="module")
def run_translator(run):
    """The run's Translator with the export's decode settings, for the tests that check the export's beams
    against the run's: one for the module, as each new one traces its search anew."""
    return Translator.from_run(run["output_dir"], run["data_dir"], extra_length=DECODE_EXTRA_LENGTH,
                               mixed_precision="none")


def test_export_is_version_1_of_the_model_with_hparams_and_vocabulary_assets(run, exported):
    path = exported["path"]
    assert path == str(run["tmp"] / "exports" / "multi30k" / "1")
    assert sorted(os.listdir(os.path.dirname(path))) == ["1"]
    spec = read_spec(os.path.join(path, "assets", HPARAMS_FILE))
    assert (spec.problem, spec.hparams_set) == ("translate_files", "transformer_tiny")
    assert spec.hparams.decode.extra_length == 10 and spec.hparams.decode.beam_size == 4
    with open(os.path.join(path, "assets", "hparams.json"), encoding="utf-8") as f:
        assert json.load(f)["export"]["max_input_length"] == 256
    with open(os.path.join(path, "assets", "vocab.model"), "rb") as f:
        assert f.read() == problems.get("translate_files")(run["data_dir"]).vocabulary.model


def test_the_export_ships_tf_serving_warmup_requests_and_each_runs_through_it(exported, serve, loaded):
    records = read_warmup_requests(exported["path"])
    assert [len(tf.make_ndarray(r.predict_log.request.inputs["inputs"])) for r in records] == list(WARMUP_BATCH_SIZES)
    expected = serve([WARMUP_SENTENCE])[0]
    for record in records:
        request = record.predict_log.request
        assert (request.model_spec.name, request.model_spec.signature_name) == ("multi30k", "serving_default")
        inputs = tf.make_ndarray(request.inputs["inputs"])  # as TF Serving feeds it at load
        assert {text.decode("utf-8") for text in inputs} == {WARMUP_SENTENCE}
        outputs = loaded.signatures[request.model_spec.signature_name](inputs=tf.constant(inputs))["outputs"]
        assert [text.decode("utf-8") for text in outputs.numpy()] == expected * len(inputs)


def test_without_tensorflow_serving_api_an_export_writes_no_warmup_and_says_so(tmp_path, monkeypatch):
    from t2t_lite.export import warmup

    monkeypatch.setattr(warmup, "serving_api_installed", lambda: False)
    said = []
    assert warmup.write_warmup_requests(str(tmp_path), "m", said.append) is None
    assert said == [warmup.NO_SERVING_API] and not (tmp_path / "assets.extra").exists()


@pytest.fixture(scope="module")
def fresh_process(exported):
    """FRESH_PROCESS's findings on the export: {"core", "text": op names, "served": outputs of the sentences}."""
    result = python("-c", FRESH_PROCESS, exported["path"], str(exported["sentences"]))
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_fresh_process_with_only_tensorflow_gives_the_decoders_strings(exported, fresh_process):
    served = fresh_process["served"]
    decoded = exported["decoded"].read_text(encoding="utf-8").split("\n")[:-1]
    assert len(served) == len(decoded) == 40
    assert served == decoded
    assert len(set(decoded)) > 1  # the run learned something input-dependent: not a vacuous match


@pytest.mark.slow  # two processes of saved_model_cli, each loading the export
def test_saved_model_cli_shows_both_signatures_and_runs_the_export(exported, serve, tmp_path):
    show_code, shown, show_errors = run_forked(saved_model_cli, False, "show", "--dir", exported["path"], "--all")
    assert show_code == 0, show_errors[-3000:]
    for fragment in ("signature_def['serving_default']", "signature_def['decode_ids']", "dtype: DT_STRING",
                     "inputs['inputs']", "outputs['outputs']", "outputs['scores']", "tensorflow/serving/predict"):
        assert fragment in shown
    # `run` loads through the TF1 session loader, the path TF Serving's C++ loader takes.
    run_code, _, run_errors = run_forked(saved_model_cli, True, "run", "--dir", exported["path"], "--tag_set", "serve",
                                         "--signature_def", "serving_default", "--input_exprs",
                                         'inputs=["A dog runs.", "", "Two men sit."]', "--outdir", str(tmp_path))
    assert run_code == 0, run_errors[-3000:]
    texts, scores = serve(["A dog runs.", "", "Two men sit."])
    assert [t.decode("utf-8") for t in np.load(tmp_path / "outputs.npy", allow_pickle=True)] == texts
    np.testing.assert_allclose(np.load(tmp_path / "scores.npy"), scores, rtol=1e-5)


def graph_ops(saved_model_dir: str) -> tuple[set[str], set[str]]:
    """(every op type in the graph and in every function of its library, the library's function names)."""
    nodes, functions = graph_nodes(saved_model_dir)
    return {node.op for node in nodes}, functions


def test_every_op_in_the_export_is_core_tensorflow_or_tensorflow_text(exported, fresh_process):
    registered = fresh_process
    core, text = set(registered["core"]), set(registered["text"])
    assert {"MatMul", "While", "StaticRegexFullMatch"} <= core and "SentencepieceOp" not in core
    ops, functions = graph_ops(exported["path"])
    # A node may call a library function by its name; its body is audited with the library.
    other = sorted(ops - core - text - functions)
    assert other == [], f"ops that are neither core TensorFlow nor tensorflow-text: {other}"
    assert ops & text == {"SentencepieceOp", "SentencepieceTokenizeOp", "SentencepieceDetokenizeOp"}


ODD_INPUTS = {
    "empty": "",
    "whitespace only": " \t \u3000\u00a0\u2028 ",
    "5,000 characters": ("A black dog runs across the green grass near a lake. " * 100)[:5000],
    "emoji": "\U0001f436\U0001f3c3\u200d\u2642\ufe0f\U0001f4a8 \U0001f44d\U0001f3fd",
    "CJK": "\u4e00\u53ea\u72d7\u5728\u8349\u5730\u4e0a\u5954\u8dd1\u3002\u72ac\u304c\u8d70\u308b\u3002",
    "control characters": "A\x00dog\x01\x07\x1b[31m runs\x7f\r\x0b\x0c\x85.",
    "newline inside": "Two men\nsit on a bench.",
    "invalid UTF-8": b"\xff\xfe A dog \xc3( runs",
    "ordinary": "A woman rides a bike.",
}


@pytest.mark.parametrize("name", ODD_INPUTS)
def test_odd_input_gives_one_output_and_no_error(serve, name):
    texts, scores = serve([ODD_INPUTS[name]])
    assert len(texts) == len(scores) == 1 and np.isfinite(scores[0])
    if not ODD_INPUTS[name].strip():
        assert (texts[0], scores[0]) == ("", 0.0)


def test_a_batch_mixing_every_odd_input_gives_one_output_each(serve):
    lines = list(ODD_INPUTS.values()) * 2
    texts, scores = serve(lines)
    assert len(texts) == len(scores) == len(lines)
    assert all((texts[i], scores[i]) == ("", 0.0) for i, line in enumerate(lines) if not line.strip())
    # Every sentence decodes independently of its batch (the Decoder's guarantee).
    assert texts == [serve([line])[0][0] for line in lines]
    assert serve([])[0] == []


def test_over_long_input_is_truncated_to_max_input_length_tokens(run, loaded, serve):
    """Documented behaviour: the first max_input_length - 1 = 255 tokens, then EOS."""
    decode_ids = loaded.signatures["decode_ids"]
    vocabulary = problems.get("translate_files")(run["data_dir"]).vocabulary
    long_line = ODD_INPUTS["5,000 characters"]
    ids = vocabulary.encode(long_line)
    assert len(ids) > 255
    whole, first_255 = (decode_ids(inputs=tf.constant([row], tf.int32)) for row in (ids, ids[:255]))
    np.testing.assert_array_equal(whole["outputs"], first_255["outputs"])
    assert serve([long_line])[0] == [vocabulary.decode(whole["outputs"][0, 0].numpy())]


def test_decode_ids_takes_ids_with_or_without_eos_and_gives_k_beams(run, loaded, serve, run_translator):
    decode_ids = loaded.signatures["decode_ids"]
    vocabulary = problems.get("translate_files")(run["data_dir"]).vocabulary
    lines = ["A dog runs.", "Two men sit on a bench near the water."]
    ids = [vocabulary.encode(line) for line in lines]
    width = max(map(len, ids)) + 1
    padded = [[row + [0] * (width - len(row)) for row in ids],  # no EOS, PAD after
              [row + [1] + [0] * (width - len(row) - 1) for row in ids],  # EOS, then PAD
              [[0] * width for _ in ids]]  # no tokens: not decoded
    without_eos, with_eos, empty = (decode_ids(inputs=tf.constant(rows, tf.int32)) for rows in padded)
    assert without_eos["outputs"].shape[:2] == (2, 4) and without_eos["scores"].shape == (2, 4)
    np.testing.assert_array_equal(without_eos["outputs"], with_eos["outputs"])
    assert not np.any(empty["outputs"]) and not np.any(empty["scores"])
    for no_rows_or_no_columns in ([0, 3], [2, 0]):
        nothing = decode_ids(inputs=tf.zeros(no_rows_or_no_columns, tf.int32))
        assert nothing["scores"].shape == (no_rows_or_no_columns[0], 4) and not np.any(nothing["scores"])
    texts = [vocabulary.decode(beams[0]) for beams in without_eos["outputs"].numpy()]
    assert texts == serve(lines)[0]
    # Every beam, not only the best: the run's decoder with the export's settings gives the same 4 beams in
    # the same order, with their scores (a beam left unfinished would show as ids the decoder does not give).
    expected = run_translator.hypotheses(lines, nbest=4)
    outputs, scores = without_eos["outputs"].numpy(), without_eos["scores"].numpy()
    for sentence, hypotheses in enumerate(expected):
        assert len(hypotheses) == 4
        for beam, hypothesis in enumerate(hypotheses):
            row = outputs[sentence, beam]
            assert tuple(row[row != 0].tolist()) == hypothesis.ids, (sentence, beam)
            assert scores[sentence, beam] == pytest.approx(hypothesis.score, abs=1e-4)


def test_8_threads_of_20_requests_give_the_one_by_one_outputs(serve):
    lines = [f"{n} dogs play in the snow." for n in range(1, 9)] + ["", "A man sleeps."]
    expected = {line: serve([line])[0][0] for line in lines}

    def client(thread: int) -> list[tuple[str, str]]:
        # 20 each keeps all 8 threads calling at once for most of the test, as 100 each did at 5x the time.
        requests = [lines[(thread + i) % len(lines)] for i in range(20)]
        return [(line, serve([line])[0][0]) for line in requests]

    with concurrent.futures.ThreadPoolExecutor(max_workers=8) as pool:
        answers = [pair for result in pool.map(client, range(8)) for pair in result]
    assert len(answers) == 160
    assert all(text == expected[line] for line, text in answers)


def test_translator_from_export_gives_the_decoders_outputs_and_its_beams(exported, serve, run_translator):
    lines = exported["sentences"].read_text(encoding="utf-8").splitlines()[:20] + ["", "   "]
    translator = Translator.from_export(exported["path"])
    best = translator.translate(lines)
    assert best == serve(lines)[0]
    assert best[:20] == exported["decoded"].read_text(encoding="utf-8").splitlines()[:20]
    nbest = translator.hypotheses(lines, nbest=4)
    assert [hyps[0].text for hyps in nbest] == best and [len(h) for h in nbest[:20]] == [4] * 20
    np.testing.assert_allclose([hyps[0].score for hyps in nbest], serve(lines)[1], rtol=1e-5)
    # The beams after the best are the search's own: distinct, best first, and the run decoder's 4-best.
    for hyps in nbest[:20]:
        assert len({h.ids for h in hyps}) == 4 and all(a.score >= b.score for a, b in zip(hyps, hyps[1:]))
    from_run = run_translator.hypotheses(lines, nbest=4)
    assert [[h.text for h in hyps] for hyps in nbest] == [[h.text for h in hyps] for hyps in from_run]
    np.testing.assert_allclose([[h.score for h in hyps] for hyps in nbest[:20]],
                               [[h.score for h in hyps] for hyps in from_run[:20]], rtol=1e-5)
    with pytest.raises(UserError, match="holds beam search only"):
        translator.score(lines, lines)
    with pytest.raises(UserError, match=r"exported with \(4\); export again with `beam_size`=2"):
        translator.translate(lines, beam_size=2)
    with pytest.raises(UserError, match="is not a t2t-lite export"):
        Translator.from_export(str(exported["sentences"].parent))


def test_decoder_command_decodes_the_saved_model_in_a_fresh_process(exported, tmp_path):
    # A new process has not imported tensorflow-text: opening the export must register its ops itself.
    decoded = run_tool("decoder", f"--export_dir={exported['path']}", f"--decode_from_file={exported['sentences']}",
                       f"--decode_to_file={tmp_path / 'out.de'}")
    assert decoded.returncode == 0, decoded.stderr[-3000:]
    assert (tmp_path / "out.de").read_text(encoding="utf-8") == exported["decoded"].read_text(encoding="utf-8")


def test_second_export_is_version_2_with_the_decode_settings_asked_for_each_signatures_search_traced_once(
        run, exported, monkeypatch):
    export_dir = os.path.dirname(os.path.dirname(exported["path"]))
    run_request = RunRequest(output_dir=run["output_dir"], data_dir=run["data_dir"], decode=DecodeRequest(beam_size=1, alpha=0.0))
    searches_traced = []
    trace = Decoder._decode  # runs in Python only while a search is traced
    monkeypatch.setattr(Decoder, "_decode", lambda self, inputs: searches_traced.append(1) or trace(self, inputs))
    path = export_run(ExportRequest(export_dir=export_dir, run=run_request, model_name="multi30k", max_input_length=64))
    # One search traced per signature: tracing it again as the export is saved doubled an export's time.
    assert len(searches_traced) == 2
    assert os.path.basename(path) == "2" and sorted(os.listdir(os.path.dirname(path))) == ["1", "2"]
    with open(os.path.join(path, "assets", "hparams.json"), encoding="utf-8") as f:
        saved = json.load(f)
    assert saved["hparams"]["decode"]["beam_size"] == 1 and saved["export"]["max_input_length"] == 64
    decode_ids = tf.saved_model.load(path).signatures["decode_ids"]
    assert decode_ids(inputs=tf.constant([[5, 6, 7]], tf.int32))["scores"].shape == (1, 1)


@pytest.fixture(scope="module")
def refused(run, tmp_path_factory):
    """The exporter CLI on a bad flag and on a refusal of the library's; the library's other refusals are
    test_library_refusals_are_user_errors'."""
    tmp = tmp_path_factory.mktemp("refused")
    (tmp / "a_file").write_text("not a directory\n")
    cases = {
        "missing checkpoint": ([f"--output_dir={tmp / 'no_run'}", f"--export_dir={tmp / 'exports'}"],
                               "no checkpoint in --output_dir"),
        "unknown precision": ([f"--output_dir={run['output_dir']}", f"--data_dir={run['data_dir']}",
                               f"--export_dir={tmp / 'exports'}", "--mixed_precision=float8"],
                              "--mixed_precision=float8: value should be one of <auto|none|mixed_bfloat16|mixed_float16>"),
    }
    done = run_tools({name: ("exporter", flags) for name, (flags, _) in cases.items()}, max_running=2)
    return tmp, {name: (done[name].returncode, done[name].stdout, done[name].stderr, cases[name][1])
                 for name in cases}


@pytest.mark.parametrize("case", ["missing checkpoint", "unknown precision"])
def test_exporter_refuses_bad_input_with_one_line_and_writes_nothing(refused, case):
    tmp, results = refused
    code, stdout, stderr, message = results[case]
    errors = [line for line in stderr.splitlines() if line.startswith("t2t-lite-exporter: error:")]
    assert code == 2 and len(errors) == 1 and message in errors[0], stderr
    assert "Traceback" not in stderr and stdout == ""
    assert sorted(os.listdir(tmp)) == ["a_file"]


def test_library_refusals_are_user_errors(run, tmp_path):
    hparams = hparams_sets.get("transformer_tiny")()
    with pytest.raises(UserError, match="`max_input_length` must be at least 2"):
        check_lengths(hparams.model, hparams.decode, 1)
    learned = config.apply_overrides(hparams, "position_encoding=learned,max_position=100")
    with pytest.raises(UserError, match="exceeds the model's learned max_position 100"):
        check_lengths(learned.model, learned.decode, 64)
    with pytest.raises(UserError, match="'algorithmic_reverse' has no SentencePiece vocabulary"):
        text_vocabularies(problems.get("algorithmic_reverse")(), "algorithmic_reverse")
    good = RunRequest(output_dir=run["output_dir"], data_dir=run["data_dir"])
    export_dir = str(run["tmp"] / "x")
    with pytest.raises(UserError, match="`model_name` must be"):
        export_run(ExportRequest(export_dir, good, model_name="../escape"))
    with pytest.raises(UserError, match="^a SavedModel decodes with beam search"):  # the exporter's engine
        export_run(ExportRequest(export_dir, dataclasses.replace(good, decode=DecodeRequest(
            sampling=SamplingSettings()))))
    assert not os.path.exists(run["tmp"] / "x")
    (tmp_path / "a_file").write_text("not a directory\n")
    with pytest.raises(UserError, match="cannot write to `export_dir`"):
        export_run(ExportRequest(str(tmp_path / "a_file" / "exports"), good))
    assert sorted(os.listdir(tmp_path)) == ["a_file"] and (tmp_path / "a_file").read_text() == "not a directory\n"
