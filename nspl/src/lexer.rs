//! Turns NSPL text into tokens with byte spans.
//!
//! The lexer never fails: text it cannot read becomes an [`TokenKind::Error`] token that the
//! parser reports where it meets it, so one stray character yields one positioned error and
//! the rest of the script is still checked. Comments are kept aside for the formatter.

use crate::span::Span;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Punct {
    LParen,
    RParen,
    LBrace,
    RBrace,
    LBracket,
    RBracket,
    Comma,
    Semicolon,
    Dot,
    Eq,
    NotEq,
    LtGt,
    Lt,
    LtEq,
    Gt,
    GtEq,
    Plus,
    Minus,
    Star,
    Slash,
    Percent,
    Concat,
}

impl Punct {
    pub fn as_str(self) -> &'static str {
        match self {
            Punct::LParen => "(",
            Punct::RParen => ")",
            Punct::LBrace => "{",
            Punct::RBrace => "}",
            Punct::LBracket => "[",
            Punct::RBracket => "]",
            Punct::Comma => ",",
            Punct::Semicolon => ";",
            Punct::Dot => ".",
            Punct::Eq => "=",
            Punct::NotEq => "!=",
            Punct::LtGt => "<>",
            Punct::Lt => "<",
            Punct::LtEq => "<=",
            Punct::Gt => ">",
            Punct::GtEq => ">=",
            Punct::Plus => "+",
            Punct::Minus => "-",
            Punct::Star => "*",
            Punct::Slash => "/",
            Punct::Percent => "%",
            Punct::Concat => "||",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum TokenKind {
    /// A bare word: a keyword or an identifier, decided by the parser.
    Word,
    /// Digits, optionally with a fraction or exponent (`12`, `1.5`, `2e3`).
    Number,
    /// A number immediately followed by a unit (`250ms`, `8MiB`); `unit_at` is the unit's offset.
    Quantity {
        unit_at: u32,
    },
    /// A quoted string with its quotes removed and doubled quotes unescaped.
    Str(String),
    Punct(Punct),
    /// Text the lexer could not read, with the reason.
    Error(String),
    Eof,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Token {
    pub kind: TokenKind,
    pub span: Span,
}

/// A `-- line` or `/* block */` comment, kept for the formatter.
#[derive(Debug, Clone, PartialEq)]
pub struct Comment {
    pub span: Span,
}

pub struct Lexed {
    pub tokens: Vec<Token>,
    pub comments: Vec<Comment>,
}

/// Tokenizes `src`; the last token is always [`TokenKind::Eof`].
pub fn lex(src: &str) -> Lexed {
    let bytes = src.as_bytes();
    let mut tokens = Vec::with_capacity(src.len() / 4 + 1);
    let mut comments = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let start = i;
        let b = bytes[i];
        let kind = match b {
            b' ' | b'\t' | b'\r' | b'\n' => {
                i += 1;
                continue;
            }
            b'-' if bytes.get(i + 1) == Some(&b'-') => {
                while i < bytes.len() && bytes[i] != b'\n' {
                    i += 1;
                }
                comments.push(Comment {
                    span: Span::new(start, i),
                });
                continue;
            }
            b'/' if bytes.get(i + 1) == Some(&b'*') => match src[i + 2..].find("*/") {
                Some(end) => {
                    i += 2 + end + 2;
                    comments.push(Comment {
                        span: Span::new(start, i),
                    });
                    continue;
                }
                None => {
                    i = bytes.len();
                    TokenKind::Error("unterminated block comment".into())
                }
            },
            b'a'..=b'z' | b'A'..=b'Z' | b'_' => {
                while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                    i += 1;
                }
                TokenKind::Word
            }
            b'0'..=b'9' => lex_number(bytes, &mut i),
            b'\'' | b'"' => lex_string(src, &mut i),
            _ => match lex_punct(bytes, i) {
                Some((p, len)) => {
                    i += len;
                    TokenKind::Punct(p)
                }
                None => {
                    let ch = src[i..].chars().next().unwrap_or('\u{fffd}');
                    i += ch.len_utf8();
                    TokenKind::Error(format!("unexpected character `{}`", ch.escape_debug()))
                }
            },
        };
        tokens.push(Token {
            kind,
            span: Span::new(start, i),
        });
    }
    tokens.push(Token {
        kind: TokenKind::Eof,
        span: Span::new(bytes.len(), bytes.len()),
    });
    Lexed { tokens, comments }
}

fn lex_number(bytes: &[u8], i: &mut usize) -> TokenKind {
    let digits = |i: &mut usize| {
        while *i < bytes.len() && bytes[*i].is_ascii_digit() {
            *i += 1;
        }
    };
    digits(i);
    if *i + 1 < bytes.len() && bytes[*i] == b'.' && bytes[*i + 1].is_ascii_digit() {
        *i += 1;
        digits(i);
    }
    if *i < bytes.len() && (bytes[*i] == b'e' || bytes[*i] == b'E') {
        let mut j = *i + 1;
        if j < bytes.len() && (bytes[j] == b'+' || bytes[j] == b'-') {
            j += 1;
        }
        if j < bytes.len() && bytes[j].is_ascii_digit() {
            *i = j;
            digits(i);
        }
    }
    if *i < bytes.len() && (bytes[*i].is_ascii_alphabetic() || bytes[*i] == b'_') {
        let unit_at = *i as u32;
        while *i < bytes.len() && (bytes[*i].is_ascii_alphanumeric() || bytes[*i] == b'_') {
            *i += 1;
        }
        return TokenKind::Quantity { unit_at };
    }
    TokenKind::Number
}

fn lex_string(src: &str, i: &mut usize) -> TokenKind {
    let bytes = src.as_bytes();
    let quote = bytes[*i];
    *i += 1;
    let mut value = String::new();
    let mut run_start = *i;
    loop {
        match bytes.get(*i) {
            None => {
                return TokenKind::Error(format!(
                    "unterminated string: missing closing {}",
                    quote as char
                ))
            }
            Some(&b) if b == quote => {
                value.push_str(&src[run_start..*i]);
                *i += 1;
                if bytes.get(*i) == Some(&quote) {
                    // A doubled quote stands for one quote character.
                    run_start = *i;
                    *i += 1;
                } else {
                    return TokenKind::Str(value);
                }
            }
            Some(_) => *i += 1,
        }
    }
}

fn lex_punct(bytes: &[u8], i: usize) -> Option<(Punct, usize)> {
    let next = bytes.get(i + 1).copied();
    Some(match (bytes[i], next) {
        (b'!', Some(b'=')) => (Punct::NotEq, 2),
        (b'<', Some(b'>')) => (Punct::LtGt, 2),
        (b'<', Some(b'=')) => (Punct::LtEq, 2),
        (b'>', Some(b'=')) => (Punct::GtEq, 2),
        (b'|', Some(b'|')) => (Punct::Concat, 2),
        (b'(', _) => (Punct::LParen, 1),
        (b')', _) => (Punct::RParen, 1),
        (b'{', _) => (Punct::LBrace, 1),
        (b'}', _) => (Punct::RBrace, 1),
        (b'[', _) => (Punct::LBracket, 1),
        (b']', _) => (Punct::RBracket, 1),
        (b',', _) => (Punct::Comma, 1),
        (b';', _) => (Punct::Semicolon, 1),
        (b'.', _) => (Punct::Dot, 1),
        (b'=', _) => (Punct::Eq, 1),
        (b'<', _) => (Punct::Lt, 1),
        (b'>', _) => (Punct::Gt, 1),
        (b'+', _) => (Punct::Plus, 1),
        (b'-', _) => (Punct::Minus, 1),
        (b'*', _) => (Punct::Star, 1),
        (b'/', _) => (Punct::Slash, 1),
        (b'%', _) => (Punct::Percent, 1),
        _ => return None,
    })
}
