"""t2t-lite-query against local stand-ins for TF Serving (there is no model server here).

The REST stub answers like TF Serving's predict API in row format; the gRPC stub
implements PredictionService.Predict (tensorflow-serving-api, in the test extra; its tests skip without it).
Both keep what the client sent.
"""
import http.server
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
from typing import ClassVar

import pytest

from t2t_lite.errors import UserError
from t2t_lite.inference import client
from cli_helpers import run_tool

ENV = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
ERROR_PREFIX = "t2t-lite-query: error: "


def fake_translation(text: str) -> tuple[str, float]:
    """What the stubs 'translate' a line to: reversed, scored by its length."""
    return text[::-1], -0.5 * len(text)


class TFServingRest(http.server.BaseHTTPRequestHandler):
    """POST /v1/models/translate[/versions/N]:predict, answered as TF Serving does."""

    requests: ClassVar[list] = []

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.requests.append((self.path, body))
        name = re.fullmatch(r"/v1/models/([^/:]+)(?:/versions/\d+)?:predict", self.path).group(1)
        if name == "slow":
            return time.sleep(2)  # longer than the client waits: it has gone when this returns
        if name != "translate":
            return self.answer(404, {"error": f"Servable not found for request: Latest({name})"})
        if body.get("signature_name") != "serving_default":
            return self.answer(400, {"error": "Serving signature name not found"})
        predictions = [dict(zip(("outputs", "scores"), fake_translation(text))) for text in body["instances"]]
        self.answer(200, {"predictions": predictions})

    def answer(self, status: int, reply: dict) -> None:
        data = json.dumps(reply).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture
def rest_server():
    TFServingRest.requests = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), TFServingRest)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def query(*flags, stdin=None):
    return subprocess.run([sys.executable, "-m", "t2t_lite.bin.query", *flags], input=stdin, check=False,
                          capture_output=True, text=True, timeout=60, env=ENV)


LINES = ["A dog runs.", "", "Zwei M\u00e4nner \U0001f436 \u72ac", "   ", "Last line"]


def test_query_prints_one_output_per_line_in_order(rest_server, tmp_path):
    source = tmp_path / "in.txt"
    source.write_text("".join(line + "\n" for line in LINES), encoding="utf-8")
    result = query("--model_name=translate", f"--server={rest_server}", f"--input_file={source}", "--batch_size=2")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "".join(fake_translation(line)[0] + "\n" for line in LINES)
    # Three bounded requests of at most 2 lines each, in TF Serving's row format.
    assert [body["instances"] for _, body in TFServingRest.requests] == [LINES[0:2], LINES[2:4], LINES[4:]]


def test_query_reads_stdin_and_prints_scores(rest_server):
    result = query("--model_name=translate", f"--server=http://{rest_server}", "--model_version=3", "--scores",
                   stdin="A dog runs.\nTwo cats.\n")
    assert result.returncode == 0, result.stderr
    assert result.stdout == ".snur god A\t-5.5000\n.stac owT\t-4.5000\n"
    assert TFServingRest.requests[0][0] == "/v1/models/translate/versions/3:predict"


@pytest.mark.parametrize("case", ["no server", "unknown model", "missing model name", "missing input file"])
def test_query_failures_are_one_line(rest_server, tmp_path, case):
    flags, message = {
        "no server": ([f"--server=127.0.0.1:{free_port()}", "--model_name=translate"],
                      "cannot reach TF Serving at http://127.0.0.1:"),
        "unknown model": ([f"--server={rest_server}", "--model_name=other"],
                          "answered HTTP 404: Servable not found for request: Latest(other)"),
        "missing model name": ([f"--server={rest_server}"], "--model_name is required"),
        "missing input file": ([f"--server={rest_server}", "--model_name=translate",
                                f"--input_file={tmp_path / 'nope.txt'}"], "cannot read"),
    }[case]
    result = query(*flags, stdin="A dog runs.\n")
    errors = [line for line in result.stderr.splitlines() if line.startswith(ERROR_PREFIX)]
    assert result.returncode == 2 and len(errors) == 1 and message in errors[0], result.stderr
    assert "Traceback" not in result.stderr and result.stdout == ""
    if case == "no server":  # the refusal's reason, not the URLError wrapped around it
        assert errors[0].endswith(": Connection refused"), errors[0]


def test_timeout_is_a_user_error(rest_server):
    predict = client.make_predict("rest", rest_server, "slow", timeout=0.5)
    with pytest.raises(UserError, match="cannot reach TF Serving at .*slow:predict: timed out"):
        predict(["A dog runs."])


def test_answer_without_predictions_is_a_user_error():
    with pytest.raises(UserError, match="answered without predictions .*is it a t2t-lite export"):
        client.parse_rest_predictions({"predictions": [[0.1, 0.9]]}, 1, "http://x")
    with pytest.raises(UserError, match="returned 1 predictions for 2 inputs"):
        client.parse_rest_predictions({"predictions": [{"outputs": "a", "scores": 0.0}]}, 2, "http://x")


def test_rest_url_follows_tf_serving():
    assert client.rest_url("localhost:8501", "translate", None) == "http://localhost:8501/v1/models/translate:predict"
    assert (client.rest_url("https://host/", "m", 7) == "https://host/v1/models/m/versions/7:predict")


