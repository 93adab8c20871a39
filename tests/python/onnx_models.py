"""Small ONNX models that the integration tests generate on the fly with the `onnx` package.

Each builder returns an onnx.ModelProto with fixed (seeded) weights, so the server's answers can
be compared with onnxruntime-python's on the same file. The opset and IR version are pinned to
values every recent ONNX Runtime reads.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
IR_VERSION = 8

IMAGE_CLASSES = 10


def _model(graph: onnx.GraphProto) -> onnx.ModelProto:
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = IR_VERSION
    onnx.checker.check_model(model)
    return model


def image_classifier(seed: int = 7) -> onnx.ModelProto:
    """FP32 "image" [N,3,224,224] -> FP32 "probabilities" [N,10] (batch axis dynamic).

    Conv(3->4, 3x3, stride 4) + Relu + GlobalAveragePool + Flatten + Gemm + Softmax: small
    enough to run in a millisecond, deep enough that wrong strides or a mixed-up batch give
    visibly different numbers.
    """
    rng = np.random.default_rng(seed)
    conv_w = rng.normal(0, 0.5, size=(4, 3, 3, 3)).astype(np.float32)
    conv_b = rng.normal(0, 0.1, size=(4,)).astype(np.float32)
    fc_w = rng.normal(0, 1.0, size=(IMAGE_CLASSES, 4)).astype(np.float32)
    fc_b = rng.normal(0, 0.1, size=(IMAGE_CLASSES,)).astype(np.float32)
    nodes = [
        helper.make_node("Conv", ["image", "conv_w", "conv_b"], ["conv"], kernel_shape=[3, 3],
                         strides=[4, 4], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["conv"], ["relu"]),
        helper.make_node("GlobalAveragePool", ["relu"], ["pooled"]),
        helper.make_node("Flatten", ["pooled"], ["flat"], axis=1),
        helper.make_node("Gemm", ["flat", "fc_w", "fc_b"], ["logits"], transB=1),
        helper.make_node("Softmax", ["logits"], ["probabilities"], axis=1),
    ]
    graph = helper.make_graph(
        nodes,
        "image_classifier",
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, ["N", 3, 224, 224])],
        [helper.make_tensor_value_info("probabilities", TensorProto.FLOAT, ["N", IMAGE_CLASSES])],
        initializer=[
            numpy_helper.from_array(conv_w, "conv_w"),
            numpy_helper.from_array(conv_b, "conv_b"),
            numpy_helper.from_array(fc_w, "fc_w"),
            numpy_helper.from_array(fc_b, "fc_b"),
        ],
    )
    return _model(graph)


def mixed_types() -> onnx.ModelProto:
    """INT64 "ids" [N,4] and FP16 "scale" [N,4] (batch axis dynamic) ->
    FP16 "scaled" = float16(ids) * scale, INT64 "total" = sum(ids, axis 1) [N,1], and
    INT64 "echo" = ids (exact: ONNX Runtime's int64 ReduceSum rounds beyond 2**53)."""
    nodes = [
        helper.make_node("Cast", ["ids"], ["ids_f16"], to=TensorProto.FLOAT16),
        helper.make_node("Mul", ["ids_f16", "scale"], ["scaled"]),
        helper.make_node("ReduceSum", ["ids", "axes"], ["total"], keepdims=1),
        helper.make_node("Identity", ["ids"], ["echo"]),
    ]
    graph = helper.make_graph(
        nodes,
        "mixed_types",
        [
            helper.make_tensor_value_info("ids", TensorProto.INT64, ["N", 4]),
            helper.make_tensor_value_info("scale", TensorProto.FLOAT16, ["N", 4]),
        ],
        [
            helper.make_tensor_value_info("scaled", TensorProto.FLOAT16, ["N", 4]),
            helper.make_tensor_value_info("total", TensorProto.INT64, ["N", 1]),
            helper.make_tensor_value_info("echo", TensorProto.INT64, ["N", 4]),
        ],
        initializer=[numpy_helper.from_array(np.array([1], dtype=np.int64), "axes")],
    )
    return _model(graph)


def fixed_shape(seed: int = 11) -> onnx.ModelProto:
    """FP32 "x" [2,3] (no batch axis: not batchable) -> FP32 "y" = relu(x @ W) [2,2]."""
    rng = np.random.default_rng(seed)
    w = rng.normal(0, 1.0, size=(3, 2)).astype(np.float32)
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["mm"]),
        helper.make_node("Relu", ["mm"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "fixed_shape",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 2])],
        initializer=[numpy_helper.from_array(w, "w")],
    )
    return _model(graph)


