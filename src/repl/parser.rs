//! The syntax tree and the parser: a statement per line, expressions by precedence climbing.

use super::MAX_DEPTH;
use super::error::{R, ReplError};
use super::lexer::{Tok, lex};

/// Binary operators.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Op {
    Add,
    Sub,
    Mul,
    Div,
    FloorDiv,
    Rem,
    Pow,
    Matmul,
    Max,
    Min,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

/// A call's arguments: each with its keyword, if named.
pub(super) type CallArgs = Vec<(Option<String>, Expr)>;

/// An expression.
#[derive(Clone, Debug)]
pub(super) enum Expr {
    /// A number literal; `true` if written as an integer.
    Num(f64, bool),
    /// An integer literal beyond ±2^53.
    Int(i64),
    Str(String),
    Var(String),
    List(Vec<Expr>),
    Neg(Box<Expr>),
    Bin(Op, Box<Expr>, Box<Expr>),
    /// `name(args)`.
    Call(String, CallArgs),
    /// `recv.name(args)`.
    Method(Box<Expr>, String, CallArgs),
    /// `recv.name`.
    Attr(Box<Expr>, String),
    /// `recv[items]`.
    Index(Box<Expr>, Vec<IndexItem>),
}

/// One item of `a[..]`.
#[derive(Clone, Debug)]
pub(super) enum IndexItem {
    /// `:`
    All,
    /// `i`: selects.
    At(Expr),
    /// `lo:hi` or `lo:hi:step`, each part optional: narrows, then steps.
    Range(Option<Expr>, Option<Expr>, Option<Expr>),
    /// `...`: as many `:` as the other items leave dims.
    Ellipsis,
}

/// A line.
pub(super) enum Stmt {
    /// `let name = expr` or `name = expr`.
    Let(String, Expr),
    Expr(Expr),
}

/// Parses one line (not a `:command`).
pub(super) fn parse(line: &str) -> R<Stmt> {
    let mut p = Parser {
        toks: lex(line)?,
        pos: 0,
        nesting: 0,
    };
    let stmt = p.statement()?;
    p.expect_end()?;
    Ok(stmt)
}

/// A parsed expression and the depth of its tree (a leaf is 1).
type Node = (Expr, usize);

/// The depth of a node over children at most `below` deep, or the error past [`MAX_DEPTH`]:
/// checked before the node is built, so no tree deeper than that exists, even the partial one of
/// a refused line (whose dropping recurses too).
fn deeper(below: usize) -> R<usize> {
    if below >= MAX_DEPTH {
        return Err(ReplError::TooDeep);
    }
    Ok(below + 1)
}

