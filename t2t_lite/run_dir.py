"""A run directory: what a training run leaves where, and the create-or-resume check.

    <output_dir>/
      hparams.json        the RunSpec: problem, hparams set, overrides, resolved hparams, data_dir, usr_dir
      checkpoint          the CheckpointManager's list of ckpt-<step> files
      ckpt-<step>.*       model, optimizer, data position, seconds trained
      train/, eval/       TensorBoard logs (tensorboard --logdir <output_dir>)
      dev_scores.json     every evaluation's dev scores, the best so far, the early-stopping count
      best/               the best checkpoint so far on the dev metric, with best.json and hparams.json
      averaged/           the mean of the last checkpoints, with averaged.json and hparams.json
      average_sources/    the end-of-run checkpoints averaged under train.average_span
      ensemble.json       the runs decoded with this one by default, as one ensemble (t2t-lite-ensemble)

This module is the only one that knows those names: the rest of the library
reaches them through RunDir, and finds checkpoints with `find_checkpoint`. A public
entry (t2t_lite.train, RunConfig, RunRequest, Translator.from_run, average_checkpoints)
makes its path a RunDir once, with `as_run_dir`; below them a run directory travels as one.
best/ and averaged/ are run directories of their own (a checkpoint beside
hparams.json), so a decoder opens them as it opens the run. hparams.json records
which problem and hparams set built the checkpoints, so a later command
rebuilds the model from it instead of trusting its own flags, and where the
data and the user's registrations (--usr_dir) were, so it needs neither flag
again while they stay put. A restart with a different problem, set or
hparams is refused rather than allowed to overwrite or misread the checkpoints.
"""
import contextlib
import dataclasses
import json
import os
import tempfile

from t2t_lite import config
from t2t_lite.config import HParams
from t2t_lite.errors import UserError
from t2t_lite.files import atomic_write_text, read_json

HPARAMS_FILE = "hparams.json"
CHECKPOINT_NAME = "ckpt"  # checkpoints are <dir>/ckpt-<step>
CHECKPOINT_STATE_FILE = "checkpoint"  # TensorFlow's list of a directory's checkpoints
AVERAGED_SUBDIR = "averaged"
BEST_SUBDIR = "best"
BEST_FILE = "best.json"  # in best/: the best checkpoint's step and scores
AVERAGED_FILE = "averaged.json"  # in averaged/ (or t2t-lite-avg-checkpoints' --destination_dir): its sources
SOURCES_SUBDIR = "average_sources"
DEV_SCORES_FILE = "dev_scores.json"
PARTNERS_FILE = "ensemble.json"  # its "partners": run directories, relative to the run's
TRAIN_LOGS, EVAL_LOGS = "train", "eval"
# Which checkpoint of a run directory `find_checkpoint` may be asked for.
CHECKPOINT_CHOICES = ("averaged", "best", "latest")


