"""Tests for t2t_lite.training.averaging and t2t-lite-avg-checkpoints.

Three checkpoints are written through a CheckpointManager shaped like the
trainer's (model + optimizer + tf.data iterator), each with different weights;
averaged values are checked against numpy means of the values read
independently with tf.train.load_checkpoint.
"""
from __future__ import annotations

import collections
import os

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.core.protobuf import trackable_object_graph_pb2

import t2t_lite.hparams  # noqa: F401  (registers transformer_tiny)
from t2t_lite import config, registry
from t2t_lite.errors import UserError
from t2t_lite.models import build_model
from t2t_lite.run_dir import RunDir, RunSpec, load_spec, save_spec
from t2t_lite.training.averaging import average_after_training, average_checkpoints, checkpoints_to_average
from t2t_lite.training.steps import make_optimizer
from cli_helpers import run_tool

OVERRIDES = "vocab_size=20,d_model=16,d_ff=32,num_heads=2"
STEPS = (100, 200, 300)


def tiny_hparams():
    return config.apply_overrides(registry.hparams_sets.get("transformer_tiny")(), OVERRIDES)


def model_values(checkpoint_path: str) -> dict[str, np.ndarray]:
    """The model's weights in a checkpoint, read through its object graph without building a model.

    A value is stored under the first path the saver reached it by, which for
    a trainer checkpoint is often optimizer/_trainable_variables/N, so walk
    the graph from "model" instead of filtering keys by prefix.

    Returns:
      Object path from the model (e.g. "model/encoder_0/ffn/hidden/kernel") -> value.
    """
    reader = tf.train.load_checkpoint(checkpoint_path)
    graph = trackable_object_graph_pb2.TrackableObjectGraph()
    graph.ParseFromString(reader.get_tensor("_CHECKPOINTABLE_OBJECT_GRAPH"))
    start = next(c.node_id for c in graph.nodes[0].children if c.local_name == "model")
    values, seen, queue = {}, {start}, collections.deque([(start, "model")])
    while queue:  # breadth first, children by name: each weight gets its shortest path, the same in every checkpoint
        node_id, path = queue.popleft()
        for attribute in graph.nodes[node_id].attributes:
            if attribute.name == "VARIABLE_VALUE":
                values[path] = reader.get_tensor(attribute.checkpoint_key)
        for child in sorted(graph.nodes[node_id].children, key=lambda c: c.local_name):
            if child.node_id not in seen:
                seen.add(child.node_id)
                queue.append((child.node_id, f"{path}/{child.local_name}"))
    return values


def mean_of(paths: list[str]) -> dict[str, np.ndarray]:
    values = [model_values(p) for p in paths]
    return {key: (sum(v[key].astype(np.float64) for v in values) / len(values)).astype(values[0][key].dtype)
            for key in values[0]}


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> str:
    """A run directory with hparams.json and ckpt-100/200/300, each with other random weights."""
    output_dir = str(tmp_path_factory.mktemp("run"))
    hparams = tiny_hparams()
    save_spec(RunDir(output_dir), RunSpec("algorithmic_reverse", "transformer_tiny", OVERRIDES, hparams))
    model, optimizer = build_model(hparams), make_optimizer(hparams)
    optimizer.build(model.trainable_variables)
    data = iter(tf.data.Dataset.range(1000))
    checkpoint = tf.train.Checkpoint(model=model, optimizer=optimizer, data=data)
    manager = tf.train.CheckpointManager(checkpoint, output_dir, max_to_keep=20, checkpoint_name="ckpt")
    rng = np.random.default_rng(0)
    for step in STEPS:
        for weight in model.trainable_variables:
            weight.assign(rng.normal(size=weight.shape).astype(np.float32))
        for slot in optimizer.variables:
            if slot.dtype == "float32":
                slot.assign(rng.normal(size=slot.shape).astype(np.float32))
        next(data)
        manager.save(checkpoint_number=step)
    return output_dir


def test_checkpoints_hold_every_model_weight(run):
    # Guards the premise of averaging: a weight missing from the trainer's
    # checkpoints could never be averaged (nor resumed, nor decoded).
    assert len(model_values(os.path.join(run, "ckpt-300"))) == len(build_model(tiny_hparams()).trainable_variables)


def test_last_two_are_averaged_and_the_oldest_excluded(run, tmp_path):
    lines = []
    result = average_checkpoints(run, 2, destination_dir=str(tmp_path / "avg"), log=lines.append)
    assert result == str(tmp_path / "avg" / "ckpt-300")
    assert lines == ["averaging 2 checkpoints: ckpt-200, ckpt-300", f"wrote {result}"]
    averaged = model_values(result)
    expected = mean_of([os.path.join(run, "ckpt-200"), os.path.join(run, "ckpt-300")])
    with_oldest = mean_of([os.path.join(run, f"ckpt-{s}") for s in STEPS])
    assert averaged.keys() == expected.keys()
    for key, value in averaged.items():
        np.testing.assert_array_equal(value, expected[key], err_msg=key)
        assert not np.allclose(value, with_oldest[key]), key
    # Only the model: no optimizer slots, no data iterator position.
    keys = tf.train.load_checkpoint(result).get_variable_to_shape_map()
    assert not [k for k in keys if k.startswith(("optimizer/", "data/"))]


