"""One update, however its batch is split: 8 mirrored replicas or k accumulated micro-batches equal one device.

The updates are compared after one SGD step with learning rate 1, so the
weights differ exactly by the gradients. Adam would hide errors of scale: its
first step is about lr * sign(gradient) whatever the gradient's size.
"""
import contextlib
import json

import keras
import numpy as np
import pytest
import tensorflow as tf

import t2t_lite.hparams  # noqa: F401
from t2t_lite import config
from t2t_lite.models import build_model
from t2t_lite.models.transformer import Transformer
from t2t_lite.errors import UserError
from t2t_lite.registry import hparams_sets
from t2t_lite.training import distribution, steps
from t2t_lite.training.steps import BATCH_SIGNATURE, TrainStep
from cli_helpers import print_json, run_forked, start_forked

TINY = ("vocab_size=12,d_model=32,d_ff=64,num_heads=4,num_encoder_layers=1,num_decoder_layers=1,"
        "dropout=0,attention_dropout=0,relu_dropout=0,train.batch_size=64")
REPLICAS = 4


def tiny_hparams():
    return config.apply_overrides(hparams_sets.get("transformer_tiny")(), TINY)


def random_batch(rng, sentences, length, min_length=1):
    """{"inputs", "targets"} int32 [sentences, length]: random ids 2..11, each row EOS-ended then PAD."""
    batch = {}
    for key in ("inputs", "targets"):
        rows = np.zeros((sentences, length), np.int32)
        for row in rows:
            n = rng.integers(min_length, length + 1)
            row[:n - 1], row[n - 1] = rng.integers(2, 12, n - 1), 1
        batch[key] = rows
    return batch


def concatenate(batches):
    """One batch holding every row of `batches`, PAD-extended to the longest."""
    length = max(b["inputs"].shape[1] for b in batches)
    return {key: np.concatenate([np.pad(b[key], [(0, 0), (0, length - b[key].shape[1])]) for b in batches])
            for key in ("inputs", "targets")}


def dataset_of(batches):
    """The batches in order, as one tf.data pipeline with unknown batch and length dimensions."""
    return tf.data.Dataset.from_generator(lambda: iter(batches), output_signature=BATCH_SIGNATURE)


def sgd_train_step(strategy, hparams, accumulation_steps=1):
    """(model, TrainStep) with SGD at learning rate 1, built under strategy."""
    keras.utils.set_random_seed(3)
    with strategy.scope():
        model = build_model(hparams)
        optimizer = keras.optimizers.SGD(learning_rate=1.0)
        optimizer.build(model.trainable_variables)
        step = TrainStep(model, optimizer, strategy, hparams.train.label_smoothing, hparams.train.batch_size,
                         accumulation_steps)
    return model, step


def weights_after_one_step(model, step, initial, batches, strategy):
    """Sets model to initial, takes one update from batches; returns the new weights."""
    model.set_weights(initial)
    step(iter(strategy.distribute_datasets_from_function(lambda context: dataset_of(batches))))
    return [w.numpy() for w in model.trainable_variables]


def replica_target_tokens(strategy, batches):
    """The target tokens each replica receives from a distributed dataset of batches."""
    dataset = strategy.distribute_datasets_from_function(lambda context: dataset_of(batches))
    return [int(np.count_nonzero(t)) for t in strategy.experimental_local_results(next(iter(dataset))["targets"])]


