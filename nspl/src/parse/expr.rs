//! Expressions by precedence climbing (DESIGN §7), loosest first: `OR`; `AND`; `NOT`;
//! comparisons, `IS [NOT] NULL`, `[NOT] IN`, `[NOT] BETWEEN`; `||`; `+ -`; `* / %`; unary `-`;
//! `AS` casts. Each nesting (parentheses, calls, conditionals, prefix operators) passes through
//! [`Parser::nested`], so depth is bounded.

use super::{PResult, Parser};
use crate::ast::{BinaryOp, Expr, ExprKind, Literal, UnaryOp};
use crate::error::{Expected, NameKind, ParseError};
use crate::lexer::{Punct, TokenKind};

/// Words that start or continue expression syntax and so are never bare field names.
pub const RESERVED_IN_EXPRESSIONS: &[&str] = &[
    "AND",
    "OR",
    "NOT",
    "IS",
    "IN",
    "BETWEEN",
    "CASE",
    "WHEN",
    "THEN",
    "ELSE",
    "END",
    "IF",
    "AS",
    "TRUE",
    "FALSE",
    "NULL",
    "TRY_CAST",
    "JSON_VALUE",
];

/// Binding power of each precedence level; a higher level binds tighter.
pub mod level {
    pub const OR: u8 = 1;
    pub const AND: u8 = 2;
    pub const NOT: u8 = 3;
    pub const COMPARE: u8 = 4;
    pub const CONCAT: u8 = 5;
    pub const ADD: u8 = 6;
    pub const MUL: u8 = 7;
    pub const NEG: u8 = 8;
    pub const CAST: u8 = 9;
    pub const ATOM: u8 = 10;
}

