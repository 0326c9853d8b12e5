"""Where training runs: one device, every local GPU (or logical CPU), or a cluster of machines.

The strategies are tf.distribute's own; this module only chooses one by name
and answers the two questions the trainer asks of it (how many replicas, and
whether this process is the one that writes files).
"""
import json
import os

import tensorflow as tf

from t2t_lite.errors import UserError

DISTRIBUTIONS = ("auto", "one_device", "mirrored", "multi_worker")


def split_cpu(num_devices: int) -> None:
    """Splits the CPU into num_devices logical devices, so `mirrored` runs (and is tested) without GPUs.

    Must be called before TensorFlow creates its devices, i.e. before the first
    op; TensorFlow raises RuntimeError otherwise.

    Args:
      num_devices: logical CPU devices to create, at least 1.
    """
    if num_devices < 1:
        raise UserError(f"--cpu_devices must be at least 1, got {num_devices}")
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * num_devices)


def cluster_tasks() -> int:
    """How many tasks the TF_CONFIG environment variable lists; 0 when it is unset."""
    text = os.environ.get("TF_CONFIG", "")
    if not text:
        return 0
    try:
        cluster = json.loads(text).get("cluster", {})
    except (ValueError, AttributeError):
        raise UserError(f"TF_CONFIG is not a JSON object with a 'cluster': {text!r}") from None
    return sum(len(addresses) for addresses in cluster.values())


def local_devices() -> list[str]:
    """The devices `mirrored` replicates over: every GPU, or every logical CPU device when there is none."""
    gpus = tf.config.list_logical_devices("GPU")
    return [device.name for device in gpus or tf.config.list_logical_devices("CPU")]


def make_strategy(name: str) -> tf.distribute.Strategy:
    """The tf.distribute strategy called `name`.

    Args:
      name: one of DISTRIBUTIONS.
        one_device: TensorFlow's default strategy (the first GPU, else the CPU);
          the only one whose data iterator TensorFlow can checkpoint.
        mirrored: MirroredStrategy over local_devices(), gradients all-reduced.
        multi_worker: MultiWorkerMirroredStrategy over the cluster in TF_CONFIG.
        auto: multi_worker if TF_CONFIG lists more than one task, else mirrored
          if there is more than one local device, else one_device.
    Returns:
      The strategy. Create it before any other TensorFlow op: multi_worker
      configures collective ops, which TensorFlow allows only at start-up.
    """
    if name not in DISTRIBUTIONS:
        raise UserError(f"--distribution must be one of {', '.join(DISTRIBUTIONS)}; got {name!r}")
    if name == "auto":
        if cluster_tasks() > 1:
            name = "multi_worker"
        else:
            name = "mirrored" if len(local_devices()) > 1 else "one_device"
    if name == "multi_worker":
        if not cluster_tasks():
            raise UserError("--distribution=multi_worker needs TF_CONFIG (the cluster and this task); see the README")
        return tf.distribute.MultiWorkerMirroredStrategy()
    if name == "mirrored":
        return tf.distribute.MirroredStrategy(local_devices())
    return tf.distribute.get_strategy()


def is_chief(strategy: tf.distribute.Strategy) -> bool:
    """Whether this process writes checkpoints, summaries and hparams.json.

    True except on the non-chief workers of a multi-worker cluster (the chief
    is the "chief" task, or worker 0 when the cluster has none).
    """
    return strategy.extended.should_checkpoint


def is_default(strategy: tf.distribute.Strategy) -> bool:
    """Whether strategy is TensorFlow's default one (no distribution), as make_strategy("one_device") returns."""
    with strategy.scope():
        # has_strategy() is False only inside the default strategy's scope.
        return not tf.distribute.has_strategy()
