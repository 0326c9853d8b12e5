"""Translator: a trained run or an export as a Python object, text in and text out.

    from t2t_lite import Translator
    translator = Translator.from_run("runs/multi30k", data_dir="data/multi30k")
    translator.translate(["A dog runs in the park."])           # ["Ein Hund rennt im Park."]
    translator.hypotheses(["A dog runs."], beam_size=8, nbest=3)  # [[Hypothesis(text, score, ids) x 3]]
    translator.score(["A dog runs."], ["Ein Hund rennt."])         # [PairScore(...)]

A parser's `translate` gives bracketed trees with the words put back, "(S (NP (DT The) (NN cat)) (VP (VBD
sat)) (. .))" (tags "XX" where its target form drops them), from a run or an export alike; `hypotheses`
gives the linearised outputs the model wrote, as a SavedModel served directly does. A parser takes raw text,
tokenized here, in Python, as its problem says (Problem.input_tokenizer: Penn Treebank tokens for the PTB
parsers), whatever the backend; `input_tokenized=True` takes tokens as they are.

`from_run` opens the checkpoint t2t-lite-decoder would (or the one named) and
decodes exactly as the decoder does; `from_export` loads what t2t-lite-exporter
wrote: a SavedModel (with only TensorFlow and tensorflow-text at work) or a
CTranslate2 model (with CTranslate2).

A Translator is a thin front over a t2t_lite.inference.backend.Backend, the one
inference interface (inference/__init__.py lists the three). It resolves each
DecodeRequest against its backend's engine once; the backend decodes what it
is given.

Importing this module imports no TensorFlow, and decoding a CTranslate2 export
never does (docs/serving.md, the smallest deployment).
"""
import dataclasses
from typing import TYPE_CHECKING

from t2t_lite.data.input_tokenizers import check_input_tokenizer, tokenize_lines
from t2t_lite.data.target_forms import TARGET_FORMS
from t2t_lite.data.trees import readable
from t2t_lite.decoding.batching import Hypothesis
from t2t_lite.decoding.request import RUN, DecodeRequest, Engine, ResolvedDecode
from t2t_lite.errors import UserError
from t2t_lite.export_format import CTRANSLATE2, input_tokenizer, tree_form
from t2t_lite.inference.export_reader import read_export
from t2t_lite.inference.backend import Backend
from t2t_lite.inference.run_backend import RunBackend
from t2t_lite.inference.saved_model_backend import saved_model_backend

if TYPE_CHECKING:  # `import t2t_lite` stays free of TensorFlow: a CTranslate2 deployment has none
    from t2t_lite.ops.step_matmul import StepMatmulSettings
    from t2t_lite.run_dir import RunDir


