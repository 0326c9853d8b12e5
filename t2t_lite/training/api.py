"""`t2t_lite.train`: train or resume a run from Python as t2t-lite-trainer does, on the devices the command would use.

    import t2t_lite
    t2t_lite.train(problem="algorithmic_reverse", hparams_set="transformer_tiny",
                   output_dir="/tmp/reverse", train_steps=2000)
    t2t_lite.Translator.from_run("/tmp/reverse").translate(["1234"])   # ["4321"]

The run directory it leaves (t2t_lite.run_dir) is the command's: hparams.json with the data_dir and usr
dir, checkpoints, best/, averaged/, so the decoder, exporter and Translator open it without more flags.
The command checks its flags as a RunConfig before preparing data and calls `train_run` with it; `train`
makes the RunConfig from settings by name. Either way the settings are checked once, when the RunConfig is
made, and resolved once, in `train_run`.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING

from t2t_lite import config, registry
from t2t_lite.config import HParams
from t2t_lite.errors import UserError

if TYPE_CHECKING:  # imported when training starts, so `import t2t_lite` stays light
    import keras

    import tensorflow as tf

    from t2t_lite.data.problem import Problem
    from t2t_lite.run_dir import RunDir, RunSpec
    from t2t_lite.training.loop import StopReason
    from t2t_lite.training.run_config import RunConfig


@dataclasses.dataclass(frozen=True)
class TrainedRun:
    """What `train` leaves: the run directory and its spec, and the model as training left it."""

    output_dir: str  # the run directory's path, as a user would pass it on
    spec: RunSpec
    problem: Problem
    model: keras.Model
    step: int
    stop_reason: StopReason


def train(problem: str | None = None, hparams_set: str | None = None, output_dir: str | RunDir | None = None,
          data_dir: str | None = None, hparams: str = "", usr_dir: str | None = None, distribution: str = "auto",
          strategy: tf.distribute.Strategy | None = None, log: Callable[[str], None] = print,
          **settings) -> TrainedRun:
    """Trains `problem` with `hparams_set` into output_dir; on a directory that holds a run, resumes it.

    Args:
      problem, hparams_set: registered names; a resumed run's own when None.
      output_dir: the run directory (a path, or a t2t_lite.run_dir.RunDir).
      data_dir: the problem's prepared data (t2t-lite-datagen); a resumed run's own when None.
      hparams: overrides, e.g. "d_model=256,train.batch_size=2048"; a resumed run's own when empty.
      usr_dir: a package or module registering your own problems, sets or models (docs/extending.md); the run
        records it. None: a resumed run's own, else the usr dir its problem, set or model came from.
      distribution: the command's --distribution (training.distribution.DISTRIBUTIONS): "auto" mirrors over
        every GPU of the machine, as the command does.
      strategy: your own tf.distribute strategy instead of `distribution`.
      log: where progress lines go.
      settings: t2t-lite-trainer's run flags by name (training.run_config.RunConfig): train_steps,
        train_minutes, save_checkpoints_steps, eval_steps, mixed_precision, random_seed, ...
    Raises:
      UserError: a bad setting, an unknown name, or a directory holding another run; nothing is written then.
    """
    from t2t_lite.training import run_config
    from t2t_lite.training.distribution import make_strategy

    run = run_config.from_settings(output_dir, settings)
    if strategy is not None and distribution != "auto":
        raise UserError(f"give train() a distribution or a strategy, not both (got distribution={distribution!r} "
                        f"and a {type(strategy).__name__})")
    return train_run(run, problem, hparams_set, data_dir, hparams, usr_dir, strategy or make_strategy(distribution),
                     log)


def train_run(run: RunConfig, problem: str | None = None, hparams_set: str | None = None,
              data_dir: str | None = None, hparams: str = "", usr_dir: str | None = None,
              strategy: tf.distribute.Strategy | None = None, log: Callable[[str], None] = print) -> TrainedRun:
    """`train` with its settings already made into a RunConfig (and so checked), run.output_dir the run directory.

    Args:
      strategy: None: TensorFlow's default (one device). The rest: as for `train`.
    """
    import tensorflow as tf

    from t2t_lite import usr_dir as usr_dirs
    from t2t_lite.run_dir import RunSpec, absolute, create_or_resume, load_spec, recorded_data_dir
    from t2t_lite.training import distribution, run_config
    from t2t_lite.training.trainer import Trainer

    saved = load_spec(run.output_dir)
    # The usr dir given (a moved one's new place, which the run then records), else a resumed run's own.
    usr_dir = usr_dirs.import_for_run(usr_dir, saved and saved.usr_dir)
    problem_name = problem or (saved and saved.problem)
    set_name = hparams_set or (saved and saved.hparams_set)
    if not problem_name or not set_name:
        raise UserError("`problem` and `hparams_set` are required for a new `output_dir`")
    if not data_dir and saved is not None:
        data_dir = recorded_data_dir(saved, run.output_dir.path)
    opened = open_problem(problem_name, data_dir)
    overrides = hparams if (hparams or saved is None) else saved.hparams_overrides
    resolved = resolve_hparams(set_name, overrides, opened.vocab_size,
                               opened.source_vocab_size if opened.separate_vocabularies else None)
    # Given none, the usr dir of this run's own registrations, not whichever the process imported first.
    usr_dir = usr_dir or usr_dirs.defining(registry.problems.get(problem_name), registry.hparams_sets.get(set_name),
                                           registry.models.get(resolved.model_name))
    requested = RunSpec(problem_name, set_name, overrides, resolved, absolute(data_dir), usr_dir,
                        opened.vocabulary_fingerprint())
    strategy = strategy or tf.distribute.get_strategy()
    run = run_config.resolve_for(run, opened, requested.hparams, strategy, log)
    spec = create_or_resume(run.output_dir, requested, chief=distribution.is_chief(strategy))
    trainer = Trainer(opened, spec.hparams, run, log=log, strategy=strategy)
    reason = trainer.train()
    return TrainedRun(run.output_dir.path, spec, opened, trainer.model, trainer.step, reason)


def resolve_hparams(set_name: str, overrides: str, vocab_size: int, source_vocab_size: int | None = None) -> HParams:
    """The named set with overrides applied and the vocabulary sizes filled in.

    Args:
      vocab_size: the problem's (target) vocabulary size.
      source_vocab_size: the sources' own vocabulary size where the problem has a vocabulary per side; None for
        one shared vocabulary.
    Raises:
      UserError: an override contradicts the problem's vocabularies, or the set shares what two cannot.
    """
    hparams = config.apply_overrides(registry.hparams_sets.get(set_name)(), overrides)
    model = hparams.model
    sizes = {"vocab_size": vocab_size, "source_vocab_size": 0 if source_vocab_size is None else source_vocab_size}
    for name, size in sizes.items():
        if getattr(model, name) not in (0, size):
            what = "vocabulary" if name == "vocab_size" else "source vocabulary"
            raise UserError(f"{name}={getattr(model, name)} in the hparams, but the problem's {what} has "
                            f"{size or 'no'} entries; drop the {name} override")
    model = dataclasses.replace(model, **sizes)
    if source_vocab_size is not None:
        if model.share_embeddings:
            raise UserError("the problem's data has a vocabulary per side, so one matrix cannot embed both; add "
                            "share_embeddings=false to `hparams` (the target embedding stays the softmax's)")
        shared_only = [name for name in model.decoder_features
                       if getattr(registry.decoder_features.get(name), "one_vocabulary", False)]
        if shared_only:
            raise UserError(f"decoder feature {shared_only[0]!r} reads source and target pieces through one table, "
                            "so it needs one shared vocabulary; leave it out of decoder_features or prepare the "
                            "data with one vocabulary")
    return dataclasses.replace(hparams, model=model)


def open_problem(name: str, data_dir: str | None):
    """The registered problem `name` on data_dir; one that reads prepared data needs a data_dir."""
    from t2t_lite.data.text_problem import Text2TextProblem

    problem = registry.problems.get(name)(data_dir)
    if isinstance(problem, Text2TextProblem) and not data_dir:
        raise UserError(f"`problem`={name} trains on prepared data: make it with t2t-lite-datagen "
                        f"`problem`={name} `data_dir`=DIR and pass `data_dir`=DIR here, or add `generate_data` "
                        "`data_dir`=DIR to prepare it first")
    return problem
