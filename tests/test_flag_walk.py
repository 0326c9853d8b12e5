"""No flag silently dropped: every flag of every command, on every engine it runs on, takes effect or is refused.

The flags are read off the commands themselves (each t2t_lite.bin module that runs under run_main, imported
in a process of its own), so a flag added later without a decision here fails
test_every_flag_of_every_command_has_a_decision_on_every_engine. A decision is EFFECT (the flag is used),
ENGINE (it picks the engine) or Refused(value, message): given `value` (with `also`), the command refuses it
in one line naming why, exits 2 and writes nothing, before any model loads; every Refused here is run.
EFFECT is checked where a check is cheap: on a CTranslate2 export --alpha changes the scores as the length
penalty says, --extra_length caps the lengths; --batch_size reaches both exports' batching.
"""
import concurrent.futures
import dataclasses
import json
import math
import os
import re
from pathlib import Path

import pytest

from t2t_lite.data.vocabulary import Vocabulary
from t2t_lite.export import ctranslate2_export
from t2t_lite.export.exporter import ExportRequest, export_run
from t2t_lite.decoding.request import DecodeRequest
from t2t_lite.run import RunRequest, open_run
from cli_helpers import run_forked, run_tool, run_tools, snapshot

BIN = Path(__file__).resolve().parents[1] / "bin"
EFFECT = "takes effect"
ENGINE = "picks the engine"


@dataclasses.dataclass(frozen=True)
class Refused:
    value: str  # the flag's value in the refused command
    message: str  # a part of the one error line: why
    also: tuple[str, ...] = ()  # other flags the refusal needs (e.g. sampling for --sampling_topk)


def effect(*names: str) -> dict:
    return dict.fromkeys(names, EFFECT)


USR_DIR = effect("usr_dir", "t2t_usr_dir")  # bin/cli.py's, on every command: imported before main runs
RUN_PICKING = ("output_dir", "checkpoint_path", "checkpoint", "data_dir", "problem", "hparams_set")
NOT_A_RUN = "picks a run, but --export_dir decodes an export"
NO_SAMPLING = Refused("1.0", "decodes with beam search; sample from the run")
DECODER_ANY_ENGINE = {**USR_DIR, "export_dir": ENGINE,
                      **effect("decode_from_file", "decode_to_file", "decode_reference", "paper_bleu_language",
                               "batch_size", "parallel_batches", "nbest", "output_format",
                               # for a parser (test_parser_trees.py); refused for other problems there too
                               "output_trees",
                               # for a parser (test_raw_text.py); other problems read their lines as they are
                               "input_tokenized")}
DECODER_ON_AN_EXPORT = {**DECODER_ANY_ENGINE,
                        **{name: Refused("x", NOT_A_RUN) for name in RUN_PICKING if name != "checkpoint"},
                        "checkpoint": Refused("latest", NOT_A_RUN),
                        "sampling_temperature": NO_SAMPLING,
                        "sampling_topk": Refused("5", NO_SAMPLING.message, ("--sampling_temperature=1",)),
                        "random_seed": Refused("1", NO_SAMPLING.message, ("--sampling_temperature=1",))}
EXPORTED = "decodes with the {} it was exported with"
EXPORTER_ANY_FORMAT = {**USR_DIR, "export_format": ENGINE, **effect(*RUN_PICKING),
                       # fixed in a SavedModel, a CTranslate2 export's defaults (test_export*.py check both)
                       **effect("beam_size", "alpha", "extra_length", "export_dir", "model_name")}

