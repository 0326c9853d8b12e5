"""One Decoder factory (decoding/decoder.make_decoder): every way the library decodes makes its Decoder there,
from a model and a resolved request, so the trainer's samples search as the decoder does."""
import ast
from pathlib import Path

import keras
import pytest

import t2t_lite.problems  # noqa: F401  (registers the problems)
from t2t_lite import config
from t2t_lite.bin.trainer import show_samples
from t2t_lite.data.trees import delinearize, linearize
from t2t_lite.decoding import decoder as decoder_module
from t2t_lite.models import build_model
from t2t_lite.registry import hparams_sets, problems
from shared_data import require_shared

REPO = Path(__file__).resolve().parent.parent


def test_no_module_but_the_factory_makes_a_decoder():
    makers = []
    for path in sorted([*REPO.glob("t2t_lite/**/*.py"), *REPO.glob("bin/*.py")]):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for function in (n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))):
            for call in (n for n in ast.walk(function) if isinstance(n, ast.Call)):
                if getattr(call.func, "id", None) == "Decoder" or getattr(call.func, "attr", None) == "Decoder":
                    makers.append(f"{path.relative_to(REPO)}:{function.name}")
    assert makers == ["t2t_lite/decoding/decoder.py:make_decoder"]


@pytest.fixture(scope="module")
def parser(tmp_path_factory):
    """parsing_ptb_sample prepared from a slice of the shared sample, and an untrained tiny model of it set to
    decode constrained, 4 sentences a batch: untrained, it writes trees only under the constraint."""
    mrg = require_shared("ptb_wsj_sample/mrg")
    root = tmp_path_factory.mktemp("parser")
    (root / "mrg").mkdir()
    for number in [*range(1, 9), 160, 161]:
        (root / "mrg" / f"wsj_{number:04d}.mrg").symlink_to(mrg / f"wsj_{number:04d}.mrg")
    problem = problems.get("parsing_ptb_sample")(str(root / "data"))
    problem.generate_data(str(root / "mrg"), vocab_size=500, num_shards=1, log=lambda line: None)
    hparams = config.apply_overrides(
        hparams_sets.get("transformer_wsj_parsing_tiny")(),
        f"vocab_size={problem.vocab_size},d_model=32,d_ff=64,num_encoder_layers=1,num_decoder_layers=1,"
        "decode.constrained_decoding=true,decode.batch_size=4,decode.extra_length=20")
    keras.utils.set_random_seed(3)
    return problem, build_model(hparams), hparams


def test_the_trainers_samples_of_a_constrained_parser_are_trees_decoded_in_the_requests_batches(parser, monkeypatch,
                                                                                            capsys):
    problem, model, hparams = parser
    batches = []

    def counting(*args, **kwargs):
        made = make_decoder(*args, **kwargs)
        decode = made.decode
        made.decode = lambda inputs: (batches.append(int(inputs.shape[0])), decode(inputs))[1]
        return made

    make_decoder = decoder_module.make_decoder
    monkeypatch.setattr(decoder_module, "make_decoder", counting)
    show_samples(problem, model, hparams, 6)
    assert batches == [4, 2]
    shown = [line for line in capsys.readouterr().out.splitlines() if "  ->  " in line]
    assert len(shown) == 5
    for line in shown:
        source, rest = line.strip().split("  ->  ")
        output = rest.split("   (expected ")[0].split()
        words = source.split()
        # A well-formed tree over the source's words reads back as itself, with no repair.
        assert linearize(delinearize(words, output)) == (words, output), line
