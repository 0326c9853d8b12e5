"""One decode request, checked once when made and resolved once against its engine, on every way in.

The rules: each setting's bounds when a DecodeRequest is made; what an engine can do when it is resolved
(decoding/request.py). The paths: the decoder and scorer commands (on a run, a SavedModel, a CTranslate2
export), the exporter, and Translator from Python, each run in a process of its own with
DecodeRequest.__post_init__ and DecodeRequest.resolve counted. And no backend re-checks a setting the
request owns.
"""
import ast
import collections
import inspect
import json
import runpy
import shutil
import sys
from pathlib import Path

import pytest

from t2t_lite import config
from t2t_lite.config import DECODE_LEAST, DecodeHParams
from t2t_lite.decoding.request import DecodeRequest, Engine, SamplingSettings
from t2t_lite import Translator
from t2t_lite.errors import UserError
from t2t_lite.run_dir import HPARAMS_FILE
from cli_helpers import run_forked
from trained_runs import multi30k_lines

REPO = Path(__file__).resolve().parent.parent
SAVED_MODEL = Engine("a SavedModel", DecodeHParams(beam_size=4, alpha=0.6), fixed=("beam_size", "alpha"),
                     samples=False, precision="mixed_bfloat16", precision_hint="export again")


@pytest.mark.parametrize("name", sorted(DECODE_LEAST))
def test_each_setting_below_its_least_value_is_refused_naming_it(name):
    DecodeRequest(**{name: DECODE_LEAST[name]})  # the least value itself is allowed
    with pytest.raises(UserError, match=f"^`{name}` must be at least {DECODE_LEAST[name]}, got {DECODE_LEAST[name] - 1}$"):
        DecodeRequest(**{name: DECODE_LEAST[name] - 1})


@pytest.mark.parametrize("name", sorted(set(DECODE_LEAST) - {"nbest"}))  # nbest is a request's, not a run's
def test_a_run_decode_setting_below_its_least_value_is_refused_when_made_overridden_or_read(name, reverse_run,
                                                                                           tmp_path):
    least = DECODE_LEAST[name]
    assert getattr(DecodeHParams(**{name: least}), name) == least
    message = f"`{name}` must be at least {least}, got {least - 1}(\\.0)?"  # an override's alpha is a float
    with pytest.raises(UserError, match=f"^{message}$"):
        DecodeHParams(**{name: least - 1})
    with pytest.raises(UserError, match=f"^{message}$"):
        config.apply_overrides(config.HParams(), f"decode.{name}={least - 1}")
    # A run whose hparams.json holds the value (edited by hand) is refused in one line naming the file.
    run = shutil.copytree(reverse_run, tmp_path / "run")
    spec = json.loads((run / HPARAMS_FILE).read_text(encoding="utf-8"))
    spec["hparams"]["decode"][name] = least - 1
    (run / HPARAMS_FILE).write_text(json.dumps(spec), encoding="utf-8")
    with pytest.raises(UserError, match=f"^{run / HPARAMS_FILE}: {message}$"):
        Translator.from_run(str(run))


def test_an_unknown_precision_and_sampling_with_a_beam_setting_or_nbest_are_refused():
    with pytest.raises(UserError, match="^`mixed_precision` must be one of auto, none, "):
        DecodeRequest(mixed_precision="bfloat16")
    sampling = SamplingSettings(temperature=0.5)
    for name, value in (("beam_size", 2), ("alpha", 0.6)):
        with pytest.raises(UserError, match=f"without a beam or length penalty; drop `{name}`"):
            DecodeRequest(sampling=sampling, **{name: value})
    with pytest.raises(UserError, match="sampling gives one output per sentence"):
        DecodeRequest(sampling=sampling, nbest=2)