@dataclasses.dataclass(frozen=True)
class RunDir:
    """The paths of one run directory (the layout above), and the checkpoints in it.

    best/, averaged/ and average_sources/ are RunDirs too: each holds ckpt-<step> files and its own
    `checkpoint` list (and, but average_sources/, an hparams.json).
    """

    path: str

    @property
    def spec_file(self) -> str:
        return os.path.join(self.path, HPARAMS_FILE)

    @property
    def checkpoint_state_file(self) -> str:
        return os.path.join(self.path, CHECKPOINT_STATE_FILE)

    def checkpoint_prefix(self, step: int) -> str:
        """Where the checkpoint of `step` is (or goes): <path>/ckpt-<step>."""
        return os.path.join(self.path, f"{CHECKPOINT_NAME}-{step}")

    def latest_checkpoint(self) -> str | None:
        """The newest checkpoint the directory's `checkpoint` list names; None when there is none."""
        import tensorflow as tf  # here: reading a spec (a CTranslate2 export's) needs no TensorFlow

        return tf.train.latest_checkpoint(self.path)

    def manager(self, checkpoint, max_to_keep: int, step_counter=None):
        """A tf.train.CheckpointManager saving `checkpoint` (a tf.train.Checkpoint) as <path>/ckpt-<step>, keeping
        the newest max_to_keep in the directory's `checkpoint` list."""
        import tensorflow as tf

        return tf.train.CheckpointManager(checkpoint, self.path, max_to_keep=max_to_keep, step_counter=step_counter,
                                          checkpoint_name=CHECKPOINT_NAME)

    def checkpoint_state(self):
        """TensorFlow's CheckpointState of the directory's `checkpoint` list (paths, timestamps); None without one."""
        import tensorflow as tf

        return tf.train.get_checkpoint_state(self.path)

    def listed_checkpoints(self) -> list[str]:
        """The checkpoints the directory's `checkpoint` list names, oldest first, whether or not their files remain."""
        state = self.checkpoint_state()
        return list(state.all_model_checkpoint_paths) if state else []

    def checkpoints(self) -> list[str]:
        """The listed checkpoints whose files are there (one deleted by hand cannot be read), oldest first."""
        return [path for path in self.listed_checkpoints() if checkpoint_exists(path)]

    def keep_listed(self, kept: list[str]) -> None:
        """Deletes the listed checkpoints not in `kept` (a subsequence of listed_checkpoints) and lists only `kept`.

        A CheckpointManager made afterwards takes over only the paths whose timestamps it finds in the
        `checkpoint` list, so the kept ones keep theirs; with nothing kept the list goes.
        """
        import tensorflow as tf

        state = self.checkpoint_state()
        paths = list(state.all_model_checkpoint_paths) if state else []
        if kept == paths:
            return
        for path in set(paths) - set(kept):
            for name in tf.io.gfile.glob(path + ".*"):
                tf.io.gfile.remove(name)
        if kept:
            times = dict(zip(paths, state.all_model_checkpoint_timestamps))
            tf.compat.v1.train.update_checkpoint_state(
                self.path, kept[-1], all_model_checkpoint_paths=kept,
                all_model_checkpoint_timestamps=[times[p] for p in kept],
                last_preserved_timestamp=state.last_preserved_timestamp)
        else:
            tf.io.gfile.remove(self.checkpoint_state_file)

    def remove_unrecorded(self, step: int) -> None:
        """Removes what a failed save of `step` left: its temporary files, and its files unless the
        `checkpoint` list already names it as the newest (the failure came after it was recorded)."""
        import tensorflow as tf

        prefix = self.checkpoint_prefix(step)
        listed = self.listed_checkpoints()
        recorded = (bool(listed) and os.path.basename(listed[-1]) == os.path.basename(prefix)
                    and checkpoint_exists(prefix))
        # <prefix>_temp/ holds the shards being written; checkpoint.tmp<hex> a state file being written.
        leftovers = tf.io.gfile.glob(prefix + "_temp*") + tf.io.gfile.glob(self.checkpoint_state_file + ".tmp*")
        if not recorded:
            leftovers += tf.io.gfile.glob(prefix + ".index") + tf.io.gfile.glob(prefix + ".data-*")
        for path in leftovers:
            with contextlib.suppress(tf.errors.OpError):  # already gone; nothing else can be done about the rest
                (tf.io.gfile.rmtree if tf.io.gfile.isdir(path) else tf.io.gfile.remove)(path)

    @classmethod
    def scratch(cls, parent: str | None = None, prefix: str = "t2t-lite-worker-") -> "RunDir":
        """A new temporary directory in `parent` (None: the system's): a non-chief worker's to save into
        (Checkpoints), or where checkpoint_dir stages a directory before renaming it into place."""
        return cls(tempfile.mkdtemp(dir=parent, prefix=prefix))

    @property
    def best(self) -> "RunDir":
        return RunDir(os.path.join(self.path, BEST_SUBDIR))

    @property
    def best_file(self) -> str:
        return os.path.join(self.path, BEST_SUBDIR, BEST_FILE)

    @property
    def averaged(self) -> "RunDir":
        return RunDir(os.path.join(self.path, AVERAGED_SUBDIR))

    @property
    def averaged_file(self) -> str:
        """averaged.json, in a directory holding an averaged checkpoint (averaged/, or a --destination_dir)."""
        return os.path.join(self.path, AVERAGED_FILE)

    @property
    def average_sources(self) -> "RunDir":
        return RunDir(os.path.join(self.path, SOURCES_SUBDIR))

    @property
    def dev_scores_file(self) -> str:
        return os.path.join(self.path, DEV_SCORES_FILE)

    @property
    def partners_file(self) -> str:
        return os.path.join(self.path, PARTNERS_FILE)

    def logs(self, name: str) -> str:
        """The TensorBoard log directory `name` (TRAIN_LOGS or EVAL_LOGS)."""
        return os.path.join(self.path, name)


