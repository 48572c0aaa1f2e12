//! The recursive-descent parser: token cursor, expectation tracking and the shared clause
//! parsers every statement family uses.
//!
//! Every `at_*`/`eat_*` probe records what it looked for at the current token, so when no
//! alternative matches, the error names exactly the alternatives the grammar offered there
//! (and completion offers the same set). Recursion is bounded by [`MAX_NESTING_DEPTH`], so no
//! input can overflow the stack.

pub mod catalog;
pub mod emitter;
pub mod expr;
pub mod ingestor;
pub mod processor;
pub mod route;
pub mod statement;

use crate::ast::{ByteSize, ConfigMap, ConfigValue, Duration, Ident, ResourceVersion, TypeName};
use crate::error::{Expected, NameKind, ParseError};
use crate::lexer::{Punct, Token, TokenKind};
use crate::span::Span;

pub type PResult<T> = Result<T, ParseError>;

/// The deepest nesting of parentheses, calls and conditionals an expression may have.
pub const MAX_NESTING_DEPTH: u32 = 128;

/// At most this many alternatives are listed in an error message.
const MAX_LISTED_EXPECTATIONS: usize = 12;

pub struct Parser<'a> {
    src: &'a str,
    tokens: Vec<Token>,
    pos: usize,
    depth: u32,
    expected: Vec<Expected>,
    expected_at: usize,
}

impl<'a> Parser<'a> {
    pub fn new(src: &'a str, tokens: Vec<Token>) -> Parser<'a> {
        assert!(
            matches!(tokens.last().map(|t| &t.kind), Some(TokenKind::Eof)),
            "token stream must end with Eof"
        );
        Parser {
            src,
            tokens,
            pos: 0,
            depth: 0,
            expected: Vec::new(),
            expected_at: usize::MAX,
        }
    }

    // ----- cursor -----

    pub fn peek(&self) -> &Token {
        self.peek_at(0)
    }

    pub fn peek_at(&self, n: usize) -> &Token {
        let last = self.tokens.len() - 1;
        &self.tokens[(self.pos + n).min(last)]
    }

    pub fn at_end(&self) -> bool {
        matches!(self.peek().kind, TokenKind::Eof)
    }

    /// The source text of a token.
    pub fn text(&self, token: &Token) -> &'a str {
        &self.src[token.span.start as usize..token.span.end as usize]
    }

    /// The span of the current token.
    pub fn span(&self) -> Span {
        self.peek().span
    }

    /// The span of the token just consumed.
    pub fn prev_span(&self) -> Span {
        self.tokens[self.pos.saturating_sub(1)].span
    }

    pub fn advance(&mut self) -> Token {
        let token = self.peek().clone();
        if !matches!(token.kind, TokenKind::Eof) {
            self.pos += 1;
        }
        token
    }

    /// The current token index, for backtracking with [`Parser::reset`].
    pub fn mark(&self) -> usize {
        self.pos
    }

    pub fn reset(&mut self, mark: usize) {
        self.pos = mark;
    }

    // ----- expectations and errors -----

    /// Records that `what` would have been accepted at the current token.
    pub fn note(&mut self, what: Expected) {
        if self.expected_at != self.pos {
            self.expected.clear();
            self.expected_at = self.pos;
        }
        if !self.expected.contains(&what) {
            self.expected.push(what);
        }
    }

    /// An error at the current token: `expected <alternatives>, found <token>`.
    pub fn unexpected(&mut self) -> ParseError {
        let expected = if self.expected_at == self.pos {
            self.expected.clone()
        } else {
            Vec::new()
        };
        let token = self.peek().clone();
        if let TokenKind::Error(reason) = &token.kind {
            return ParseError::new(token.span, reason.clone());
        }
        let found = self.describe(&token);
        let mut listed: Vec<String> = expected
            .iter()
            .take(MAX_LISTED_EXPECTATIONS)
            .map(Expected::describe)
            .collect();
        if expected.len() > MAX_LISTED_EXPECTATIONS {
            listed.push(format!("{} more", expected.len() - MAX_LISTED_EXPECTATIONS));
        }
        let mut message = match listed.len() {
            0 => format!("unexpected {found}"),
            1 => format!("expected {}, found {found}", listed[0]),
            _ => format!("expected one of {}, found {found}", listed.join(", ")),
        };
        if let TokenKind::Word = token.kind {
            if let Some(suggestion) = suggest(self.text(&token), &expected) {
                message.push_str(&format!(" (did you mean `{suggestion}`?)"));
            }
        }
        ParseError {
            span: token.span,
            message,
            expected,
            at_end: matches!(token.kind, TokenKind::Eof),
        }
    }