def test_resolving_keeps_the_engines_settings_and_replaces_those_given():
    settings = DecodeHParams(beam_size=5, alpha=0.3, extra_length=7, batch_size=9)
    engine = Engine("the run", settings)
    assert DecodeRequest().resolve(engine).hparams == settings
    resolved = DecodeRequest(beam_size=2, batch_size=3, nbest=2, mixed_precision="none").resolve(engine)
    assert resolved.hparams == DecodeHParams(beam_size=2, alpha=0.3, extra_length=7, batch_size=3)
    assert (resolved.nbest, resolved.sampling, resolved.mixed_precision) == (2, None, "none")


def test_nbest_above_the_resolved_beam_is_refused_and_sampling_has_one_beam():
    engine = Engine("the run", DecodeHParams(beam_size=3))
    assert DecodeRequest(nbest=3).resolve(engine).nbest == 3
    with pytest.raises(UserError, match=r"^`nbest`=4 is more than the beam size 3; "):
        DecodeRequest(nbest=4).resolve(engine)
    with pytest.raises(UserError, match=r"^`nbest`=3 is more than the beam size 2; "):
        DecodeRequest(beam_size=2, nbest=3).resolve(engine)
    assert DecodeRequest(sampling=SamplingSettings()).resolve(engine).beams == 1


def test_a_fixed_setting_is_refused_unless_it_is_the_engines_own():
    assert DecodeRequest(beam_size=4, alpha=0.6, extra_length=3).resolve(SAVED_MODEL).hparams.extra_length == 3
    with pytest.raises(UserError, match=r"^a SavedModel decodes with the beam_size it was exported with \(4\); "
                                        r"export again with `beam_size`=8$"):
        DecodeRequest(beam_size=8).resolve(SAVED_MODEL)
    with pytest.raises(UserError, match="^a SavedModel decodes with beam search"):
        DecodeRequest(sampling=SamplingSettings()).resolve(SAVED_MODEL)


def test_an_engine_with_a_precision_setting_of_its_own_refuses_any_but_auto():
    ctranslate2 = Engine("a CTranslate2 export", takes_precision=False, precision_hint="it computes in its own")
    assert DecodeRequest().resolve(ctranslate2).mixed_precision == "auto"
    with pytest.raises(UserError, match="^a CTranslate2 export takes no `mixed_precision`; it computes in its own$"):
        DecodeRequest(mixed_precision="none").resolve(ctranslate2)


def test_a_fixed_precision_is_the_resolved_one_and_another_is_refused():
    assert DecodeRequest().resolve(SAVED_MODEL).mixed_precision == "mixed_bfloat16"
    assert DecodeRequest(mixed_precision="mixed_bfloat16").resolve(SAVED_MODEL).mixed_precision == "mixed_bfloat16"
    with pytest.raises(UserError, match="^a SavedModel computes in mixed_bfloat16, not `mixed_precision`=none"):
        DecodeRequest(mixed_precision="none").resolve(SAVED_MODEL)


def test_an_engine_that_searches_freely_refuses_constraints_given_or_its_own():
    free = Engine("a CTranslate2 export", DecodeHParams(), constrains=False)
    with pytest.raises(UserError, match="^a CTranslate2 export searches freely"):
        DecodeRequest(constrained_decoding=True).resolve(free)
    own = Engine("a CTranslate2 export", DecodeHParams(constrained_decoding=True), constrains=False)
    with pytest.raises(UserError, match="^a CTranslate2 export searches freely"):
        DecodeRequest().resolve(own)
    assert not DecodeRequest(constrained_decoding=False).resolve(own).hparams.constrained_decoding


@pytest.mark.parametrize("name, value", [("beam_size", 2), ("extra_length", 3), ("constrained_decoding", True)])
def test_scoring_refuses_search_settings(name, value):
    with pytest.raises(UserError, match=f"^`{name}` is a search setting, and scoring searches nothing"):
        DecodeRequest(**{name: value}).resolve(Engine("scoring", searches=False))