# command -> engine -> flag -> decision. Commands that run on one thing have the one engine "-".
DECISIONS = {
    "decoder": {
        "run": {**DECODER_ANY_ENGINE, **effect(*RUN_PICKING),
                **effect("beam_size", "alpha", "extra_length", "mixed_precision", "sampling_temperature",
                         "sampling_topk", "random_seed", "constrained_decoding"),
                "compute_type": Refused("int8", "--compute_type is for CTranslate2 exports; a run computes in --mixed_precision")},
        "saved_model": {**DECODER_ON_AN_EXPORT,
                        **{name: Refused(value, EXPORTED.format(name))
                           for name, value in (("beam_size", "2"), ("alpha", "1.5"), ("extra_length", "3"))},
                        # the fixture exports in float32
                        "mixed_precision": Refused("mixed_bfloat16", "a SavedModel computes in float32"),
                        "constrained_decoding": Refused("true", EXPORTED.format("constrained_decoding")),
                        "compute_type": Refused("int8", "is a SavedModel, which computes as it was exported")},
        "ctranslate2": {**DECODER_ON_AN_EXPORT, **effect("beam_size", "alpha", "extra_length", "compute_type"),
                        "mixed_precision": Refused("mixed_bfloat16",
                                                   "takes no --mixed_precision; it computes in its --compute_type"),
                        "constrained_decoding": Refused("true", "a CTranslate2 export searches freely")},
    },
    "scorer": {
        "run": {**USR_DIR, **effect(*RUN_PICKING),
                **effect("alpha", "mixed_precision", "batch_size", "source_file", "target_file", "output_file"),
                "beam_size": Refused("2", "scoring searches nothing"),
                "extra_length": Refused("5", "scoring searches nothing"),
                "constrained_decoding": Refused("true", "scoring searches nothing")},
    },
    "exporter": {
        "saved_model": {**EXPORTER_ANY_FORMAT, **effect("max_input_length", "mixed_precision", "constrained_decoding"),
                        "quantization": Refused("int8", "--quantization is for --export_format=ctranslate2")},
        "ctranslate2": {**EXPORTER_ANY_FORMAT, "quantization": EFFECT,
                        "constrained_decoding": Refused("true", "a CTranslate2 export searches freely"),
                        "max_input_length": Refused("64", "--max_input_length is for --export_format=saved_model"),
                        "mixed_precision": Refused("mixed_bfloat16", "a CTranslate2 export computes in float32")},
    },
    "visualize": {"run": {**USR_DIR, **effect("output_dir", "checkpoint_path", "checkpoint", "data_dir", "sentence",
                                              "plot_dir")}},
    "trainer": {"-": {
        **USR_DIR,
        **effect("hparams_set", "hparams", "output_dir", "problem", "data_dir", "generate_data", "train_steps",
                 "train_minutes", "eval_steps", "save_checkpoints_steps", "keep_checkpoint_max", "random_seed",
                 "log_every_steps", "jit_compile", "distribution", "cpu_devices", "mixed_precision",
                 "float32_output_projection", "max_nonfinite_steps", "memory_probe", "eval_bleu_sentences",
                 "best_checkpoint_metric", "early_stopping_patience", "warm_start_from", "warm_start_optimizer",
                 "show_samples", "registry_help", "dry_run"),
        # datagen's source flags prepare data with --generate_data (and --vocab_size sizes --dry_run's model);
        # training alone would ignore them
        **{name: Refused(value, "the trainer does only with --generate_data")
           for name, value in (("tmp_dir", "/tmp"), ("train_files", "a.en,a.de"), ("dev_files", "b.en,b.de"),
                               ("test_files", "c.en,c.de"), ("vocab_size", "300"), ("num_shards", "2"),
                               ("max_vocab_sentences", "1000"), ("vocab_from", "/tmp"),
                               ("vocab_file", "/tmp/v.model"), ("source_vocab_size", "300"),
                               ("target_vocab_size", "300"), ("source_vocab_file", "/tmp/v.model"),
                               ("target_vocab_file", "/tmp/v.model"), ("source_vocab_from", "/tmp"),
                               ("target_vocab_from", "/tmp"), ("max_length_ratio", "2"),
                               ("drop_copies", "false"), ("drop_duplicates", "false"))}}},
    "datagen": {"-": {**USR_DIR, **effect("problem", "data_dir", "tmp_dir", "train_files", "dev_files", "test_files",
                                          "vocab_size", "num_shards", "max_vocab_sentences", "max_length",
                                          "vocab_from", "vocab_file", "source_vocab_size", "target_vocab_size",
                                          "source_vocab_file", "target_vocab_file", "source_vocab_from",
                                          "target_vocab_from", "max_length_ratio", "drop_copies",
                                          "drop_duplicates")}},
    "avg_checkpoints": {"-": {**USR_DIR, **effect("output_dir", "last_n", "destination_dir")}},
    "ensemble": {"-": {**USR_DIR, **effect("output_dir", "partners")}},
    "bleu": {"-": {**USR_DIR, **effect("translation", "reference", "paper_bleu_language")}},
    "query": {"-": {**USR_DIR, **effect("model_name", "protocol", "server", "model_version", "input_file",
                                        "batch_size", "timeout", "scores")}},
}


def commands() -> list[str]:
    """Every command: the modules of t2t_lite.bin that run a main under cli.run_main."""
    return sorted(path.stem for path in BIN.glob("*.py")
                  if path.stem != "cli" and re.search(r"run_main\(main, \"t2t-lite-", path.read_text()))


def _print_flags(tool: str) -> None:
    """In a process of its own (absl's flags are global): the flags t2t-lite's modules define for `tool`."""
    import importlib

    from absl import flags

    importlib.import_module(f"t2t_lite.bin.{tool}")
    print(json.dumps(sorted({flag.name for module, defined in flags.FLAGS.flags_by_module_dict().items()
                             if module.startswith("t2t_lite.") for flag in defined})))


