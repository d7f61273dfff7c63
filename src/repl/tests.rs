//! The interpreter line by line: values, errors and commands.

use super::*;

fn new_repl() -> Session {
    Session::new(Vm::builder().build().unwrap())
}

fn out(s: &mut Session, line: &str) -> String {
    match s.eval_line(line) {
        Ok(Outcome::Print(p)) => p,
        other => panic!("{line}: {other:?}"),
    }
}

#[test]
fn integers_beyond_2_pow_53_stay_exact() {
    let mut s = new_repl();
    // Literals and integer arithmetic, as Python's `int` (2^53 + 1 is not an `f64`).
    assert_eq!(out(&mut s, "9007199254740993"), "9007199254740993");
    assert_eq!(out(&mut s, "2 ** 53 + 1"), "9007199254740993");
    assert_eq!(out(&mut s, "-9007199254740993 - 2"), "-9007199254740995");
    assert_eq!(out(&mut s, "9007199254740993 == 9007199254740992"), "false");
    assert_eq!(out(&mut s, "9007199254740993 / 1"), "9007199254740992"); // a float
    // Past `i64` an integer goes on as the `f64` it is.
    assert_eq!(
        out(&mut s, "9223372036854775807 + 1"),
        "9223372036854775808"
    );
    assert_eq!(
        out(&mut s, "-(-9223372036854775807 - 1)"),
        "9223372036854775808"
    );
    // Into and out of `i64` tensors, exactly.
    out(
        &mut s,
        "let x = tensor([9007199254740993, -9007199254740995, 1])",
    );
    assert_eq!(out(&mut s, "x.dtype"), "i64");
    assert_eq!(
        out(&mut s, "x.tolist()"),
        "[9007199254740993, -9007199254740995, 1]"
    );
    assert_eq!(out(&mut s, "x[0].item()"), "9007199254740993");
    assert_eq!(out(&mut s, "(x + 2).tolist()[0]"), "9007199254740995");
    assert_eq!(out(&mut s, "(x - 9007199254740993).tolist()[0]"), "0");
    assert_eq!(
        out(&mut s, "(9007199254740993 - x).tolist()[2]"),
        "9007199254740992"
    );
    assert_eq!(
        out(&mut s, "x.eq(9007199254740993).tolist()"),
        "[true, false, false]"
    );
    assert_eq!(out(&mut s, "(x == 9007199254740992).sum().item()"), "0");
    assert_eq!(
        out(&mut s, "where(x.gt(0), 9007199254740995, x).tolist()"),
        "[9007199254740995, -9007199254740995, 9007199254740995]"
    );
    assert_eq!(
        out(&mut s, "full([2], 9007199254740993).tolist()"),
        "[9007199254740993, 9007199254740993]"
    );
    assert_eq!(
        out(&mut s, "([1, 2] + 9007199254740993).tolist()"),
        "[9007199254740994, 9007199254740995]"
    );
    out(&mut s, "x.add_(9007199254740993)");
    assert_eq!(out(&mut s, "x.tolist()[2]"), "9007199254740994");
    // Other integer dtypes wrap, as PyTorch's scalar operands do (2^53 + 1 ≡ 1 mod 256).
    assert_eq!(
        out(
            &mut s,
            "(tensor([1], dtype=u8) + 9007199254740993).tolist()"
        ),
        "[2]"
    );
    // An `f64` tensor takes the nearest `f64`.
    assert_eq!(
        out(&mut s, "tensor([9007199254740993], dtype=f64).item()"),
        "9007199254740992"
    );
}

