"""Which t2t_lite modules one training update and one beam search reach: a measure of how many files a reader of
either path must open (issue 86).

A tiny Transformer, its TrainStep (SGD, the default strategy) and its Decoder (beam 4) are built first; then
sys.setprofile records each module with a function called during (a) the first trace and run of one training
update and (b) the first trace and run of one beam search decode. Paths are relative to the checkout: the
installed t2t_lite.problems, .hparams and .bin count as problems/, hparams/ and bin/.

  python benchmarks/traced_modules.py
"""
import importlib.util
import inspect
import pathlib
import sys

import keras
import tensorflow as tf

from t2t_lite import config
from t2t_lite.config import DecodeHParams
from t2t_lite.decoding.decoder import Decoder
from t2t_lite.models import build_model
from t2t_lite.registry import hparams_sets
from t2t_lite.training.steps import TrainStep

OVERRIDES = "vocab_size=40,num_encoder_layers=1,num_decoder_layers=1,d_model=16,d_ff=32,num_heads=2"
# (directory, its name in the checkout); the mapped packages first, since an installed copy puts them inside t2t_lite/.
ROOTS = [(pathlib.Path(importlib.util.find_spec(f"t2t_lite.{name}").submodule_search_locations[0]).resolve(), name)
         for name in ("problems", "hparams", "bin")]
ROOTS.append((pathlib.Path(importlib.util.find_spec("t2t_lite").submodule_search_locations[0]).resolve(), "t2t_lite"))


def checkout_path(filename: str) -> str | None:
    """A source file's path relative to the checkout ("t2t_lite/decoding/cached_step.py"), None if not ours."""
    path = pathlib.Path(filename).resolve()
    for root, name in ROOTS:
        if path.is_relative_to(root):
            return str(pathlib.PurePosixPath(name, *path.relative_to(root).parts))
    return None


def modules_reached(call) -> list[str]:
    """The sorted checkout paths of the modules with a function called while call() runs."""
    seen = set()

    def profile(frame, event, arg):
        # A function's frame, not a module or class body that a first import runs.
        if event == "call" and frame.f_code.co_flags & inspect.CO_NEWLOCALS:
            seen.add(frame.f_code.co_filename)

    sys.setprofile(profile)
    try:
        call()
    finally:
        sys.setprofile(None)
    return sorted(path for path in map(checkout_path, seen) if path is not None)


def main() -> None:
    hparams = config.apply_overrides(hparams_sets.get("transformer_tiny")(), OVERRIDES)
    model = build_model(hparams)
    optimizer = keras.optimizers.SGD()
    optimizer.build(model.trainable_variables)
    step = TrainStep(model, optimizer, tf.distribute.get_strategy(), hparams.train.label_smoothing,
                     hparams.train.batch_size)
    batch = {"inputs": tf.constant([[5, 6, 7, 1], [8, 9, 1, 0]], tf.int32),  # EOS 1, PAD 0
             "targets": tf.constant([[7, 6, 5, 1], [9, 8, 1, 0]], tf.int32)}
    iterator = iter(tf.data.Dataset.from_tensors(batch).repeat())
    decoder = Decoder(model, DecodeHParams(beam_size=4, alpha=0.6, extra_length=3))

    for title, call in (("one training update (TrainStep, first trace and run)", lambda: step(iterator)),
                        ("one beam search (Decoder.decode, beam 4, first trace and run)",
                         lambda: decoder.decode(batch["inputs"]))):
        modules = modules_reached(call)
        print(f"{title}: {len(modules)} modules")
        for module in modules:
            print(f"  {module}")


if __name__ == "__main__":
    main()