def test_every_flag_of_every_command_has_a_decision_on_every_engine():
    assert sorted(DECISIONS) == commands()
    with concurrent.futures.ThreadPoolExecutor(3) as pool:
        printed = dict(zip(DECISIONS, pool.map(lambda tool: run_forked(_print_flags, tool), DECISIONS)))
    for tool, engines in DECISIONS.items():
        code, out, err = printed[tool]
        assert code == 0, err
        flag_names = set(json.loads(out))
        # The walk sees the flags: cli.py's and the command's own.
        assert {"usr_dir", "t2t_usr_dir"} < flag_names, flag_names
        for engine, decisions in engines.items():
            assert set(decisions) == flag_names, (
                f"t2t-lite-{tool} on {engine}: decide (EFFECT or Refused) for {sorted(flag_names - set(decisions))}; "
                f"no such flags: {sorted(set(decisions) - flag_names)}")


@pytest.fixture(scope="module")
def engines(multi30k_run, tmp_path_factory):
    """The shared Multi30k run, a SavedModel and a CTranslate2 export of it, and a few source lines."""
    pytest.importorskip("ctranslate2")
    tmp = tmp_path_factory.mktemp("engines")
    request = RunRequest(output_dir=multi30k_run["output_dir"], data_dir=multi30k_run["data_dir"],
                         decode=DecodeRequest(extra_length=10, mixed_precision="none"))
    saved_model = export_run(ExportRequest(export_dir=str(tmp / "saved_model"), run=request, model_name="m"))
    ctranslate2 = ctranslate2_export.export_ctranslate2(open_run(request), str(tmp / "ctranslate2"), "m")
    with open(multi30k_run["raw"] / "val.en", encoding="utf-8") as f:
        sentences = ["A man.", "Dogs."] + f.read().splitlines()[:2]  # short ones, whose outputs outgrow them
    source = tmp / "source.en"
    source.write_text("\n".join(sentences) + "\n", encoding="utf-8")
    (tmp / "target.de").write_text("\n".join(sentences) + "\n", encoding="utf-8")
    return {**multi30k_run, "tmp": tmp, "saved_model": saved_model, "ctranslate2": ctranslate2, "source": source,
            "sentences": sentences}


def engine_flags(tool: str, engine: str, places: dict, out: Path) -> list[str]:
    """The flags that run `tool` on `engine`, writing only under `out`."""
    run = [f"--output_dir={places['output_dir']}", f"--data_dir={places['data_dir']}"]
    if tool == "decoder":
        where = run if engine == "run" else [f"--export_dir={places[engine]}"]
        return [*where, f"--decode_from_file={places['source']}", f"--decode_to_file={out / 'decoded'}"]
    if tool == "scorer":
        return [*run, f"--source_file={places['source']}", f"--target_file={places['tmp'] / 'target.de'}",
                f"--output_file={out / 'scores'}"]
    if tool == "exporter":
        return [*run, f"--export_dir={out / 'exports'}", f"--export_format={engine}"]
    if tool == "trainer":
        return ["--problem=algorithmic_reverse", "--hparams_set=transformer_tiny", f"--output_dir={out / 'run'}",
                "--train_steps=1"]
    raise AssertionError(f"no engine flags for {tool}: add them to refuse one of its flags")


REFUSALS = sorted((tool, engine, flag) for tool, engines in DECISIONS.items() for engine, decisions in engines.items()
                  for flag, decision in decisions.items() if isinstance(decision, Refused))


@pytest.fixture(scope="module")
def refusals(engines):
    """Each refused (command, engine, flag) run: its Result and whether anything changed on disk."""
    cases, outs = {}, {}
    for tool, engine, flag in REFUSALS:
        decision = DECISIONS[tool][engine][flag]
        out = engines["tmp"] / "refused" / f"{tool}-{engine}-{flag}"
        out.mkdir(parents=True)
        outs[(tool, engine, flag)] = out
        cases[(tool, engine, flag)] = (tool, [*engine_flags(tool, engine, engines, out), *decision.also,
                                              f"--{flag}={decision.value}"])
    watched = [engines["tmp"] / "saved_model", engines["tmp"] / "ctranslate2", Path(engines["output_dir"])]
    before = {path: snapshot(path) for path in [*watched, *outs.values()]}
    results = run_tools(cases)
    return {key: (result, [str(path) for path in [*watched, outs[key]] if snapshot(path) != before[path]])
            for key, result in results.items()}


@pytest.mark.parametrize("tool,engine,flag", REFUSALS)
def test_refused_flag_gets_one_line_exit_2_and_nothing_written(refusals, tool, engine, flag):
    result, changed = refusals[(tool, engine, flag)]
    assert result.returncode == 2, result.stderr[-3000:]
    assert DECISIONS[tool][engine][flag].message in result.error
    # one line, and nothing before it: no progress line of a model loading or decoding
    assert result.stderr.strip().splitlines() == result.error_lines, result.stderr[-3000:]
    assert result.stdout == "" and changed == []