def test_grpc_without_tensorflow_serving_api_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "tensorflow_serving", None)  # makes the import fail
    with pytest.raises(UserError, match="pip install tensorflow-serving-api"):
        client.make_predict("grpc", None, "translate")(["A dog runs."])


class GrpcStub:
    """PredictionService.Predict as TF Serving answers it, keeping every request it gets.

    Scores come back as float_val, or packed in tensor_content when packed_scores is set (TF Serving sends either).
    """

    def __init__(self):
        self.requests, self.packed_scores, self.drop_one = [], False, False

    def predict(self, request, context):
        import grpc
        import numpy as np
        from tensorflow.core.framework import tensor_pb2, types_pb2
        from tensorflow_serving.apis import predict_pb2

        self.requests.append(request)
        if request.model_spec.name != "translate":
            context.abort(grpc.StatusCode.NOT_FOUND, f"Servable not found for request: "
                                                     f"Latest({request.model_spec.name})")
        if request.model_spec.signature_name != "serving_default":
            context.abort(grpc.StatusCode.FAILED_PRECONDITION, "Serving signature name not found")
        pairs = [fake_translation(s.decode("utf-8")) for s in request.inputs["inputs"].string_val]
        if self.drop_one:
            pairs = pairs[1:]
        scores = [score for _, score in pairs]
        response = predict_pb2.PredictResponse()
        response.outputs["outputs"].CopyFrom(tensor_pb2.TensorProto(
            dtype=types_pb2.DT_STRING, string_val=[text.encode("utf-8") for text, _ in pairs]))
        if self.packed_scores:
            scores_tensor = tensor_pb2.TensorProto(dtype=types_pb2.DT_FLOAT,
                                                   tensor_content=np.asarray(scores, "<f4").tobytes())
        else:
            scores_tensor = tensor_pb2.TensorProto(dtype=types_pb2.DT_FLOAT, float_val=scores)
        response.outputs["scores"].CopyFrom(scores_tensor)
        return response


@pytest.fixture
def grpc_server():
    """(host:port, the GrpcStub behind it)."""
    grpc = pytest.importorskip("grpc")
    apis = pytest.importorskip("tensorflow_serving.apis.prediction_service_pb2_grpc")
    stub = GrpcStub()

    class Servicer(apis.PredictionServiceServicer):
        def Predict(self, request, context):
            return stub.predict(request, context)

    from concurrent import futures

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    apis.add_PredictionServiceServicer_to_server(Servicer(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    yield f"127.0.0.1:{port}", stub
    server.stop(None)


def sent_lines(request) -> list[str]:
    """The lines of a PredictRequest, checked to be the export's input: a DT_STRING vector of shape [B]."""
    from tensorflow.core.framework import types_pb2

    assert list(request.inputs) == ["inputs"]
    tensor = request.inputs["inputs"]
    assert tensor.dtype == types_pb2.DT_STRING
    assert [dim.size for dim in tensor.tensor_shape.dim] == [len(tensor.string_val)]
    return [value.decode("utf-8") for value in tensor.string_val]


def test_grpc_query_sends_the_signatures_inputs_and_prints_one_output_per_line(grpc_server):
    server, stub = grpc_server
    predict = client.make_predict("grpc", server, "translate")
    expected = [client.Translation(*fake_translation(line)) for line in LINES]
    assert client.predict_in_batches(predict, LINES, 2) == expected
    assert [sent_lines(request) for request in stub.requests] == [LINES[0:2], LINES[2:4], LINES[4:]]
    for request in stub.requests:
        assert request.model_spec.name == "translate" and request.model_spec.signature_name == "serving_default"
        assert not request.model_spec.HasField("version")  # TF Serving's default: the highest version
    stub.packed_scores = True
    assert client.predict_in_batches(client.make_predict("grpc", server, "translate", version=3), LINES, 5) == \
        expected
    assert stub.requests[-1].model_spec.version.value == 3 and sent_lines(stub.requests[-1]) == LINES
    stub.packed_scores, stub.drop_one = False, True
    with pytest.raises(UserError, match=r"TF Serving \(gRPC\) at .* returned 1 outputs for 2 inputs"):
        predict(LINES[:2])
    with pytest.raises(UserError, match=r"TF Serving \(gRPC\) at .*: NOT_FOUND: Servable not found"):
        client.make_predict("grpc", server, "other")(["A dog runs."])
    with pytest.raises(UserError, match=r"TF Serving \(gRPC\) at .*: UNAVAILABLE"):
        client.make_predict("grpc", f"127.0.0.1:{free_port()}", "translate", timeout=5)(["A dog runs."])


def test_query_cli_over_grpc_as_serving_md_shows(grpc_server, tmp_path):
    server, stub = grpc_server
    source = tmp_path / "in.txt"
    source.write_text("".join(line + "\n" for line in LINES), encoding="utf-8")
    result = run_tool("query", "--model_name=translate", "--protocol=grpc", f"--server={server}",
                      f"--input_file={source}", "--model_version=2", "--batch_size=3", "--scores")
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout == "".join("%s\t%.4f\n" % fake_translation(line) for line in LINES)
    assert [sent_lines(request) for request in stub.requests] == [LINES[0:3], LINES[3:]]
    assert {(r.model_spec.name, r.model_spec.signature_name, r.model_spec.version.value) for r in stub.requests} \
        == {("translate", "serving_default", 2)}