def batch_mixing() -> onnx.ModelProto:
    """FP32 "x" [N,4] -> FP32 "twice" = concat(x, x) [2N,4] (first axis dynamic but not the
    batch: the rows of requests batched together cannot be split back by position), and
    FP32 "sum" = x + 1 [N,4]."""
    one = numpy_helper.from_array(np.ones((1, 4), dtype=np.float32), "one")
    nodes = [
        helper.make_node("Concat", ["x", "x"], ["twice"], axis=0),
        helper.make_node("Add", ["x", "one"], ["sum"]),
    ]
    graph = helper.make_graph(
        nodes,
        "batch_mixing",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
        [helper.make_tensor_value_info("twice", TensorProto.FLOAT, ["M", 4]),
         helper.make_tensor_value_info("sum", TensorProto.FLOAT, ["N", 4])],
        initializer=[one],
    )
    return _model(graph)


def exact_image_batch(rng: np.random.Generator, n: int) -> np.ndarray:
    """Random pixels that are multiples of 1/64 in [0, 1): exact in float32 and short in JSON,
    so request bodies stay small and the server parses exactly the values the test holds."""
    return (rng.integers(0, 64, size=(n, 3, 224, 224)) / 64.0).astype(np.float32)


def non_finite() -> onnx.ModelProto:
    """FP32 "x" [N,3] (batch axis dynamic) -> FP32 "ratio" = x / 0 (infinity, or NaN where x
    is 0), FP16 "ratio16" and FP64 "ratio64" (the same values cast), and FP32 "finite" =
    x + 1: a broken model beside a working output."""
    zero = numpy_helper.from_array(np.zeros((1, 3), dtype=np.float32), "zero")
    one = numpy_helper.from_array(np.ones((1, 3), dtype=np.float32), "one")
    nodes = [
        helper.make_node("Div", ["x", "zero"], ["ratio"]),
        helper.make_node("Cast", ["ratio"], ["ratio16"], to=TensorProto.FLOAT16),
        helper.make_node("Cast", ["ratio"], ["ratio64"], to=TensorProto.DOUBLE),
        helper.make_node("Add", ["x", "one"], ["finite"]),
    ]
    graph = helper.make_graph(
        nodes,
        "non_finite",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3])],
        [helper.make_tensor_value_info("ratio", TensorProto.FLOAT, ["N", 3]),
         helper.make_tensor_value_info("ratio16", TensorProto.FLOAT16, ["N", 3]),
         helper.make_tensor_value_info("ratio64", TensorProto.DOUBLE, ["N", 3]),
         helper.make_tensor_value_info("finite", TensorProto.FLOAT, ["N", 3])],
        initializer=[zero, one],
    )
    return _model(graph)


def non_finite_text(dimensions: int = 4) -> onnx.ModelProto:
    """A text-embedding graph: INT64 "input_ids" and "attention_mask" [N,T] -> FP32
    "sentence_embedding" [N,dimensions] = sum(ids * mask) * [NaN, 1, 1, ...], whose first
    element is always NaN (serve it with model.yaml, pooling none, and any tokenizer)."""
    scale = np.ones((1, dimensions), dtype=np.float32)
    scale[0, 0] = np.nan
    nodes = [
        helper.make_node("Mul", ["input_ids", "attention_mask"], ["masked"]),
        helper.make_node("Cast", ["masked"], ["masked_f"], to=TensorProto.FLOAT),
        helper.make_node("ReduceSum", ["masked_f", "axes"], ["total"], keepdims=1),
        helper.make_node("Mul", ["total", "scale"], ["sentence_embedding"]),
    ]
    graph = helper.make_graph(
        nodes,
        "non_finite_text",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["N", "T"]),
         helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["N", "T"])],
        [helper.make_tensor_value_info("sentence_embedding", TensorProto.FLOAT,
                                       ["N", dimensions])],
        initializer=[numpy_helper.from_array(np.array([1], dtype=np.int64), "axes"),
                     numpy_helper.from_array(scale, "scale")],
    )
    return _model(graph)
