#!/usr/bin/env python3
"""PyTorch's answers for Eddy's parity suite.

Generates the case list (REPL expressions that are also Python once the names below are
defined), evaluates each with PyTorch, and writes `tests/parity/expected.json`: per case its
value (a tensor's dtype, shape and values; a number; a bool; a dtype; a list) or that PyTorch
refused it. `tests/pytorch_parity_suite.rs` runs the same expressions through `eddy repl`'s
evaluator and compares. Rerun this when PyTorch changes:

    pip install torch && python3 compare/torch_parity.py
"""

import json
import math
import os
import sys

import torch
import torch.nn.functional as F

OUT = os.path.join(os.path.dirname(__file__), "..", "tests", "parity", "expected.json")

DTYPES = {
    torch.float32: "f32",
    torch.float64: "f64",
    torch.float16: "f16",
    torch.bfloat16: "bf16",
    torch.int64: "i64",
    torch.int32: "i32",
    torch.uint8: "u8",
    torch.bool: "bool",
}

# The REPL's names, as PyTorch.
NAMES = {
    "tensor": lambda data, dtype=None: torch.tensor(data, dtype=dtype),
    "zeros": torch.zeros,
    "ones": torch.ones,
    "arange": torch.arange,
    "cat": torch.cat,
    "stack": torch.stack,
    "where": torch.where,
    "matmul": torch.matmul,
    "true": True,
    "false": False,
    "inf": math.inf,
    "nan": math.nan,
}
NAMES.update({name: dt for dt, name in DTYPES.items()})

# Methods the REPL offers on tensors that PyTorch has as functions only.
torch.Tensor.cross_entropy = lambda self, t: F.cross_entropy(self, t)
torch.Tensor.nll_loss = lambda self, t: F.nll_loss(self, t)
torch.Tensor.gelu = lambda self: F.gelu(self)
torch.Tensor.silu = lambda self: F.silu(self)
torch.Tensor.elu = lambda self, alpha=1.0: F.elu(self, alpha)
torch.Tensor.leaky_relu = lambda self, slope=0.01: F.leaky_relu(self, slope)
torch.Tensor.softplus = lambda self, beta=1.0, threshold=20.0: F.softplus(self, beta, threshold)
torch.Tensor.mse_loss = lambda self, t: F.mse_loss(self, t)
torch.Tensor.conv2d = lambda self, w, bias=None, stride=1, padding=0, dilation=1, groups=1: (
    F.conv2d(self, w, bias, stride, padding, dilation, groups))
torch.Tensor.max_pool2d = lambda self, k, stride=None, padding=0, dilation=1, ceil_mode=False: (
    F.max_pool2d(self, k, stride, padding, dilation, ceil_mode))
torch.Tensor.avg_pool2d = lambda self, k, stride=None, padding=0, ceil_mode=False, count_include_pad=True: (
    F.avg_pool2d(self, k, stride, padding, ceil_mode, count_include_pad))
torch.Tensor.adaptive_avg_pool2d = lambda self, size: F.adaptive_avg_pool2d(self, size)
torch.Tensor.scaled_dot_product_attention = (
    lambda self, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None:
    F.scaled_dot_product_attention(self, k, v, attn_mask, dropout_p, is_causal, scale=scale))


def number(v):
    if isinstance(v, bool):
        return v
    if isinstance(v, int):
        return v
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return v


def encode(v):
    if isinstance(v, torch.Tensor):
        flat = v.detach().reshape(-1)
        vals = flat.tolist() if v.dtype != torch.bfloat16 else flat.float().tolist()
        return {
            "kind": "tensor",
            "dtype": DTYPES[v.dtype],
            "shape": list(v.shape),
            "values": [number(x) for x in vals],
        }
    if isinstance(v, torch.dtype):
        return {"kind": "dtype", "value": DTYPES[v]}
    if isinstance(v, torch.Size):
        return {"kind": "list", "items": [{"kind": "number", "value": d} for d in v]}
    if isinstance(v, bool):
        return {"kind": "bool", "value": v}
    if isinstance(v, (int, float)):
        return {"kind": "number", "value": number(v)}
    if isinstance(v, (tuple, list)):
        return {"kind": "list", "items": [encode(x) for x in v]}
    raise TypeError(f"cannot record {type(v)}")


