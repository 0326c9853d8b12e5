"""Keras's Adam, each variable updated by TensorFlow's fused Adam kernel."""
import keras
import tensorflow as tf

from t2t_lite import compat


class FusedAdam(keras.optimizers.Adam):
    """keras.optimizers.Adam whose per-variable update is one `ResourceApplyAdam` op.

    The same update as Keras's (paper 5.3; epsilon added to sqrt(v) as in Keras and tf.keras 2) and the same
    slot variables, so checkpoints are interchangeable. Keras writes the update as about twenty ops per
    variable: building them made up a sixth of a tiny model's first training step, and each reads and
    writes the model-sized moments again. Sparse gradients and AMSGrad take Keras's own update.
    """

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._update_scalars = _UpdateScalars()

    def apply(self, grads, trainable_variables=None):
        # The update's scalars (the step, the beta powers, the learning rate) are made once for all its
        # variables: made per variable, they were a fifth of tracing a tiny model's update.
        self._update_scalars.by_key = {}
        try:
            return super().apply(grads, trainable_variables)
        finally:
            self._update_scalars.by_key = None

    def update_step(self, gradient, variable, learning_rate):
        if self.amsgrad or isinstance(gradient, tf.IndexedSlices):
            return super().update_step(gradient, variable, learning_rate)
        momentum, velocity = compat.adam_slots(self, variable)  # Keras's own slots: a private lookup
        dtype = variable.dtype
        tf.raw_ops.ResourceApplyAdam(var=_handle(variable), m=_handle(momentum), v=_handle(velocity),
                                     **self._scalars(learning_rate, dtype), grad=tf.cast(gradient, dtype))

    def _scalars(self, learning_rate, dtype) -> dict:
        """ResourceApplyAdam's scalar arguments in dtype, made once per update (apply) for all its variables."""
        key = (tf.compat.v1.get_default_graph(), id(learning_rate), dtype)
        # Outside an update (apply) nothing is kept: a fresh dict, dropped afterwards.
        made = {} if self._update_scalars.by_key is None else self._update_scalars.by_key
        if key not in made:
            step = tf.cast(self.iterations + 1, dtype)
            beta_1, beta_2 = tf.cast(self.beta_1, dtype), tf.cast(self.beta_2, dtype)
            made[key] = dict(beta1_power=tf.pow(beta_1, step), beta2_power=tf.pow(beta_2, step),
                             lr=tf.cast(learning_rate, dtype), beta1=beta_1, beta2=beta_2,
                             epsilon=tf.cast(self.epsilon, dtype))
        return made[key]


class _UpdateScalars:
    """The scalars of the update under way, by (graph, learning rate, dtype); None between updates. A plain
    object: Keras would track a dict attribute of the optimizer."""

    by_key: dict | None = None


def _handle(variable):
    """The resource handle of a Keras or TensorFlow variable; under a distribution strategy's update call,
    that of the copy on the device being updated."""
    return (variable.value if isinstance(variable, keras.Variable) else variable).handle
