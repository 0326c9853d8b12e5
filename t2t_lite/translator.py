"""Translator: a trained run or an export as a Python object, text in and text out.

    from t2t_lite import Translator
    translator = Translator.from_run("runs/multi30k", data_dir="data/multi30k")
    translator.translate(["A dog runs in the park."])           # ["Ein Hund rennt im Park."]
    translator.hypotheses(["A dog runs."], beam_size=8, nbest=3)  # [[Hypothesis(text, score, ids) x 3]]
    translator.score(["A dog runs."], ["Ein Hund rennt."])         # [PairScore(...)]

A parser's `translate` gives bracketed trees with the words put back, "(S (NP (DT The) (NN cat)) (VP (VBD
sat)) (. .))" (tags "XX" where its target form drops them), from a run or an export alike; `hypotheses`
gives the linearised outputs the model wrote, as a SavedModel served directly does.

`from_run` opens the checkpoint t2t-lite-decoder would (or the one named) and
decodes exactly as the decoder does; `from_export` loads what t2t-lite-exporter
wrote: a SavedModel (with only TensorFlow and tensorflow-text at work) or a
CTranslate2 model (with CTranslate2).

A Translator is a thin front over a t2t_lite.inference.Backend, the one
inference interface: `RunBackend` (a run's Decoder), `IdBatchBackend` over a
SavedModel's decode_ids signature (`saved_model_backend`) and
t2t_lite.export.ctranslate2_backend.CTranslate2Export. Another engine that
decodes padded id batches, a t2t_lite.decoding.batching.DecodeBatch, needs only
`IdBatchBackend` around it: `Translator(IdBatchBackend(...))`.

Importing this module imports no TensorFlow, and decoding a CTranslate2 export
never does (docs/serving.md, the smallest deployment).
"""
import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING

from t2t_lite.data.target_forms import TARGET_FORMS
from t2t_lite.data.trees import readable
from t2t_lite.decoding.batching import Hypothesis, decode_id_batches, encode_lines
from t2t_lite.errors import UserError
from t2t_lite.export.export_dir import CTRANSLATE2, read_export, tree_form
from t2t_lite.inference import Backend

if TYPE_CHECKING:  # `import t2t_lite` stays free of TensorFlow: a CTranslate2 deployment has none
    from t2t_lite.ops.step_matmul import StepMatmulSettings


