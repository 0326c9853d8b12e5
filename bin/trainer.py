"""t2t-lite-trainer: train a registered model on a registered problem.

  t2t-lite-trainer --problem=algorithmic_reverse --hparams_set=transformer_tiny --output_dir=/tmp/reverse
  t2t-lite-trainer --problem=wmt_ende --hparams_set=transformer_base --output_dir=/tmp/ende \\
      --data_dir=/data/ende --generate_data

--generate_data first runs t2t-lite-datagen's step into --data_dir (taking its source flags:
--train_files, --dev_files, --test_files, --tmp_dir, --vocab_size, --num_shards, --max_vocab_sentences);
on a rerun it finds the data ready and goes straight to training.
"""
from absl import flags

from t2t_lite import precision, registry
from t2t_lite.bin import prepare
from t2t_lite.bin.cli import flag_names, run_main
from t2t_lite.errors import UserError
from t2t_lite.training import run_config

FLAGS = flags.FLAGS
flags.DEFINE_string("hparams_set", None, "Registered hparams set; defaults to the one saved in --output_dir.")
flags.DEFINE_string("hparams", "", 'Overrides, e.g. "d_model=256,train.batch_size=2048".')
flags.DEFINE_string("output_dir", None, "Checkpoints, summaries and hparams.json go here; rerun to resume.")
# --problem, --data_dir, --vocab_size and the data-source flags of --generate_data.
flags.adopt_module_key_flags(prepare)
flags.DEFINE_bool("generate_data", False, "First prepare --problem's data in --data_dir as t2t-lite-datagen does "
                  "(from the same flags: --train_files, --dev_files, --tmp_dir, ...), then train; data already "
                  "prepared with the same options is kept.")
# The run flags are RunConfig's fields by name and take its defaults: each is written once, in run_config.py,
# and --help shows the one t2t_lite.train has too.
DEFAULT = run_config.DEFAULTS
flags.DEFINE_integer("train_steps", DEFAULT["train_steps"], "Total steps; defaults to the hparams set's train_steps.")
flags.DEFINE_float("train_minutes", DEFAULT["train_minutes"], "A time budget: stop once the run has trained this many "
                   "minutes (counted across restarts, start-up excluded), saving, evaluating and averaging as at "
                   "--train_steps, whichever comes first; with train.average_span the averaged checkpoints are "
                   "spread over the budget's end. 0 = none.")
flags.DEFINE_integer("eval_steps", DEFAULT["eval_steps"], "Dev batches per evaluation; 0 = the whole dev split.")
flags.DEFINE_integer("save_checkpoints_steps", DEFAULT["save_checkpoints_steps"],
                     "Checkpoint and evaluate every this many steps.")
flags.DEFINE_integer("keep_checkpoint_max", DEFAULT["keep_checkpoint_max"],
                     "Checkpoints kept (the paper averages the last 5 or 20).")
flags.DEFINE_integer("random_seed", DEFAULT["random_seed"], "Seeds initialisation, dropout and shuffling.")
flags.DEFINE_integer("log_every_steps", DEFAULT["log_every_steps"], "Progress line every this many steps.")
flags.DEFINE_bool("jit_compile", DEFAULT["jit_compile"], "Compile each replica's forward and backward pass with XLA; "
                  "batches are padded to their bucket's bound so XLA compiles one program per bucket.")
flags.DEFINE_enum("distribution", "auto", ["auto", "one_device", "mirrored", "multi_worker"],
                  "one_device; mirrored (every GPU, or every --cpu_devices CPU device); multi_worker (the cluster "
                  "in TF_CONFIG); auto: multi_worker if TF_CONFIG lists several tasks, else mirrored if there are "
                  "several devices, else one_device.")
flags.DEFINE_integer("cpu_devices", 0, "Split the CPU into this many logical devices (for trying mirrored "
                     "without GPUs); 0 leaves it whole.")