struct Parser {
    toks: Vec<Tok>,
    pos: usize,
    /// How many [`unary`](Self::unary) calls are open: every nesting of the grammar (brackets,
    /// arguments, unary signs, `**`) passes there, so this bounds the parser's own recursion,
    /// also where no node is built (`((((1))))`, `+ + 1`).
    nesting: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.pos)
    }
    fn is(&self, sym: &str) -> bool {
        matches!(self.peek(), Some(Tok::Sym(s)) if *s == sym)
    }
    fn eat(&mut self, sym: &str) -> bool {
        if self.is(sym) {
            self.pos += 1;
            true
        } else {
            false
        }
    }
    fn expect(&mut self, sym: &str) -> R<()> {
        if self.eat(sym) {
            Ok(())
        } else {
            Err(ReplError::parse(format!(
                "expected `{sym}`, found {}",
                self.found()
            )))
        }
    }
    fn found(&self) -> String {
        match self.peek() {
            None => "the end of the line".into(),
            Some(Tok::Ident(s)) => format!("`{s}`"),
            Some(Tok::Num(v, _)) => format!("`{v}`"),
            Some(Tok::Int(i)) => format!("`{i}`"),
            Some(Tok::Str(s)) => format!("{s:?}"),
            Some(Tok::Sym(s)) => format!("`{s}`"),
        }
    }
    fn expect_end(&self) -> R<()> {
        match self.peek() {
            None => Ok(()),
            Some(_) => Err(ReplError::parse(format!("unexpected {}", self.found()))),
        }
    }
    fn ident(&mut self) -> R<String> {
        match self.peek() {
            Some(Tok::Ident(s)) => {
                let s = s.clone();
                self.pos += 1;
                Ok(s)
            }
            _ => Err(ReplError::parse(format!(
                "expected a name, found {}",
                self.found()
            ))),
        }
    }
    fn statement(&mut self) -> R<Stmt> {
        if matches!(self.peek(), Some(Tok::Ident(s)) if s == "let") {
            self.pos += 1;
            let name = self.ident()?;
            self.expect("=")?;
            return Ok(Stmt::Let(name, self.expr()?.0));
        }
        // `a = expr` also binds.
        if let (Some(Tok::Ident(name)), Some(Tok::Sym("="))) = (self.toks.first(), self.toks.get(1))
        {
            let name = name.clone();
            self.pos = 2;
            return Ok(Stmt::Let(name, self.expr()?.0));
        }
        Ok(Stmt::Expr(self.expr()?.0))
    }
    fn expr(&mut self) -> R<Node> {
        let (a, da) = self.additive()?;
        let op = match self.peek() {
            Some(Tok::Sym("==")) => Op::Eq,
            Some(Tok::Sym("!=")) => Op::Ne,
            Some(Tok::Sym("<")) => Op::Lt,
            Some(Tok::Sym("<=")) => Op::Le,
            Some(Tok::Sym(">")) => Op::Gt,
            Some(Tok::Sym(">=")) => Op::Ge,
            _ => return Ok((a, da)),
        };
        self.pos += 1;
        let (b, db) = self.additive()?;
        let d = deeper(da.max(db))?;
        Ok((Expr::Bin(op, Box::new(a), Box::new(b)), d))
    }
    fn additive(&mut self) -> R<Node> {
        // The loop builds a left-nested tree: `1+1+…+1` is as deep as it is long.
        let (mut a, mut da) = self.term()?;
        loop {
            let op = if self.eat("+") {
                Op::Add
            } else if self.eat("-") {
                Op::Sub
            } else {
                return Ok((a, da));
            };
            let (b, db) = self.term()?;
            da = deeper(da.max(db))?;
            a = Expr::Bin(op, Box::new(a), Box::new(b));
        }
    }
    fn term(&mut self) -> R<Node> {
        let (mut a, mut da) = self.unary()?;
        loop {
            let op = if self.eat("*") {
                Op::Mul
            } else if self.eat("//") {
                Op::FloorDiv
            } else if self.eat("/") {
                Op::Div
            } else if self.eat("%") {
                Op::Rem
            } else if self.eat("@") {
                Op::Matmul
            } else {
                return Ok((a, da));
            };
            let (b, db) = self.unary()?;
            da = deeper(da.max(db))?;
            a = Expr::Bin(op, Box::new(a), Box::new(b));
        }
    }
    /// Counts itself in [`nesting`](Self::nesting) around [`signed`](Self::signed).
    fn unary(&mut self) -> R<Node> {
        if self.nesting >= MAX_DEPTH {
            return Err(ReplError::TooDeep);
        }
        self.nesting += 1;
        let r = self.signed();
        self.nesting -= 1;
        r
    }
    fn signed(&mut self) -> R<Node> {
        if self.eat("-") {
            let (x, d) = self.unary()?;
            return Ok((Expr::Neg(Box::new(x)), deeper(d)?));
        }
        if self.eat("+") {
            return self.unary();
        }
        let (base, db) = self.postfix()?;
        if self.eat("**") {
            // Right-associative and tighter than unary minus on its left: -2**2 == -4.
            let (exp, de) = self.unary()?;
            let d = deeper(db.max(de))?;
            return Ok((Expr::Bin(Op::Pow, Box::new(base), Box::new(exp)), d));
        }
        Ok((base, db))
    }
    fn postfix(&mut self) -> R<Node> {
        let (mut e, mut d) = self.primary()?;
        loop {
            if self.eat(".") {
                let name = self.ident()?;
                if self.eat("(") {
                    let (args, da) = self.args(")")?;
                    d = deeper(d.max(da))?;
                    e = Expr::Method(Box::new(e), name, args);
                } else {
                    d = deeper(d)?;
                    e = Expr::Attr(Box::new(e), name);
                }
            } else if self.eat("[") {
                let (mut items, mut di) = (Vec::new(), 0);
                loop {
                    let (item, depth) = self.index_item()?;
                    items.push(item);
                    di = di.max(depth);
                    if !self.eat(",") {
                        break;
                    }
                }
                self.expect("]")?;
                d = deeper(d.max(di))?;
                e = Expr::Index(Box::new(e), items);
            } else {
                return Ok((e, d));
            }
        }
    }
    /// An index item and the depth of its deepest bound (0 for `:`).
    fn index_item(&mut self) -> R<(IndexItem, usize)> {
        if self.eat("...") {
            return Ok((IndexItem::Ellipsis, 0));
        }
        let lo = if self.is(":") {
            None
        } else {
            Some(self.expr()?)
        };
        if !self.eat(":") {
            return lo
                .map(|(e, d)| (IndexItem::At(e), d))
                .ok_or_else(|| ReplError::parse("empty index"));
        }
        let bound = |p: &mut Self| -> R<Option<(Expr, usize)>> {
            if p.is(",") || p.is("]") || p.is(":") {
                Ok(None)
            } else {
                p.expr().map(Some)
            }
        };
        let hi = bound(self)?;
        let step = if self.eat(":") { bound(self)? } else { None };
        let d = [&lo, &hi, &step]
            .iter()
            .map(|n| n.as_ref().map_or(0, |n| n.1))
            .max()
            .unwrap_or(0);
        let item = match (lo, hi, step) {
            (None, None, None) => IndexItem::All,
            (lo, hi, step) => IndexItem::Range(lo.map(|n| n.0), hi.map(|n| n.0), step.map(|n| n.0)),
        };
        Ok((item, d))
    }
    /// Arguments up to `close`, and the depth of the deepest (0 for none).
    fn args(&mut self, close: &str) -> R<(CallArgs, usize)> {
        let (mut out, mut depth) = (Vec::new(), 0);
        if self.eat(close) {
            return Ok((out, depth));
        }
        loop {
            let named = match (self.peek(), self.toks.get(self.pos + 1)) {
                (Some(Tok::Ident(n)), Some(Tok::Sym("="))) => Some(n.clone()),
                _ => None,
            };
            if named.is_some() {
                self.pos += 2;
            }
            let (e, d) = self.expr()?;
            depth = depth.max(d);
            out.push((named, e));
            if self.eat(close) {
                return Ok((out, depth));
            }
            self.expect(",")?;
            if self.eat(close) {
                return Ok((out, depth));
            }
        }
    }
    fn primary(&mut self) -> R<Node> {
        match self.peek().cloned() {
            Some(Tok::Num(v, int)) => {
                self.pos += 1;
                Ok((Expr::Num(v, int), 1))
            }
            Some(Tok::Int(i)) => {
                self.pos += 1;
                Ok((Expr::Int(i), 1))
            }
            Some(Tok::Str(s)) => {
                self.pos += 1;
                Ok((Expr::Str(s), 1))
            }
            Some(Tok::Ident(name)) => {
                self.pos += 1;
                if self.eat("(") {
                    let (args, d) = self.args(")")?;
                    Ok((Expr::Call(name, args), deeper(d)?))
                } else {
                    Ok((Expr::Var(name), 1))
                }
            }
            Some(Tok::Sym("(")) => {
                self.pos += 1;
                let e = self.expr()?;
                self.expect(")")?;
                Ok(e)
            }
            Some(Tok::Sym("[")) => {
                self.pos += 1;
                let (items, d) = self.args("]")?;
                if items.iter().any(|(n, _)| n.is_some()) {
                    return Err(ReplError::parse("a list cannot have named items"));
                }
                let list = Expr::List(items.into_iter().map(|(_, e)| e).collect());
                Ok((list, deeper(d)?))
            }
            _ => Err(ReplError::parse(format!(
                "expected a value, found {}",
                self.found()
            ))),
        }
    }
}