class Translator:
    """Translates (or parses) lists of sentences; see the module docstring.

    Build one with `from_run` or `from_export`, or directly around another backend (module docstring).

    Args:
      backend: what decodes.
      tree_form: for a parser, its target form (a key of t2t_lite.data.target_forms.TARGET_FORMS): `translate`
        then returns bracketed trees; None returns the outputs as they are.
    """

    def __init__(self, backend: Backend, tree_form: str | None = None):
        if tree_form is not None and tree_form not in TARGET_FORMS:
            raise UserError(f"tree_form must be one of {sorted(TARGET_FORMS)} or None, got {tree_form!r}")
        self._backend = backend
        self.tree_form = tree_form

    @classmethod
    def from_run(cls, output_dir: str | None = None, data_dir: str | None = None, checkpoint: str | None = None,
                 step_matmul: "StepMatmulSettings | None" = None, **settings) -> "Translator":
        """A training run's model.

        Args:
          output_dir: the run directory (what the trainer's --output_dir was).
          data_dir: the problem's prepared data (its vocabulary); None for problems without one.
          checkpoint: None picks what t2t-lite-decoder would (the averaged checkpoint if any, else the
            newest); "best", "latest" or "averaged" picks that one of output_dir; anything else is a
            checkpoint path, or several comma-separated for an ensemble.
          step_matmul: how a decoding step multiplies on a CPU (t2t_lite.ops.StepMatmulSettings);
            None is its default, which chooses for this machine.
          settings: any other t2t_lite.run.RunRequest field, e.g. beam_size=8, alpha=1.0,
            mixed_precision="mixed_bfloat16", problem=...
        """
        from t2t_lite.run import CHECKPOINT_CHOICES, RunRequest

        if checkpoint is None or checkpoint in CHECKPOINT_CHOICES:
            request = RunRequest(output_dir=output_dir, data_dir=data_dir, checkpoint=checkpoint, **settings)
        else:
            request = RunRequest(output_dir=output_dir, data_dir=data_dir, checkpoint_path=checkpoint, **settings)
        return cls.from_request(request, step_matmul)

    @classmethod
    def from_request(cls, request, step_matmul: "StepMatmulSettings | None" = None) -> "Translator":
        """A run opened from a t2t_lite.run.RunRequest (what the command-line tools build from their flags)."""
        from t2t_lite.ops.step_matmul import StepMatmulSettings
        from t2t_lite.run import open_run

        run = open_run(request, ensemble=True)
        return cls(RunBackend(run, step_matmul or StepMatmulSettings()), tree_form(run.problem))

    @classmethod
    def from_export(cls, path: str, batch_size: int | None = None, alpha: float | None = None,
                    extra_length: int | None = None, **settings) -> "Translator":
        """An export t2t-lite-exporter wrote (the numbered version directory, e.g. exports/m/1).

        A SavedModel decodes with the beam size, alpha and extra_length it was exported with (another is
        refused). A CTranslate2 export decodes with the same tokenizer and search settings as the run (any
        beam size, n-best, alpha and extra_length; export/ctranslate2_backend.py says how its length penalty
        is matched), without importing TensorFlow; `settings` go to its ctranslate2.Translator: device
        ("cpu", "cuda"), compute_type (e.g. "int8"), threads. Neither samples nor scores.

        Args:
          batch_size: sentences per batch; None keeps the exported decode.batch_size.
          alpha, extra_length: None keeps the export's.
        """
        if batch_size is not None and batch_size < 1:
            raise UserError(f"batch_size must be at least 1, got {batch_size}")
        export = read_export(path)
        if export.format == CTRANSLATE2:
            from t2t_lite.export.ctranslate2_backend import CTranslate2Export

            return cls(CTranslate2Export(path, alpha=alpha, extra_length=extra_length, batch_size=batch_size,
                                         **settings), export.tree_form)
        if settings:
            raise UserError(f"{', '.join(sorted(settings))} apply to CTranslate2 exports; {path!r} is not one")
        exported = export.decode_hparams
        for name, value in (("alpha", alpha), ("extra_length", extra_length)):
            if value is not None and value != getattr(exported, name):
                raise UserError(f"a SavedModel decodes with the {name} it was exported with "
                                f"({getattr(exported, name)}); export again with --{name}={value}")
        return cls(saved_model_backend(path, batch_size), export.tree_form)

    @property
    def run(self):
        """The opened run (t2t_lite.run.OpenedRun) of a Translator from a run; None for an export."""
        return getattr(self._backend, "run", None)

    def translate(self, sentences: list[str], beam_size: int | None = None, sampling=None) -> list[str]:
        """The best output of each sentence, in the input's order; an empty sentence gives "".
        A parser's are bracketed trees over the sentence's words (`as_trees`).

        Args:
          beam_size: None keeps the run's (the paper's 4 unless the run set another); 1 is greedy.
          sampling: a t2t_lite.decoding.sampling.SamplingSettings to draw one sample per sentence
            instead of searching (e.g. for back-translation); runs only.
        """
        results = self.hypotheses(sentences, beam_size=beam_size, sampling=sampling)
        outputs = [hyps[0].text if hyps else "" for hyps in results]
        return self.as_trees(sentences, outputs) if self.tree_form else outputs

    def as_trees(self, sentences: list[str], outputs: list[str]) -> list[str]:
        """A parser's linearised outputs as one-line bracketed trees with the sentences' words put back,
        "(S (NP (DT The) (NN cat)) (VP (VBD sat)) (. .))"; malformed outputs repaired (data/target_forms.py), an
        empty sentence an empty line.

        Raises:
          UserError: this Translator is not a parser's.
        """
        if self.tree_form is None:
            raise UserError("as_trees is for parsers: this Translator's problem does not write trees")
        form = TARGET_FORMS[self.tree_form]
        return [readable(form.delinearize(sentence.split(), output.split())) if sentence.split() else ""
                for sentence, output in zip(sentences, outputs)]

    def hypotheses(self, sentences: list[str], beam_size: int | None = None, nbest: int = 1, sampling=None,
                   **decoding) -> list[list[Hypothesis]]:
        """The nbest best outputs of each sentence with their scores and token ids: a list (per sentence) of
        lists of t2t_lite.decoding.batching.Hypothesis, best first (fewer when fewer beams finished).

        Args:
          beam_size, sampling: as for `translate`.
          nbest: outputs per sentence; at most the beam size (1 when sampling).
          decoding: decode_id_batches' progress and parallel_batches, and first_line (the 1-based line
            number of sentences[0], for error messages).
        """
        if isinstance(sentences, str):
            raise UserError("translate takes a list of sentences; wrap a single one in a list")
        if nbest < 1:
            raise UserError(f"nbest must be at least 1, got {nbest}")
        return self._backend.hypotheses(list(sentences), beam_size, nbest, sampling, **decoding)

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