#[test]
fn evaluates_expressions_like_pytorch() {
    let mut s = new_repl();
    out(&mut s, "let a = tensor([[1., 2.], [3., 4.]])");
    assert_eq!(out(&mut s, "a.sum()"), "tensor(10.0000, dtype=f32)");
    assert_eq!(
        out(&mut s, "(a @ a.t()).sum(1)"),
        "tensor([16.0000, 36.0000], dtype=f32)"
    );
    assert_eq!(out(&mut s, "a[1, 0].item()"), "3");
    assert_eq!(out(&mut s, "a[:, 1:].shape"), "[2, 1]");
    assert_eq!(out(&mut s, "-2 ** 2 + 10 / 4"), "-1.5");
    assert_eq!(out(&mut s, "(1 - a).max()"), "tensor(0.0000, dtype=f32)");
    assert_eq!(out(&mut s, "a.gt(2).sum().item()"), "2");
    assert_eq!(out(&mut s, "relu(a - 3).tolist()"), "[[0, 0], [0, 1]]");
    assert_eq!(out(&mut s, "arange(4).reshape(2, -1).dtype"), "i64");
    assert_eq!(out(&mut s, "zeros(2, 3, dtype=f64).dtype"), "f64");
    assert_eq!(
        out(&mut s, "a.var().item()"),
        format!("{}", (5.0f32 / 3.0) as f64)
    );
    assert_eq!(
        out(&mut s, "a.std(1, correction=0, keepdim=true).tolist()"),
        "[[0.5], [0.5]]"
    );
    assert_eq!(out(&mut s, "a.cumsum(dim=0).tolist()"), "[[1, 2], [4, 6]]");
    assert_eq!(out(&mut s, "a.flip(1).tolist()"), "[[2, 1], [4, 3]]");
    assert_eq!(out(&mut s, "a.tril().tolist()"), "[[1, 0], [3, 4]]");
    assert_eq!(
        out(&mut s, "a.triu(diagonal=1).tolist()"),
        "[[0, 2], [0, 0]]"
    );
    assert_eq!(
        out(&mut s, "a.argsort(descending=true).tolist()"),
        "[[1, 0], [1, 0]]"
    );
    assert_eq!(
        out(&mut s, "a.sort(0, descending=true)[0].tolist()"),
        "[[3, 4], [1, 2]]"
    );
    assert_eq!(out(&mut s, "a.topk(1, dim=0)[1].tolist()"), "[[1, 1]]");
    assert_eq!(
        out(&mut s, "a.topk(1, largest=false)[-2].tolist()"),
        "[[1], [3]]"
    );
    assert_eq!(out(&mut s, "a.median().item()"), "2");
    assert_eq!(out(&mut s, "a.median(1)[1].tolist()"), "[0, 0]");
    assert!(
        s.eval_line("a.sort()[2]")
            .is_err_and(|e| e.to_string() == "index 2 out of range for a list of 2")
    );
    assert_eq!(
        out(&mut s, "a.gt(1).logical_and(a.lt(4)).tolist()"),
        "[[false, true], [true, false]]"
    );
    assert_eq!(
        out(&mut s, "a.gt(3).logical_or(a.eq(1)).logical_not().tolist()"),
        "[[false, true], [true, false]]"
    );
    assert_eq!(
        out(&mut s, "a.gt(2).logical_xor(a.gt(1)).sum().item()"),
        "1"
    );
    assert_eq!(
        out(&mut s, "(a - 2.5).round().tolist()"),
        "[[-2, -0], [0, 2]]"
    );
    assert_eq!(
        out(&mut s, "(a - 3).leaky_relu(negative_slope=0.5).tolist()"),
        "[[-1, -0.5], [0, 1]]"
    );
    assert_eq!(out(&mut s, "(a - 3).elu(2)[1].tolist()"), "[0, 1]");
    assert!(out(&mut s, "(a - 3).elu(2)[0, 1].item()").starts_with("-1.264"));
    assert_eq!(
        out(&mut s, "(a * 10).softplus(threshold=15).tolist()"),
        "[[10.000045776367188, 20], [30, 40]]"
    );
    assert_eq!(out(&mut s, "a.gt(3).any(dim=1).sum().item()"), "1");
    assert_eq!(out(&mut s, "a.all().sum().item()"), "1");
    assert_eq!(out(&mut s, "a.norm(p=1).item()"), "10");
    assert_eq!(out(&mut s, "a.logsumexp(0, keepdim=true).shape"), "[1, 2]");
    assert_eq!(
        out(&mut s, "a.dropout(0.5, training=false).tolist()"),
        "[[1, 2], [3, 4]]"
    );
    assert_eq!(out(&mut s, "a.dropout(p=1).sum().item()"), "0");
    let kept = out(&mut s, "ones(1000).dropout(0.25).ne(0).sum().item()");
    let kept: f64 = kept.parse().unwrap();
    assert!((650.0..850.0).contains(&kept), "{kept}");
    assert!(s.eval_line("a.dropout(2)").is_err());
}

