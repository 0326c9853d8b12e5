"""docs/reproduce_wmt14.md's commands, each run in a dry form, so the recipe cannot go stale.

Every ```sh block of the page is read; each command is checked by the program it names:
  t2t-lite-*   its flags parsed by that program's own module (one process per program, since every
               program defines its flags on absl's global FLAGS), then a dry form of its work:
               trainer: run-flag checks, hparams overrides resolved, the model built with --dry_run (once
                 per distinct model) and its parameters counted, the --distribution strategy made on 8
                 logical CPU devices standing in for 8 GPUs (multi_worker: TF_CONFIG checked, since its
                 strategy would wait for the hosts it names);
               datagen: the problem's data sources resolved from the flags, nothing downloaded or read;
               decoder, avg-checkpoints: flags parsed; bleu: run on two small files in place of the doc's.
  sacrebleu    its arguments parsed by sacreBLEU's own parser and the test set looked up, nothing fetched.
The page's "# parameters:" and "# update:" comments and its FLOP estimate are checked against what the
programs compute.
"""
from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import io
import json
import os
import re
import shlex
import sys
import tempfile
from importlib import metadata
from pathlib import Path

import pytest

from cli_helpers import run_forked

DOC = Path(__file__).resolve().parents[1] / "docs" / "reproduce_wmt14.md"
UPDATE_NOTE = re.compile(r"# update: (\d+) tokens x (\d+) replicas? x (\d+) accumulation steps? = ([\d,]+) tokens; "
                         r"([\d,]+) steps; average the last (\d+) checkpoints$")
PARAMETERS_NOTE = re.compile(r"# parameters: (\d+)$")
# Replicas `mirrored` makes in the checking process: the doc's 8 GPUs, as logical CPU devices.
STAND_IN_DEVICES = 8


@dataclasses.dataclass(frozen=True)
class Command:
    line: int
    env: dict
    program: str
    args: list
    notes: list  # the comment lines just above the command


def read_commands(text: str) -> list[Command]:
    """The commands of text's ```sh blocks; `\\` continues a line, `NAME=value` prefixes set the environment."""
    commands, notes, pending, start, in_block = [], [], "", 0, False
    for number, line in enumerate(text.splitlines(), 1):
        if line.startswith("```"):
            in_block = line == "```sh"
            continue
        if not in_block or not line.strip():
            continue
        if not pending and line.lstrip().startswith("#"):
            notes.append(line.strip())
            continue
        pending, start = pending + line.rstrip("\\").strip() + " ", start or number
        if line.endswith("\\"):
            continue
        tokens = shlex.split(pending)
        env = {}
        while "=" in tokens[0] and re.match(r"[A-Z_][A-Z0-9_]*=", tokens[0]):
            name, _, value = tokens.pop(0).partition("=")
            env[name] = value
        if ">" in tokens:  # output redirection is the shell's, not the program's
            index = tokens.index(">")
            del tokens[index:index + 2]
        commands.append(Command(start, env, tokens[0], tokens[1:], notes))
        notes, pending, start = [], "", 0
    return commands


def program_modules() -> dict[str, str]:
    """Console script -> the module that defines its flags, from the installed entry points."""
    return {ep.name: ep.value.split(":")[0] for ep in metadata.entry_points(group="console_scripts")
            if ep.name.startswith("t2t-lite-")}


def flag(command: Command, name: str, default=None):
    """The value of --name in the command's arguments (the last one wins, as in absl)."""
    values = [arg.split("=", 1)[1] for arg in command.args if arg.startswith(f"--{name}=")]
    return values[-1] if values else default


# ---------------------------------------------------------------------------------------------------------------
# The checking process: one program's commands.