def mirrored_matches_one_device() -> dict:
    """Run in a process of its own with the CPU split into REPLICAS devices; returns the largest differences per
    case."""
    distribution.split_cpu(REPLICAS)
    mirrored = distribution.make_strategy("mirrored")
    assert mirrored.num_replicas_in_sync == REPLICAS
    one_device = tf.distribute.get_strategy()
    hparams = tiny_hparams()
    (model, step), (mirrored_model, mirrored_step) = (sgd_train_step(s, hparams) for s in (one_device, mirrored))
    initial = model.get_weights()
    rng = np.random.default_rng(0)
    cases = {
        "even": [random_batch(rng, 2, 6, min_length=6) for _ in range(REPLICAS)],
        # 1 to 4 sentences of 3 to 9 tokens per replica, padding inside: 3 to ~36 target tokens each.
        "uneven": [random_batch(rng, 1 + i, 3 + 2 * i) for i in range(REPLICAS)],
    }
    # Tracing the mirrored step is most of this test's time, so one trace serves every case: its loss
    # turns NaN on the replica nan_replica names, and no replica has that id (-1) until the last case.
    nan_replica = tf.Variable(-1)
    result = {}
    for name, per_replica in cases.items():
        reference = weights_after_one_step(model, step, initial, [concatenate(per_replica)], one_device)
        with loss_is_nan_on(nan_replica):  # read when mirrored_step is traced, i.e. on its first call
            replicated = weights_after_one_step(mirrored_model, mirrored_step, initial, per_replica, mirrored)
        result[name] = {
            "max_difference": max(float(np.max(np.abs(a - b))) for a, b in zip(reference, replicated)),
            "max_update": max(float(np.max(np.abs(a - b))) for a, b in zip(reference, initial)),
            "replica_tokens": replica_target_tokens(mirrored, per_replica),
        }
    nan_replica.assign(3)
    mirrored_model.set_weights(initial)
    skipped = mirrored_step(iter(mirrored.distribute_datasets_from_function(
        lambda context: dataset_of(cases["uneven"])))).skipped
    moved = max(float(np.max(np.abs(w.numpy() - w0))) for w, w0 in zip(mirrored_model.trainable_variables, initial))
    result["nan_on_one_replica"] = {"skipped": skipped, "max_update": moved}
    return result


@contextlib.contextmanager
def loss_is_nan_on(nan_replica: tf.Variable):
    """While active, a newly traced TrainStep's loss sum is NaN on the replica whose id nan_replica holds."""
    finite_losses = Transformer.token_losses

    def nan_on_one_replica(model, *args, **kwargs):
        losses = finite_losses(model, *args, **kwargs)
        replica = tf.distribute.get_replica_context().replica_id_in_sync_group
        return losses._replace(loss_sum=tf.where(tf.equal(replica, nan_replica), float("nan"), losses.loss_sum))

    Transformer.token_losses = nan_on_one_replica
    try:
        yield
    finally:
        Transformer.token_losses = finite_losses


@pytest.mark.slow
def test_mirrored_on_4_cpu_devices_gives_the_one_device_update_also_with_uneven_tokens():
    # Forked with TensorFlow imported but not started, so the CPU can still be split; no interpreter start-up.
    code, stdout, stderr = run_forked(print_json, mirrored_matches_one_device, timeout=400)
    assert code == 0, stderr[-3000:]
    result = json.loads(stdout.strip().splitlines()[-1])
    assert result.pop("nan_on_one_replica") == {"skipped": True, "max_update": 0.0}  # every replica skipped
    for case in result.values():
        assert case["max_difference"] < 1e-5
        assert case["max_update"] > 1e-3  # the step did move the weights
    assert len(set(result["even"]["replica_tokens"])) == 1
    tokens = result["uneven"]["replica_tokens"]
    assert len(tokens) == REPLICAS and max(tokens) > 10 * min(tokens)


@pytest.fixture(scope="module")
def one_and_accumulated():
    """One SGD update from 3 uneven micro-batches accumulated, and one from their concatenation.

    Both tests below read it: tracing the two steps is what costs here. Returns the initial weights, the
    weights after each update ("reference", "accumulated_weights"), each update's StepResult ("one",
    "accumulated"), the micro-batches and the accumulating TrainStep.
    """
    strategy = tf.distribute.get_strategy()
    hparams = tiny_hparams()
    rng = np.random.default_rng(1)
    micro = [random_batch(rng, 3, 5), random_batch(rng, 2, 9), random_batch(rng, 4, 4)]  # uneven token counts
    model, one_step = sgd_train_step(strategy, hparams)
    initial = model.get_weights()
    one = one_step(iter(dataset_of([concatenate(micro)])))
    reference = [w.numpy() for w in model.trainable_variables]
    accumulating_model, accumulating = sgd_train_step(strategy, hparams, accumulation_steps=3)
    accumulating_model.set_weights(initial)
    accumulated = accumulating(iter(dataset_of(micro)))
    return {"initial": initial, "reference": reference, "one": one, "micro": micro, "accumulating": accumulating,
            "accumulated_weights": [w.numpy() for w in accumulating_model.trainable_variables],
            "accumulated": accumulated}