flags.DEFINE_enum("mixed_precision", DEFAULT["mixed_precision"], [precision.AUTO, *precision.PRECISIONS],
                  "Compute dtype: float16 with loss scaling (GPUs) or bfloat16 (CPUs, TPUs, Ampere+ GPUs); "
                  "variables, softmax and loss stay float32. auto: mixed_bfloat16 on a CPU that multiplies "
                  "bfloat16 natively (AVX-512 BF16 or AMX), where it trains about 1.7x as fast (more with AMX), else none (float32); "
                  "none (float32) too where TensorFlow sees a GPU: pick mixed_float16 or mixed_bfloat16 for one.")
flags.DEFINE_bool("float32_output_projection", DEFAULT["float32_output_projection"], "With --mixed_precision, multiply "
                  "the training loss's projection onto the vocabulary, and its gradients, with float32 operands (its "
                  "logits are summed in float32 either way): the loss curve follows float32's more closely, at a "
                  "fifth to a third less speed with bfloat16 on CPUs.")
flags.DEFINE_integer("max_nonfinite_steps", DEFAULT["max_nonfinite_steps"], "Stop when this many updates in a row were "
                     "skipped because the loss or a gradient was not finite (a skipped update changes nothing).")
flags.DEFINE_bool("memory_probe", DEFAULT["memory_probe"], "Before training, run one forward and backward pass on the "
                  "largest batch the bucketing can produce, so a batch that does not fit fails at once.")
flags.DEFINE_integer("eval_bleu_sentences", DEFAULT["eval_bleu_sentences"], "At every evaluation, decode the "
                     "first this many dev sentences with the run's beam settings (hparams.decode) and log the "
                     "problem's dev metric beside dev loss: BLEU (sacreBLEU), bracket F1 for parsing, exact match for "
                     "algorithmic problems. 0 = off. Default: 200, or 0 for algorithmic problems.")
flags.DEFINE_enum("best_checkpoint_metric", DEFAULT["best_checkpoint_metric"], list(run_config.METRIC_CHOICES),
                  "What chooses the best checkpoint, kept in --output_dir/best/ (decode it with --checkpoint=best): "
                  "bleu = the problem's dev metric of --eval_bleu_sentences (BLEU, bracket F1 or exact match; "
                  "higher is better), loss = dev loss. Default: bleu when --eval_bleu_sentences > 0, else loss.")
flags.DEFINE_integer("early_stopping_patience", DEFAULT["early_stopping_patience"], "Stop (exit 0) after this many "
                     "evaluations in a row without a better --best_checkpoint_metric score; 0 = never.")
flags.DEFINE_string("warm_start_from", DEFAULT["warm_start_from"], "Start a new run from this run directory's weights "
                    "(its averaged checkpoint if any, else its newest) or a checkpoint's: fine-tuning. Step, schedule "
                    "and Adam state start afresh; the model and vocabulary must be the source's. A run with "
                    "checkpoints of its own resumes them instead.")
flags.DEFINE_bool("warm_start_optimizer", DEFAULT["warm_start_optimizer"],
                  "With --warm_start_from, keep the source's Adam moments too.")
flags.DEFINE_integer("show_samples", 0, "After training, decode this many dev examples as the run decodes (its "
                     "beam, batch size and constraint) and print a few with the exact-match rate.")
flags.DEFINE_bool("registry_help", False, "List registered models, hparams sets and problems, then exit.")
flags.DEFINE_bool("dry_run", False, "Build the model without data, print 'parameters: N', exit.")


def dry_run() -> None:
    from t2t_lite.models import build_model
    from t2t_lite.training.api import open_problem, resolve_hparams

    if not FLAGS.hparams_set:
        raise UserError("--dry_run needs --hparams_set")
    problem = open_problem(FLAGS.problem, FLAGS.data_dir) if FLAGS.problem else None
    vocab_size = FLAGS.vocab_size or FLAGS.target_vocab_size or (problem.vocab_size if problem else 0)
    if vocab_size <= 0:
        raise UserError("--dry_run needs --vocab_size=N (or a --problem to take it from)")
    source_vocab_size = FLAGS.source_vocab_size or (
        problem.source_vocab_size if problem is not None and problem.separate_vocabularies else None)
    hparams = resolve_hparams(FLAGS.hparams_set, FLAGS.hparams, vocab_size, source_vocab_size)
    print(f"parameters: {build_model(hparams).count_params()}")


