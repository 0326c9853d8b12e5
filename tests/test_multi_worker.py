"""Two trainer processes on 127.0.0.1 under MultiWorkerMirroredStrategy: chief-only files, resume, joint stop."""
import json
import os
import signal
import socket

import pytest
import tensorflow as tf

from cli_helpers import start_tool

TINY = ("vocab_size=12,d_model=16,d_ff=32,num_heads=2,num_encoder_layers=1,num_decoder_layers=1,"
        "train.batch_size=128,train.max_length=32,average_last_checkpoints=2")


def free_ports(count):
    """Ports the OS reports free now (another process could take one before the workers bind it)."""
    sockets = [socket.socket() for _ in range(count)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def start_cluster(output_dir, train_steps, temp_dirs):
    """Starts worker 0 (the chief) and worker 1 training to train_steps; returns the processes (each forked with
    TensorFlow imported, start_tool: its own process, environment and stdout, as a fresh interpreter's)."""
    cluster = {"worker": [f"127.0.0.1:{port}" for port in free_ports(2)]}
    processes = []
    for index, temp_dir in enumerate(temp_dirs):
        env = {"TMPDIR": str(temp_dir),
               "TF_CONFIG": json.dumps({"cluster": cluster, "task": {"type": "worker", "index": index}})}
        processes.append(start_tool("trainer", "--problem=algorithmic_reverse", "--hparams_set=transformer_tiny",
                                    f"--hparams={TINY}", f"--output_dir={output_dir}",
                                    f"--train_steps={train_steps}", "--save_checkpoints_steps=2",
                                    "--log_every_steps=1", "--eval_steps=1", "--distribution=multi_worker",
                                    "--nomemory_probe", env=env))
    return processes


def outputs(processes, already_read=("", "")):
    """Waits for the processes to exit 0; returns their whole outputs."""
    results = [read + process.wait(timeout=240).stdout for process, read in zip(processes, already_read)]
    for process, output in zip(processes, results):
        assert process.returncode == 0, output[-3000:]
    return results


@pytest.mark.slow
def test_two_workers_train_the_chief_checkpoints_a_restart_resumes_and_a_signal_stops_both(tmp_path):
    run = tmp_path / "run"
    temp_dirs = [tmp_path / "tmp0", tmp_path / "tmp1"]
    for temp_dir in temp_dirs:
        temp_dir.mkdir()
    chief, worker = outputs(start_cluster(run, 2, temp_dirs))
    assert "step 2/2" in chief and "step 2/2" in worker
    assert "step 2: dev loss" in chief and "dev loss" not in worker  # only the chief evaluates
    assert tf.train.latest_checkpoint(str(run)).endswith("ckpt-2")
    assert sorted(os.listdir(run)) == ["averaged", "best", "checkpoint", "ckpt-2.data-00000-of-00001", "ckpt-2.index",
                                       "dev_scores.json", "eval", "hparams.json", "train"]
    # The worker saved into a temporary directory of its own and removed it.
    assert os.listdir(temp_dirs[1]) == []

    processes = start_cluster(run, 1000, temp_dirs)
    worker_lines = []
    for line in processes[1].stream:
        worker_lines.append(line)
        if line.startswith("step 3/"):
            break
    processes[1].send_signal(signal.SIGTERM)  # to worker 1 only
    chief, worker = outputs(processes, ("", "".join(worker_lines)))
    for output in (chief, worker):
        assert f"resumed from {run / 'ckpt-2'} at step 2" in output
        assert "step 3/1000" in output and "step 1/" not in output
    stopped_at = int(worker.split("SIGTERM received: saved step ")[1].split(",")[0])
    assert f"stop request from another worker received: saved step {stopped_at}," in chief
    assert tf.train.latest_checkpoint(str(run)).endswith(f"ckpt-{stopped_at}")
