"""How a run trains (not what it trains): the trainer's settings, checked when made and resolved once.

RunConfig's fields are t2t-lite-trainer's run flags by their flag names, so
the command maps flags onto it by name and `t2t_lite.train(**settings)`
takes the same names. A RunConfig is checked when it is made (`check`).
`resolve` turns the settings as given (None for "the default") into a
ResolvedRunConfig, the only kind the Trainer takes, by a pure function of
what it needs to know: the problem's dev-metric default, the set's
train_steps, what "auto" precision means on this machine and how many
processes train; `resolve_for` reads those from the problem, the hparams and
the strategy.
"""
import dataclasses

from t2t_lite import precision
from t2t_lite.errors import UserError
from t2t_lite.run_dir import RunDir, as_run_dir

# What best_checkpoint_metric may be: the problem's dev metric (BLEU; bracket F1 for parsing; exact match
# for algorithmic problems), higher is better, or the dev loss, lower is better.
METRIC_CHOICES = ("bleu", "loss")


@dataclasses.dataclass(frozen=True)
class RunConfig:
    """How long, how observably and on what numerics to train; not part of the model's hparams."""

    # The run directory; a path given is made a RunDir when the config is made.
    output_dir: RunDir
    # Total updates; None: the hparams set's train.train_steps.
    train_steps: int | None = None
    # Stop, save and average (as at train_steps) once the run has trained this long (time_budget.py: counted
    # across restarts, start-up excluded); whichever of this and train_steps comes first ends it. 0 = no budget.
    train_minutes: float = 0.0
    # Dev batches per evaluation; 0 evaluates the whole dev split.
    eval_steps: int = 100
    save_checkpoints_steps: int = 1000
    keep_checkpoint_max: int = 20
    random_seed: int = 1234
    log_every_steps: int = 100
    # XLA for each replica's forward and backward pass; batches are then padded to bucket bounds.
    jit_compile: bool = False
    # "none", "mixed_float16" (GPUs, with loss scaling) or "mixed_bfloat16" (CPUs, TPUs, Ampere+ GPUs);
    # "auto": mixed_bfloat16 where the CPU has native bfloat16 and no GPU is visible, else none. A property of the hardware, not
    # the model: checkpoints hold float32 variables either way.
    mixed_precision: str = "auto"
    # Under mixed precision, the loss's projection onto the vocabulary with float32 operands and
    # gradients (its logits are summed in float32 either way): a loss curve closer to float32's,
    # for a fifth to a third less speed (TrainStep).
    float32_output_projection: bool = False
    # Stop after this many updates in a row were skipped for a non-finite loss or gradient.
    # Float16 loss scaling skips a few on its own while it finds its scale.
    max_nonfinite_steps: int = 20
    # Before training, one forward and backward pass on the largest batch shape the bucketing
    # can produce, so a batch that does not fit in memory fails at once rather than hours in.
    memory_probe: bool = True
    # At every evaluation, decode the first this many dev sentences with hparams.decode's beam settings and
    # score them with the problem's dev metric (BLEU, bracket F1, exact match); 0 decodes nothing.
    # None: the problem's dev_metric_sentences (200 for translation and parsing, 0 for algorithmic problems).
    eval_bleu_sentences: int | None = None
    # What chooses the best checkpoint (output_dir/best/): "bleu", the problem's dev metric, or "loss";
    # None: "bleu" when eval_bleu_sentences > 0, else "loss".
    best_checkpoint_metric: str | None = None
    # Stop after this many evaluations in a row without a better best-checkpoint score; 0 never stops.
    early_stopping_patience: int = 0
    # A fresh run starts from this run directory's (or checkpoint's) weights: fine-tuning (warm_start.py).
    # A run that has checkpoints of its own resumes from them instead.
    warm_start_from: str | None = None
    # With warm_start_from, also take the source's Adam moments (the step and schedule restart either way).
    warm_start_optimizer: bool = False

    def __post_init__(self):
        object.__setattr__(self, "output_dir", as_run_dir(self.output_dir))
        check(self)


@dataclasses.dataclass(frozen=True)
class ResolvedRunConfig(RunConfig):
    """The settings a run trains with: every default filled in for its problem, set, machine and strategy.

    Made by `resolve` alone, from a RunConfig checked when it was made, so it is not checked again; it
    holds no None where RunConfig has defaults to fill in, and no "auto" precision.
    """

    def __post_init__(self):
        unresolved = [name for name in ("train_steps", "eval_bleu_sentences") if getattr(self, name) is None]
        if self.mixed_precision not in precision.PRECISIONS:
            unresolved.append("mixed_precision")
        if unresolved:
            raise ValueError(f"{', '.join(unresolved)} not resolved (got {self}); make a ResolvedRunConfig with "
                             f"run_config.resolve")

    @property
    def tracked_metric(self) -> str:
        """What chooses the best checkpoint: best_checkpoint_metric, else "bleu" when the run decodes dev sentences."""
        return self.best_checkpoint_metric or ("bleu" if self.eval_bleu_sentences > 0 else "loss")


