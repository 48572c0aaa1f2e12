//! NSPL, the Nervix Stream Processing Language: lexer, parser, AST, canonical renderer and
//! completion.
//!
//! This crate owns the text of the language and nothing else: it decides what is well-formed
//! and what each statement means structurally, and renders any tree back to one canonical text
//! (`SHOW CREATE`, `nervix fmt`). Rules that need the catalog — references, types, per-entity
//! tables — belong to the engine's validation. Correctness rests on three properties the tests
//! check: rendering is deterministic, `parse(render(t)) == t`, and no input panics or recurses
//! without bound (nesting is capped at [`parse::MAX_NESTING_DEPTH`]).

pub mod ast;
pub mod complete;
pub mod error;
pub mod lexer;
pub mod parse;
pub mod render;
pub mod span;

pub use ast::{ObjectKind, Spanned, Statement};
pub use complete::{complete, Catalog, Completion, NoCatalog};
pub use error::{Expected, NameKind, ParseError};
pub use render::render_statement;
pub use span::{position, Position, Span};

use lexer::Comment;

/// Everything read from one script: the statements that parsed, the comments, and one error
/// per statement that did not.
#[derive(Debug, Clone)]
pub struct Script {
    pub statements: Vec<Spanned>,
    pub comments: Vec<Comment>,
    pub errors: Vec<ParseError>,
}

/// Parses every statement of `src`, recovering after each error at the next `;`.
pub fn parse_script(src: &str) -> Script {
    let lexed = lexer::lex(src);
    let mut parser = parse::Parser::new(src, lexed.tokens);
    let mut statements = Vec::new();
    let mut errors = Vec::new();
    while !parser.at_end() {
        match parser.statement() {
            Ok(statement) => statements.push(statement),
            Err(error) => {
                errors.push(error);
                parser.recover();
            }
        }
    }
    Script {
        statements,
        comments: lexed.comments,
        errors,
    }
}

/// Parses exactly one statement (its `;` may be omitted).
pub fn parse_statement(src: &str) -> Result<Statement, ParseError> {
    let trimmed = src.trim_end();
    let owned;
    let text = if trimmed.ends_with(';') {
        src
    } else {
        owned = format!("{trimmed};");
        &owned
    };
    let mut script = parse_script(text);
    if let Some(error) = script.errors.into_iter().next() {
        return Err(error);
    }
    match script.statements.len() {
        1 => Ok(script.statements.remove(0).statement),
        0 => Err(ParseError::new(
            Span::new(0, 0),
            "expected a statement, found end of input",
        )),
        _ => Err(ParseError::new(
            script.statements[1].span,
            "expected one statement, found several",
        )),
    }
}

/// Parses one expression, the whole of `src`.
pub fn parse_expression(src: &str) -> Result<ast::Expr, ParseError> {
    let mut parser = parse::Parser::new(src, lexer::lex(src).tokens);
    let expr = parser.expr()?;
    if !parser.at_end() {
        parser.note(Expected::Thing("an operator"));
        return Err(parser.unexpected());
    }
    Ok(expr)
}

/// The canonical text of a whole script: statements separated by blank lines, each preceded by
/// the comments written before or inside it, ending with a newline.
pub fn format_script(src: &str) -> Result<String, Vec<ParseError>> {
    let script = parse_script(src);
    if !script.errors.is_empty() {
        return Err(script.errors);
    }
    let mut out = String::new();
    let mut comments = script.comments.iter().peekable();
    for statement in &script.statements {
        let mut block = String::new();
        while let Some(c) = comments.next_if(|c| c.span.start < statement.span.end) {
            block.push_str(src[c.span.start as usize..c.span.end as usize].trim_end());
            block.push('\n');
        }
        if !out.is_empty() {
            out.push('\n');
        }
        out.push_str(&block);
        out.push_str(&render_statement(&statement.statement));
        out.push('\n');
    }
    let trailing: Vec<&str> = comments
        .map(|c| src[c.span.start as usize..c.span.end as usize].trim_end())
        .collect();
    if !trailing.is_empty() {
        if !out.is_empty() {
            out.push('\n');
        }
        for c in trailing {
            out.push_str(c);
            out.push('\n');
        }
    }
    Ok(out)
}