def test_accumulating_k_micro_batches_gives_the_update_of_their_concatenation(one_and_accumulated):
    run = one_and_accumulated
    for a, b in zip(run["reference"], run["accumulated_weights"]):
        np.testing.assert_allclose(a, b, atol=1e-5, rtol=0)
    assert max(float(np.max(np.abs(a - s))) for a, s in zip(run["reference"], run["initial"])) > 1e-3
    assert int(run["accumulating"].optimizer.iterations.numpy()) == 1  # one update, one schedule step


def test_accumulation_reports_loss_and_tokens_of_the_whole_step(one_and_accumulated):
    one, accumulated = one_and_accumulated["one"], one_and_accumulated["accumulated"]
    assert one.tokens == accumulated.tokens == sum(np.count_nonzero(b["targets"])
                                                   for b in one_and_accumulated["micro"])
    np.testing.assert_allclose(one.loss, accumulated.loss, rtol=1e-6)
    assert one.stop is False and one.skipped is False
    assert accumulated.stop is False and accumulated.skipped is False


def test_auto_is_one_device_on_one_cpu_and_multi_worker_needs_tf_config(monkeypatch):
    monkeypatch.delenv("TF_CONFIG", raising=False)
    strategy = distribution.make_strategy("auto")
    assert distribution.is_default(strategy) and distribution.is_chief(strategy)
    assert not distribution.is_default(tf.distribute.MirroredStrategy(["/cpu:0"]))
    with pytest.raises(UserError, match="needs TF_CONFIG"):
        distribution.make_strategy("multi_worker")
    with pytest.raises(UserError, match="must be one of"):
        distribution.make_strategy("mirored")
    cluster = {"chief": ["host0:2222"], "worker": ["host1:2222", "host2:2222"]}
    monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": cluster, "task": {"type": "worker", "index": 1}}))
    assert distribution.cluster_tasks() == 3



def test_the_worker_count_is_the_given_strategys_not_tf_configs(monkeypatch, tmp_path):
    from small_training import TINY, small_problem
    from t2t_lite.training.run_config import RunConfig, resolve_for

    cluster = {"worker": ["host1:2222", "host2:2222"]}
    monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": cluster, "task": {"type": "worker", "index": 0}}))
    assert distribution.cluster_tasks() == 2  # what make_strategy("auto") would build a cluster from
    assert distribution.worker_count(tf.distribute.get_strategy()) == 1
    assert distribution.worker_count(tf.distribute.MirroredStrategy(["/cpu:0"])) == 1
    # A run given a one-process strategy is one process, so it may have a time budget.
    hparams = config.apply_overrides(hparams_sets.get("transformer_tiny")(), TINY)
    run = RunConfig(output_dir=str(tmp_path), train_minutes=5.0, mixed_precision="none")
    assert resolve_for(run, small_problem(), hparams, tf.distribute.get_strategy()).train_minutes == 5.0



def test_multi_worker_asked_for_after_tensorflow_started_is_one_line(monkeypatch):
    one_task = {"cluster": {"worker": ["127.0.0.1:2222"]}, "task": {"type": "worker", "index": 0}}
    monkeypatch.setenv("TF_CONFIG", json.dumps(one_task))
    tf.constant(1.0).numpy()  # the process has started TensorFlow
    with pytest.raises(UserError, match=r"^cannot start multi_worker training in this process \(Collective ops "
                                        r"must be configured at program startup\): choose the distribution before "
                                        r"any TensorFlow op, e\.g\. call t2t_lite\.train first$"):
        distribution.make_strategy("multi_worker")

def worker_count_in_cluster() -> int:
    """Run in each of a cluster's processes (TF_CONFIG set): the worker count of its MultiWorkerMirroredStrategy."""
    return distribution.worker_count(distribution.make_strategy("multi_worker"))


@pytest.mark.slow
def test_a_two_worker_strategy_counts_two_workers():
    from test_multi_worker import free_ports

    cluster = {"worker": [f"127.0.0.1:{port}" for port in free_ports(2)]}
    # Each worker a process of its own, forked with TensorFlow imported but not started (as start_tool's trainers
    # in test_multi_worker.py): collective ops are configured at its start, with no interpreter start-up.
    processes = [start_forked(print_json, worker_count_in_cluster, stdout_too=False,
                              env={"TF_CONFIG": json.dumps({"cluster": cluster,
                                                            "task": {"type": "worker", "index": index}})})
                 for index in range(2)]
    for process in processes:
        result = process.wait(timeout=120)
        assert result.returncode == 0, result.stderr[-3000:]
        assert json.loads(result.stdout.strip().splitlines()[-1]) == 2