def _check_trainer(module, FLAGS, built: dict) -> dict:
    """Args: built: model hparams -> parameter count, of the models this process has built."""
    from t2t_lite import registry
    from t2t_lite.training import distribution, run_config
    from t2t_lite.training.api import resolve_hparams

    if not FLAGS.dry_run:  # as the trainer: a dry run builds the model and trains nothing
        run_config.check(run_config.from_settings(FLAGS.output_dir, {name: FLAGS[name].value
                                                                     for name in run_config.SETTINGS}))
    vocab_size = FLAGS.vocab_size or registry.problems.get(FLAGS.problem).default_vocab_size
    hparams = resolve_hparams(FLAGS.hparams_set, FLAGS.hparams, vocab_size)
    if hparams.model not in built:
        # The trainer's own dry run: build the model and print its parameter count.
        FLAGS.dry_run, FLAGS.vocab_size = True, vocab_size
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            module.main([module.__name__])
        built[hparams.model] = int(re.search(r"parameters: (\d+)", printed.getvalue()).group(1))
    result = {"parameters": built[hparams.model], "batch_size": hparams.train.batch_size,
              "accumulation_steps": hparams.train.accumulation_steps,
              "train_steps": FLAGS.train_steps or hparams.train.train_steps,
              "average_last_checkpoints": hparams.train.average_last_checkpoints,
              "keep_checkpoint_max": FLAGS.keep_checkpoint_max, "workers": distribution.cluster_tasks()}
    if FLAGS.distribution == "multi_worker":
        # make_strategy's own checks; creating the strategy would wait for the doc's hosts to answer.
        distribution.read_tf_config(require_task=True)
    else:
        result["replicas"] = distribution.make_strategy(FLAGS.distribution).num_replicas_in_sync
    return result


def _check_datagen(module, FLAGS, built: dict) -> dict:
    from t2t_lite import registry

    problem = registry.problems.get(FLAGS.problem)(FLAGS.data_dir)
    options = problem.resolve_options({name: FLAGS[name].value for name in module.prepare.OPTION_FLAGS})
    # The sources are lazy: resolving them checks the file flags' combination without reading or downloading.
    sources = [split for split in ("train", "dev", "test") if problem.pair_source(split, options, FLAGS.tmp_dir)]
    return {"vocab_size": options.vocab_size, "splits": sources}


def _check_bleu(module, FLAGS, built: dict) -> dict:
    with tempfile.TemporaryDirectory() as directory:
        for name in ("translation", "reference"):
            path = os.path.join(directory, name)
            Path(path).write_text("Die Katze sitzt auf der Matte.\nEin Mehrzweck-Werkzeug.\n", encoding="utf-8")
            FLAGS[name].value = path
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            module.main([module.__name__])
    return {"printed": printed.getvalue()}


def check_program(module_name: str, commands: list[dict]) -> list[dict]:
    """Each command's flags parsed by module_name's FLAGS, then its dry check; {"error": ...} on failure."""
    import importlib

    from absl import flags

    from t2t_lite.errors import UserError

    module = importlib.import_module(module_name)
    FLAGS = flags.FLAGS
    program = module_name.rsplit(".", 1)[1]
    checks = {"trainer": _check_trainer, "datagen": _check_datagen, "bleu": _check_bleu}
    check = checks.get(program, lambda module, FLAGS, built: {})
    if program == "trainer":
        from t2t_lite.training import distribution
        distribution.split_cpu(STAND_IN_DEVICES)  # before TensorFlow's first op
    built, results = {}, []
    for command in commands:
        FLAGS.unparse_flags()
        saved_env = dict(os.environ)
        os.environ.update(command["env"])
        try:
            FLAGS([module_name, *command["args"]])
            results.append(check(module, FLAGS, built))
        except (flags.Error, UserError) as error:
            results.append({"error": f"{type(error).__name__}: {error}"})
        finally:
            os.environ.clear()
            os.environ.update(saved_env)
    return results


# ---------------------------------------------------------------------------------------------------------------
# The tests.

def run_checks(module_name: str, commands: list[Command]) -> list[dict]:
    """check_program in a process of its own: absl's FLAGS and TensorFlow's devices are per process."""
    with tempfile.TemporaryDirectory() as directory:
        taken = Path(directory, "results.json")
        code, _, stderr = run_forked(write_checks, module_name, [{"env": c.env, "args": c.args} for c in commands],
                                     str(taken), timeout=600)
        assert code == 0, f"checking {module_name} failed:\n{stderr[-3000:]}"
        return json.loads(taken.read_text())


def write_checks(module_name: str, commands: list[dict], taken: str) -> None:
    Path(taken).write_text(json.dumps(check_program(module_name, commands)))


def check_sacrebleu(command: Command) -> dict:
    """sacreBLEU's own argument parser on the command, and its test set and language pair looked up."""
    from unittest import mock

    from sacrebleu import sacrebleu as cli
    from sacrebleu.dataset import DATASETS

    try:
        with mock.patch.object(sys, "argv", ["sacrebleu", *command.args]), contextlib.redirect_stderr(io.StringIO()):
            args = cli.parse_args()
    except SystemExit:
        return {"error": f"sacrebleu rejects {command.args}"}
    if args.test_set not in DATASETS or args.langpair not in DATASETS[args.test_set].langpairs:
        return {"error": f"sacreBLEU has no test set {args.test_set} for {args.langpair}"}
    return {}


