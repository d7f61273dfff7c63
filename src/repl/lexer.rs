//! Tokens and the lexer.

use super::error::{R, ReplError};

/// A token.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Tok {
    /// A name: a variable, function, method, attribute, keyword or dtype.
    Ident(String),
    /// A number; `true` if it was written as an integer.
    Num(f64, bool),
    /// An integer literal beyond ±2^53 that `i64` holds (see [`Value::Int`](super::Value::Int)).
    Int(i64),
    /// A quoted string, without its quotes.
    Str(String),
    /// An operator or punctuation.
    Sym(&'static str),
}

/// Operators and punctuation, each before any that is a prefix of it.
const SYMS: [&str; 23] = [
    "...", "**", "==", "!=", "<=", ">=", "//", "+", "-", "*", "/", "%", "@", "<", ">", "(", ")",
    "[", "]", ",", ".", "=", ":",
];

/// The tokens of `s`; `#` starts a comment.
pub(super) fn lex(s: &str) -> R<Vec<Tok>> {
    let lex_err = |at: usize, message: String| ReplError::Lex {
        col: at + 1,
        message,
    };
    let b = s.as_bytes();
    let mut i = 0;
    let mut out = Vec::new();
    while i < b.len() {
        let c = b[i] as char;
        if c.is_whitespace() {
            i += 1;
        } else if c == '#' {
            break;
        } else if c.is_ascii_digit() || (c == '.' && b.get(i + 1).is_some_and(u8::is_ascii_digit)) {
            let st = i;
            let mut int = true;
            while i < b.len() && (b[i].is_ascii_digit() || b[i] == b'.' || b[i] == b'_') {
                if b[i] == b'.' {
                    // `1.relu()` is not a thing; `1.5` and `1.` are numbers.
                    if b.get(i + 1).is_some_and(|c| c.is_ascii_alphabetic()) {
                        break;
                    }
                    int = false;
                }
                i += 1;
            }
            if i < b.len() && (b[i] == b'e' || b[i] == b'E') {
                let mut j = i + 1;
                if j < b.len() && (b[j] == b'+' || b[j] == b'-') {
                    j += 1;
                }
                if j < b.len() && b[j].is_ascii_digit() {
                    int = false;
                    i = j;
                    while i < b.len() && b[i].is_ascii_digit() {
                        i += 1;
                    }
                }
            }
            let text: String = s[st..i].chars().filter(|&c| c != '_').collect();
            match text.parse::<i64>() {
                Ok(v) if int && v.unsigned_abs() > 1 << 53 => out.push(Tok::Int(v)),
                _ => {
                    let v: f64 = text
                        .parse()
                        .map_err(|_| lex_err(st, format!("bad number `{}`", &s[st..i])))?;
                    out.push(Tok::Num(v, int));
                }
            }
        } else if c.is_ascii_alphabetic() || c == '_' {
            let st = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            out.push(Tok::Ident(s[st..i].to_string()));
        } else if c == '"' || c == '\'' {
            let end = s[i + 1..]
                .find(c)
                .ok_or_else(|| lex_err(i, "unterminated string".into()))?;
            out.push(Tok::Str(s[i + 1..i + 1 + end].to_string()));
            i += end + 2;
        } else if let Some(sym) = SYMS.iter().find(|p| s[i..].starts_with(**p)) {
            out.push(Tok::Sym(sym));
            i += sym.len();
        } else {
            let ch = s[i..].chars().next().unwrap_or('?');
            return Err(lex_err(i, format!("unexpected character `{ch}`")));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_names_strings_and_symbols() {
        assert_eq!(
            lex("a.b(1_000, 2.5e1) ** 'x' # no").unwrap(),
            [
                Tok::Ident("a".into()),
                Tok::Sym("."),
                Tok::Ident("b".into()),
                Tok::Sym("("),
                Tok::Num(1000.0, true),
                Tok::Sym(","),
                Tok::Num(25.0, false),
                Tok::Sym(")"),
                Tok::Sym("**"),
                Tok::Str("x".into()),
            ]
        );
        assert_eq!(
            lex("9007199254740993").unwrap(),
            [Tok::Int(9007199254740993)]
        );
    }

    #[test]
    fn errors_name_their_column() {
        let msg = |s: &str| lex(s).unwrap_err().to_string();
        assert_eq!(msg("1 + $"), "unexpected character `$` at column 5");
        assert_eq!(msg("x + 'ab"), "unterminated string at column 5");
        assert_eq!(msg("1.2.3"), "bad number `1.2.3` at column 1");
    }
}
