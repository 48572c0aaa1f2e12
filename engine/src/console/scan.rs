//! Finding where console statements end as bytes arrive, in time linear in the bytes.
//!
//! A statement ends at a `;` token. Re-lexing the pending text with
//! [`nervix_nspl::lexer::lex`] each time a chunk arrives would cost time quadratic in a
//! statement's size (8 MiB arriving a byte at a time), so [`Scanner`] carries the lexer's state
//! from byte to byte instead. It mirrors exactly the lexer rules that decide whether a `;` byte
//! is a token: `'…'` and `"…"` strings with doubled quotes, `-- …` comments to the end of the
//! line, `/* … */` comments (the `*` of `/*` never closes it), and nothing else — no other
//! token of the lexer contains a quote, a `;`, `--` or `/*`. The protocol still confirms each
//! end it reports with the lexer, and a property test checks the two agree on arbitrary text.

/// Where the scanner is within the text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Between tokens, or inside one that cannot hold a quote, `;` or comment.
    Normal,
    /// After a `-` that may start `--`.
    Dash,
    /// After a `/` that may start `/*`.
    Slash,
    LineComment,
    BlockComment,
    /// Inside a block comment, after a `*` that may end it.
    BlockStar,
    /// Inside a string quoted by this byte.
    Str(u8),
    /// Inside a string, after a quote byte: a second one is an escaped quote.
    StrQuote(u8),
}

/// What one byte meant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Step {
    /// The statement's first token began: at this byte (0) or at the byte before it (1).
    pub first_token_back: Option<usize>,
    /// This byte is a `;` token ending a statement that has tokens before it.
    pub end: bool,
    /// This byte is a `;` token with nothing before it: an empty statement.
    pub empty: bool,
}

/// The lexer's state carried across chunks; see the module documentation.
#[derive(Debug, Clone)]
pub struct Scanner {
    state: State,
    has_tokens: bool,
}

impl Default for Scanner {
    fn default() -> Scanner {
        Scanner::new()
    }
}

impl Scanner {
    pub fn new() -> Scanner {
        Scanner {
            state: State::Normal,
            has_tokens: false,
        }
    }

    /// Whether the pending statement has no token yet and no string or comment is open:
    /// everything so far was whitespace and complete comments.
    pub fn at_statement_start(&self) -> bool {
        self.state == State::Normal && !self.has_tokens
    }

    /// Starts the next statement after an end.
    pub fn next_statement(&mut self) {
        self.has_tokens = false;
    }

    /// Takes one byte of the text.
    pub fn step(&mut self, byte: u8) -> Step {
        let mut step = Step::default();
        match self.state {
            State::Normal => {}
            State::Dash => {
                self.state = State::Normal;
                if byte == b'-' {
                    self.state = State::LineComment;
                    return step;
                }
                self.token(&mut step, 1);
            }
            State::Slash => {
                self.state = State::Normal;
                if byte == b'*' {
                    self.state = State::BlockComment;
                    return step;
                }
                self.token(&mut step, 1);
            }
            State::StrQuote(quote) => {
                self.state = State::Normal;
                if byte == quote {
                    self.state = State::Str(quote);
                    return step;
                }
            }
            State::LineComment => {
                if byte == b'\n' {
                    self.state = State::Normal;
                }
                return step;
            }
            State::BlockComment => {
                if byte == b'*' {
                    self.state = State::BlockStar;
                }
                return step;
            }
            State::BlockStar => {
                self.state = match byte {
                    b'/' => State::Normal,
                    b'*' => State::BlockStar,
                    _ => State::BlockComment,
                };
                return step;
            }
            State::Str(quote) => {
                if byte == quote {
                    self.state = State::StrQuote(quote);
                }
                return step;
            }
        }
        match byte {
            b' ' | b'\t' | b'\r' | b'\n' => {}
            b'-' => self.state = State::Dash,
            b'/' => self.state = State::Slash,
            b'\'' | b'"' => {
                self.token(&mut step, 0);
                self.state = State::Str(byte);
            }
            b';' => {
                if self.has_tokens {
                    step.end = true;
                } else {
                    step.empty = true;
                }
            }
            _ => self.token(&mut step, 0),
        }
        step
    }

    fn token(&mut self, step: &mut Step, back: usize) {
        if !self.has_tokens {
            self.has_tokens = true;
            step.first_token_back = Some(back);
        }
    }
}

#[cfg(test)]
mod tests {
    use nervix_nspl::lexer::{lex, Punct, TokenKind};
    use proptest::prelude::*;

    use super::*;

    /// Offsets of every `;` byte the scanner calls a statement end or an empty statement.
    fn scanned_ends(text: &str) -> Vec<usize> {
        let mut scanner = Scanner::new();
        let mut ends = Vec::new();
        for (i, b) in text.bytes().enumerate() {
            let step = scanner.step(b);
            if step.end || step.empty {
                ends.push(i);
                scanner.next_statement();
            }
        }
        ends
    }

    fn lexed_ends(text: &str) -> Vec<usize> {
        lex(text)
            .tokens
            .iter()
            .filter(|t| t.kind == TokenKind::Punct(Punct::Semicolon))
            .map(|t| t.span.start as usize)
            .collect()
    }

    #[test]
    fn strings_and_comments_hide_semicolons() {
        for (text, ends) in [
            ("a; b;", vec![1, 4]),
            ("'a;''b;'; x;", vec![8, 11]),
            ("\"a;\"\"\";", vec![6]),
            ("-- a;\n b;", vec![8]),
            ("/* a; */ b; /*/ ; */;", vec![10, 20]),
            ("x -; y -- ;", vec![3]),
            ("1e-5; 'unterminated ;", vec![4]),
        ] {
            assert_eq!(scanned_ends(text), ends, "{text:?}");
            assert_eq!(lexed_ends(text), ends, "{text:?}");
        }
    }

    #[test]
    fn first_token_offsets() {
        let mut scanner = Scanner::new();
        let steps: Vec<Step> = "  -x".bytes().map(|b| scanner.step(b)).collect();
        assert_eq!(steps[3].first_token_back, Some(1));
        assert!(!scanner.at_statement_start());
        let mut scanner = Scanner::new();
        let steps: Vec<Step> = "-- c\n/* d */ 'x"
            .bytes()
            .map(|b| scanner.step(b))
            .collect();
        assert_eq!(
            steps
                .iter()
                .filter(|s| s.first_token_back.is_some())
                .count(),
            1
        );
        assert_eq!(steps[13].first_token_back, Some(0));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]
        /// The scanner finds exactly the `;` tokens the lexer finds.
        #[test]
        fn scanner_agrees_with_the_lexer(
            text in proptest::collection::vec(
                prop::sample::select(vec![
                    "'", "\"", ";", "-", "/", "*", "\n", " ", "a", "1", ".", "e", "+", "é", "\\",
                ]),
                0..64,
            )
        ) {
            let text: String = text.concat();
            prop_assert_eq!(scanned_ends(&text), lexed_ends(&text), "{:?}", text);
        }
    }
}