def cases():
    """The expressions, by family."""
    out = []
    ints = "[300, -1, 0, 255, 3000000000, -129]"
    floats = "[300.7, -1.5, 0.0, 255.9, -0.9, 3e9, 1e20, nan, inf, -inf]"
    all_dt = ["f32", "f64", "f16", "bf16", "i64", "i32", "u8", "bool"]
    # Casts between every pair of dtypes, from integers and from floats with edges.
    for dst in all_dt:
        out.append(f"tensor({ints}).to({dst})")
        out.append(f"tensor({floats}).to({dst})")
        out.append(f"tensor([true, false]).to({dst})")
        for src in ["f16", "bf16", "i32", "u8"]:
            out.append(f"tensor([1, 0, 7], dtype={src}).to({dst})")
    # Binary ops over dtype pairs, dimensioned and 0-d operands.
    samples = {
        "f32": "tensor([1.5, -2.0, 3.0])",
        "f64": "tensor([1.5, -2.0, 3.0], dtype=f64)",
        "f16": "tensor([1.5, -2.0, 3.0], dtype=f16)",
        "bf16": "tensor([1.5, -2.0, 3.0], dtype=bf16)",
        "i64": "tensor([7, -7, 3])",
        "i32": "tensor([7, -7, 3], dtype=i32)",
        "u8": "tensor([7, 250, 3], dtype=u8)",
        "bool": "tensor([true, false, true])",
    }
    zero_d = {
        "f32": "tensor(2.0)",
        "f64": "tensor(2.0, dtype=f64)",
        "i64": "tensor(2)",
        "i32": "tensor(2, dtype=i32)",
        "bool": "tensor(true)",
    }
    for op in ["+", "-", "*", "/", "//", "%"]:
        for a in all_dt:
            for b in all_dt:
                if a <= b or a == b:
                    out.append(f"{samples[a]} {op} {samples[b]}")
            for z in zero_d:
                out.append(f"{samples[a]} {op} {zero_d[z]}")
        for a in all_dt:
            for scalar in ["2", "2.5", "-3"]:
                out.append(f"{samples[a]} {op} {scalar}")
    for a in all_dt:
        out.append(f"{samples[a]} ** 2")
        for cmp in ["==", "<", ">="]:
            out.append(f"{samples[a]} {cmp} 3")
            out.append(f"{samples[a]} {cmp} {samples['f32']}")
    # Unary ops over dtypes.
    unary = ["neg()", "abs()", "exp()", "log()", "sqrt()", "sigmoid()", "tanh()", "relu()",
             "gelu()", "silu()", "sign()", "floor()", "round()", "square()", "reciprocal()",
             "sin()", "erf()", "leaky_relu(0.1)", "elu()", "softplus()"]
    for a in all_dt:
        for u in unary:
            out.append(f"{samples[a]}.{u}")
    # Reductions, with dims, keepdim, empties and NaN.
    reds = ["sum()", "mean()", "prod()", "max()", "min()", "argmax()", "argmin()", "std()",
            "var()", "norm()", "norm(1)", "sum(0)", "sum(0, keepdim=true)", "mean(0)",
            "amax(0)", "median()", "logsumexp(0)", "any()", "all()"]
    mats = {
        "f32": "tensor([[1.0, -2.0, 3.0], [4.0, 5.0, -6.0]])",
        "i64": "tensor([[1, -2, 3], [4, 5, -6]])",
        "bool": "tensor([[true, false, true], [false, false, true]])",
        "empty": "tensor([])",
        "nan": "tensor([1.0, nan, 3.0])",
    }
    for m in mats.values():
        for r in reds:
            out.append(f"{m}.{r}")
    # Shapes and views.
    m = "arange(12).reshape(3, 4)"
    for v in ["t()", "transpose(0, 1)", "reshape(4, 3)", "reshape(-1)", "reshape(2, -1)",
              "flatten()", "unsqueeze(0).shape", "squeeze()", "select(1, -1)", "select(0, 2)",
              "narrow(1, -2, 2)", "narrow(0, 1, 2)", "flip(0)", "flip(1)", "tril()", "triu(1)",
              "permute(1, 0)", "expand(2, 3, 4).shape", "contiguous()", "sum(1)",
              "view(6, 2)", "select(0, 3)", "narrow(1, 3, 2)", "reshape(5, 2)"]:
        out.append(f"{m}.{v}")
    for ix in ["[0]", "[-1]", "[1:]", "[:2]", "[::2]", "[1::2]", "[::-1]", "[:, 1]",
               "[:, ::3]", "[-1, -1]", "[5]", "[-4]", "[1:3, 1:3]", "[..., 0]"]:
        out.append(f"{m}{ix}")
    out.append("tensor([[1], [2]]).expand(-1, 3)")
    out.append("zeros(1, 3, 1).squeeze().shape")
    for a in all_dt:
        out.append(f"cat([{samples[a]}, {samples['i64']}])")
        out.append(f"stack([{samples[a]}, {samples['f32']}])")
    # Row-wise ops and losses.
    logits = {
        "small": "tensor([[1.0, 2.0, 3.0], [1.0, 1.0, 1.0]])",
        "large": "tensor([[10000.0, 10000.0, 0.0], [1000.0, -1000.0, 0.0]])",
        "inf": "tensor([[1.0, inf, 2.0]])",
        "f64": "tensor([[1.0, 2.0, 3.0]], dtype=f64)",
    }
    for lg in logits.values():
        out.append(f"{lg}.softmax(1)")
        out.append(f"{lg}.log_softmax(1)")
        out.append(f"{lg}.log_softmax(-1).exp().sum(1)")
    for tgt in ["tensor([0, 2])", "tensor([-100, 1])", "tensor([-100, -100])",
                "tensor([0, 2], dtype=i32)", "tensor([0, 2], dtype=u8)", "tensor([3, 0])",
                "tensor([[0.2, 0.3, 0.5], [1.0, 0.0, 0.0]])"]:
        out.append(f"{logits['small']}.cross_entropy({tgt})")
        out.append(f"{logits['large']}.cross_entropy({tgt})")
    out.append("tensor([1.0, 2.0, 3.0]).cross_entropy(tensor(1))")
    out.append("tensor([[1.0, 2.0]]).nll_loss(tensor([1]))")
    out.append("tensor([1.0, 2.0]).mse_loss(tensor([2.0, 4.0]))")
    # Sorting.
    v = "tensor([3.0, -1.0, 2.0, 5.0])"
    for s in ["sort()", "sort(0, true)", "argsort()", "topk(2)", "topk(2, 0, false)",
              "cumsum(0)", "max(0)", "min(0)", "kthvalue(2)"]:
        out.append(f"{v}.{s}")
    # Indexing ops.
    src = "tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])"
    for ix in ["index_select(0, tensor([2, 0]))", "index_select(1, tensor([1]))",
               "gather(1, tensor([[1], [0], [1]]))", "index_select(0, tensor([3]))",
               "index_select(0, tensor([-1]))", "masked_fill(tensor([true, false]), 0.0)"]:
        out.append(f"{src}.{ix}")
    out.append("where(tensor([true, false]), tensor([1, 2]), tensor([1.5, 2.5]))")
    out.append("where(tensor([true, false]), tensor([1, 2]), tensor(0.5))")
    # Matmul and dtypes.
    for a in ["f32", "f64", "i64", "i32"]:
        out.append(f"matmul(tensor([[1, 2], [3, 4]], dtype={a}), tensor([[5, 6], [7, 8]], dtype={a}))")
    out.append("matmul(tensor([[1, 2]], dtype=i32), tensor([[1], [2]], dtype=i64))")
    out.append("tensor([1.0, 2.0]).matmul(tensor([3.0, 4.0]))")
    # Expressions a PyTorch user typed, whose answers differed once.
    out += [
        "tensor([300]).to(u8)", "tensor([-1]).to(u8)", "tensor([3000000000]).to(i32)",
        "tensor([1, 2], dtype=i32) + tensor(5)", "tensor([1.0], dtype=f16) + tensor(2.0)",
        "tensor([[10000.0, 10000.0]]).cross_entropy(tensor([0]))",
        "tensor([[1000.0, 1000.0, 0.0]]).log_softmax(1).exp().sum()",
        "tensor([true, false]) + 1", "tensor([true, false]) * tensor([true, true])",
        "tensor([true, false]).exp()", "cat([tensor([1, 2]), tensor([1.5])])",
        "tensor([[1, 2], [3, 4]]).select(1, -1)", "tensor([[1], [2]]).expand(-1, 3)",
        "tensor([]).median()", "tensor([[1.0, 2.0]]).cross_entropy(tensor([-100]))",
        "tensor([[1.0, 2.0]]).cross_entropy(tensor([[0.3, 0.7]]))",
        "tensor([1.0, 2.0]).cross_entropy(tensor(1))",
        "tensor([[1.0, 2.0]]).cross_entropy(tensor([1], dtype=i32))", "tensor([1, 2]).gelu()",
        "tensor([1.0, 2.0, 3.0]).norm(1)", "tensor([7, -7]) // 2", "tensor([7, -7]) % 3",
        "tensor([7, -7]).div(2, rounding_mode='floor')",
        "tensor([7, -7]).div(2, rounding_mode='trunc')", "zeros(2, 1, 3).squeeze().shape",
        "arange(10)[::2]", "tensor([1.0, 5.0, 3.0]).topk(2, 0, false)",
        "tensor([1, 2]).requires_grad_()", "tensor([true]).requires_grad_()",
        "tensor([1.0, 2.0]).requires_grad_()", "tensor([1, 2]).requires_grad_(false)",
        "tensor([1.0, 2.0], dtype=f64).requires_grad_(true)",
        # ignore_index = -100 in computed targets too, and in nll_loss.
        "tensor([[1.0, 2.0], [3.0, 4.0]]).cross_entropy(tensor([-100, 1]) + 0)",
        "tensor([[1.0, 2.0], [3.0, 4.0]]).cross_entropy(tensor([-100, -100]) + 0)",
        "tensor([[1.0, 2.0], [3.0, 4.0]]).cross_entropy(tensor([1, 0]) + 0)",
        "tensor([[1.0, 2.0], [3.0, 4.0]]).nll_loss(tensor([-100, 1]))",
        "tensor([[1.0, 2.0], [3.0, 4.0]]).nll_loss(tensor([-100, 1]) + 0)",
        "tensor([[1.0, 2.0], [3.0, 4.0]]).nll_loss(tensor([-100, -100]))",
        "tensor([[1.0, 2.0], [3.0, 4.0]]).nll_loss(tensor([1, 0], dtype=u8))",
        "tensor([[1.0, 2.0], [3.0, 4.0]]).nll_loss(tensor([1, 0], dtype=i32))",
        "tensor([[1.0, 2.0], [3.0, 4.0]]).nll_loss(tensor([2, 0]))",
        "tensor([[1.0, 2.0], [3.0, 4.0]]).nll_loss(tensor([-1, 0]))",
        "tensor([1.0, 2.0]).nll_loss(tensor(1))",
        # Deliberate: Eddy compares an integer scalar as it is (PyTorch wraps it first).
        "tensor([255, 0], dtype=u8) == 256",
        # Literals out of an integer dtype's range, the legacy empty tensor in `cat`, and
        # `any`/`all` of u8.
        "tensor([300], dtype=u8)", "tensor([-1, 255.5], dtype=u8)", "tensor([-1.5], dtype=u8)",
        "tensor([-256], dtype=u8)", "tensor([3000000000], dtype=i32)", "tensor([nan], dtype=i64)",
        "tensor([70000.0], dtype=f16)", "cat([tensor([1.0, 2.0]), tensor([])], 0)",
        "cat([tensor([]), tensor([1, 2])])", "tensor([1, 2], dtype=u8).all()",
        "tensor([1, 0], dtype=u8).any()", "tensor([[1, 0], [2, 3]], dtype=u8).all(1)",
    ]
    # Convolution and pooling, with PyTorch's arguments (images from arange, so exact).
    img = "(arange(50).reshape(1, 2, 5, 5).to(f32) / 10 - 2)"
    w = "(arange(36).reshape(2, 2, 3, 3).to(f32) / 20 - 0.8)"
    for c in [f"{img}.conv2d({w})", f"{img}.conv2d({w}, tensor([0.5, -1.0]), 1, 1)",
              f"{img}.conv2d({w}, stride=[2, 1], padding=[1, 0])",
              f"{img}.conv2d({w}, padding=2, dilation=2)",
              f"{img}.conv2d(arange(18).reshape(2, 1, 3, 3).to(f32) / 9, groups=2)",
              f"{img}.to(f64).conv2d({w}.to(f64), padding=1)",
              f"{img}[0].conv2d({w}, padding=1)",
              f"{img}.conv2d(arange(12).reshape(3, 4, 1, 1).to(f32))",
              f"{img}.conv2d({w}, groups=2)", f"{img}.to(i64).conv2d({w}.to(i64))",
              f"{img}.conv2d({w}, tensor([1.0, 2.0, 3.0]))", f"{img}.conv2d({w}, stride=0)",
              f"{img}.max_pool2d(2)", f"{img}.max_pool2d(3, 2, 1)",
              f"{img}.max_pool2d(2, ceil_mode=true)", f"{img}.max_pool2d(3, 1, dilation=2)",
              f"{img}.max_pool2d([2, 3], [1, 2])", "tensor([[[[1.0, nan], [3.0, 2.0]]]]).max_pool2d(2)",
              f"{img}.max_pool2d(2, padding=2)", f"{img}.to(i64).max_pool2d(2)",
              f"{img}.avg_pool2d(2)", f"{img}.avg_pool2d(3, 2, 1)",
              f"{img}.avg_pool2d(3, 2, 1, count_include_pad=false)",
              f"{img}.avg_pool2d(2, ceil_mode=true)", f"{img}.avg_pool2d(2, 2, 1, true, false)",
              f"{img}.adaptive_avg_pool2d(1)", f"{img}.adaptive_avg_pool2d([2, 3])",
              f"{img}.adaptive_avg_pool2d(4)", f"{img}.adaptive_avg_pool2d(0)"]:
        out.append(c)
    # Scaled dot-product attention: causal, bool (a row fully masked) and float masks, a
    # scale, broadcast batch dims, 2-d operands, dtypes, and PyTorch's refusals.
    q = "(arange(24).reshape(2, 3, 4).to(f32) / 10 - 1)"
    k = "(arange(40).reshape(2, 5, 4).to(f32) / 15 - 1.2)"
    v = "(arange(30).reshape(2, 5, 3).to(f32) / 7 - 2)"
    bmask = "tensor([[true, false, true, false, true], [false, false, false, false, false], [true, true, true, true, true]])"
    fmask = "(arange(15).reshape(3, 5).to(f32) / 10)"
    sdpa = "scaled_dot_product_attention"
    for c in [f"{q}.{sdpa}({k}, {v})", f"{q}.{sdpa}({k}, {v}, is_causal=true)",
              f"{q}.{sdpa}({k}, {v}, scale=0.5)", f"{q}.{sdpa}({k}, {v}, {bmask})",
              f"{q}.{sdpa}({k}, {v}, {fmask})", f"{q}[0].{sdpa}({k}[0], {v}[0])",
              f"{q}.{sdpa}({k}[0], {v}[0])", f"{q}.to(f64).{sdpa}({k}.to(f64), {v}.to(f64), is_causal=true)",
              f"{q}.to(f16).{sdpa}({k}.to(f16), {v}.to(f16))",
              f"{q}.{sdpa}({k}, {v}, {bmask}, is_causal=true)", f"{q}.{sdpa}({k}[:, :, :3], {v})",
              f"{q}.{sdpa}({k}, {v}[:, :4])", f"{q}.{sdpa}({k}, {v}.to(f64))",
              f"{q}.{sdpa}({k}, {v}, {fmask}.to(f64))", f"{q}.{sdpa}({k}, {v}, dropout_p=1.5)",
              f"{q}.to(i64).{sdpa}({k}.to(i64), {v}.to(i64))", f"{q}[0, 0].{sdpa}({k}[0, 0], {v}[0, 0])"]:
        out.append(c)
    # A number's kind, not its value, decides the dtype (PyTorch's Python scalars): every
    # dtype beside whole and fractional floats and integers, out of place and in place.
    kinds = {
        "f32": "tensor([1.5, -2.0, 3.0])",
        "f64": "tensor([1.5, -2.0, 3.0], dtype=f64)",
        "f16": "tensor([1.5, -2.0, 3.0], dtype=f16)",
        "bf16": "tensor([1.5, -2.0, 3.0], dtype=bf16)",
        "i64": "tensor([1, -2, 3])",
        "i32": "tensor([1, -2, 3], dtype=i32)",
        "u8": "tensor([1, 250, 3], dtype=u8)",
        "bool": "tensor([true, false, true])",
    }
    for a, t in kinds.items():
        for c in ["2.0", "2.5", "2", "1e10", "0.0", "0"]:
            for op in ["+", "-", "*", "/", "**"]:
                out.append(f"{t} {op} {c}")
            out.append(f"{c} + {t}")
            out.append(f"{c} * {t}")
            for cmp in ["==", "<", ">="]:
                out.append(f"{t} {cmp} {c}")
            for m in ["add_", "sub_", "mul_"]:
                out.append(f"{t}.{m}({c})")
            out.append(f"{t}.clamp(min={c})")
            out.append(f"{t}.clamp(max={c})")
            out.append(f"{t}.clamp({c}, 3)")
        out.append(f"{t}.clamp(0, 2.5)")
    out += [
        "tensor([16777217]) == 16777216.0", "tensor([16777217]) == 16777216",
        "tensor([16777217], dtype=i32) < 16777216.5", "tensor([1, 2], dtype=i32) * 1e10",
        "tensor([1.0], dtype=f16) * 1e10", "tensor([true, false]) + true",
        "tensor([true, false]) * false",
        # Deliberate: Eddy compares a negative integer with u8 values as it is.
        "tensor([255, 0], dtype=u8) == -1", "tensor([1, 2], dtype=u8) > -1",
    ]
    # Two 0-d operands promote as any two tensors do, in either order.
    zs = ["tensor(300)", "tensor(1, dtype=u8)", "tensor(1.5, dtype=f64)", "tensor(2.0)",
          "tensor(true)", "tensor(7, dtype=i32)", "tensor(2.0, dtype=f16)"]
    for a in zs:
        for b in zs:
            if a != b:
                out.append(f"{a} + {b}")
    # Losses over K dims (segmentation's [N, C, d1, ...] and [N, d1, ...]); masked_fill with a
    # mask larger than the tensor; t() past 2 dims.
    k_in = "tensor([[[1.0, 2.0], [0.5, -1.0]], [[0.0, 1.0], [2.0, 3.0]]])"
    for tgt in ["tensor([[0, 1], [1, -100]])", "tensor([[1, 1], [0, 0]])",
                "tensor([[0, 2], [1, 0]])", "tensor([0, 1])"]:
        out.append(f"{k_in}.cross_entropy({tgt})")
        out.append(f"{k_in}.log_softmax(1).nll_loss({tgt})")
    out.append(f"{k_in}.cross_entropy(tensor([[[0.5, 0.5], [1.0, 0.0]], [[0.0, 1.0], [0.5, 0.5]]]))")
    out += [
        "tensor([1.0, 2.0]).masked_fill(tensor([[true, false], [false, true]]), 0.0)",
        "tensor([1.0, 2.0]).masked_fill(tensor([[true], [false]]), -1.0)",
        "tensor([[[1.0]]]).t()", "tensor([1.0, 2.0]).t()", "arange(8).reshape(2, 2, 2).mT",
    ]
    # Names and arguments a PyTorch user types.
    out += [
        "tensor([1.0, 2.0, 3.0]).cumprod(0)", "tensor([1, 2, 3]).cumprod(0)",
        "zeros(3).index_add(0, tensor([0, 0, 2]), tensor([1.0, 2.0, 3.0]))",
        "zeros(3).scatter_add(0, tensor([0, 0, 2]), tensor([1.0, 2.0, 3.0]))",
        "tensor([1.0, 2.0, 3.0])[tensor([0, 0, -1])]",
        "arange(6).reshape(3, 2)[tensor([2, 0])]",
        "tensor([3.0, 1.0, 2.0, 1.0]).sort(stable=true)",
        "tensor([3.0, 1.0, 2.0, 1.0]).sort(descending=true, stable=true)",
        "tensor([1.2345, 2.5, -0.125]).round(decimals=2)",
        "tensor([[1.0, 2.0], [3.0, 4.0]]).norm(p='fro')",
        "tensor([1, 2, 3]).cumsum(0, dtype=f32)", "tensor([1, 2, 3]).cumsum(0, dtype=f64)",
        "zeros(1, 2, 1, 3).squeeze([0, 2]).shape", "zeros(1, 2, 1, 3).squeeze([0, 1]).shape",
    ]
    # Numbers (Python's int and float arithmetic).
    for e in ["7 // 2", "-7 // 2", "7 % -3", "-7 % 3", "5.5 % 2", "-5.5 // 2", "2 ** 10",
              "2 ** -1", "7 / 2", "1 // 0"]:
        out.append(e)
    return out


def main():
    results = []
    for expr in cases():
        try:
            v = eval(expr.replace("[..., ", "[Ellipsis, "), {}, dict(NAMES))
            rec = encode(v)
        except Exception:  # PyTorch refused it: a refusal is the answer
            rec = {"kind": "error"}
        results.append({"expr": expr, "expect": rec})
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w") as f:
        f.write(json.dumps({"torch": torch.__version__, "cases": results}, indent=0))
        f.write("\n")
    print(f"{len(results)} cases from PyTorch {torch.__version__} to {os.path.normpath(OUT)}",
          file=sys.stderr)


if __name__ == "__main__":
    main()