class RunBackend:
    """A run's Decoder as a t2t_lite.inference.Backend: beam search, sampling, ensembles and scoring.

    Args:
      run: a t2t_lite.run.OpenedRun (opened with ensemble=True).
      step_matmul: how a decoding step multiplies on a CPU.
    """

    def __init__(self, run, step_matmul: "StepMatmulSettings"):
        from t2t_lite.decoding.constraints import problem_constraint

        self.run, self.step_matmul = run, step_matmul
        self.constraint = problem_constraint(run.problem, run.decode_hparams)  # None unless asked for
        self._decoders = {}

    def decoder(self, beam_size: int | None, sampling, nbest: int = 1):
        """The Decoder for these settings: a search stops once each sentence's nbest best are final."""
        from t2t_lite.decoding.decoder import Decoder

        hp = self.run.decode_hparams
        if beam_size is not None:
            if beam_size < 1:
                raise UserError(f"beam_size must be at least 1, got {beam_size}")
            hp = dataclasses.replace(hp, beam_size=beam_size)
        most = 1 if sampling else hp.beam_size
        if nbest > most:
            raise UserError(f"nbest ({nbest}) cannot exceed the beam size ({most})" if not sampling else
                            f"sampling gives one output per sentence; nbest must be 1, not {nbest}")
        key = (hp.beam_size, sampling, nbest)
        if key not in self._decoders:
            # One per setting: each traces its own graph once, then decodes batch after batch.
            self._decoders[key] = Decoder(list(self.run.models), hp, self.step_matmul, sampling=sampling,
                                           constraint=self.constraint, final_beams=nbest)
        return self._decoders[key]

    def hypotheses(self, sentences, beam_size, nbest, sampling, first_line=1, **decoding):
        decoder = self.decoder(beam_size, sampling, nbest)
        problem = self.run.problem
        results = decode_id_batches(decoder.decode, encode_lines(problem, sentences, first_line),
                                    self.run.decode_hparams.batch_size, problem.decode, **decoding)
        return [hyps[:nbest] for hyps in results]

    def score(self, sources, targets, progress):
        from t2t_lite.decoding.scoring import score_pairs

        return score_pairs(self.run.problem, list(self.run.models), sources, targets,
                           self.run.decode_hparams.batch_size, self.run.decode_hparams.alpha, progress=progress)


class IdBatchBackend:
    """A t2t_lite.inference.Backend over an engine that decodes padded id batches with a search fixed beforehand
    (a SavedModel's decode_ids signature).

    Args:
      decode_batch: a t2t_lite.decoding.batching.DecodeBatch: int32 [B, T_src] source ids (EOS-terminated,
        PAD after) -> (ids [B, K, T], scores [B, K]), PAD (and EOS, if any) after each hypothesis's tokens.
      encode: text -> its ids, without EOS.
      decode: ids (without EOS and PAD) -> text.
      beam_size: the engine's K.
      batch_size: sentences per batch.
      encode_many: texts -> encode's ids for each, all at once; None encodes one text at a time.
    """

    def __init__(self, decode_batch: Callable, encode: Callable[[str], list[int]],
                 decode: Callable[[list[int]], str], beam_size: int, batch_size: int,
                 encode_many: Callable[[list[str]], list[list[int]]] | None = None):
        self.decode_batch, self.encode, self.decode = decode_batch, encode, decode
        self.beam_size, self.batch_size = beam_size, batch_size
        self.encode_many = encode_many

    def hypotheses(self, sentences, beam_size, nbest, sampling, first_line=1, **decoding):
        if beam_size is not None and beam_size != self.beam_size:
            raise UserError(f"an export decodes with the beam size it was exported with ({self.beam_size}); "
                            f"export again with --beam_size={beam_size}")
        if sampling is not None:
            raise UserError("an export decodes with the search it was exported with; sample with Translator.from_run")
        if nbest > self.beam_size:
            raise UserError(f"nbest ({nbest}) cannot exceed the export's beam size ({self.beam_size})")
        encoded = encode_lines(self, sentences, first_line)  # self.encode(_many) is the engine's tokenizer
        results = decode_id_batches(self.decode_batch, encoded, self.batch_size, self.decode, **decoding)
        return [hyps[:nbest] for hyps in results]

    def score(self, sources, targets, progress):
        raise UserError("an export holds beam search only; score with Translator.from_run on the run it came from")


def saved_model_backend(path: str, batch_size: int | None = None) -> IdBatchBackend:
    """An IdBatchBackend over the decode_ids signature of the SavedModel t2t-lite-exporter wrote at path, which
    tokenizes with the tf-text op the export's own text signature runs (data/vocabulary.py).

    Args:
      batch_size: sentences per call; None keeps the exported decode.batch_size.
    """
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  registers the SentencepieceOp the export's text signatures hold

    from t2t_lite.data.vocabulary import Vocabulary

    export = read_export(path)
    if export.format == CTRANSLATE2:
        raise UserError(f"{path!r} is a CTranslate2 export, not a SavedModel; open it with Translator.from_export")
    signature = tf.saved_model.load(path).signatures["decode_ids"]
    vocabulary = Vocabulary.from_file(export.vocab_path)

    def decode_batch(inputs):
        found = signature(inputs=tf.constant(inputs))
        return found["outputs"].numpy(), found["scores"].numpy()  # [B, K, T], [B, K]

    hp = export.decode_hparams
    return IdBatchBackend(decode_batch, vocabulary.encode, vocabulary.decode, hp.beam_size, batch_size or hp.batch_size,
                          encode_many=vocabulary.encode_many)