    /// An error at `span` that is not about the next token.
    pub fn error_at(&self, span: Span, message: impl Into<String>) -> ParseError {
        ParseError::new(span, message)
    }

    fn describe(&self, token: &Token) -> String {
        match &token.kind {
            TokenKind::Eof => "end of input".into(),
            TokenKind::Str(s) => format!("string '{}'", truncate(s, 40)),
            _ => format!("`{}`", truncate(self.text(token), 40)),
        }
    }

    /// Runs `f` one nesting level deeper, refusing input nested beyond [`MAX_NESTING_DEPTH`].
    pub fn nested<T>(&mut self, f: impl FnOnce(&mut Self) -> PResult<T>) -> PResult<T> {
        if self.depth >= MAX_NESTING_DEPTH {
            return Err(ParseError::new(
                self.span(),
                format!("expression nested too deeply: the limit is {MAX_NESTING_DEPTH} levels"),
            ));
        }
        self.depth += 1;
        let result = f(self);
        self.depth -= 1;
        result
    }

    // ----- keywords -----

    /// Whether the token `n` ahead is the keyword `kw` (no expectation recorded).
    pub fn is_keyword_at(&self, n: usize, kw: &str) -> bool {
        let token = self.peek_at(n);
        matches!(token.kind, TokenKind::Word) && self.text(token).eq_ignore_ascii_case(kw)
    }

    pub fn at_keyword(&mut self, kw: &'static str) -> bool {
        self.note(Expected::Keyword(kw));
        self.is_keyword_at(0, kw)
    }