#[test]
fn convolution_and_pooling_take_pytorch_arguments() {
    let mut s = new_repl();
    out(&mut s, "let x = ones(1, 1, 4, 4)");
    out(&mut s, "let w = ones(2, 1, 3, 3)");
    assert_eq!(out(&mut s, "x.conv2d(w, padding=1).shape"), "[1, 2, 4, 4]");
    assert_eq!(
        out(&mut s, "x.conv2d(w, padding=1)[0, 0, 0].tolist()"),
        "[4, 6, 6, 4]"
    );
    assert_eq!(
        out(&mut s, "x.conv2d(w, ones(2), 2, 1).shape"),
        "[1, 2, 2, 2]"
    );
    assert_eq!(
        out(&mut s, "x.conv2d(w, stride=[1, 2]).shape"),
        "[1, 2, 2, 1]"
    );
    assert_eq!(out(&mut s, "x.max_pool2d(2).shape"), "[1, 1, 2, 2]");
    assert_eq!(
        out(&mut s, "x.max_pool2d(3, stride=1, ceil_mode=true).shape"),
        "[1, 1, 2, 2]"
    );
    assert_eq!(
        out(
            &mut s,
            "x.avg_pool2d(2, padding=1, count_include_pad=false).sum().item()"
        ),
        "9"
    );
    assert_eq!(
        out(&mut s, "x.adaptive_avg_pool2d([1, 2]).shape"),
        "[1, 1, 1, 2]"
    );
    // Attention: a row of one key gets that key's value; a mask with is_causal is refused.
    s.eval_line("let q = ones([1, 2, 2])").unwrap();
    s.eval_line("let v = tensor([[[1.0, 2.0], [3.0, 4.0]]])")
        .unwrap();
    assert_eq!(
        out(
            &mut s,
            "q.scaled_dot_product_attention(q, v, is_causal=true)[0, 0].tolist()"
        ),
        "[1, 2]"
    );
    assert!(
        s.eval_line("q.scaled_dot_product_attention(q, v, ones([2, 2]), is_causal=true)")
            .is_err()
    );
    assert!(s.eval_line("x.conv2d()").is_err());
    assert!(s.eval_line("x.max_pool2d([1, 2, 3])").is_err());
    assert!(s.eval_line("x.conv2d(w, groups=2)").is_err());
    // PyTorch's CPU device has no index, and prints so.
    assert_eq!(out(&mut s, "x.device"), "\"cpu\"");
}