# The settings `t2t_lite.train` and the trainer's flags give by name (every field but output_dir) and their
# defaults, which the flags take rather than repeat.
DEFAULTS = {field.name: field.default for field in dataclasses.fields(RunConfig) if field.name != "output_dir"}
SETTINGS = tuple(DEFAULTS)


def from_settings(output_dir: "str | RunDir | None", settings: dict) -> RunConfig:
    """A RunConfig from settings by name, checked; an unknown name is a UserError listing the known ones."""
    unknown = sorted(set(settings) - set(SETTINGS))
    if unknown:
        raise UserError(f"unknown training setting{'s' if len(unknown) > 1 else ''} {', '.join(unknown)}; "
                        f"known: {', '.join(SETTINGS)}")
    return RunConfig(output_dir=output_dir, **settings)


def check(run: RunConfig) -> None:
    """Settings that cannot work, whatever the problem and machine: what making a RunConfig checks, before anything
    is written."""
    if not run.output_dir:
        raise UserError("`output_dir` is required (the run directory)")
    for name in ("train_steps", "save_checkpoints_steps", "keep_checkpoint_max", "log_every_steps",
                 "max_nonfinite_steps"):
        value = getattr(run, name)
        if value is not None and value < 1:
            raise UserError(f"`{name}` must be at least 1, got {value}")
    for name, zero in (("train_minutes", "no time budget"), ("eval_steps", "the whole dev split"),
                       ("eval_bleu_sentences", "off"), ("early_stopping_patience", "never stop early")):
        if (getattr(run, name) or 0) < 0:
            raise UserError(f"`{name}` must be 0 ({zero}) or more, got {getattr(run, name)}")
    if run.best_checkpoint_metric not in (None, *METRIC_CHOICES):
        raise UserError(f"`best_checkpoint_metric` must be one of {', '.join(METRIC_CHOICES)}; "
                        f"got {run.best_checkpoint_metric!r}")
    if run.best_checkpoint_metric == "bleu" and run.eval_bleu_sentences == 0:
        raise UserError("`best_checkpoint_metric`=bleu needs the dev metric: set `eval_bleu_sentences`=N (N > 0), "
                        "or use `best_checkpoint_metric`=loss")
    precision.check_setting(run.mixed_precision)
    if run.float32_output_projection and run.mixed_precision == "none":
        raise UserError("`float32_output_projection` changes nothing with `mixed_precision`=none: "
                        "use `mixed_precision`=mixed_bfloat16 (or mixed_float16, or auto), or drop it")
    if run.warm_start_optimizer and not run.warm_start_from:
        raise UserError("`warm_start_optimizer` needs `warm_start_from`")


def resolve(run: RunConfig, dev_metric_sentences: int, default_train_steps: int, auto_precision: str,
            workers: int = 1) -> tuple[ResolvedRunConfig, list[str]]:
    """The settings this run trains with, every default filled in, and lines worth telling the user.

    Args:
      run: as given (checked when it was made).
      dev_metric_sentences: the problem's default for eval_bleu_sentences.
      default_train_steps: the hparams set's train.train_steps.
      auto_precision: what "auto" precision means on this machine (precision.resolve).
      workers: processes training together (a time budget needs exactly one).
    """
    notes = []
    eval_bleu_sentences = dev_metric_sentences if run.eval_bleu_sentences is None else run.eval_bleu_sentences
    if run.best_checkpoint_metric == "bleu" and eval_bleu_sentences < 1:
        raise UserError("the best checkpoint can be chosen on the dev metric only when it is computed: "
                        "set `eval_bleu_sentences`=N (N > 0), or `best_checkpoint_metric`=loss")
    if run.train_minutes and workers > 1:
        # Each worker's clock would end its run at a different step.
        raise UserError("`train_minutes` works in one process; give a multi-worker run `train_steps` instead")
    mixed_precision, float32_output_projection = run.mixed_precision, run.float32_output_projection
    if mixed_precision == precision.AUTO:
        mixed_precision = auto_precision
        notes.append(precision.describe_auto(auto_precision))
        if float32_output_projection and auto_precision == "none":
            notes.append("`float32_output_projection` is ignored: training runs in float32 here")
            float32_output_projection = False
    return ResolvedRunConfig(**{**vars(run), "train_steps": run.train_steps or default_train_steps,
                                "eval_bleu_sentences": eval_bleu_sentences, "mixed_precision": mixed_precision,
                                "float32_output_projection": float32_output_projection}), notes


def resolve_for(run: RunConfig, problem, hparams, strategy=None, log=print) -> ResolvedRunConfig:
    """`resolve` with what it needs read from the problem, the hparams, this machine and the strategy.

    Args:
      problem: the run's Problem (its dev_metric_sentences).
      hparams: the run's HParams (train.train_steps).
      strategy: the tf.distribute strategy the run trains under, which says how many processes train;
        None: TensorFlow's default (one process).
      log: receives the lines worth telling the user (what "auto" precision chose).
    """
    from t2t_lite.training import distribution

    auto = precision.resolve(precision.AUTO) if run.mixed_precision == precision.AUTO else "none"
    resolved, notes = resolve(run, problem.dev_metric_sentences, hparams.train.train_steps, auto,
                              distribution.worker_count(strategy))
    for line in notes:
        log(line)
    return resolved