@dataclasses.dataclass(frozen=True)
class RunSpec:
    """What hparams.json holds: the problem, the set and overrides asked for, the result, and where the
    run's data and user registrations were (absolute paths; None when the run had none)."""

    problem: str
    hparams_set: str
    hparams_overrides: str
    hparams: HParams
    data_dir: str | None = None
    usr_dir: str | None = None
    # The sha256 of the vocabulary it was trained on (Problem.vocabulary_fingerprint), so that a warm start or a
    # resume can tell its vocabulary from another of the same size wherever its data_dir went; None for a fixed
    # vocabulary, and in runs made before it was recorded.
    vocabulary_sha256: str | None = None


def spec_json(spec: RunSpec, **extra) -> str:
    """The text of hparams.json for spec; `extra` entries (e.g. an export's settings) are added beside it."""
    # asdict gives the hparams as config.to_dict does (it is asdict), beside the spec's other fields.
    return json.dumps({**dataclasses.asdict(spec), **extra}, indent=2, sort_keys=True) + "\n"


def as_run_dir(directory: "str | os.PathLike | RunDir | None") -> RunDir | None:
    """A public entry's run directory (a path, or already a RunDir) as the RunDir it is below; no path is None."""
    if isinstance(directory, RunDir) or not directory:
        return directory or None
    return RunDir(os.fspath(directory))


def save_spec(run: RunDir, spec: RunSpec) -> None:
    """Writes spec as run's hparams.json, atomically."""
    atomic_write_text(run.spec_file, spec_json(spec))


def load_spec(run: RunDir) -> RunSpec | None:
    """The RunSpec saved in run, or None if there is none yet."""
    return read_spec(run.spec_file)


def read_spec(path: str) -> RunSpec | None:
    """The RunSpec in the hparams.json at path (a run's, or an export's), or None if there is none."""
    if not os.path.exists(path):
        return None
    try:
        data = read_json(path)
        return RunSpec(data["problem"], data["hparams_set"], data["hparams_overrides"],
                       config.from_dict(data["hparams"]), data.get("data_dir"), data.get("usr_dir"),
                       data.get("vocabulary_sha256"))
    except UserError as error:  # a value the settings refuse, e.g. a hand-edited decode.beam_size of 0
        raise UserError(f"{path}: {error}") from None
    except (OSError, ValueError, KeyError) as error:
        raise UserError(f"{path} is unreadable or not a t2t-lite hparams file: {error}") from None


def save_partners(run: RunDir, partners: list[RunDir]) -> None:
    """Records `partners` as the runs decoded with `run` by default; none removes the record.

    The paths are kept relative to run, so that a directory holding the runs together can move or be copied.
    """
    if not partners:
        with contextlib.suppress(FileNotFoundError):
            os.remove(run.partners_file)
        return
    names = [os.path.relpath(os.path.abspath(partner.path), os.path.abspath(run.path)) for partner in partners]
    atomic_write_text(run.partners_file, json.dumps({"partners": names}, indent=2) + "\n")


def load_partners(run: RunDir) -> list[RunDir]:
    """The runs `run` is decoded with by default (save_partners), in their order; [] when it has none."""
    if not os.path.exists(run.partners_file):
        return []
    try:
        names = read_json(run.partners_file)["partners"]
        if not isinstance(names, list) or not all(isinstance(name, str) for name in names):
            raise ValueError("'partners' is not a list of paths")
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise UserError(f"{run.partners_file} is unreadable ({error}); name the run's partners again with "
                        f"t2t-lite-ensemble") from None
    return [RunDir(os.path.normpath(os.path.join(run.path, name))) for name in names]


def absolute(path: str | None) -> str | None:
    """path made absolute, as a spec records it; None stays None."""
    return os.path.abspath(path) if path else None


