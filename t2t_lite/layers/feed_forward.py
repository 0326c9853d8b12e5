"""The position-wise feed-forward network (paper 3.3)."""
import keras
from keras import ops

from t2t_lite.layers.dropout import Dropout


@keras.saving.register_keras_serializable(package="t2t_lite")
class FeedForward(keras.layers.Layer):
    """max(0, x W1 + b1) W2 + b2, applied at every position.

    Args:
      d_model: D, input and output width.
      d_ff: F, hidden width.
      dropout: rate on the hidden activations (t2t's relu_dropout; 0 in the paper).
    """

    def __init__(self, d_model, d_ff, dropout=0.0, **kwargs):
        super().__init__(**kwargs)
        self.d_model, self.d_ff, self.dropout_rate = d_model, d_ff, dropout
        policy = self.dtype_policy
        self.hidden = keras.layers.Dense(d_ff, activation="relu", name="hidden", dtype=policy)
        self.hidden_dropout = Dropout(dropout, dtype=policy)
        self.output_proj = keras.layers.Dense(d_model, name="output", dtype=policy)

    def build(self, input_shape):
        self.hidden.build((None, None, self.d_model))
        self.output_proj.build((None, None, self.d_ff))

    def call(self, x, training=None):
        """x [..., D] (e.g. [B, T, D]) -> [..., D]."""
        # One row per position: each Dense then multiplies through one MatMul (attention.positions says why).
        rows = ops.reshape(x, (-1, self.d_model))  # [R, D]
        hidden = self.hidden_dropout(self.hidden(rows), training=training)  # [R, F]
        return ops.reshape(self.output_proj(hidden), (*ops.shape(x)[:-1], self.d_model))

    def get_config(self):
        config = super().get_config()
        config.update(d_model=self.d_model, d_ff=self.d_ff, dropout=self.dropout_rate)
        return config
