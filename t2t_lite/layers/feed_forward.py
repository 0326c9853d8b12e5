"""The position-wise feed-forward network (paper 3.3)."""
import keras
from keras import ops

from t2t_lite.layers.dropout import Dropout
from t2t_lite.layers.prepared import dense_product, plain_denses


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

    def prepared_products(self, prepare) -> dict:
        """Its two products made once by `prepare` (layers/prepared.py), or {} where either is not a plain Dense or
        a subclass overrides `call`."""
        if type(self).call is not FeedForward.call or not plain_denses(self.hidden, self.output_proj):
            return {}
        return {"hidden": dense_product(prepare, self.hidden), "output": dense_product(prepare, self.output_proj)}

    def call(self, x, products=None, training=None):
        """x [..., D] (e.g. [B, T, D]) -> [..., D]; products: None, or `prepared_products`'."""
        products = products or {}
        # One row per position: each Dense then multiplies through one MatMul (attention.to_rows says why).
        rows = ops.reshape(x, (-1, self.d_model))  # [R, D]
        hidden = self.hidden_dropout(products.get("hidden", self.hidden)(rows), training=training)  # [R, F]
        return ops.reshape(products.get("output", self.output_proj)(hidden), (*ops.shape(x)[:-1], self.d_model))

    def get_config(self):
        config = super().get_config()
        config.update(d_model=self.d_model, d_ff=self.d_ff, dropout=self.dropout_rate)
        return config