def create_or_resume(run: RunDir, requested: RunSpec, chief: bool = True) -> RunSpec:
    """The spec of run: a new run's is written, a resumed run's is checked against `requested`.

    A resumed run given another data_dir or usr_dir (moved) records the new one. Only the chief writes.
    Raises:
      UserError: run is not writable, or holds a run of another problem, set or hparams.
    """
    saved = load_spec(run)
    if saved is not None:
        check_matches(saved, requested, run)
    # A moved data_dir or usr_dir replaces the saved one; a run from before the fingerprint was recorded gets it.
    moved = ("data_dir", "usr_dir") + (("vocabulary_sha256",) if saved and not saved.vocabulary_sha256 else ())
    spec = requested if saved is None else dataclasses.replace(
        saved, **{name: getattr(requested, name) for name in moved if getattr(requested, name)})
    if chief:
        # A resumed run's directory is checked too: a read-only output_dir would otherwise fail only at the first
        # save. A new run's spec, or a resumed one's that moved, is written.
        ensure_writable(run, spec if spec != saved else None)
    return spec


def ensure_writable(run: RunDir, spec: RunSpec | None = None) -> None:
    """Creates run's directory if needed and checks a file can be written there, then writes `spec` (if given) as
    its hparams.json; or raises UserError.

    A failure to write the spec (a full disk: an empty probe file still fits) is the same one UserError, and
    leaves no half-written hparams.json.
    """
    try:
        os.makedirs(run.path, exist_ok=True)
        tempfile.NamedTemporaryFile(dir=run.path, prefix=".write-test-").close()  # a probe file, removed when closed
        if spec is not None:
            save_spec(run, spec)
    except OSError as error:
        raise UserError(f"cannot write to `output_dir` {run.path!r}: {error.strerror or error}") from None


def check_matches(saved: RunSpec, requested: RunSpec, run: RunDir) -> None:
    """Raises UserError if a restart asks for a different problem or hparams than run holds."""
    if saved.problem != requested.problem:
        raise UserError(f"`output_dir` {run.path!r} holds a run of problem {saved.problem!r}, not "
                        f"{requested.problem!r}; use a new `output_dir`")
    if saved.hparams_set != requested.hparams_set:
        raise UserError(f"`output_dir` {run.path!r} holds a run of hparams set {saved.hparams_set!r}, not "
                        f"{requested.hparams_set!r}; use a new `output_dir` or `hparams_set`={saved.hparams_set}")
    if saved.vocabulary_sha256 and requested.vocabulary_sha256 not in (None, saved.vocabulary_sha256):
        raise UserError(f"`output_dir` {run.path!r} was trained on another vocabulary than the one in `data_dir` "
                        f"{requested.data_dir} (sha256 {saved.vocabulary_sha256[:12]}... vs "
                        f"{requested.vocabulary_sha256[:12]}...); resume on the run's own data, or use a new "
                        "`output_dir`")
    if saved.hparams != requested.hparams:
        old, new = _flat(saved.hparams), _flat(requested.hparams)
        changed = ", ".join(f"{k}: {old[k]} -> {new[k]}" for k in sorted(old) if old[k] != new[k])
        raise UserError(f"`output_dir` {run.path!r} was trained with other hparams ({changed}); "
                        f"use a new `output_dir` or the original `hparams`")


def find_checkpoint(run: RunDir | None, checkpoint_path: str | None, choice: str | None = None) -> str:
    """The checkpoint to open.

    An explicit checkpoint_path wins; otherwise `choice` in run:
    "averaged" (what training or t2t-lite-avg-checkpoints wrote), "best" (the
    best on the dev metric so far), "latest" (the newest); None picks the
    averaged checkpoint if there is one (the paper decodes from it), else the newest.
    A checkpoint_path that is a run directory stands for its checkpoint as `choice` says, so that an
    ensemble can name its members' runs.
    """
    if checkpoint_path:
        member = RunDir(checkpoint_path)
        if os.path.isfile(member.spec_file):
            return find_checkpoint(member, None, choice)
        if not checkpoint_exists(checkpoint_path):
            raise UserError(f"no checkpoint at `checkpoint_path` {checkpoint_path!r} "
                            f"(expected {checkpoint_path}.index, or a run directory)")
        return checkpoint_path
    if run is None:
        raise UserError("give `output_dir` (a training run) or `checkpoint_path`")
    if choice is not None and choice not in CHECKPOINT_CHOICES:
        raise UserError(f"`checkpoint` must be one of {', '.join(CHECKPOINT_CHOICES)}; got {choice!r} "
                        f"(a path goes in `checkpoint_path`)")
    places = {None: (run.averaged, run), "averaged": (run.averaged,), "best": (run.best,), "latest": (run,)}[choice]
    for place in places:
        if latest := place.latest_checkpoint():
            return latest
    if choice is None:
        raise UserError(f"no checkpoint in `output_dir` {run.path!r}; train first or pass `checkpoint_path`")
    raise UserError(f"no {choice} checkpoint in `output_dir` {run.path!r} (looked in {places[0].path!r}); "
                    f"pick another `checkpoint`")