@pytest.fixture(scope="module")
def recipe():
    """[(command, its check's result)] for every command of the doc, in the doc's order."""
    commands = read_commands(DOC.read_text(encoding="utf-8"))
    modules = program_modules()
    by_module = {}
    for command in commands:
        if command.program in modules:
            by_module.setdefault(modules[command.program], []).append(command)
    results = {id(c): check_sacrebleu(c) for c in commands if c.program == "sacrebleu"}
    # The trainer's check (TensorFlow, four models) dominates; the others run beside it.
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        futures = {module: pool.submit(run_checks, module, group) for module, group in by_module.items()}
        for module, group in by_module.items():
            results.update(zip(map(id, group), futures[module].result()))
    return [(c, results.get(id(c), {"error": f"{c.program} is not a t2t-lite program or sacrebleu"}))
            for c in commands]


def test_read_commands_joins_lines_and_keeps_notes_environment_and_arguments():
    text = ("```sh\n# note one\nA_B='{\"x\": 1}' \\\n  prog --flag=1 \\\n  --other='a b' > out.txt\nprog2\n```\n"
            "```\nnot_a_command\n```\n")
    first, second = read_commands(text)
    assert first == Command(3, {"A_B": '{"x": 1}'}, "prog", ["--flag=1", "--other=a b"], ["# note one"])
    assert second == Command(6, {}, "prog2", [], [])


def test_a_flag_its_program_does_not_define_is_an_error():
    result, = run_checks("t2t_lite.bin.avg_checkpoints", [Command(1, {}, "t2t-lite-avg-checkpoints",
                                                                  ["--output_dir=/runs/x", "--last_nn=20"], [])])
    assert "last_nn" in result["error"]


def where(command: Command) -> str:
    return f"docs/reproduce_wmt14.md line {command.line}: {command.program} {' '.join(command.args)}"


def test_every_command_runs_in_its_dry_form(recipe):
    failures = [f"{where(c)}\n  {r['error']}" for c, r in recipe if "error" in r]
    assert not failures, "\n".join(failures)


def test_the_page_holds_the_whole_recipe(recipe):
    text = DOC.read_text(encoding="utf-8")
    assert set(re.findall(r"^```(\S*)", text, re.M)) == {"sh", ""}, "a code block that is not ```sh goes untested"
    trainer = [c for c, _ in recipe if c.program == "t2t-lite-trainer" and "--dry_run" not in c.args]
    wanted = {
        "datagen wmt_ende via tensorflow-datasets": any(
            c.program == "t2t-lite-datagen" and flag(c, "problem") == "wmt_ende" and not flag(c, "train_files")
            for c, _ in recipe),
        "datagen wmt_ende from local files": any(
            c.program == "t2t-lite-datagen" and flag(c, "problem") == "wmt_ende" and flag(c, "train_files")
            for c, _ in recipe),
        "base and big on 8 GPUs": {flag(c, "hparams_set") for c in trainer
                                   if flag(c, "distribution") == "mirrored"} >= {"transformer_base", "transformer_big"},
        "base and big on 1 GPU, 8 accumulation steps": {
            flag(c, "hparams_set") for c in trainer
            if "train.accumulation_steps=8" in flag(c, "hparams", "")} >= {"transformer_base", "transformer_big"},
        "both workers of a 2-machine cluster": sorted(
            json.loads(c.env["TF_CONFIG"])["task"]["index"] for c in trainer
            if flag(c, "distribution") == "multi_worker") == [0, 1],
        "decoding": any(c.program == "t2t-lite-decoder" for c, _ in recipe),
        "the paper's BLEU, de and fr": {flag(c, "paper_bleu_language") for c, _ in recipe
                                        if c.program == "t2t-lite-bleu"} == {"de", "fr"},
    }
    assert all(wanted.values()), f"missing from the page: {[name for name, ok in wanted.items() if not ok]}"


def test_stated_parameter_counts_are_what_the_trainer_builds(recipe):
    stated = [(c, r, int(m.group(1))) for c, r in recipe for note in c.notes if (m := PARAMETERS_NOTE.match(note))]
    assert len(stated) == 4
    for command, result, count in stated:
        assert "--dry_run" in command.args and result["parameters"] == count, where(command)
    # Every training command trains a model whose size the page states.
    counts = {count for _, _, count in stated}
    for command, result in recipe:
        if command.program == "t2t-lite-trainer":
            assert result["parameters"] in counts, where(command)