# Flags that take effect on an engine but would do nothing in one of its modes: refused there.
MODE_REFUSALS = {
    "sampling with a beam": (["--sampling_temperature=1", "--beam_size=2"], "without a beam or length penalty"),
    "sampling with alpha": (["--sampling_temperature=1", "--alpha=1"], "without a beam or length penalty"),
    "standard input in parallel": (["--decode_from_file=-", "--parallel_batches=2"], "needs a file to decode"),
}


@pytest.mark.parametrize("mode", sorted(MODE_REFUSALS))
def test_a_flag_that_does_nothing_in_a_mode_is_refused_there(engines, mode):
    flags, message = MODE_REFUSALS[mode]
    # the decoder's outputs would go to standard output: nothing there, one line on stderr
    result = run_tool("decoder", f"--output_dir={engines['output_dir']}", f"--data_dir={engines['data_dir']}",
                      f"--decode_from_file={engines['source']}", *flags)  # the last --decode_from_file counts
    assert result.returncode == 2 and message in result.error
    assert result.stderr.strip().splitlines() == result.error_lines and result.stdout == ""


# CTranslate2's default of 4 threads spins for cores the other test workers hold: 20x slower on 2 busy cores.
CTRANSLATE2_ENV = {"OMP_NUM_THREADS": "1"}


def decode_all(engines, runs: dict) -> dict:
    """name -> (engine, flags): each decoder run's JSON Lines and progress lines, at most 3 at a time."""
    results = run_tools({name: ("decoder", [f"--export_dir={engines[engine]}",
                                            f"--decode_from_file={engines['source']}", "--output_format=jsonl",
                                            *flags], CTRANSLATE2_ENV)
                         for name, (engine, flags) in runs.items()})
    decoded = {}
    for name, result in results.items():
        assert result.returncode == 0, result.stderr[-3000:]
        progress = [line for line in result.stderr.splitlines() if line.startswith("decoded ")]
        decoded[name] = ([json.loads(line) for line in result.stdout.splitlines()], progress)
    return decoded


@pytest.fixture(scope="module")
def decoded(engines):
    """The decoder's JSON Lines and progress lines on the exports: as exported, and with a flag each."""
    return decode_all(engines, {"default": ("ctranslate2", ()),
                                "alpha_batches": ("ctranslate2", ("--alpha=0", "--batch_size=2")),
                                "capped": ("ctranslate2", ("--extra_length=1",)),
                                "saved_model_batches": ("saved_model", ("--batch_size=2",))})


@pytest.fixture(scope="module")
def source_lengths(engines) -> list[int]:
    """Each source line's token count, its EOS included."""
    vocabulary = Vocabulary.from_file(os.path.join(engines["ctranslate2"], "vocab.model"))
    return [len(vocabulary.encode(sentence)) + 1 for sentence in engines["sentences"]]


def test_batch_size_takes_effect_on_both_exports(decoded):
    outputs, progress = decoded["default"]
    assert len(progress) == 1  # the export's batch size (32) holds every line
    for name in ("alpha_batches", "saved_model_batches"):
        outputs, progress = decoded[name]
        assert len(outputs) == len(decoded["default"][0])
        assert len(progress) == math.ceil(len(outputs) / 2), progress  # 2 sentences a call


def test_alpha_takes_effect_on_a_ctranslate2_export(decoded, source_lengths):
    # --alpha=0 scores the log-probability; the export's 0.6 divides it by ((5 + length) / 6) ** 0.6, the length
    # counting the EOS, which a hypothesis stopped at the export's extra_length (10) lacks
    same = 0
    for ours, theirs, source in zip(decoded["default"][0], decoded["alpha_batches"][0], source_lengths):
        best, plain = ours["hypotheses"][0], theirs["hypotheses"][0]
        if best["ids"] == plain["ids"]:
            same += 1
            length = len(best["ids"]) + (len(best["ids"]) < source + 10)
            assert plain["score"] == pytest.approx(best["score"] * ((5 + length) / 6) ** 0.6, rel=1e-4)
            assert plain["score"] < best["score"] < 0
    assert same >= len(source_lengths) // 2


def test_extra_length_takes_effect_on_a_ctranslate2_export(decoded, source_lengths):
    # --extra_length=1: at most the source's tokens, its EOS and one more, where the export's 10 gives more
    capped, default = decoded["capped"][0], decoded["default"][0]
    assert all(len(h["ids"]) <= source + 1 for output, source in zip(capped, source_lengths)
               for h in output["hypotheses"])
    assert any(len(output["hypotheses"][0]["ids"]) > source + 1 for output, source in zip(default, source_lengths))