def backends():
    from t2t_lite.inference.ctranslate2_backend import CTranslate2Export
    from t2t_lite.inference.run_backend import RunBackend
    from t2t_lite.inference.saved_model_backend import IdBatchBackend

    return [RunBackend, IdBatchBackend, CTranslate2Export]


@pytest.mark.parametrize("backend", backends(), ids=lambda backend: backend.__name__)
def test_no_backend_refuses_anything_while_decoding_a_resolved_request(backend):
    """A backend decodes the ResolvedDecode it is given: a rule written again inside one fails this."""
    source = inspect.getsource(backend.hypotheses)
    body = ast.parse(inspect.cleandoc("\n" + source) if source.startswith(" ") else source)
    raises = [node.lineno for node in ast.walk(body) if isinstance(node, ast.Raise)]
    assert raises == [], f"{backend.__name__}.hypotheses raises at its lines {raises}"


def test_no_module_but_the_request_refuses_an_nbest_or_beam_size():
    """The rules a user meets on n-best and the beam are the request's alone, in the library and the commands."""
    offenders = []
    for path in sorted([*REPO.glob("t2t_lite/**/*.py"), *REPO.glob("bin/*.py")]):
        if path == REPO / "t2t_lite" / "decoding" / "request.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call)
                    and getattr(node.exc.func, "id", None) == "UserError"):  # a user's mistake, not a bug
                text = " ".join(str(c.value) for c in ast.walk(node.exc) if isinstance(c, ast.Constant))
                if "nbest" in text or "beam size" in text or "beam_size" in text:
                    offenders.append(f"{path.relative_to(REPO)}:{node.lineno}")
    assert offenders == []


# --- each way in builds one request, checked once and resolved once -------------------------------------

def counted(target: str, argv: list[str]) -> None:
    """In a forked process: runs `target` (a command module of t2t_lite.bin, or "translator" for the Python
    path) with DecodeRequest's check and resolve counted; prints the counts as the last stdout line."""
    import t2t_lite.bin.lines  # noqa: F401  imported before counting: a module's defaults are not a path's
    import t2t_lite.export.exporter  # noqa: F401

    counts = collections.Counter()
    check, resolve = DecodeRequest.__post_init__, DecodeRequest.resolve

    def counting_check(self):
        counts["check"] += 1
        check(self)

    def counting_resolve(self, engine):
        counts["resolve"] += 1
        return resolve(self, engine)

    DecodeRequest.__post_init__, DecodeRequest.resolve = counting_check, counting_resolve
    try:
        if target == "translator":
            from t2t_lite import Translator

            output_dir, data_dir, sentences = argv
            translator = Translator.from_run(output_dir, data_dir=data_dir, beam_size=2)
            translator.hypotheses(json.loads(sentences))
        else:
            sys.argv = [f"t2t_lite.bin.{target}", *argv]
            runpy.run_module(f"t2t_lite.bin.{target}", run_name="__main__", alter_sys=True)
    except SystemExit as exit_:
        if exit_.code:
            raise
    print(json.dumps(dict(counts)))


