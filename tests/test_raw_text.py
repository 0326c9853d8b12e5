"""A parser takes raw text: Penn Treebank tokens made in Python before any backend encodes them, and trees
whose leaves are exactly those tokens, in order, whatever the model writes."""
import random

import pytest

from t2t_lite import Translator
from t2t_lite.data.input_tokenizers import PENN_TREEBANK, tokenize_lines
from t2t_lite.data.target_forms import TARGET_FORMS, delinearize_with_words
from t2t_lite.data.trees import PLACEHOLDER_POS, ROOT_LABEL, Tree, parse_tree_string, readable
from t2t_lite.config import DecodeHParams
from t2t_lite.decoding.batching import Hypothesis
from t2t_lite.decoding.request import Engine
from t2t_lite.errors import UserError
from cli_helpers import run_tool

# Raw sentences and the Penn Treebank tokens their trees' leaves must be: punctuation, parentheses,
# brackets, quotes, contractions, numbers, letters outside ASCII, and an empty line.
RAW_AND_TOKENS = [
    ("The cat sat on the mat.", "The cat sat on the mat ."),
    ("Prices rose (slightly) in May, didn't they?", "Prices rose -LRB- slightly -RRB- in May , did n't they ?"),
    ('He said "no" [twice]; she won\'t.', "He said `` no '' -LSB- twice -RSB- ; she wo n't ."),
    ("It cost $3.5 million, up 12% from 1989's 2,000.", "It cost $ 3.5 million , up 12 % from 1989 's 2,000 ."),
    ("Café owners in Zürich aren't pleased!", "Café owners in Zürich are n't pleased !"),
    ("", ""),
]
RAW = [raw for raw, _ in RAW_AND_TOKENS]
TOKENS = [tokens for _, tokens in RAW_AND_TOKENS]
# Target tokens a model may write, brackets of the "words" form among bracket-like words and garbage.
GARBAGE = ["(S", "(NP", ")NP", ")S", "(", ")", "((", "))", "(slightly)", ")x(", "(NP)", "-LRB-", "word", "é",
           "\ufffd", "NP", "/NP"]


def leaves(tree: str) -> list[str]:
    """The leaves of a bracketed tree as a reader of the output gets them back."""
    return parse_tree_string(tree).words()


class ScriptedBackend:
    """A Backend whose model writes `output(sentence)` for every sentence, and which keeps what it was given."""

    engine = Engine("a script", DecodeHParams())

    def __init__(self, output):
        self.output, self.given = output, []

    def hypotheses(self, sentences, decode, first_line=1, **decoding):
        self.given.extend(sentences)
        return [[Hypothesis(self.output(sentence) if sentence else "", 0.0)] for sentence in sentences]


def scripted_parser(output) -> tuple[Translator, ScriptedBackend]:
    backend = ScriptedBackend(output)
    return Translator(backend, tree_form="words", input_tokenizer=PENN_TREEBANK), backend


def test_the_penn_treebank_tokenizer_gives_the_treebanks_tokens():
    assert tokenize_lines(PENN_TREEBANK, RAW + ["   "]) == TOKENS + [""]
    assert tokenize_lines(None, RAW) == RAW


def test_a_parser_tokenizes_raw_text_before_its_backend_encodes_it_and_its_leaves_are_the_tokens():
    translator, backend = scripted_parser(lambda sentence: "(S " + sentence + " )S")
    trees = translator.translate(RAW)
    assert backend.given == TOKENS
    assert trees[-1] == "" and [leaves(tree) for tree in trees[:-1]] == [t.split() for t in TOKENS[:-1]]
    assert trees[0] == "(S (XX The) (XX cat) (XX sat) (XX on) (XX the) (XX mat) (. .))"
    assert translator.hypotheses(RAW[:1])[0][0].text == "(S " + TOKENS[0] + " )S"


def test_input_tokenized_passes_the_tokens_through_unchanged():
    translator, backend = scripted_parser(lambda sentence: "(S " + sentence + " )S")
    sentences = ["-LRB- slightly -RRB- on the mat.", "He said '' no ''"]
    trees = translator.translate(sentences, input_tokenized=True)
    assert backend.given == sentences
    assert [leaves(tree) for tree in trees] == [sentence.split() for sentence in sentences]
    assert leaves(translator.translate(["-LRB-"])[0]) == ["-LRB-"]  # already a token: tokenizing keeps it