def test_restores_into_a_fresh_model_as_the_mean(run, tmp_path):
    result = average_checkpoints(run, 2, destination_dir=str(tmp_path / "avg"), log=lambda _: None)
    restored, newer, older = (build_model(tiny_hparams()) for _ in range(3))
    tf.train.Checkpoint(model=restored).restore(result).assert_existing_objects_matched()
    tf.train.Checkpoint(model=newer).restore(os.path.join(run, "ckpt-300")).expect_partial()
    tf.train.Checkpoint(model=older).restore(os.path.join(run, "ckpt-200")).expect_partial()
    for r, n, o in zip(restored.trainable_variables, newer.trainable_variables, older.trainable_variables):
        mean = ((n.numpy().astype(np.float64) + o.numpy()) / 2).astype(np.float32)
        np.testing.assert_array_equal(r.numpy(), mean, err_msg=r.path)
    assert tf.train.latest_checkpoint(str(tmp_path / "avg")) == result
    assert load_spec(RunDir(str(tmp_path / "avg"))).hparams == tiny_hparams()


def test_fewer_checkpoints_than_asked_averages_all_and_says_so(run, tmp_path):
    lines = []
    result = average_checkpoints(run, 5, destination_dir=str(tmp_path / "avg"), log=lines.append)
    assert lines[0] == "averaging 3 checkpoints (asked for 5, only 3 present): ckpt-100, ckpt-200, ckpt-300"
    expected = mean_of([os.path.join(run, f"ckpt-{s}") for s in STEPS])
    for key, value in model_values(result).items():
        np.testing.assert_array_equal(value, expected[key], err_msg=key)


def test_default_destination_is_replaced_whole_and_no_temp_left(run):
    first = average_after_training(RunDir(run), 3, log=lambda _: None)
    second = average_after_training(RunDir(run), 2, log=lambda _: None)
    assert first == second == os.path.join(run, "averaged", "ckpt-300")
    expected = mean_of([os.path.join(run, "ckpt-200"), os.path.join(run, "ckpt-300")])
    for key, value in model_values(second).items():
        np.testing.assert_array_equal(value, expected[key], err_msg=key)
    assert not [name for name in os.listdir(run) if name.startswith(".tmp")]
    assert average_after_training(RunDir(run), 0) is None
    assert checkpoints_to_average(RunDir(run), 20) == [os.path.join(run, f"ckpt-{s}") for s in STEPS]


def test_missing_or_empty_run_dir_is_a_clear_error(tmp_path):
    with pytest.raises(UserError, match="does not exist"):
        average_checkpoints(str(tmp_path / "nowhere"), 5)
    with pytest.raises(UserError, match="no checkpoints in"):
        average_checkpoints(str(tmp_path), 5)
    with pytest.raises(UserError, match="at least 1"):
        average_checkpoints(str(tmp_path), 0)


def test_refuses_a_destination_it_did_not_write(run, tmp_path):
    foreign = tmp_path / "notes"
    foreign.mkdir()
    (foreign / "todo.txt").write_text("keep me\n")
    with pytest.raises(UserError, match="not an averaged checkpoint"):
        average_checkpoints(run, 2, destination_dir=str(foreign), log=lambda _: None)
    with pytest.raises(UserError, match="would replace the run directory"):
        average_checkpoints(run, 2, destination_dir=run, log=lambda _: None)
    assert (foreign / "todo.txt").read_text() == "keep me\n"


def test_checkpoint_of_other_hparams_is_a_clear_error(run, tmp_path):
    other = tmp_path / "other"
    other.mkdir()
    for name in os.listdir(run):
        if name.startswith("ckpt-") or name == "checkpoint":
            os.link(os.path.join(run, name), other / name)
    with pytest.raises(UserError, match="no hparams.json in"):
        average_checkpoints(str(other), 2, log=lambda _: None)
    wider = config.apply_overrides(tiny_hparams(), "d_model=32")
    save_spec(RunDir(str(other)), RunSpec("algorithmic_reverse", "transformer_tiny", OVERRIDES, wider))
    with pytest.raises(UserError, match="does not fit the model of hparams.json"):
        average_checkpoints(str(other), 2, log=lambda _: None)
    assert not os.path.exists(other / "averaged")


def run_cli(*args: str):
    return run_tool("avg_checkpoints", *args, timeout=120)


def test_cli_prints_sources_and_result(run, tmp_path):
    done = run_cli(f"--output_dir={run}", "--last_n=2", f"--destination_dir={tmp_path / 'avg'}")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["averaging 2 checkpoints: ckpt-200, ckpt-300",
                                        f"wrote {tmp_path / 'avg' / 'ckpt-300'}"]


def test_cli_missing_dir_is_one_line_and_nonzero_exit(tmp_path):
    done = run_cli(f"--output_dir={tmp_path / 'nowhere'}")
    assert done.returncode != 0
    assert done.stderr.strip().splitlines()[-1:] == [
        f"t2t-lite-avg-checkpoints: error: --output_dir {str(tmp_path / 'nowhere')!r} does not exist"]
