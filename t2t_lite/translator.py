"""Translator: a trained run or an export as a Python object, text in and text out.

    from t2t_lite import Translator
    translator = Translator.from_run("runs/multi30k", data_dir="data/multi30k")
    translator.translate(["A dog runs in the park."])           # ["Ein Hund rennt im Park."]
    translator.translate(["A dog runs."], beam_size=8, nbest=3)  # [[best, second, third]]
    translator.score(["A dog runs."], ["Ein Hund rennt."])       # [PairScore(...)]

`from_run` opens the checkpoint t2t-lite-decoder would (or the one named) and
decodes exactly as the decoder does; `from_export` loads a SavedModel that
t2t-lite-exporter wrote, with only TensorFlow and tensorflow-text at work.
"""
import dataclasses
import os

import numpy as np

from t2t_lite.errors import UserError


class Translator:
    """Translates (or parses) lists of sentences; see the module docstring.

    Build one with `from_run` or `from_export`, not directly.
    """

    def __init__(self, backend):
        self._backend = backend

    @classmethod
    def from_run(cls, output_dir: str | None = None, data_dir: str | None = None, checkpoint: str | None = None,
                 **settings) -> "Translator":
        """A training run's model.

        Args:
          output_dir: the run directory (what the trainer's --output_dir was).
          data_dir: the problem's prepared data (its vocabulary); None for problems without one.
          checkpoint: None picks what t2t-lite-decoder would (the averaged checkpoint if any, else the
            newest); "best", "latest" or "averaged" picks that one of output_dir; anything else is a
            checkpoint path, or several comma-separated for an ensemble.
          settings: any other t2t_lite.run.RunRequest field, e.g. beam_size=8, alpha=1.0,
            mixed_precision="mixed_bfloat16", problem=...
        """
        from t2t_lite.run import CHECKPOINT_CHOICES, RunRequest

        if checkpoint is None or checkpoint in CHECKPOINT_CHOICES:
            request = RunRequest(output_dir=output_dir, data_dir=data_dir, checkpoint=checkpoint, **settings)
        else:
            request = RunRequest(output_dir=output_dir, data_dir=data_dir, checkpoint_path=checkpoint, **settings)
        return cls.from_request(request)

    @classmethod
    def from_request(cls, request) -> "Translator":
        """A run opened from a t2t_lite.run.RunRequest (what the command-line tools build from their flags)."""
        from t2t_lite.run import open_run

        return cls(_RunBackend(open_run(request, ensemble=True)))

    @classmethod
    def from_export(cls, path: str) -> "Translator":
        """A SavedModel written by t2t-lite-exporter (the numbered version directory, e.g. exports/m/1).

        It decodes with the beam size and settings it was exported with; it cannot score.
        """
        return cls(_ExportBackend(path))

    @property
    def run(self):
        """The opened run (t2t_lite.run.OpenedRun) of a Translator from a run; None for an export."""
        return getattr(self._backend, "run", None)

    def translate(self, sentences: list[str], beam_size: int | None = None, nbest: int = 1, sampling=None):
        """The best output of each sentence (a list of str), or with nbest > 1 its nbest best (a list of lists).

        Empty sentences give "" (or [""]); the order is the input's.

        Args:
          beam_size: None keeps the run's (the paper's 4 unless the run set another); 1 is greedy.
          nbest: outputs per sentence, best first; at most beam_size.
          sampling: a t2t_lite.decoding.sampling.SamplingSettings to draw one sample per sentence
            instead of searching (e.g. for back-translation); runs only.
        """
        results = self.hypotheses(sentences, beam_size=beam_size, nbest=nbest, sampling=sampling)
        if nbest == 1:
            return [hyps[0].text for hyps in results]
        return [[h.text for h in hyps] for hyps in results]

    def hypotheses(self, sentences: list[str], beam_size: int | None = None, nbest: int = 1, sampling=None,
                   **decoding):
        """As `translate`, with each output's score and token ids: a list (per sentence) of lists of
        t2t_lite.decoding.decode_lines.Hypothesis, best first.

        Args:
          decoding: for a run, decode_lines' progress, parallel_batches and first_line.
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


class _RunBackend:
    def __init__(self, run):
        self.run = run
        self._decoders = {}

    def decoder(self, beam_size: int | None, sampling):
        from t2t_lite.decoding.decoder import Decoder

        hp = self.run.decode_hparams
        if beam_size is not None:
            if beam_size < 1:
                raise UserError(f"beam_size must be at least 1, got {beam_size}")
            hp = dataclasses.replace(hp, beam_size=beam_size)
        key = (hp.beam_size, sampling)
        if key not in self._decoders:
            # One per setting: each traces its own graph once, then decodes batch after batch.
            self._decoders[key] = Decoder(list(self.run.models), hp, sampling=sampling)
        return self._decoders[key]

    def hypotheses(self, sentences, beam_size, nbest, sampling, **decoding):
        from t2t_lite.decoding.decode_lines import decode_lines

        decoder = self.decoder(beam_size, sampling)
        most = 1 if sampling else decoder.hparams.beam_size
        if nbest > most:
            raise UserError(f"nbest ({nbest}) cannot exceed the beam size ({most})" if not sampling else
                            f"sampling gives one output per sentence; nbest must be 1, not {nbest}")
        results = decode_lines(self.run.problem, decoder, sentences, self.run.decode_hparams.batch_size, **decoding)
        return [hyps[:nbest] for hyps in results]

    def score(self, sources, targets, progress):
        from t2t_lite.decoding.scoring import score_pairs

        return score_pairs(self.run.problem, list(self.run.models), sources, targets,
                           self.run.decode_hparams.batch_size, self.run.decode_hparams.alpha, progress=progress)


class _ExportBackend:
    def __init__(self, path: str):
        import tensorflow as tf

        from t2t_lite.data.vocabulary import Vocabulary
        from t2t_lite.run import load_spec

        assets = os.path.join(path, "assets")
        spec = load_spec(assets)
        if spec is None or not tf.saved_model.contains_saved_model(path):
            raise UserError(f"{path!r} is not a t2t-lite export (a SavedModel with assets/hparams.json); give the "
                            f"numbered version directory t2t-lite-exporter printed")
        self.beam_size = spec.hparams.decode.beam_size
        self._signature = tf.saved_model.load(path).signatures["decode_ids"]
        self._vocabulary = Vocabulary.from_file(os.path.join(assets, "vocab.model"))
        self._batch_size = spec.hparams.decode.batch_size

    def hypotheses(self, sentences, beam_size, nbest, sampling, **decoding):
        import tensorflow as tf

        from t2t_lite.decoding.decode_lines import Hypothesis

        if beam_size is not None and beam_size != self.beam_size:
            raise UserError(f"an export decodes with the beam size it was exported with ({self.beam_size}); "
                            f"export again with --beam_size={beam_size}")
        if sampling is not None or decoding:
            raise UserError("an export decodes with the search it was exported with; sample with Translator.from_run")
        if nbest > self.beam_size:
            raise UserError(f"nbest ({nbest}) cannot exceed the export's beam size ({self.beam_size})")
        results = []
        for first in range(0, len(sentences), self._batch_size):
            batch = [self._vocabulary.encode(s) if s.strip() else [] for s in sentences[first:first + self._batch_size]]
            width = max([len(ids) for ids in batch] + [1])
            padded = np.array([ids + [0] * (width - len(ids)) for ids in batch], np.int32)  # [B, T_src]
            found = self._signature(inputs=tf.constant(padded))
            ids, scores = found["outputs"].numpy(), found["scores"].numpy()  # [B, K, T], [B, K]
            for row, source in enumerate(batch):
                if not source:
                    results.append([Hypothesis(text="", score=0.0)])
                    continue
                beams = [[int(i) for i in beam if i != 0] for beam in ids[row]]
                results.append([Hypothesis(text=self._vocabulary.decode(beam), score=float(score), ids=tuple(beam))
                                for beam, score in zip(beams[:nbest], scores[row][:nbest]) if np.isfinite(score)])
        return results

    def score(self, sources, targets, progress):
        raise UserError("an export holds beam search only; score with Translator.from_run on the run it came from")
