"""Dropout whose mask does not depend on the compute dtype."""
import keras
from keras import ops


@keras.saving.register_keras_serializable(package="t2t_lite")
class Dropout(keras.layers.Dropout):
    """keras.layers.Dropout with the mask drawn and the kept values scaled in float32.

    Keras's TensorFlow backend draws the mask's uniform numbers in the input's
    dtype (tf.nn.experimental.stateless_dropout). Under mixed_bfloat16 that
    gives a different mask from float32's for the same seed, and bfloat16's
    8-bit uniforms and its rounded 1 / (1 - rate) (1.109375 for 1.111 at
    rate 0.1) shift the kept fraction and the scale. Here one seed gives one
    mask in every dtype and the rate is the one asked for, so a bfloat16 run
    differs from its float32 twin only in its arithmetic. Float32 inputs take
    Keras's own path, which draws the same float32 uniforms.
    """

    def call(self, inputs, training=False):
        if keras.backend.standardize_dtype(inputs.dtype) == "float32":
            return super().call(inputs, training=training)  # the same mask, and float32 training's graph unchanged
        if not training or self.rate == 0:
            return inputs
        if self.rate >= 1:
            return ops.zeros_like(inputs)
        uniform = keras.random.uniform(ops.shape(inputs), dtype="float32", seed=self.seed_generator)
        kept = ops.cast(inputs, "float32") * (1.0 / (1.0 - self.rate))
        return ops.cast(ops.where(uniform >= self.rate, kept, 0.0), inputs.dtype)