def check_data_flags() -> None:
    """--generate_data's needs, or without it the data source flags it would ignore: refused before anything is
    prepared or written."""
    from t2t_lite.training import distribution

    if not FLAGS.generate_data:
        for name in ("tmp_dir", *prepare.OPTION_FLAGS):  # datagen's flags, read only to prepare data
            if FLAGS[name].present:
                raise UserError(f"--{name} is for preparing data, which the trainer does only with --generate_data: "
                                f"add --generate_data, or prepare --data_dir with t2t-lite-datagen first")
    elif not FLAGS.problem or not FLAGS.data_dir:
        raise UserError("--generate_data needs --problem and --data_dir=DIR (where the prepared data goes)")
    elif distribution.cluster_tasks() > 1:
        # Every worker would write the same shards at once.
        raise UserError("--generate_data runs in one process: prepare the data once with t2t-lite-datagen, "
                        "then start every worker with its --data_dir")


def main(argv) -> None:
    if FLAGS.registry_help:
        for reg in (registry.models, registry.hparams_sets, registry.problems):
            print(f"{reg.kind}s:", *(f"  {name}" for name in reg.names()), sep="\n")
        return
    if FLAGS.dry_run:
        dry_run()
        return
    from t2t_lite.training import distribution
    from t2t_lite.training.api import open_problem, train_run

    # Made (and so checked) before data is prepared or anything written, and handed on: checked once.
    run = run_config.from_settings(FLAGS.output_dir, {name: FLAGS[name].value for name in run_config.SETTINGS})
    check_data_flags()
    # Devices and strategy come first: TensorFlow fixes both when it runs its first op.
    if FLAGS.cpu_devices:
        distribution.split_cpu(FLAGS.cpu_devices)
    strategy = distribution.make_strategy(FLAGS.distribution)
    if FLAGS.generate_data:
        # Without datagen's count of over-long examples: a full extra read of the data at every start.
        prepare.generate_data(open_problem(FLAGS.problem, FLAGS.data_dir))
    # The library's progress lines name settings as parameters ("raise `train_minutes`"); here they are flags.
    trained = train_run(run, problem=FLAGS.problem, hparams_set=FLAGS.hparams_set, data_dir=FLAGS.data_dir,
                        hparams=FLAGS.hparams, usr_dir=FLAGS.usr_dir, strategy=strategy,
                        log=lambda line: print(flag_names(line)))
    if FLAGS.show_samples and distribution.is_chief(strategy):
        show_samples(trained.problem, trained.model, trained.spec.hparams, FLAGS.show_samples)


def show_samples(problem, model, hparams, count: int) -> None:
    from t2t_lite import environment
    from t2t_lite.decoding.decoder import make_decoder
    from t2t_lite.decoding.request import run_decode
    from t2t_lite.decoding.samples import decode_samples, exact_match_rate

    # The run's own settings (its constraint too), resolved as the decoder's: each example's best output.
    decode = run_decode(hparams.decode)
    decoder = make_decoder(model, problem, decode, environment.step_matmul_settings())
    samples = decode_samples(problem, decoder, count, decode.hparams.batch_size)
    for sample in samples[:5]:
        mark = "ok" if sample.exact else "WRONG"
        print(f"  {sample.source}  ->  {sample.output}   (expected {sample.reference}) {mark}")
    print(f"exact match on {len(samples)} dev examples (beam {hparams.decode.beam_size}): "
          f"{exact_match_rate(samples):.1%}")


def run() -> None:
    run_main(main, "t2t-lite-trainer")


if __name__ == "__main__":
    run()