@pytest.mark.parametrize("form", sorted(TARGET_FORMS))
def test_whatever_the_model_writes_the_leaves_are_the_tokens_in_order(form):
    rng = random.Random(64)
    translator = Translator(ScriptedBackend(lambda sentence: " ".join(rng.choices(GARBAGE, k=rng.randrange(12)))),
                            tree_form=form, input_tokenizer=PENN_TREEBANK)
    for _ in range(20):
        trees = translator.translate(RAW)
        assert trees[-1] == "" and [leaves(tree) for tree in trees[:-1]] == [t.split() for t in TOKENS[:-1]]


def test_a_leaf_holding_a_bracket_is_written_with_the_treebanks_names_so_the_tree_reads_back():
    translator, _ = scripted_parser(lambda sentence: "(S " + sentence + " )S")
    tree = translator.translate(["a ( (slightly) )"], input_tokenized=True)[0]
    assert tree == "(S (XX a) (XX -LRB-) (XX -LRB-slightly-RRB-) (XX -RRB-))"
    assert leaves(tree) == ["a", "-LRB-", "-LRB-slightly-RRB-", "-RRB-"]


def test_a_bracket_like_word_the_model_writes_marks_a_words_place_not_a_phrase():
    tree = delinearize_with_words(["a", "b"], ["(S", "(slightly)", ")x(", ")S"])
    assert tree == Tree(ROOT_LABEL, (Tree("S", (Tree(PLACEHOLDER_POS, ("a",)), Tree(PLACEHOLDER_POS, ("b",)))),))
    assert readable(tree) == "(S (XX a) (XX b))"


def test_an_unknown_input_tokenizer_is_refused_in_one_line():
    with pytest.raises(UserError, match="^input tokenizer must be one of penn_treebank or None, got 'moses'$"):
        Translator(ScriptedBackend(str), input_tokenizer="moses")


@pytest.fixture(scope="module")
def saved_model(words_parser, tmp_path_factory):
    """The tiny words parser exported as a SavedModel."""
    from t2t_lite.decoding.request import DecodeRequest
    from t2t_lite.export.exporter import ExportRequest, export_run
    from t2t_lite.run import RunRequest

    request = RunRequest(output_dir=words_parser[0], decode=DecodeRequest(**SETTINGS))
    return export_run(ExportRequest(run=request, export_dir=str(tmp_path_factory.mktemp("raw_text") / "export")))


# Decoding freely, a 40-step parser writes anything (its trees are repairs); a short search keeps it quick.
SETTINGS = dict(beam_size=2, extra_length=12, batch_size=8, mixed_precision="none")


def test_a_trained_parser_from_a_run_and_its_savedmodel_parses_raw_text_into_trees_over_its_tokens(
        words_parser, saved_model):
    run = Translator.from_run(words_parser[0], **SETTINGS)
    export = Translator.from_export(saved_model)
    assert run.input_tokenizer == export.input_tokenizer == PENN_TREEBANK
    trees = run.translate(RAW)
    assert trees[-1] == "" and [leaves(tree) for tree in trees[:-1]] == [t.split() for t in TOKENS[:-1]]
    assert export.translate(RAW) == trees
    assert run.translate(TOKENS, input_tokenized=True) == trees
    assert leaves(run.translate(["on the mat."], input_tokenized=True)[0]) == ["on", "the", "mat."]


def test_the_decoder_tokenizes_raw_lines_unless_told_they_are_tokens(words_parser, tmp_path):
    (tmp_path / "raw").write_text("\n".join(RAW[:2] + ["", "on the mat."]) + "\n", encoding="utf-8")
    flags = [f"--output_dir={words_parser[0]}", f"--decode_from_file={tmp_path / 'raw'}", "--output_trees",
             "--beam_size=2", "--extra_length=12", "--mixed_precision=none"]
    raw = run_tool("decoder", *flags)
    tokenized = run_tool("decoder", *flags, "--input_tokenized")
    assert raw.returncode == tokenized.returncode == 0, raw.stderr + tokenized.stderr
    raw_trees, given_trees = raw.stdout.splitlines(), tokenized.stdout.splitlines()
    assert [leaves(tree) if tree else [] for tree in raw_trees] == [*(t.split() for t in TOKENS[:2]), [],
                                                                    ["on", "the", "mat", "."]]
    assert [leaves(tree) if tree else [] for tree in given_trees] == [
        "The cat sat on the mat.".split(), "Prices rose -LRB-slightly-RRB- in May, didn't they?".split(), [],
        ["on", "the", "mat."]]