def test_stated_updates_are_what_the_flags_give(recipe):
    training = [(c, r) for c, r in recipe if c.program == "t2t-lite-trainer" and "--dry_run" not in c.args]
    for command, result in training:
        notes = [m for note in command.notes if (m := UPDATE_NOTE.match(note))]
        assert len(notes) == 1, f"{where(command)}: no '# update: ...' comment above it"
        tokens, replicas, accumulation, total, steps, averaged = (int(g.replace(",", "")) for g in notes[0].groups())
        assert (tokens, accumulation) == (result["batch_size"], result["accumulation_steps"]), where(command)
        assert tokens * replicas * accumulation == total, where(command)
        if flag(command, "distribution") == "multi_worker":
            # Each machine mirrors over its own GPUs: the replicas are workers x GPUs per machine.
            assert result["workers"] == 2 and replicas % result["workers"] == 0, where(command)
        else:
            expected = STAND_IN_DEVICES if flag(command, "distribution") == "mirrored" else 1
            assert result["replicas"] == replicas == expected, where(command)
        assert steps == result["train_steps"], where(command)
        assert averaged == result["average_last_checkpoints"] <= result["keep_checkpoint_max"], where(command)


def test_decoding_settings_are_the_papers(recipe):
    from t2t_lite.config import DecodeHParams

    paper = DecodeHParams(beam_size=4, alpha=0.6, extra_length=50)
    assert (DecodeHParams().beam_size, DecodeHParams().alpha, DecodeHParams().extra_length) == (4, 0.6, 50)
    for command, _ in recipe:
        if command.program == "t2t-lite-decoder":
            for name in ("beam_size", "alpha", "extra_length"):
                given = flag(command, name)
                assert given is None or float(given) == getattr(paper, name), where(command)


def test_the_papers_bleu_convention_is_printed(recipe):
    from t2t_lite.metrics.bleu import COMPOUND_SPLIT_LABEL

    for command, result in recipe:
        if command.program == "t2t-lite-bleu":
            language = flag(command, "paper_bleu_language")
            assert f"BLEU ({COMPOUND_SPLIT_LABEL}, {language}) = 100.00" in result["printed"], where(command)


def test_flop_estimates_follow_from_the_counts(recipe):
    text = DOC.read_text(encoding="utf-8")
    counts = {int(m.group(1)) for c, _ in recipe for note in c.notes if (m := PARAMETERS_NOTE.match(note))}
    lines = re.findall(r"6 x ([\d,]+) parameters x ([\d,]+) tokens x ([\d,]+) steps = ([\d.]+e\d+) FLOPs", text)
    assert len(lines) == 2
    flops = {}
    for parameters, tokens, steps, stated in lines:
        parameters, tokens, steps = (int(v.replace(",", "")) for v in (parameters, tokens, steps))
        assert parameters in counts and tokens == 4096 * 8
        assert float(f"{6 * parameters * tokens * steps:.2e}") == float(stated)
        flops[steps] = 6 * parameters * tokens * steps
    # The hours table: each cell is the FLOPs over the GPUs' peak at 40 % and at 30 %, rounded as printed.
    peaks = {"A100": 312e12, "H100": 989e12}
    assert "A100 312 TFLOP/s" in text and "H100 SXM 989" in text
    header = re.search(r"^\| \|.* x A100 .*$", text, re.M).group(0)
    columns = [(int(n), peaks[gpu]) for n, gpu in re.findall(r"(\d+) x ([AH]100)", header)]
    rows = re.findall(r"^\| (?:base|big), (\d+)k steps \|(.*)\|$", text, re.M)
    assert len(rows) == 2 and len(columns) == 4
    for steps, cells in rows:
        for (gpus, peak), cell in zip(columns, cells.split("|")):
            low, high, unit = re.fullmatch(r" ([\d.]+)-([\d.]+) (min|h) ", cell).groups()
            seconds = flops[int(steps) * 1000] / (gpus * peak)
            for printed, utilisation in ((low, 0.4), (high, 0.3)):
                value = seconds / utilisation / (60 if unit == "min" else 3600)
                half_unit = 0.5 * 10 ** -len(printed.partition(".")[2])
                assert abs(float(printed) - value) <= half_unit + 1e-9, f"{steps}k steps, {cell}: {value:.3f}"
