"""Reading a SavedModel's graph, for tests of what an export holds."""
import os

import tensorflow as tf


def graph_nodes(saved_model_dir: str) -> tuple[list, set[str]]:
    """(every node of the graph and of every function in its library, the library's function names)."""
    from tensorflow.core.protobuf import saved_model_pb2

    with open(os.path.join(saved_model_dir, "saved_model.pb"), "rb") as f:
        saved_model = saved_model_pb2.SavedModel.FromString(f.read())
    nodes, functions = [], set()
    for meta_graph in saved_model.meta_graphs:
        graph = meta_graph.graph_def
        nodes.extend(graph.node)
        for function in graph.library.function:
            functions.add(function.signature.name)
            nodes.extend(function.node_def)
    return nodes, functions


def matmul_dtypes(saved_model_dir: str) -> set[str]:
    """The dtypes (T) of every matmul node in the export's graph and functions."""
    return {tf.dtypes.as_dtype(node.attr["T"].type).name for node in graph_nodes(saved_model_dir)[0]
            if node.op in ("MatMul", "BatchMatMulV2", "BatchMatMulV3")}
