"""Fewer, larger operators for the encoder graph: the same vectors, bit for bit.

ONNX Runtime runs a graph one operator at a time. Its two intra-op threads sleep when
idle (see ``minilm``: spinning doubled latency on a loaded machine), so every operator
that splits its work wakes the other thread, and for one chat message that hand-off
costs about as much as the arithmetic of the many small operators. :func:`fuse`
rewrites the graph :func:`memstrata.embeddings._bert.build_onnx` makes, or its dynamic
int8 quantization, layer by layer:

- the exact GELU (``x·½ · (1 + erf(x/√2))``, five operators) becomes ``Gelu``;
- the attention core (the heads' reshapes and transposes, the query's scale, Q·Kᵀ, the
  mask's bias, softmax, ·V, the merge back: twelve operators) becomes
  ``MultiHeadAttention``, given the mask as its key padding mask (the same −10 000 bias);
- in the int8 graph, the query, key and value products of one quantized input become one
  ``MatMulInteger`` over the three weight matrices side by side, then ``Split`` (integer
  products: each column is computed as before).

Both operators are ONNX Runtime's own (domain ``com.microsoft``), run by its CPU
provider. Each rewrite keeps the arithmetic and its order, so the vectors do not change
(``scripts/build_embedder.py`` checks the shipped graph against the unfused one bit for
bit, and so do the tests), and the model keeps the identity of the unfused graph. A
graph of another shape is refused (ValueError), never half rewritten.

Needs the ``onnx`` package: the build script and the float32 runner of a weights folder
call it; the shipped int8 graph is stored fused.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from onnx import ModelProto, NodeProto

__all__ = ["MASK_BIAS", "fuse"]

#: The bias ``build_onnx`` adds to a padded position's attention scores, and the value
#: ``MultiHeadAttention`` fills masked scores with.
MASK_BIAS = -10_000.0
_MS = "com.microsoft"
_MASK = "attention_mask"
_MASK_I32 = "attention_mask_i32"


class _Graph:
    """A graph's nodes with who makes and who reads each value, and the rewrites queued:
    nodes dropped, and new ones placed where an anchor node stood."""

    def __init__(self, model: ModelProto) -> None:
        from onnx import numpy_helper

        self.model = model
        self.nodes = list(model.graph.node)
        self.maker: dict[str, NodeProto] = {out: n for n in self.nodes for out in n.output}
        self.readers: dict[str, list[NodeProto]] = {}
        for n in self.nodes:
            for name in n.input:
                self.readers.setdefault(name, []).append(n)
        self.consts = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
        self.dropped: set[int] = set()
        self.placed: dict[int, list[NodeProto]] = {}

    def made_by(self, name: str, op: str) -> NodeProto:
        node = self.maker.get(name)
        if node is None or node.op_type != op:
            raise ValueError(f"{name} is not the output of a {op}")
        return node

    def read_once(self, name: str, op: str) -> NodeProto:
        readers = self.readers.get(name, [])
        if len(readers) != 1 or readers[0].op_type != op:
            raise ValueError(f"{name} is not read by one {op} alone")
        return readers[0]

    def const(self, name: str) -> Any:
        if name not in self.consts:
            raise ValueError(f"{name} is not a constant")
        return self.consts[name]

    def replace(self, old: Sequence[NodeProto], anchor: NodeProto, new: list[NodeProto]) -> None:
        """Drop ``old``; ``new`` goes where ``anchor`` (one of ``old``) stood, so what it
        reads is made before it and what reads it comes after."""
        for n in old:
            if id(n) in self.dropped:
                raise ValueError(f"{n.name or n.op_type} is part of two rewrites")
            self.dropped.add(id(n))
        self.placed[id(anchor)] = new

    def add_const(self, name: str, value: Any) -> str:
        from onnx import numpy_helper

        self.model.graph.initializer.append(numpy_helper.from_array(np.asarray(value), name))
        self.consts[name] = value
        return name

    def finish(self) -> None:
        from onnx import helper

        out: list[NodeProto] = [
            helper.make_node("Cast", [_MASK], [_MASK_I32], to=6)  # int32
        ]
        for n in self.nodes:
            out.extend(self.placed.get(id(n), []))
            if id(n) not in self.dropped:
                out.append(n)
        graph = self.model.graph
        del graph.node[:]
        graph.node.extend(out)
        used = {name for n in out for name in n.input}
        kept = [i for i in graph.initializer if i.name in used]
        del graph.initializer[:]
        graph.initializer.extend(kept)
        if not any(o.domain == _MS for o in self.model.opset_import):
            self.model.opset_import.append(helper.make_opsetid(_MS, 1))


def _scalar(g: _Graph, node: NodeProto, value: float) -> str:
    """The input of a binary ``node`` that is not the constant ``value`` (checked)."""
    a, b = node.input
    for x, c in ((a, b), (b, a)):
        if c in g.consts and np.size(g.consts[c]) == 1:
            if not math.isclose(float(g.consts[c]), value, rel_tol=1e-6):
                raise ValueError(f"{node.op_type} by {float(g.consts[c])}, not {value}")
            return str(x)
    raise ValueError(f"{node.op_type} has no constant operand")


def _gelu(g: _Graph, erf: NodeProto) -> None:
    from onnx import helper

    scaled = g.made_by(erf.input[0], "Mul")
    x = _scalar(g, scaled, 1 / math.sqrt(2))
    plus_one = g.read_once(erf.output[0], "Add")
    if _scalar(g, plus_one, 1.0) != erf.output[0]:
        raise ValueError("the GELU's Add does not add one to the Erf")
    product = g.read_once(plus_one.output[0], "Mul")
    half_x = next(i for i in product.input if i != plus_one.output[0])
    half = g.made_by(half_x, "Mul")
    if _scalar(g, half, 0.5) != x:
        raise ValueError("the GELU's halves are of two values")
    g.replace(
        [scaled, erf, plus_one, half, product],
        product,
        [helper.make_node("Gelu", [x], [product.output[0]], domain=_MS)],
    )


def _heads(g: _Graph, name: str, perm: list[int]) -> tuple[str, NodeProto, NodeProto, int]:
    """The (batch, length, hidden) value split into heads as ``name``; its Reshape and
    Transpose, and the number of heads."""
    from onnx import helper

    transpose = g.made_by(name, "Transpose")
    if list(helper.get_attribute_value(transpose.attribute[0])) != perm:
        raise ValueError(f"a head transpose is not {perm}")
    reshape = g.made_by(transpose.input[0], "Reshape")
    shape = [int(v) for v in g.const(reshape.input[1])]
    if len(shape) != 4 or shape[:2] != [0, 0]:
        raise ValueError(f"a head reshape to {shape}")
    return reshape.input[0], reshape, transpose, shape[2]


def _attention(g: _Graph, softmax: NodeProto) -> list[NodeProto]:
    """Rewrite one layer's attention core; returns the nodes making its mask bias."""
    from onnx import helper

    biased = g.made_by(softmax.input[0], "Add")
    scores = g.made_by(biased.input[0], "MatMul")
    bias = _mask_bias(g, biased.input[1])
    scaled_q = g.made_by(scores.input[0], "Mul")
    scale_name = next(i for i in scaled_q.input if i in g.consts)
    scale = float(g.const(scale_name))
    q, reshape_q, transpose_q, heads = _heads(
        g, next(i for i in scaled_q.input if i != scale_name), [0, 2, 1, 3]
    )
    k, reshape_k, transpose_k, _ = _heads(g, scores.input[1], [0, 2, 3, 1])
    mixed = g.read_once(softmax.output[0], "MatMul")
    v, reshape_v, transpose_v, _ = _heads(g, mixed.input[1], [0, 2, 1, 3])
    merge_t = g.read_once(mixed.output[0], "Transpose")
    merge = g.read_once(merge_t.output[0], "Reshape")
    g.replace(
        [
            *(reshape_q, transpose_q, reshape_k, transpose_k, reshape_v, transpose_v),
            *(scaled_q, scores, biased, softmax, mixed, merge_t, merge),
        ],
        merge,
        [
            helper.make_node(
                "MultiHeadAttention",
                [q, k, v, "", _MASK_I32],
                [merge.output[0]],
                domain=_MS,
                num_heads=heads,
                scale=scale,
                mask_filter_value=MASK_BIAS,
            )
        ],
    )
    return bias


