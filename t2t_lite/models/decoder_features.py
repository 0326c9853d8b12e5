"""Decoder-input features: what each decoder input is told beside its token and position.

A feature adds a [N, T, D] tensor to the decoder's input embeddings (after their dropout), computed from
the target written so far and, if it wants, from the encoded sentence. ModelHParams.decoder_features names
the features of a model, looked up in `registry.decoder_features`; the model makes each one once and
runs them in that order in its training pass and the beam search's step (decoding/cached_step.py), so a feature's arithmetic and its state are written once, here.

A feature keeps what it learns or reads on the model (`create` and `build` set model attributes), so a
checkpoint names its variables as the model's own; the feature object itself holds only settings.
Per row of decoding (a beam) it may carry a state from one chunk of positions to the next; per sentence,
a context computed once from the encoder's output. docs/extending.md walks through adding one.
"""
import keras


class DecoderFeature:
    """One decoder-input feature. Subclasses override what they need; the defaults add nothing.

    The model calls, with itself as `model`:
      create(model) in its __init__, for layers; build(model) in its build, for weights;
      configure(model, problem) when a trainer begins, for tables read from the problem (its vocabulary);
      context(model, inputs, memory) once per batch of sentences;
      initial_state(model, rows) before a target's first position;
      __call__(model, context, ids, state) for each chunk of positions (all of them in training, one per
        decoding step).
    """

    # Whether it reads source and target ids through one table over the vocabulary, so needs the shared one
    # (training refuses it on data with a vocabulary per side).
    one_vocabulary = False

    def create(self, model: keras.Model) -> None:
        """Makes the feature's layers, as attributes of the model."""

    def build(self, model: keras.Model) -> None:
        """Builds the layers and makes the feature's weights, as attributes of the model."""

    def configure(self, model: keras.Model, problem) -> None:
        """Sets what the feature reads from the problem (e.g. tables over its vocabulary) into its weights.

        Raises:
          UserError: the problem has nothing for this feature to read, naming the feature.
        """

    def context(self, model: keras.Model, inputs, memory):
        """What the feature needs of a batch's sentences: inputs int [B, T_src], memory [B, T_src, D] ->
        a nest of [B, ...] tensors, or None."""
        return None

    def initial_state(self, model: keras.Model, rows):
        """The state before a target's first position: a nest of [rows, ...] tensors ({} for none)."""
        return {}

    def __call__(self, model: keras.Model, context, ids, state):
        """The feature of each input and the state after the last one.

        Args:
          context: `context`'s, for the B sentences.
          ids: int [N, T], decoder inputs continuing from `state`; N = B*R, R rows per sentence (beams),
            sentence-major.
          state: the state before ids[:, 0].
        Returns:
          ([N, T, D] added to the inputs' embeddings, the state after ids[:, -1]).
        """
        raise NotImplementedError