class Translator:
    """Translates (or parses) lists of sentences; see the module docstring.

    Build one with `from_run` or `from_export`, or directly around another backend (module docstring).

    Args:
      backend: what decodes.
      tree_form: for a parser, its target form (a key of t2t_lite.data.target_forms.TARGET_FORMS): `translate`
        then returns bracketed trees; None returns the outputs as they are.
      decode: how it decodes when a call does not say: a DecodeRequest resolved against backend.engine
        (None resolves the empty request, the backend's own settings).
      input_tokenizer: how raw input is tokenized before the backend encodes it (the problem's
        input_tokenizer, a name of t2t_lite.data.input_tokenizers.INPUT_TOKENIZERS); None passes it as it is.
    """

    def __init__(self, backend: Backend, tree_form: str | None = None, decode: ResolvedDecode | None = None,
                 input_tokenizer: str | None = None):
        if tree_form is not None and tree_form not in TARGET_FORMS:
            raise UserError(f"`tree_form` must be one of {sorted(TARGET_FORMS)} or None, got {tree_form!r}")
        check_input_tokenizer(input_tokenizer)
        self._backend, self.tree_form, self.input_tokenizer = backend, tree_form, input_tokenizer
        self.decode = decode or DecodeRequest().resolve(backend.engine)

    @classmethod
    def from_run(cls, output_dir: "str | RunDir | None" = None, data_dir: str | None = None,
                 checkpoint: str | None = None, step_matmul: "StepMatmulSettings | None" = None,
                 **settings) -> "Translator":
        """A training run's model.

        Args:
          output_dir: the run directory (the trainer's --output_dir), a path or a t2t_lite.run_dir.RunDir.
          data_dir: the problem's prepared data (its vocabulary); None for problems without one.
          checkpoint: None picks what t2t-lite-decoder would (the averaged checkpoint if any, else the
            newest; a run with partners, t2t_lite.run.name_partners, opens with theirs as one ensemble);
            "best", "latest" or "averaged" picks that one of output_dir (and of its partners); anything else
            is a checkpoint path, or several comma-separated for an ensemble.
          step_matmul: how a decoding step multiplies on a CPU (t2t_lite.ops.StepMatmulSettings);
            None is its default, which chooses for this machine.
          settings: any t2t_lite.decoding.request.DecodeRequest field (e.g. beam_size=8, alpha=1.0,
            mixed_precision="mixed_bfloat16") or other t2t_lite.run.RunRequest field (e.g. problem=...).
        """
        from t2t_lite.run import CHECKPOINT_CHOICES, RunRequest

        decode, settings = split_decode_settings(settings)
        picked = {"checkpoint": checkpoint} if checkpoint is None or checkpoint in CHECKPOINT_CHOICES \
            else {"checkpoint_path": checkpoint}
        return cls.from_request(RunRequest(output_dir=output_dir, data_dir=data_dir, decode=decode or DecodeRequest(),
                                           **picked, **settings), step_matmul)

    @classmethod
    def from_request(cls, request, step_matmul: "StepMatmulSettings | None" = None,
                     engine: Engine | None = None) -> "Translator":
        """A run opened from a t2t_lite.run.RunRequest (what the command-line tools build from their flags);
        request.decode is resolved once, as the run is opened, against `engine` (None: t2t_lite.run.RUN)."""
        from t2t_lite.ops.step_matmul import StepMatmulSettings
        from t2t_lite.run import open_run

        run = open_run(request, ensemble=True, engine=engine or RUN)
        return cls(RunBackend(run, step_matmul or StepMatmulSettings()), tree_form(run.problem), run.decode,
                   input_tokenizer(run.problem))

    @classmethod
    def from_export(cls, path: str, request: DecodeRequest | None = None, **settings) -> "Translator":
        """An export t2t-lite-exporter wrote (the numbered version directory, e.g. exports/m/1).

        A SavedModel decodes with the search it was exported with (another beam size, alpha, extra_length or
        precision is refused). A CTranslate2 export decodes with the same tokenizer and search settings as the
        run (any beam size, n-best, alpha and extra_length; export/ctranslate2_backend.py says how its length
        penalty is matched), without importing TensorFlow. Neither samples nor scores.

        Args:
          request: how to decode; None is the export's own settings.
          settings: DecodeRequest fields (e.g. batch_size=64, beam_size=8 for CTranslate2), or, for a
            CTranslate2 export, its ctranslate2.Translator's device ("cpu", "cuda"), compute_type (e.g.
            "int8") and threads.
        """
        decode, settings = split_decode_settings(settings)
        if request is not None and decode is not None:
            raise UserError("give the decode settings in `request` or as keywords, not both")
        export = read_export(path)
        resolved = (request or decode or DecodeRequest()).resolve(export.engine)  # refused before it loads
        if export.format == CTRANSLATE2:
            from t2t_lite.inference.ctranslate2_backend import CTranslate2Export

            backend = CTranslate2Export(export, **settings)
        else:
            refuse_ctranslate2_settings(settings, f"{path!r} is a SavedModel, which computes as it was exported")
            backend = saved_model_backend(export)
        return cls(backend, export.tree_form, resolved, export.input_tokenizer)

    @property
    def run(self):
        """The opened run (t2t_lite.run.OpenedRun) of a Translator from a run; None for an export."""
        return getattr(self._backend, "run", None)

    def translate(self, sentences: list[str], beam_size: int | None = None, sampling=None,
                  input_tokenized: bool = False) -> list[str]:
        """The best output of each sentence, in the input's order; an empty sentence gives "".
        A parser's are bracketed trees whose leaves are the sentence's tokens (`tokenized`, `as_trees`).

        Args:
          beam_size: None keeps the run's (the paper's 4 unless the run set another); 1 is greedy.
          sampling: a t2t_lite.decoding.sampling.SamplingSettings to draw one sample per sentence
            instead of searching (e.g. for back-translation); runs only.
          input_tokenized: the sentences are tokens already, separated by spaces (`tokenized`).
        """
        tokens = self.tokenized(sentences, input_tokenized)
        results = self.hypotheses(tokens, beam_size=beam_size, sampling=sampling, input_tokenized=True)
        outputs = [hyps[0].text if hyps else "" for hyps in results]
        return self.as_trees(tokens, outputs) if self.tree_form else outputs

    def tokenized(self, sentences: list[str], input_tokenized: bool = False) -> list[str]:
        """The sentences as the model reads them: raw text split by the problem's input_tokenizer, its tokens
        joined by spaces ("The cat sat on the mat." -> "The cat sat on the mat ." for a PTB parser); as they
        are when input_tokenized, or for a problem that reads raw text (translation)."""
        if isinstance(sentences, str):
            raise UserError("translate takes a list of sentences; wrap a single one in a list")
        return list(sentences) if input_tokenized else tokenize_lines(self.input_tokenizer, sentences)

    def as_trees(self, sentences: list[str], outputs: list[str]) -> list[str]:
        """A parser's linearised outputs as one-line bracketed trees with the sentences' words put back,
        "(S (NP (DT The) (NN cat)) (VP (VBD sat)) (. .))"; malformed outputs repaired (data/target_forms.py), an
        empty sentence an empty line. The leaves are exactly each sentence's space-separated tokens, in order
        (`tokenized` gives them from raw text), a bracket in one written -LRB- or -RRB- (trees.tree_to_string).

        Raises:
          UserError: this Translator is not a parser's.
        """
        if self.tree_form is None:
            raise UserError("as_trees is for parsers: this Translator's problem does not write trees")
        form = TARGET_FORMS[self.tree_form]
        return [readable(form.delinearize(sentence.split(), output.split())) if sentence.split() else ""
                for sentence, output in zip(sentences, outputs)]

    def hypotheses(self, sentences: list[str], beam_size: int | None = None, nbest: int | None = None,
                   sampling=None, input_tokenized: bool = False, **decoding) -> list[list[Hypothesis]]:
        """The nbest best outputs of each sentence with their scores and token ids: a list (per sentence) of
        lists of t2t_lite.decoding.batching.Hypothesis, best first (fewer when fewer beams finished).

        Args:
          beam_size, sampling, input_tokenized: as for `translate`.
          nbest: outputs per sentence; at most the beam size (1 when sampling); None keeps the Translator's
            (at most this call's beam size).
          decoding: decode_id_batches' progress and parallel_batches, and first_line (the 1-based line
            number of sentences[0], for error messages).
        """
        return self._backend.hypotheses(self.tokenized(sentences, input_tokenized),
                                        self._call_decode(beam_size, nbest, sampling), **decoding)

    def _call_decode(self, beam_size, nbest, sampling) -> ResolvedDecode:
        """The Translator's decode with a call's own settings over it; what the call leaves out stays the
        Translator's. A beam size or sampling given chooses between searching and sampling; nbest left out
        keeps the Translator's, at most the call's beams (1 when sampling)."""
        if (beam_size, nbest, sampling) == (None, None, None):
            return self.decode
        if beam_size is None and sampling is None:
            sampling = self.decode.sampling
        if nbest is None:
            beams = 1 if sampling is not None else beam_size or self.decode.hparams.beam_size
            nbest = min(self.decode.nbest, beams)
        request = DecodeRequest(beam_size=beam_size, nbest=nbest, sampling=sampling,
                                mixed_precision=self.decode.mixed_precision)
        return request.resolve(dataclasses.replace(self._backend.engine, settings=self.decode.hparams))

    def score(self, sources: list[str], targets: list[str], progress=None):
        """The model's log-probability of each target given its source: a list of
        t2t_lite.decoding.scoring.PairScore (None for a pair with an empty side). Runs only.

        Args:
          progress: called with a progress line after each batch.
        """
        if isinstance(sources, str) or isinstance(targets, str):
            raise UserError("score takes lists of sentences; wrap a single one in a list")
        if len(sources) != len(targets):
            raise UserError(f"score needs as many targets as sources; got {len(targets)} and {len(sources)}")
        return self._backend.score(list(sources), list(targets), progress)


def refuse_ctranslate2_settings(settings: dict, instead: str) -> None:
    """The one refusal of CTranslate2's own settings (compute_type, device, threads) where no CTranslate2 export
    decodes; `instead` says what decodes and how it computes."""
    if settings:
        names = ", ".join(f"`{name}`" for name in sorted(settings))
        raise UserError(f"{names} {'is' if len(settings) == 1 else 'are'} for CTranslate2 exports; {instead}")


def split_decode_settings(settings: dict) -> tuple[DecodeRequest | None, dict]:
    """A DecodeRequest of the DecodeRequest fields among `settings` (None if there are none), and the others."""
    names = {field.name for field in dataclasses.fields(DecodeRequest)}
    decode = {name: value for name, value in settings.items() if name in names}
    return (DecodeRequest(**decode) if decode else None,
            {name: value for name, value in settings.items() if name not in names})