def _mask_bias(g: _Graph, name: str) -> list[NodeProto]:
    """The nodes making ``name``, checked to be ``(1 − attention_mask) · MASK_BIAS`` over
    the heads' axes (every layer reads the same)."""
    unsqueeze = g.made_by(name, "Unsqueeze")
    times = g.made_by(unsqueeze.input[0], "Mul")
    pad = g.made_by(_scalar(g, times, MASK_BIAS), "Sub")
    if list(pad.input)[1] != _MASK or float(g.const(pad.input[0])) != 1.0:
        raise ValueError("the attention bias is not made from the attention mask")
    return [pad, times, unsqueeze]


_PROJECTIONS = ("query", "key", "value")


def _qkv(g: _Graph, layer: str) -> None:
    """One int8 product for the layer's query, key and value (see the module's doc)."""
    from onnx import helper

    products = []
    for name in _PROJECTIONS:
        weight = f"{layer}attention.self.{name}.weight"
        found = [
            n
            for n in g.nodes
            if n.op_type == "MatMulInteger" and n.input[1] == weight + "_quantized"
        ]
        if len(found) != 1:
            raise ValueError(f"{weight} is not one MatMulInteger's")
        product = found[0]
        cast = g.read_once(product.output[0], "Cast")
        rescale = g.read_once(cast.output[0], "Mul")
        bias = g.read_once(rescale.output[0], "Add")
        scale_of = g.made_by(next(i for i in rescale.input if i != cast.output[0]), "Mul")
        x_scale = next(i for i in scale_of.input if i != weight + "_scale")
        products.append((weight, product, cast, rescale, bias, scale_of, x_scale))
    a, zero = products[0][1].input[0], products[0][1].input[2]
    x_scale = products[0][6]
    if any((p[1].input[0], p[1].input[2], p[6]) != (a, zero, x_scale) for p in products):
        raise ValueError(f"{layer}: query, key and value read different inputs")
    width = g.const(products[0][0] + "_quantized").shape[1]

    def side_by_side(suffix: str, dtype: Any) -> Any:
        parts = [np.broadcast_to(g.const(p[0] + suffix), (width,)) for p in products]
        return np.concatenate(parts).astype(dtype)

    fused = f"{layer}attention.self.qkv"
    weights = np.concatenate([g.const(p[0] + "_quantized") for p in products], axis=1)
    w = g.add_const(fused + ".weight_quantized", weights)
    zeros = g.const(products[0][0] + "_zero_point").dtype
    zp = g.add_const(fused + ".weight_zero_point", side_by_side("_zero_point", zeros))
    scales = g.add_const(fused + ".weight_scale", side_by_side("_scale", np.float32))
    biases = [g.const(next(i for i in p[4].input if i != p[3].output[0])) for p in products]
    b = g.add_const(fused + ".bias", np.concatenate(biases).astype(np.float32))
    sizes = g.add_const(fused + ".sizes", np.array([width] * 3, dtype=np.int64))
    new = [
        helper.make_node("MatMulInteger", [a, w, zero, zp], [fused + "_int"]),
        helper.make_node("Cast", [fused + "_int"], [fused + "_float"], to=1),
        helper.make_node("Mul", [x_scale, scales], [fused + "_scale"]),
        helper.make_node("Mul", [fused + "_float", fused + "_scale"], [fused + "_scaled"]),
        helper.make_node("Add", [fused + "_scaled", b], [fused + "_biased"]),
        helper.make_node(
            "Split", [fused + "_biased", sizes], [p[4].output[0] for p in products], axis=-1
        ),
    ]
    g.replace([n for p in products for n in p[1:6]], products[0][1], new)