impl Parser<'_> {
    /// A complete expression.
    pub fn expr(&mut self) -> PResult<Expr> {
        self.expr_above(0)
    }

    /// Comma-separated expressions.
    pub fn expr_list(&mut self) -> PResult<Vec<Expr>> {
        let mut items = vec![self.expr()?];
        while !self.at_alter_operation_after_comma() && self.eat_punct(Punct::Comma) {
            items.push(self.expr()?);
        }
        Ok(items)
    }

    /// Whether a comma is followed by a new ALTER operation (`, SET MAX …`) rather than by
    /// another list item.
    pub fn at_alter_operation_after_comma(&self) -> bool {
        if self.peek().kind != TokenKind::Punct(Punct::Comma) {
            return false;
        }
        ["SET", "ADD", "DROP", "ALTER", "REPLACE"]
            .iter()
            .any(|kw| self.is_keyword_at(1, kw))
            && self.peek_at(2).kind == TokenKind::Word
    }

    /// An expression whose operators all bind tighter than `min_level`.
    pub fn expr_above(&mut self, min_level: u8) -> PResult<Expr> {
        self.nested(|p| {
            let mut left = p.prefix()?;
            loop {
                match p.infix(left, min_level)? {
                    Step::Extended(e) => left = e,
                    Step::Done(e) => return Ok(e),
                }
            }
        })
    }

    /// Consumes keyword `kw` without listing it as an expectation: at an expression start
    /// errors say "expected an expression", and after an operand they name what the enclosing
    /// clause expects rather than every operator that could continue the expression.
    fn eat_keyword_quietly(&mut self, kw: &str) -> bool {
        let found = self.is_keyword_at(0, kw);
        if found {
            self.advance();
        }
        found
    }

    fn eat_punct_quietly(&mut self, p: Punct) -> bool {
        let found = self.peek().kind == TokenKind::Punct(p);
        if found {
            self.advance();
        }
        found
    }

    fn prefix(&mut self) -> PResult<Expr> {
        self.note(Expected::Thing("an expression"));
        let start = self.span();
        if self.eat_punct_quietly(Punct::Minus) {
            let operand = self.expr_above(level::NEG - 1)?;
            return Ok(unary(UnaryOp::Neg, operand, start));
        }
        if self.eat_keyword_quietly("NOT") {
            let operand = self.expr_above(level::NOT - 1)?;
            return Ok(unary(UnaryOp::Not, operand, start));
        }
        if self.eat_punct_quietly(Punct::LParen) {
            let inner = self.expr()?;
            self.expect_punct(Punct::RParen)?;
            return Ok(inner);
        }
        if self.eat_keyword_quietly("IF") {
            return self.if_expr(start);
        }
        if self.eat_keyword_quietly("CASE") {
            return self.case_expr(start);
        }
        if self.eat_keyword_quietly("TRY_CAST") {
            self.expect_punct(Punct::LParen)?;
            // `AS` also casts, so `x AS T` inside parses as a cast whose target is TRY_CAST's.
            let inner = self.expr()?;
            let ExprKind::Cast {
                expr,
                ty,
                try_cast: false,
            } = inner.kind
            else {
                self.note(Expected::Keyword("AS"));
                return Err(self.unexpected());
            };
            let expr = *expr;
            self.expect_punct(Punct::RParen)?;
            let kind = ExprKind::Cast {
                expr: Box::new(expr),
                ty,
                try_cast: true,
            };
            return Ok(Expr::new(kind, start.to(self.prev_span())));
        }
        if self.eat_keyword_quietly("JSON_VALUE") {
            self.expect_punct(Punct::LParen)?;
            let doc = self.expr()?;
            self.expect_punct(Punct::Comma)?;
            let path = self.string()?;
            self.expect_keyword("AS")?;
            let ty = self.type_name()?;
            self.expect_punct(Punct::RParen)?;
            let kind = ExprKind::JsonValue {
                doc: Box::new(doc),
                path,
                ty,
            };
            return Ok(Expr::new(kind, start.to(self.prev_span())));
        }
        for (kw, value) in [
            ("TRUE", Literal::Bool(true)),
            ("FALSE", Literal::Bool(false)),
            ("NULL", Literal::Null),
        ] {
            if self.eat_keyword_quietly(kw) {
                return Ok(Expr::new(ExprKind::Literal(value), start));
            }
        }
        let token = self.peek().clone();
        match token.kind {
            TokenKind::Number => {
                self.advance();
                Ok(Expr::new(
                    ExprKind::Literal(self.number_literal(&token)?),
                    start,
                ))
            }
            TokenKind::Str(s) => {
                self.advance();
                Ok(Expr::new(ExprKind::Literal(Literal::String(s)), start))
            }
            TokenKind::Word => {
                let word = self.text(&token);
                if RESERVED_IN_EXPRESSIONS
                    .iter()
                    .any(|r| r.eq_ignore_ascii_case(word))
                {
                    return Err(self.unexpected());
                }
                if self.peek_at(1).kind == TokenKind::Punct(Punct::LParen) {
                    return self.call(start);
                }
                self.field(start)
            }
            _ => Err(self.unexpected()),
        }
    }

    fn number_literal(&self, token: &crate::lexer::Token) -> PResult<Literal> {
        let text = self.text(token);
        if text.contains(['.', 'e', 'E']) {
            match text.parse::<f64>() {
                Ok(v) if v.is_finite() => Ok(Literal::Decimal(v)),
                _ => Err(ParseError::new(
                    token.span,
                    format!("decimal literal `{text}` is out of range"),
                )),
            }
        } else {
            text.parse::<u64>().map(Literal::Integer).map_err(|_| {
                ParseError::new(
                    token.span,
                    format!("integer literal `{text}` is out of range"),
                )
            })
        }
    }

    fn call(&mut self, start: crate::span::Span) -> PResult<Expr> {
        let token = self.advance();
        let name = crate::ast::Ident {
            name: self.text(&token).to_ascii_lowercase(),
            span: token.span,
        };
        self.expect_punct(Punct::LParen)?;
        let mut args = Vec::new();
        if !self.eat_punct(Punct::RParen) {
            args.push(self.expr()?);
            while self.eat_punct(Punct::Comma) {
                args.push(self.expr()?);
            }
            self.expect_punct(Punct::RParen)?;
        }
        Ok(Expr::new(
            ExprKind::Call { name, args },
            start.to(self.prev_span()),
        ))
    }

    fn field(&mut self, start: crate::span::Span) -> PResult<Expr> {
        let mut path = vec![self.ident(NameKind::Field)?];
        while self.peek().kind == TokenKind::Punct(Punct::Dot) {
            self.advance();
            path.push(self.ident(NameKind::Field)?);
        }
        Ok(Expr::new(ExprKind::Field(path), start.to(self.prev_span())))
    }

    fn if_expr(&mut self, start: crate::span::Span) -> PResult<Expr> {
        let condition = self.expr()?;
        self.expect_keyword("THEN")?;
        let then = self.expr()?;
        self.expect_keyword("ELSE")?;
        let otherwise = self.expr()?;
        self.expect_keyword("END")?;
        let kind = ExprKind::If {
            condition: Box::new(condition),
            then: Box::new(then),
            otherwise: Box::new(otherwise),
        };
        Ok(Expr::new(kind, start.to(self.prev_span())))
    }

    fn case_expr(&mut self, start: crate::span::Span) -> PResult<Expr> {
        let operand = if self.at_keyword("WHEN") {
            None
        } else {
            Some(Box::new(self.expr()?))
        };
        let mut branches = Vec::new();
        self.expect_keyword("WHEN")?;
        loop {
            let when = self.expr()?;
            self.expect_keyword("THEN")?;
            branches.push((when, self.expr()?));
            if !self.eat_keyword("WHEN") {
                break;
            }
        }
        let otherwise = if self.eat_keyword("ELSE") {
            Some(Box::new(self.expr()?))
        } else {
            None
        };
        self.expect_keyword("END")?;
        let kind = ExprKind::Case {
            operand,
            branches,
            otherwise,
        };
        Ok(Expr::new(kind, start.to(self.prev_span())))
    }

    /// Extends `left` by one infix or postfix operator binding tighter than `min_level`.
    fn infix(&mut self, left: Expr, min_level: u8) -> PResult<Step> {
        let binary = |p: &mut Self, left: Expr, op: BinaryOp, lvl: u8| -> PResult<Step> {
            let right = p.expr_above(lvl)?;
            let span = left.span.to(right.span);
            let kind = ExprKind::Binary {
                op,
                left: Box::new(left),
                right: Box::new(right),
            };
            Ok(Step::Extended(Expr::new(kind, span)))
        };
        let punct_ops = [
            (Punct::Star, BinaryOp::Mul, level::MUL),
            (Punct::Slash, BinaryOp::Div, level::MUL),
            (Punct::Percent, BinaryOp::Mod, level::MUL),
            (Punct::Plus, BinaryOp::Add, level::ADD),
            (Punct::Minus, BinaryOp::Sub, level::ADD),
            (Punct::Concat, BinaryOp::Concat, level::CONCAT),
            (Punct::Eq, BinaryOp::Eq, level::COMPARE),
            (Punct::NotEq, BinaryOp::NotEq, level::COMPARE),
            (Punct::LtGt, BinaryOp::NotEq, level::COMPARE),
            (Punct::Lt, BinaryOp::Lt, level::COMPARE),
            (Punct::LtEq, BinaryOp::LtEq, level::COMPARE),
            (Punct::Gt, BinaryOp::Gt, level::COMPARE),
            (Punct::GtEq, BinaryOp::GtEq, level::COMPARE),
        ];
        if level::CAST > min_level && self.eat_keyword_quietly("AS") {
            let ty = self.type_name()?;
            let span = left.span.to(self.prev_span());
            let kind = ExprKind::Cast {
                expr: Box::new(left),
                ty,
                try_cast: false,
            };
            return Ok(Step::Extended(Expr::new(kind, span)));
        }
        for (punct, op, lvl) in punct_ops {
            if lvl > min_level && self.eat_punct_quietly(punct) {
                return binary(self, left, op, lvl);
            }
        }
        if level::COMPARE > min_level {
            if self.eat_keyword_quietly("IS") {
                let negated = self.eat_keyword("NOT");
                self.expect_keyword("NULL")?;
                let span = left.span.to(self.prev_span());
                let kind = ExprKind::IsNull {
                    expr: Box::new(left),
                    negated,
                };
                return Ok(Step::Extended(Expr::new(kind, span)));
            }
            let negated = self.is_keyword_at(0, "NOT")
                && (self.is_keyword_at(1, "IN") || self.is_keyword_at(1, "BETWEEN"));
            if negated {
                self.advance();
            }
            if self.eat_keyword_quietly("IN") {
                self.expect_punct(Punct::LParen)?;
                let list = self.comma_list(|p| p.expr())?;
                self.expect_punct(Punct::RParen)?;
                let span = left.span.to(self.prev_span());
                let kind = ExprKind::InList {
                    expr: Box::new(left),
                    list,
                    negated,
                };
                return Ok(Step::Extended(Expr::new(kind, span)));
            }
            if self.eat_keyword_quietly("BETWEEN") {
                let low = self.expr_above(level::COMPARE)?;
                self.expect_keyword("AND")?;
                let high = self.expr_above(level::COMPARE)?;
                let span = left.span.to(high.span);
                let kind = ExprKind::Between {
                    expr: Box::new(left),
                    low: Box::new(low),
                    high: Box::new(high),
                    negated,
                };
                return Ok(Step::Extended(Expr::new(kind, span)));
            }
        }
        if level::AND > min_level && self.eat_keyword_quietly("AND") {
            return binary(self, left, BinaryOp::And, level::AND);
        }
        if level::OR > min_level && self.eat_keyword_quietly("OR") {
            return binary(self, left, BinaryOp::Or, level::OR);
        }
        Ok(Step::Done(left))
    }
}

enum Step {
    Extended(Expr),
    Done(Expr),
}

fn unary(op: UnaryOp, operand: Expr, start: crate::span::Span) -> Expr {
    let span = start.to(operand.span);
    Expr::new(
        ExprKind::Unary {
            op,
            expr: Box::new(operand),
        },
        span,
    )
}