#[test]
fn errors_are_typed_and_the_repl_goes_on() {
    let mut s = new_repl();
    out(&mut s, "let a = randn(3, 4)");
    let err = |s: &mut Session, line: &str| s.eval_line(line).unwrap_err();
    let e = err(&mut s, "a.matmul(a)");
    assert!(
        matches!(
            e,
            ReplError::Tensor(crate::Error::ShapeMismatch { op: "matmul", .. })
        ),
        "{e}"
    );
    let e = err(&mut s, "b + 1");
    assert!(matches!(&e, ReplError::UnknownName { name } if name == "b"));
    assert_eq!(e.to_string(), "unknown name `b`");
    let e = err(&mut s, "a.sum(");
    assert!(matches!(e, ReplError::Parse { .. }), "{e}");
    assert_eq!(e.to_string(), "expected a value, found the end of the line");
    let e = err(&mut s, "a[7]");
    assert!(matches!(
        e,
        ReplError::IndexOutOfRange {
            index: 7,
            dim: Some(0),
            size: 3
        }
    ));
    assert_eq!(e.to_string(), "index 7 out of range for dim 0 of size 3");
    let e = err(&mut s, "a.sum(5)");
    assert!(
        matches!(
            e,
            ReplError::Tensor(crate::Error::InvalidDim { dim: 5, .. })
        ),
        "{e}"
    );
    let e = err(&mut s, "a.t(1)");
    assert!(matches!(
        e,
        ReplError::Arity {
            name: "t",
            got: 1,
            ..
        }
    ));
    assert_eq!(e.to_string(), "t: expected 0 arguments, got 1");
    let e = err(&mut s, "a.narrow(0, 1)");
    assert_eq!(e.to_string(), "narrow: expected 3 arguments, got 2");
    let e = err(&mut s, "a.clamp(1, 2, 3)");
    assert_eq!(e.to_string(), "clamp: expected 0 to 2 arguments, got 3");
    let e = err(&mut s, "a.sum(bogus=1)");
    assert!(matches!(e, ReplError::Argument { name: "sum", .. }));
    assert_eq!(e.to_string(), "sum: unknown argument `bogus`");
    let e = err(&mut s, "a.frobnicate()");
    assert_eq!(
        e.to_string(),
        "a tensor has no method `frobnicate` (try :help)"
    );
    let e = err(&mut s, "(1).exp()");
    assert!(matches!(e, ReplError::UnknownMethod { on: "a number", .. }));
    assert_eq!(e.to_string(), "a number has no method `exp`");
    assert_eq!(
        err(&mut s, "a.bogus").to_string(),
        "a tensor has no attribute `bogus`"
    );
    assert_eq!(
        err(&mut s, "a.T()").to_string(),
        "a tensor has no method `T` (try :help)"
    );
    assert_eq!(
        err(&mut s, "bogus(1)").to_string(),
        "unknown function `bogus` (try :help)"
    );
    assert_eq!(err(&mut s, "-\"x\"").to_string(), "cannot negate a string");
    assert_eq!(err(&mut s, "1 @ 2").to_string(), "@ needs tensors");
    let e = err(&mut s, "1 + $");
    assert!(matches!(e, ReplError::Lex { col: 5, .. }));
    assert_eq!(e.to_string(), "unexpected character `$` at column 5");
    let e = err(&mut s, ":bogus");
    assert!(matches!(&e, ReplError::UnknownCommand { command } if command == "bogus"));
    assert_eq!(e.to_string(), "unknown command `:bogus` (try :help)");
    let e = err(&mut s, ":trace save /nonexistent-dir/t.json");
    assert!(matches!(e, ReplError::Io { .. }), "{e}");
    assert!(
        e.to_string().starts_with("/nonexistent-dir/t.json: "),
        "{e}"
    );
    assert!(std::error::Error::source(&e).is_some());
    assert_eq!(out(&mut s, "a.shape"), "[3, 4]");
    assert_eq!(out(&mut s, "a.shape()"), "[3, 4]");
    assert_eq!(s.eval_line(":quit").unwrap(), Outcome::Quit);
}

#[test]
fn asynchronous_index_errors_surface_when_printed() {
    let mut s = new_repl();
    out(&mut s, "let e = randn(4, 2)");
    out(&mut s, "let i = tensor([1, 9])");
    let msg = s.eval_line("e.index_select(0, i)").unwrap_err().to_string();
    assert!(msg.contains("index_select") && msg.contains('9'), "{msg}");
    assert_eq!(
        out(&mut s, "e.index_select(0, tensor([3])).shape"),
        "[1, 2]"
    );
}