def fuse(model: ModelProto) -> ModelProto:
    """``model`` (from ``build_onnx``, or its dynamic int8 quantization) rewritten in
    place with fused operators, and returned. ValueError, the model untouched, when it
    is not of that shape."""
    from onnx import ModelProto

    work = ModelProto()
    work.CopyFrom(model)
    g = _Graph(work)
    if _MASK_I32 in g.maker or not any(_MASK in n.input for n in g.nodes):
        raise ValueError("not an unfused encoder graph with an attention mask")
    erfs = [n for n in g.nodes if n.op_type == "Erf"]
    softmaxes = [n for n in g.nodes if n.op_type == "Softmax"]
    if not softmaxes or len(erfs) != len(softmaxes):
        raise ValueError("the graph has no encoder layers of the expected shape")
    for erf in erfs:
        _gelu(g, erf)
    made = [_attention(g, softmax) for softmax in softmaxes]
    if any([id(n) for n in m] != [id(n) for n in made[0]] for m in made):
        raise ValueError("the layers' attention biases differ")
    # Read by no layer now: MultiHeadAttention takes the mask as it is.
    g.replace(made[0], made[0][0], [])
    if any(n.op_type == "MatMulInteger" for n in g.nodes):
        for i in range(len(softmaxes)):
            _qkv(g, f"encoder.layer.{i}.")
    g.finish()
    model.CopyFrom(work)
    return model
