"""Where training runs: one device, every local GPU (or logical CPU), or a cluster of machines.

The strategies are tf.distribute's own; this module only chooses one by name
(reading TF_CONFIG for a cluster) and answers the questions the trainer asks
of the strategy it is given: how many processes train, and whether this one
writes the files.
"""
import difflib
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
        raise UserError(f"`num_devices` must be at least 1, got {num_devices}")
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * num_devices)


# The task types MultiWorkerMirroredStrategy runs: at most one chief, and workers.
TASK_TYPES = ("chief", "worker")
TF_CONFIG_EXAMPLE = '{"cluster": {"worker": ["host1:2222", "host2:2222"]}, "task": {"type": "worker", "index": 0}}'


def read_tf_config(require_task: bool = False) -> dict | None:
    """The TF_CONFIG environment variable, parsed and checked; None when it is unset or empty.

    TensorFlow's own checks come late and as tracebacks (a ValueError deep in
    the strategy's start-up); these say in one line what is wrong.

    Args:
      require_task: whether TF_CONFIG must also say which task this process is
        (every process of a multi_worker cluster needs it).
    Returns:
      {"cluster": {type: [address, ...]}, "task": {"type", "index"}} ("task" may be absent).
    Raises:
      UserError: TF_CONFIG is not JSON, has no usable "cluster", or its "task"
        is missing (when required), of an unknown type or out of the cluster's range.
    """
    text = os.environ.get("TF_CONFIG", "")
    if not text.strip():
        return None
    fix = f"; set it like {TF_CONFIG_EXAMPLE}"
    try:
        tf_config = json.loads(text)
    except ValueError as error:
        raise UserError(f"TF_CONFIG is not valid JSON ({error}): {text[:200]!r}{fix}") from None
    if not isinstance(tf_config, dict):
        raise UserError(f"TF_CONFIG must be a JSON object, got {text[:200]!r}{fix}")
    cluster = tf_config.get("cluster")
    if not isinstance(cluster, dict) or not cluster:
        raise UserError(f"TF_CONFIG has no \"cluster\" object listing the tasks' addresses{fix}")
    for task_type, addresses in cluster.items():
        if task_type not in TASK_TYPES:
            raise UserError(f"TF_CONFIG's cluster has tasks of type {task_type!r}; multi_worker training "
                            f"runs only {' and '.join(TASK_TYPES)} tasks")
        if (not isinstance(addresses, list) or not addresses
                or not all(isinstance(address, str) and address for address in addresses)):
            raise UserError(f"TF_CONFIG's cluster {task_type!r} must be a non-empty list of \"host:port\" "
                            f"strings, got {json.dumps(addresses)}")
    if len(cluster.get("chief", [])) > 1:
        raise UserError(f"TF_CONFIG's cluster has {len(cluster['chief'])} chief tasks; at most 1 is allowed")
    task = tf_config.get("task")
    if task is None:
        if require_task:
            raise UserError("TF_CONFIG has no \"task\": add this process's own entry, e.g. "
                            '"task": {"type": "worker", "index": 0}, a different one on each machine')
        return tf_config
    if not isinstance(task, dict):
        raise UserError(f"TF_CONFIG's \"task\" must be an object like {{\"type\": \"worker\", \"index\": 0}}, "
                        f"got {json.dumps(task)}")
    task_type, index = task.get("type"), task.get("index")
    if task_type not in cluster:
        close = difflib.get_close_matches(str(task_type), list(cluster), n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise UserError(f"TF_CONFIG's task type {task_type!r} is not in its cluster; {hint}"
                        f"the cluster has {', '.join(map(repr, cluster))}")
    if isinstance(index, bool) or not isinstance(index, int):
        raise UserError(f"TF_CONFIG's task index must be an integer, got {json.dumps(index)}")
    count = len(cluster[task_type])
    if not 0 <= index < count:
        raise UserError(f"TF_CONFIG's task index {index} is out of range: the cluster lists {count} "
                        f"{task_type!r} task{'s' if count > 1 else ''} (index 0 to {count - 1})")
    return tf_config


def cluster_tasks() -> int:
    """How many tasks the TF_CONFIG environment variable lists; 0 when it is unset."""
    tf_config = read_tf_config()
    return 0 if tf_config is None else sum(len(addresses) for addresses in tf_config["cluster"].values())


def local_devices() -> list[str]:
    """The devices `mirrored` replicates over: every GPU, or every logical CPU device when there is none."""
    return [device.name for device in tf.config.list_logical_devices("GPU") or tf.config.list_logical_devices("CPU")]


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
        raise UserError(f"`distribution` must be one of {', '.join(DISTRIBUTIONS)}; got {name!r}")
    # Before TensorFlow parses TF_CONFIG (creating the strategy), which reports mistakes as tracebacks.
    tasks = cluster_tasks()
    if name == "auto":
        name = "multi_worker" if tasks > 1 else "mirrored" if len(local_devices()) > 1 else "one_device"
    if name == "multi_worker":
        if not tasks:
            raise UserError("`distribution`=multi_worker needs TF_CONFIG (the cluster and this task); see docs/training.md")
        read_tf_config(require_task=True)
        try:
            return tf.distribute.MultiWorkerMirroredStrategy()
        except RuntimeError as error:  # t2t_lite.train called after the process ran TensorFlow ops
            raise UserError(f"cannot start multi_worker training in this process ({error}): choose the "
                            f"distribution before any TensorFlow op, e.g. call t2t_lite.train first") from None
    return tf.distribute.MirroredStrategy(local_devices()) if name == "mirrored" else tf.distribute.get_strategy()


def worker_count(strategy: tf.distribute.Strategy | None) -> int:
    """How many processes train together under strategy: the tasks of its cluster; 1 without a cluster.

    Read from the strategy, not TF_CONFIG: a run given its own strategy trains as that strategy says.

    Args:
      strategy: None means TensorFlow's default strategy (one process).
    """
    resolver = strategy.cluster_resolver if strategy is not None else None
    if resolver is None:
        return 1
    cluster = resolver.cluster_spec()
    return max(1, sum(cluster.num_tasks(job) for job in cluster.jobs))


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