#[test]
fn autograd_and_commands() {
    let mut s = new_repl();
    out(&mut s, "let w = tensor([1., 2., 3.]).requires_grad_()");
    out(&mut s, "(w * w).sum().backward()");
    assert_eq!(out(&mut s, "w.grad.tolist()"), "[2, 4, 6]");
    // A second backward through one graph needs the first to retain it, as in PyTorch.
    out(&mut s, "let l = (w * w).sum()");
    out(&mut s, "l.backward(retain_graph=true)");
    out(&mut s, "l.backward()");
    assert_eq!(out(&mut s, "w.grad.tolist()"), "[6, 12, 18]");
    let err = |s: &mut Session, line: &str| s.eval_line(line).unwrap_err().to_string();
    assert!(err(&mut s, "l.backward()").contains("freed"));
    assert!(err(&mut s, "l.backward(true, retain_graph=true)").contains("twice"));
    assert!(out(&mut s, ":stats").contains("instructions inserted"));
    assert!(out(&mut s, ":mem").contains("peak in use"));
    assert_eq!(out(&mut s, ":trace on"), "tracing on");
    out(&mut s, "randn(8, 8).exp().sum()");
    let path = std::env::temp_dir().join(format!("eddy-repl-{}.json", std::process::id()));
    let msg = out(&mut s, &format!(":trace save {}", path.display()));
    assert!(msg.starts_with("wrote "), "{msg}");
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains("\"exp\""), "{text}");
    std::fs::remove_file(&path).unwrap();
    assert!(out(&mut s, ":vars").contains("w = tensor [3] f32"));
}

/// PyTorch's forms typed as a PyTorch user types them, with PyTorch 2.15's answers.
#[test]
fn pytorch_forms_give_pytorchs_answers() {
    let mut s = new_repl();
    let cases = [
        ("7 // 2", "3"),
        ("-7 // 2", "-4"),
        ("7 % -3", "-2"),
        ("5.5 % 2", "1.5"),
        ("tensor([7, -7]) // 2", "tensor([ 3, -4], dtype=i64)"),
        ("tensor([7, -7]) % 3", "tensor([1, 2], dtype=i64)"),
        ("tensor([7, -7]) % -3", "tensor([-2, -1], dtype=i64)"),
        (
            "tensor([7.5, -7.5]) % 2",
            "tensor([1.5000, 0.5000], dtype=f32)",
        ),
        (
            "tensor([7, -7]).div(2, rounding_mode=\"floor\")",
            "tensor([ 3, -4], dtype=i64)",
        ),
        (
            "tensor([7, -7]).div(2, rounding_mode=\"trunc\")",
            "tensor([ 3, -3], dtype=i64)",
        ),
        ("arange(10)[::2]", "tensor([0, 2, 4, 6, 8], dtype=i64)"),
        ("arange(10)[1:8:3]", "tensor([1, 4, 7], dtype=i64)"),
        ("zeros(1, 3, 1).squeeze().shape", "[3]"),
        (
            "tensor([1.0, 5.0, 3.0]).topk(2, 0, false)",
            "[tensor([1.0000, 3.0000], dtype=f32), tensor([0, 2], dtype=i64)]",
        ),
        (
            "tensor([[3.0, -4.0], [1.0, 2.0]]).norm(1)",
            "tensor(10.0000, dtype=f32)",
        ),
        (
            "tensor([[1, 2], [3, 4]]).select(1, -1)",
            "tensor([2, 4], dtype=i64)",
        ),
        ("tensor([[1, 2], [3, 4]]).narrow(1, -1, 1).shape", "[2, 1]"),
        ("tensor([[1], [2]]).expand(-1, 3).shape", "[2, 3]"),
        ("tensor([300]).to(u8)", "tensor([44], dtype=u8)"),
        ("(tensor([1, 2], dtype=i32) + tensor(5)).dtype", "i32"),
        ("tensor([true, false]) + 1", "tensor([2, 1], dtype=i64)"),
        ("tensor([]).median()", "tensor(NaN, dtype=f32)"),
    ];
    for (line, want) in cases {
        assert_eq!(out(&mut s, line), want, "{line}");
    }
    // An index out of range is reported as typed.
    let e = s
        .eval_line("tensor([1, 2, 3])[-4]")
        .unwrap_err()
        .to_string();
    assert!(e.contains("index -4"), "{e}");
    let e = s.eval_line("arange(4)[::0]").unwrap_err().to_string();
    assert!(e.contains("step must be positive"), "{e}");
    assert!(s.eval_line("7 // 0").is_err());
}
