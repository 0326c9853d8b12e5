"""The fence: t2t-lite's every use of Keras, TensorFlow and tensorflow-text private API, and the versions tested.

Three things have no public way in these libraries, so each is done here and
nowhere else:
  - FusedAdam updates Keras Adam's own slot variables (so checkpoints stay
    interchangeable with keras.optimizers.Adam); Keras looks a variable's
    slots up with `_get_variable_index` and keeps them in `_momentums` and
    `_velocities` (its own custom-optimizer example does the same).
  - A skipped update must know whether the distribution strategy applies
    updates without merge_call (Keras's LossScaleOptimizer asks TensorFlow
    the same, through `tf.__internal__`).
  - The SentencePiece tokenizer must hold a model resource shared across
    TensorFlow's cache clears (data/vocabulary.py says why): tf-text's
    tokenizer reads its model from `_model_resource`, and the op that makes
    one with a shared name is in `gen_sentencepiece_tokenizer`.

TESTED gives the versions these were tested with; setup.py requires the same
ranges. tests/test_compat.py fails, naming the range, when an installed
version is outside it or a name used here is gone: check the uses below
against the new version, then widen TESTED and setup.py together.
"""
import functools
import importlib
import inspect
from collections.abc import Callable
from typing import NamedTuple

# Distribution name -> the version specifier (PEP 440) tested, as in setup.py's install_requires.
TESTED = {"tensorflow": "~=2.21.0", "keras": "~=3.15.0", "tensorflow-text": "~=2.21.0"}


def adam_slots(optimizer, variable) -> tuple:
    """(momentum, velocity): a built keras.optimizers.Adam's slot variables of `variable` (a model variable)."""
    index = optimizer._get_variable_index(variable)
    return optimizer._momentums[index], optimizer._velocities[index]


def strategy_supports_no_merge_call() -> bool:
    """Whether the current distribution strategy applies updates without merge_call (so inside a tf.cond)."""
    import tensorflow as tf

    return tf.__internal__.distribute.strategy_supports_no_merge_call()


@functools.cache
def sentencepiece_tokenizer_class():
    """tensorflow_text.SentencepieceTokenizer made over a given model resource (int32 ids, its other defaults).

    Its own __init__ would parse the model into a resource of its own; this
    one takes the resource, e.g. vocabulary._SharedModel.
    """
    import tensorflow as tf
    import tensorflow_text as tf_text

    class Tokenizer(tf_text.SentencepieceTokenizer):
        def __init__(self, model_resource):
            super(tf_text.SentencepieceTokenizer, self).__init__()
            self.out_type, self.nbest_size, self.alpha = tf.int32, 0, 1.0
            self.reverse = self.add_bos = self.add_eos = self.return_nbest = False
            self._model_resource = model_resource  # the name its methods read; a SavedModel tracks it

    return Tokenizer


def sentencepiece_op(model: bytes, shared_name: str):
    """tf-text's op that parses a serialized SentencePiece model into a resource under `shared_name`."""
    from tensorflow_text.python.ops.sentencepiece_tokenizer import gen_sentencepiece_tokenizer

    return gen_sentencepiece_tokenizer.sentencepiece_op(model=model, shared_name=shared_name)


class PrivateUse(NamedTuple):
    """One private name the fence uses: its distribution, what it is, and a check that it is still there."""

    distribution: str  # a key of TESTED
    name: str
    present: Callable[[], bool]


def _adam_keeps_slots_in_lists() -> bool:
    import keras

    variable = keras.Variable([1.0, 2.0])
    optimizer = keras.optimizers.Adam()
    optimizer.build([variable])
    momentum, velocity = adam_slots(optimizer, variable)
    return momentum.path.endswith("_momentum") and velocity.path.endswith("_velocity")


def _tokenizer_reads_what_the_fence_sets() -> bool:
    import tensorflow_text as tf_text

    source = inspect.getsource(tf_text.SentencepieceTokenizer)
    names = ("_model_resource", "out_type", "nbest_size", "alpha", "reverse", "add_bos", "add_eos", "return_nbest")
    return all(f"self.{name}" in source for name in names)


PRIVATE_USES = (
    PrivateUse("keras", "Optimizer._get_variable_index",
               lambda: hasattr(importlib.import_module("keras").optimizers.Optimizer, "_get_variable_index")),
    PrivateUse("keras", "Adam._momentums, Adam._velocities (one slot per variable, by index)",
               _adam_keeps_slots_in_lists),
    PrivateUse("tensorflow", "tf.__internal__.distribute.strategy_supports_no_merge_call",
               lambda: hasattr(importlib.import_module("tensorflow").__internal__.distribute,
                               "strategy_supports_no_merge_call")),
    PrivateUse("tensorflow-text", "gen_sentencepiece_tokenizer.sentencepiece_op",
               lambda: hasattr(importlib.import_module("tensorflow_text.python.ops.sentencepiece_tokenizer")
                               .gen_sentencepiece_tokenizer, "sentencepiece_op")),
    PrivateUse("tensorflow-text", "SentencepieceTokenizer._model_resource and its settings' attribute names",
               _tokenizer_reads_what_the_fence_sets),
)
