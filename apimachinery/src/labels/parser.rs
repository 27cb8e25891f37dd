//! Lexer and recursive-descent parser for the label selector string grammar:
//!
//! ```text
//! selector    := requirement (',' requirement)* | ''
//! requirement := ['!'] KEY | KEY op VALUE | KEY ('in'|'notin') '(' VALUE (',' VALUE)* ')'
//! op          := '=' | '==' | '!=' | '>' | '<'
//! ```

use super::{Operator, Requirement};
use crate::SelectorError;

#[derive(Clone, Debug, PartialEq, Eq)]
enum Token {
    Ident(String),
    In,
    NotIn,
    Not,
    NotEquals,
    Equals,
    DoubleEquals,
    Greater,
    Less,
    Open,
    Close,
    Comma,
    End,
}

impl Token {
    /// The text shown in "found '...'" messages.
    fn literal(&self) -> &str {
        match self {
            Token::Ident(s) => s,
            Token::In => "in",
            Token::NotIn => "notin",
            Token::Not => "!",
            Token::NotEquals => "!=",
            Token::Equals => "=",
            Token::DoubleEquals => "==",
            Token::Greater => ">",
            Token::Less => "<",
            Token::Open => "(",
            Token::Close => ")",
            Token::Comma => ",",
            Token::End => "",
        }
    }

    /// Inside a value position the keywords are plain words (`env in (in, notin)`).
    fn as_value(&self) -> Option<String> {
        match self {
            Token::Ident(s) => Some(s.clone()),
            Token::In | Token::NotIn => Some(self.literal().to_string()),
            _ => None,
        }
    }
}

fn is_special(c: char) -> bool {
    matches!(c, '=' | '!' | '(' | ')' | ',' | '>' | '<')
}

fn lex(input: &str) -> Vec<Token> {
    let mut tokens = Vec::new();
    let mut chars = input.chars().peekable();
    while let Some(&c) = chars.peek() {
        if c.is_whitespace() {
            chars.next();
            continue;
        }
        if is_special(c) {
            chars.next();
            let doubled = chars.peek() == Some(&'=');
            let tok = match (c, doubled) {
                ('!', true) => Token::NotEquals,
                ('=', true) => Token::DoubleEquals,
                ('!', false) => Token::Not,
                ('=', false) => Token::Equals,
                ('(', _) => Token::Open,
                (')', _) => Token::Close,
                (',', _) => Token::Comma,
                ('>', _) => Token::Greater,
                _ => Token::Less,
            };
            if doubled && matches!(c, '!' | '=') {
                chars.next();
            }
            tokens.push(tok);
            continue;
        }
        let mut word = String::new();
        while let Some(&c) = chars.peek() {
            if c.is_whitespace() || is_special(c) {
                break;
            }
            word.push(c);
            chars.next();
        }
        tokens.push(match word.as_str() {
            "in" => Token::In,
            "notin" => Token::NotIn,
            _ => Token::Ident(word),
        });
    }
    tokens.push(Token::End);
    tokens
}

struct Parser {
    tokens: Vec<Token>,
    pos: usize,
}

fn syntax(found: &Token, expected: &str) -> SelectorError {
    SelectorError::Syntax {
        found: found.literal().to_string(),
        expected: expected.to_string(),
    }
}

impl Parser {
    fn peek(&self) -> &Token {
        self.tokens.get(self.pos).unwrap_or(&Token::End)
    }

    fn next(&mut self) -> Token {
        let t = self.peek().clone();
        if self.pos < self.tokens.len() {
            self.pos += 1;
        }
        t
    }

    fn selector(&mut self) -> Result<Vec<Requirement>, SelectorError> {
        let mut reqs = Vec::new();
        loop {
            match self.peek() {
                Token::End => return Ok(reqs),
                Token::Ident(_) | Token::Not => reqs.push(self.requirement()?),
                other => return Err(syntax(other, "!, identifier, or 'end of string'")),
            }
            match self.next() {
                Token::End => return Ok(reqs),
                Token::Comma => {
                    if !matches!(self.peek(), Token::Ident(_) | Token::Not) {
                        return Err(syntax(self.peek(), "identifier after ','"));
                    }
                }
                other => return Err(syntax(&other, "',' or 'end of string'")),
            }
        }
    }

    fn requirement(&mut self) -> Result<Requirement, SelectorError> {
        let negated = *self.peek() == Token::Not;
        if negated {
            self.next();
        }
        let key = match self.next() {
            Token::Ident(k) => k,
            other => return Err(syntax(&other, "identifier")),
        };
        if negated {
            return Requirement::new(&key, Operator::DoesNotExist, Vec::new());
        }
        let op = match self.peek() {
            Token::End | Token::Comma => {
                return Requirement::new(&key, Operator::Exists, Vec::new())
            }
            Token::Equals | Token::DoubleEquals => Operator::Equals,
            Token::NotEquals => Operator::NotEquals,
            Token::In => Operator::In,
            Token::NotIn => Operator::NotIn,
            Token::Greater => Operator::GreaterThan,
            Token::Less => Operator::LessThan,
            other => return Err(syntax(other, "in, notin, =, ==, !=, gt, lt")),
        };
        self.next();
        let values = match op {
            Operator::In | Operator::NotIn => self.value_set()?,
            _ => vec![self.exact_value()?],
        };
        Requirement::new(&key, op, values)
    }

    /// A single value after `=`, `!=`, `>` or `<`; nothing before ',' or the end means "".
    fn exact_value(&mut self) -> Result<String, SelectorError> {
        match self.peek() {
            Token::End | Token::Comma => Ok(String::new()),
            t => match t.as_value() {
                Some(v) => {
                    self.next();
                    Ok(v)
                }
                None => Err(syntax(t, "identifier")),
            },
        }
    }

    /// `( v1, v2, ... )`; empty slots between commas are empty-string values.
    fn value_set(&mut self) -> Result<Vec<String>, SelectorError> {
        let open = self.next();
        if open != Token::Open {
            return Err(syntax(&open, "'('"));
        }
        if *self.peek() == Token::Close {
            self.next();
            return Ok(Vec::new());
        }
        let mut values = Vec::new();
        loop {
            let value = self.peek().as_value();
            if value.is_some() {
                self.next();
            }
            values.push(value.unwrap_or_default());
            match self.next() {
                Token::Comma => {}
                Token::Close => return Ok(values),
                other => return Err(syntax(&other, "',', ')' or identifier")),
            }
        }
    }
}

pub(super) fn parse(input: &str) -> Result<Vec<Requirement>, SelectorError> {
    Parser {
        tokens: lex(input),
        pos: 0,
    }
    .selector()
}