def run_counted(target: str, *argv) -> dict:
    code, stdout, stderr = run_forked(counted, target, [str(a) for a in argv])
    assert code == 0, stderr[-3000:]
    return json.loads(stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def paths(multi30k_run, tmp_path_factory):
    """{path: counts} for every way in, on the shared tiny Multi30k run and exports made from it here."""
    tmp = tmp_path_factory.mktemp("decode_request")
    sentences = multi30k_lines("test_2016_flickr", "en", 4)
    (tmp / "in.txt").write_text(sentences, encoding="utf-8")
    (tmp / "out.txt").write_text(multi30k_lines("test_2016_flickr", "de", 4), encoding="utf-8")
    run = [f"--output_dir={multi30k_run['output_dir']}", f"--data_dir={multi30k_run['data_dir']}"]
    decode = [f"--decode_from_file={tmp / 'in.txt'}", "--extra_length=5"]
    counts = {}
    counts["decoder on a run"] = run_counted("decoder", *run, *decode, "--beam_size=2", "--nbest=2")
    counts["scorer"] = run_counted("scorer", *run, f"--source_file={tmp / 'in.txt'}",
                                   f"--target_file={tmp / 'out.txt'}")
    counts["translator"] = run_counted("translator", multi30k_run["output_dir"], multi30k_run["data_dir"],
                                       json.dumps(sentences.splitlines()))
    for export_format in ("saved_model", "ctranslate2"):
        export_dir = tmp / export_format
        counts[f"exporter ({export_format})"] = run_counted(
            "exporter", *run, f"--export_dir={export_dir}", f"--export_format={export_format}", "--extra_length=5",
            "--model_name=m")
        counts[f"decoder on a {export_format} export"] = run_counted(
            "decoder", f"--export_dir={export_dir / 'm' / '1'}", *decode[:1], "--nbest=2")
    return counts


def test_every_way_in_checks_its_request_once_and_resolves_it_once(paths):
    assert len(paths) == 7
    for path, counts in paths.items():
        assert (path, counts) == (path, {"check": 1, "resolve": 1})


# --- each rule written once ---------------------------------------------------------------------------

def modules():
    return sorted([*REPO.glob("t2t_lite/**/*.py"), *REPO.glob("bin/*.py")])


def guarded_settings(tree) -> list[tuple[str, int]]:
    """(setting, line) of each `if` that compares a decode setting (DECODE_LEAST's, or max_input_length) and
    raises: a rule about that setting."""
    names = {*DECODE_LEAST, "max_input_length"}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and any(isinstance(n, ast.Raise) for child in node.body for n in ast.walk(child)):
            for compare in (n for n in ast.walk(node.test) if isinstance(n, ast.Compare)):
                if any(isinstance(op, (ast.Is, ast.IsNot)) for op in compare.ops):
                    continue  # given or not: not a bound
                for operand in [compare.left, *compare.comparators]:
                    name = getattr(operand, "id", None) or getattr(operand, "attr", None)
                    if name in names and getattr(getattr(operand, "value", None), "attr", None) != "train":
                        found.append((name, node.lineno))
    return found


def gnmt_formulas(tree) -> list[int]:
    """Lines that write (5 + length) / 6, the GNMT length penalty's base."""
    return [node.lineno for node in ast.walk(tree)
            if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div)
            and getattr(node.right, "value", None) == 6 and isinstance(node.left, ast.BinOp)
            and 5 in (getattr(node.left.left, "value", None), getattr(node.left.right, "value", None))]


def compute_type_refusals(tree) -> list[int]:
    """Lines that raise a message naming compute_type themselves (translator.refuse_ctranslate2_settings names
    the settings it is given)."""
    return [node.lineno for node in ast.walk(tree) if isinstance(node, ast.Raise)
            and any("compute_type" in str(c.value) for c in ast.walk(node) if isinstance(c, ast.Constant))]


def test_each_decode_rule_is_written_in_one_module():
    """A setting's bounds, the GNMT length penalty and the refusal of a CTranslate2 setting are each written in
    one place; a copy planted anywhere in t2t_lite/ or bin/ is found."""
    rules = collections.defaultdict(set)
    for path in modules():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        where = str(path.relative_to(REPO))
        for setting, _ in guarded_settings(tree):
            rules[f"a rule on {setting}"].add(where)
        if gnmt_formulas(tree):
            rules["the GNMT length penalty"].add(where)
        if compute_type_refusals(tree):
            rules["refusing compute_type"].add(where)
    # The least values are config.DECODE_LEAST's table, checked by name nowhere; nbest against the beam is
    # the request's rule when resolved.
    assert rules == {"a rule on nbest": {"t2t_lite/decoding/request.py"},
                     "a rule on max_input_length": {"t2t_lite/export/exporter.py"},
                     "the GNMT length penalty": {"t2t_lite/decoding/length_penalty.py"}}