def spec_beside(checkpoint: str, hparams_set: str | None) -> RunSpec:
    """The hparams.json beside the checkpoint, checked against an explicitly requested set."""
    spec = load_spec(RunDir(os.path.dirname(checkpoint)))
    if spec is None:
        raise UserError(f"no {HPARAMS_FILE} beside {checkpoint!r}: it is not a t2t-lite run directory")
    if hparams_set and hparams_set != spec.hparams_set:
        raise UserError(f"checkpoint {checkpoint!r} was trained with hparams set {spec.hparams_set!r}, "
                        f"not {hparams_set!r}; drop `hparams_set` or pick the matching checkpoint")
    return spec


def recorded_data_dir(spec: RunSpec, checkpoint: str) -> str | None:
    """The data_dir the run of `checkpoint` trained on, checked to be still there."""
    if spec.data_dir and not os.path.isdir(spec.data_dir):
        raise UserError(f"the run of {checkpoint!r} trained on `data_dir` {spec.data_dir!r}, which no longer "
                        f"exists; pass `data_dir`=<where its data is now>")
    return spec.data_dir


def checkpoint_entries(prefix: str) -> frozenset[str]:
    """The top-level names the checkpoint at `prefix` holds ("model", "optimizer", "data", ...)."""
    import tensorflow as tf

    return frozenset(name.split("/")[0] for name, _ in tf.train.list_variables(prefix))


def checkpoint_exists(prefix: str) -> bool:
    """Whether a checkpoint is at `prefix` (<dir>/ckpt-<step>): its .index file is there."""
    import tensorflow as tf

    return tf.io.gfile.exists(prefix + ".index")


class CheckpointMismatch(ValueError):
    """A checkpoint that lacks a variable of what it is restored into, or cannot be read; its message is
    TensorFlow's reason, in one line."""


def restore_checkpoint(checkpoint: str, **objects) -> None:
    """Restores `objects` (e.g. model=..., optimizer=...) from `checkpoint`, checking that every variable of
    theirs was in it; what the checkpoint holds beyond them (an optimizer's slots, a data position) is ignored.

    The library's one restore of weights and training state (restore_unchecked puts back only the data
    position): opening a run, warm starting, resuming, averaging, scoring and keeping the best.
    Raises:
      CheckpointMismatch: a variable of `objects` missing or of another shape, or an unreadable checkpoint.
    """
    import tensorflow as tf

    try:
        tf.train.Checkpoint(**objects).restore(checkpoint).expect_partial().assert_existing_objects_matched()
    except (AssertionError, ValueError, tf.errors.OpError) as error:
        reason = str(error).strip()
        raise CheckpointMismatch(reason.splitlines()[0][:200] if reason else type(error).__name__) from None


def restore_unchecked(checkpoint: str, **objects) -> None:
    """Restores what of `objects` `checkpoint` holds, nothing checked: the training data iterator's position,
    which training.checkpoints restores only from a checkpoint it knows to hold one."""
    import tensorflow as tf

    tf.train.Checkpoint(**objects).restore(checkpoint).expect_partial()


def checkpoint_step(checkpoint_path: str) -> int:
    """The step of a checkpoint this project wrote: <dir>/ckpt-<step>."""
    return int(checkpoint_path.rsplit("-", 1)[1])


def _flat(hparams: HParams) -> dict:
    data = config.to_dict(hparams)
    return {"model_name": data.pop("model_name"),
            **{f"{group}.{k}": v for group, fields in data.items() for k, v in fields.items()}}