    pub fn eat_keyword(&mut self, kw: &'static str) -> bool {
        if self.at_keyword(kw) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    /// Whether the next tokens are exactly `kws` (records the first as expected).
    pub fn at_keywords(&mut self, kws: &[&'static str]) -> bool {
        self.note(Expected::Keyword(kws[0]));
        kws.iter()
            .enumerate()
            .all(|(i, kw)| self.is_keyword_at(i, kw))
    }

    /// Consumes `kws` when all of them come next; otherwise consumes nothing.
    pub fn eat_keywords(&mut self, kws: &[&'static str]) -> bool {
        if self.at_keywords(kws) {
            self.pos += kws.len();
            true
        } else {
            false
        }
    }

    pub fn expect_keyword(&mut self, kw: &'static str) -> PResult<Span> {
        if self.eat_keyword(kw) {
            Ok(self.prev_span())
        } else {
            Err(self.unexpected())
        }
    }

    /// Expects each keyword in turn, failing at the first that is missing.
    pub fn expect_keywords(&mut self, kws: &[&'static str]) -> PResult<Span> {
        let start = self.span();
        for kw in kws {
            self.expect_keyword(kw)?;
        }
        Ok(start.to(self.prev_span()))
    }

    /// Consumes whichever of `choices` comes next and returns it.
    pub fn expect_one_of(&mut self, choices: &[&'static str]) -> PResult<&'static str> {
        for choice in choices {
            if self.eat_keyword(choice) {
                return Ok(choice);
            }
        }
        Err(self.unexpected())
    }

    /// Records a several-keyword item (e.g. a head) as one expectation.
    pub fn note_phrase(&mut self, phrase: &'static str) {
        self.note(Expected::Phrase(phrase));
    }

    // ----- punctuation -----

    pub fn at_punct(&mut self, p: Punct) -> bool {
        self.note(Expected::Punct(p));
        self.peek().kind == TokenKind::Punct(p)
    }

    pub fn eat_punct(&mut self, p: Punct) -> bool {
        if self.at_punct(p) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    pub fn expect_punct(&mut self, p: Punct) -> PResult<Span> {
        if self.eat_punct(p) {
            Ok(self.prev_span())
        } else {
            Err(self.unexpected())
        }
    }

    // ----- names and literals -----

    /// A lower-case identifier `[a-z_][a-z0-9_]*` of the given kind.
    pub fn ident(&mut self, kind: NameKind) -> PResult<Ident> {
        self.note(Expected::Name(kind));
        let token = self.peek().clone();
        if token.kind != TokenKind::Word {
            return Err(self.unexpected());
        }
        let text = self.text(&token);
        if text.bytes().any(|b| b.is_ascii_uppercase()) {
            let what = Expected::Name(kind).describe();
            let message = if text.bytes().any(|b| b.is_ascii_lowercase()) {
                format!(
                    "expected {what}, found `{text}`: names are lower-case, write `{}`",
                    text.to_ascii_lowercase()
                )
            } else {
                format!("expected {what}, found keyword `{text}`")
            };
            return Err(ParseError {
                span: token.span,
                message,
                expected: vec![Expected::Name(kind)],
                at_end: false,
            });
        }
        self.pos += 1;
        Ok(Ident {
            name: text.to_string(),
            span: token.span,
        })
    }

    /// Whether the next token could be an identifier (a word), without recording anything.
    pub fn at_word(&self) -> bool {
        self.peek().kind == TokenKind::Word
    }

    /// Comma-separated identifiers.
    pub fn ident_list(&mut self, kind: NameKind) -> PResult<Vec<Ident>> {
        self.comma_list(|p| p.ident(kind))
    }

    pub fn at_string(&mut self) -> bool {
        self.note(Expected::Thing("a string"));
        matches!(self.peek().kind, TokenKind::Str(_))
    }

    /// A quoted string literal (`'…'` or `"…"`), unescaped.
    pub fn string(&mut self) -> PResult<String> {
        self.note(Expected::Thing("a string"));
        match &self.peek().kind {
            TokenKind::Str(s) => {
                let s = s.clone();
                self.pos += 1;
                Ok(s)
            }
            _ => Err(self.unexpected()),
        }
    }

    /// A non-negative integer literal.
    pub fn integer(&mut self) -> PResult<u64> {
        self.note(Expected::Thing("an integer"));
        let token = self.peek().clone();
        if token.kind != TokenKind::Number {
            return Err(self.unexpected());
        }
        let text = self.text(&token);
        let value = text.parse::<u64>().map_err(|_| {
            ParseError::new(
                token.span,
                format!(
                    "expected an integer, found `{text}` (integers are whole numbers below 2^64)"
                ),
            )
        })?;
        self.pos += 1;
        Ok(value)
    }

    /// A decimal or integer literal as a float (`TIME RATE 10.0`).
    pub fn number(&mut self) -> PResult<f64> {
        self.note(Expected::Thing("a number"));
        let token = self.peek().clone();
        if token.kind != TokenKind::Number {
            return Err(self.unexpected());
        }
        let value = self
            .text(&token)
            .parse::<f64>()
            .map_err(|_| ParseError::new(token.span, "malformed number"))?;
        self.pos += 1;
        Ok(value)
    }

    /// A number followed by a unit, split into its integer value and unit text.
    fn quantity(&mut self, what: &'static str) -> PResult<(u64, &'a str, Span)> {
        self.note(Expected::Thing(what));
        let token = self.peek().clone();
        let TokenKind::Quantity { unit_at } = token.kind else {
            return Err(self.unexpected());
        };
        let number = &self.src[token.span.start as usize..unit_at as usize];
        let unit = &self.src[unit_at as usize..token.span.end as usize];
        let value = number.parse::<u64>().map_err(|_| {
            ParseError::new(
                token.span,
                format!(
                    "expected {what}, found `{number}{unit}`: the amount must be a whole number"
                ),
            )
        })?;
        self.pos += 1;
        Ok((value, unit, token.span))
    }

    /// A duration such as `250ms`, `5s`, `10m`, `1h`, `1d`, `100us`, `10ns`.
    pub fn duration(&mut self) -> PResult<Duration> {
        let (value, unit, span) = self.quantity("a duration")?;
        let scale: u64 = match unit {
            "ns" => 1,
            "us" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            "d" => 86_400_000_000_000,
            _ => {
                return Err(ParseError::new(
                    span,
                    format!("unknown duration unit `{unit}`: use ns, us, ms, s, m, h or d"),
                ))
            }
        };
        let nanos = value
            .checked_mul(scale)
            .ok_or_else(|| ParseError::new(span, "duration too large"))?;
        Ok(Duration { nanos })
    }

    /// A byte size such as `512KiB`, `1MiB`, `100B`, `1MB`.
    pub fn byte_size(&mut self) -> PResult<ByteSize> {
        let (value, unit, span) = self.quantity("a size")?;
        let scale: u64 = match unit {
            "B" => 1,
            "KB" => 1_000,
            "MB" => 1_000_000,
            "GB" => 1_000_000_000,
            "KiB" => 1 << 10,
            "MiB" => 1 << 20,
            "GiB" => 1 << 30,
            _ => {
                return Err(ParseError::new(
                    span,
                    format!("unknown size unit `{unit}`: use B, KB, MB, GB, KiB, MiB or GiB"),
                ))
            }
        };
        let bytes = value
            .checked_mul(scale)
            .ok_or_else(|| ParseError::new(span, "size too large"))?;
        Ok(ByteSize { bytes })
    }

    /// `VERSION <n> | VERSION LATEST`.
    pub fn resource_version(&mut self) -> PResult<ResourceVersion> {
        self.expect_keyword("VERSION")?;
        if self.eat_keyword("LATEST") {
            Ok(ResourceVersion::Latest)
        } else {
            Ok(ResourceVersion::Number(self.integer()?))
        }
    }

    /// `{ 'key' = value, … }` (the braces included; the map may be empty).
    pub fn config_map(&mut self) -> PResult<ConfigMap> {
        self.expect_punct(Punct::LBrace)?;
        let mut entries = Vec::new();
        if !self.eat_punct(Punct::RBrace) {
            loop {
                let key = self.string()?;
                self.expect_punct(Punct::Eq)?;
                entries.push((key, self.config_value()?));
                if !self.eat_punct(Punct::Comma) {
                    break;
                }
            }
            self.expect_punct(Punct::RBrace)?;
        }
        Ok(ConfigMap { entries })
    }

    fn config_value(&mut self) -> PResult<ConfigValue> {
        self.note(Expected::Thing("a string, number or boolean"));
        let negative = self.eat_punct(Punct::Minus);
        let token = self.peek().clone();
        let value = match &token.kind {
            TokenKind::Str(s) if !negative => ConfigValue::String(s.clone()),
            TokenKind::Number => {
                let text = self.text(&token);
                let text = if negative {
                    format!("-{text}")
                } else {
                    text.to_string()
                };
                match text.parse::<i64>() {
                    Ok(i) => ConfigValue::Integer(i),
                    Err(_) => ConfigValue::Decimal(
                        text.parse()
                            .map_err(|_| ParseError::new(token.span, "malformed number"))?,
                    ),
                }
            }
            TokenKind::Word if !negative && self.text(&token).eq_ignore_ascii_case("TRUE") => {
                ConfigValue::Bool(true)
            }
            TokenKind::Word if !negative && self.text(&token).eq_ignore_ascii_case("FALSE") => {
                ConfigValue::Bool(false)
            }
            _ => return Err(self.unexpected()),
        };
        self.pos += 1;
        Ok(value)
    }

    /// A value type: `I64`, `STRING`, `ARRAY<F32, 2>`, `VEC<I64>`, `LIST<STRING>`; the aliases
    /// `INT8…INT64`, `UINT8…UINT64`, `FLOAT32`, `FLOAT64`, `BOOLEAN` and `TIMESTAMP` are accepted.
    pub fn type_name(&mut self) -> PResult<TypeName> {
        self.nested(|p| p.type_name_inner())
    }

    fn type_name_inner(&mut self) -> PResult<TypeName> {
        const SCALARS: &[(&str, TypeName)] = &[
            ("U8", TypeName::U8),
            ("I8", TypeName::I8),
            ("U16", TypeName::U16),
            ("I16", TypeName::I16),
            ("U32", TypeName::U32),
            ("I32", TypeName::I32),
            ("U64", TypeName::U64),
            ("I64", TypeName::I64),
            ("F32", TypeName::F32),
            ("F64", TypeName::F64),
            ("BOOL", TypeName::Bool),
            ("STRING", TypeName::String),
            ("DATETIME", TypeName::Datetime),
            ("BYTES", TypeName::Bytes),
        ];
        const ALIASES: &[(&str, TypeName)] = &[
            ("UINT8", TypeName::U8),
            ("INT8", TypeName::I8),
            ("UINT16", TypeName::U16),
            ("INT16", TypeName::I16),
            ("UINT32", TypeName::U32),
            ("INT32", TypeName::I32),
            ("UINT64", TypeName::U64),
            ("INT64", TypeName::I64),
            ("FLOAT32", TypeName::F32),
            ("FLOAT64", TypeName::F64),
            ("BOOLEAN", TypeName::Bool),
            ("TIMESTAMP", TypeName::Datetime),
        ];
        for (kw, ty) in SCALARS {
            if self.eat_keyword(kw) {
                return Ok(ty.clone());
            }
        }
        for (kw, ty) in ALIASES {
            if self.is_keyword_at(0, kw) {
                self.pos += 1;
                return Ok(ty.clone());
            }
        }
        for container in ["ARRAY", "VEC", "LIST"] {
            if self.eat_keyword(container) {
                self.expect_punct(Punct::Lt)?;
                let element = Box::new(self.type_name()?);
                let ty = if container == "ARRAY" {
                    let mut dims = Vec::new();
                    while self.eat_punct(Punct::Comma) {
                        let span = self.span();
                        let d = self.integer()?;
                        let d = u32::try_from(d).ok().filter(|d| *d > 0).ok_or_else(|| {
                            ParseError::new(span, "array dimensions are 1 to 2^32-1")
                        })?;
                        dims.push(d);
                    }
                    if dims.is_empty() {
                        self.note(Expected::Punct(Punct::Comma));
                        return Err(self.unexpected());
                    }
                    TypeName::Array(element, dims)
                } else if container == "VEC" {
                    TypeName::Vec(element)
                } else {
                    TypeName::List(element)
                };
                self.expect_punct(Punct::Gt)?;
                return Ok(ty);
            }
        }
        Err(self.unexpected())
    }

    /// One or more items separated by commas.
    pub fn comma_list<T>(
        &mut self,
        mut item: impl FnMut(&mut Self) -> PResult<T>,
    ) -> PResult<Vec<T>> {
        let mut items = vec![item(self)?];
        while self.eat_punct(Punct::Comma) {
            items.push(item(self)?);
        }
        Ok(items)
    }

    /// Whether the next tokens are `<word> =`, the start of another assignment.
    pub fn at_assignment(&self) -> bool {
        self.peek().kind == TokenKind::Word && self.peek_at(1).kind == TokenKind::Punct(Punct::Eq)
    }
}

fn truncate(s: &str, max_chars: usize) -> String {
    match s.char_indices().nth(max_chars) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}

/// The closest expected keyword within two edits of `word` (one edit for words of four
/// letters or fewer, where two edits turn any short keyword into another).
fn suggest(word: &str, expected: &[Expected]) -> Option<String> {
    let upper = word.to_ascii_uppercase();
    let max_edits = if upper.len() <= 4 { 1 } else { 2 };
    let mut best: Option<(usize, &str)> = None;
    for e in expected {
        let candidate = match e {
            Expected::Keyword(k) => *k,
            Expected::Phrase(p) => p.split(' ').next().unwrap_or(p),
            _ => continue,
        };
        if candidate == upper {
            continue;
        }
        let d = edit_distance(&upper, candidate);
        if d <= max_edits && best.is_none_or(|(bd, _)| d < bd) {
            best = Some((d, candidate));
        }
    }
    best.map(|(_, k)| k.to_string())
}

/// Levenshtein distance, bounded to short keywords so it stays cheap.
fn edit_distance(a: &str, b: &str) -> usize {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len().abs_diff(b.len()) > 2 || a.len() > 64 || b.len() > 64 {
        return usize::MAX;
    }
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    let mut cur = vec![0; b.len() + 1];
    for i in 1..=a.len() {
        cur[0] = i;
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            cur[j] = (prev[j] + 1).min(cur[j - 1] + 1).min(prev[j - 1] + cost);
        }
        std::mem::swap(&mut prev, &mut cur);
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use super::edit_distance;

    #[test]
    fn edit_distance_counts_insertions_deletions_substitutions() {
        assert_eq!(edit_distance("TOPCI", "TOPIC"), 2);
        assert_eq!(edit_distance("FORM", "FROM"), 2);
        assert_eq!(edit_distance("FROM", "FROM"), 0);
        assert_eq!(edit_distance("INGESTR", "INGESTOR"), 1);
    }
}
