"""The flags that pick a trained run and the decoding settings to open it with, shared by the decoder,
exporter and visualiser, and the RunRequest they make (t2t_lite.run.open_run takes it)."""
from absl import flags

FLAGS = flags.FLAGS


def define(verb: str, decoding_settings: bool = True) -> None:
    """Defines --output_dir, --checkpoint_path and --data_dir; with decoding_settings, also --problem,
    --hparams_set, --beam_size, --alpha, --extra_length, --constrained_decoding and --mixed_precision.

    Args:
      verb: what the command does to the run, for the help: e.g. "decodes".
    """
    flags.DEFINE_string("output_dir", None, f"A training run; {verb} its averaged checkpoint if any, else the newest.")
    flags.DEFINE_string("checkpoint_path", None, "A specific checkpoint (e.g. RUN/ckpt-5000) or another run "
                        "directory instead; several, comma-separated, make an ensemble where the command supports "
                        "one (a run directory gives the checkpoint --checkpoint picks).")
    flags.DEFINE_enum("checkpoint", None, ["averaged", "best", "latest"], "Which checkpoint of --output_dir: the "
                      "averaged one, the best on the dev metric, or the newest. Default: averaged if any, else "
                      "the newest.")
    flags.DEFINE_string("data_dir", None, "The problem's prepared data (its vocabulary); default: the "
                        "data_dir the run recorded when it was trained.")
    if not decoding_settings:
        return
    flags.DEFINE_string("problem", None, "Defaults to the run's problem (hparams.json).")
    flags.DEFINE_string("hparams_set", None, "If given, must match the run's set; a guard against opening the "
                        "wrong run.")
    flags.DEFINE_integer("beam_size", None, "Default: the run's decode.beam_size (paper: 4). 1 = greedy.")
    flags.DEFINE_float("alpha", None, "Length penalty exponent; default the run's (paper: 0.6).")
    flags.DEFINE_integer("extra_length", None, "Max output length = input length + this; default the run's (50).")
    flags.DEFINE_boolean("constrained_decoding", None, "Emit only outputs the problem allows: for parsing, "
                         "well-formed trees over the input's words (a POS tag per word, or in the words form the "
                         "words themselves, copied in order; docs/decoding.md). Default: the run's "
                         "decode.constrained_decoding (off, but on in transformer_parsing_small_data). Refused "
                         "for problems without a constraint and for CTranslate2 exports.")
    flags.DEFINE_enum("mixed_precision", "auto", ["auto", "none", "mixed_bfloat16", "mixed_float16"],
                      "Compute dtype, whatever the run trained in: mixed_bfloat16 runs the matmuls in bfloat16 "
                      "(fast on CPUs with AMX or AVX512_BF16; outputs can differ slightly, see docs/decoding.md); "
                      "auto (the default): bfloat16 where the CPU multiplies it natively, float32 elsewhere and on "
                      "GPUs; none: float32.")


def run_request(**decode_settings):
    """A t2t_lite.run.RunRequest from the flags `define` made, its DecodeRequest with `decode_settings` too
    (e.g. batch_size, nbest, sampling): the command's one decode request."""
    from t2t_lite.decoding.request import DecodeRequest
    from t2t_lite.run import RunRequest

    return RunRequest(**given(RUN_FLAGS), decode=DecodeRequest(**given(DECODE_FLAGS), **decode_settings))


# The flags that pick and open a run, and those of its decode request.
PICKS_A_RUN = ("output_dir", "checkpoint_path", "checkpoint", "data_dir", "problem", "hparams_set")
RUN_FLAGS = (*PICKS_A_RUN, "usr_dir")
DECODE_FLAGS = ("beam_size", "alpha", "extra_length", "constrained_decoding", "mixed_precision")


def given(names) -> dict:
    """The values of the flags among `names` that this command defines."""
    return {name: FLAGS[name].value for name in names if name in FLAGS}
