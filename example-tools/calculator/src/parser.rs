//! A recursive-descent evaluator for arithmetic expressions.
//!
//! Grammar (lowest precedence first; `^` is right-associative and binds
//! tighter than unary minus, so `-2^2` is -4):
//!
//! ```text
//! expression := term (("+" | "-") term)*
//! term       := unary (("*" | "/" | "%") unary)*
//! unary      := ("-" | "+") unary | power
//! power      := primary ("^" unary)?
//! primary    := number | name | name "(" expression ("," expression)* ")"
//!             | "(" expression ")"
//! ```
//!
//! Positions in error messages count characters from 1.

use std::fmt;

/// Deeper nesting than this is refused rather than risking the stack.
const MAX_DEPTH: usize = 200;

/// Why an expression could not be evaluated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EvalError(String);

impl fmt::Display for EvalError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Evaluates `expression`; `ans` is the value of the name `ans`, if any.
pub fn evaluate(expression: &str, ans: Option<f64>) -> Result<f64, EvalError> {
    let tokens = tokenize(expression)?;
    let mut parser = Parser {
        tokens,
        next: 0,
        depth: 0,
        ans,
    };
    if parser.peek().kind == Kind::End {
        return Err(EvalError("the expression is empty".into()));
    }
    let value = parser.expression()?;
    let token = parser.peek();
    if token.kind != Kind::End {
        return Err(unexpected(token));
    }
    Ok(value)
}

#[derive(Debug, Clone, PartialEq)]
enum Kind {
    Number(f64),
    Name(String),
    Operator(char),
    Open,
    Close,
    Comma,
    End,
}

#[derive(Debug, Clone)]
struct Token {
    kind: Kind,
    /// 1-based character position of the token's first character.
    position: usize,
}

fn unexpected(token: &Token) -> EvalError {
    let what = match &token.kind {
        Kind::Number(_) => "number".to_owned(),
        Kind::Name(name) => format!("'{name}'"),
        Kind::Operator(op) => format!("'{op}'"),
        Kind::Open => "'('".to_owned(),
        Kind::Close => "')'".to_owned(),
        Kind::Comma => "','".to_owned(),
        Kind::End => return EvalError("unexpected end of expression".into()),
    };
    EvalError(format!("unexpected {what} at position {}", token.position))
}

fn tokenize(text: &str) -> Result<Vec<Token>, EvalError> {
    let chars: Vec<char> = text.chars().collect();
    let mut tokens = Vec::new();
    let mut index = 0;
    while index < chars.len() {
        let c = chars[index];
        let position = index + 1;
        let kind = match c {
            _ if c.is_whitespace() => {
                index += 1;
                continue;
            }
            '0'..='9' | '.' => {
                let (value, end) = number(&chars, index)?;
                index = end;
                tokens.push(Token {
                    kind: Kind::Number(value),
                    position,
                });
                continue;
            }
            _ if c.is_ascii_alphabetic() || c == '_' => {
                let start = index;
                while index < chars.len()
                    && (chars[index].is_ascii_alphanumeric() || chars[index] == '_')
                {
                    index += 1;
                }
                let name: String = chars[start..index].iter().collect();
                tokens.push(Token {
                    kind: Kind::Name(name.to_ascii_lowercase()),
                    position,
                });
                continue;
            }
            '+' | '-' | '*' | '/' | '%' | '^' => Kind::Operator(c),
            '×' => Kind::Operator('*'),
            '÷' => Kind::Operator('/'),
            '(' => Kind::Open,
            ')' => Kind::Close,
            ',' => Kind::Comma,
            _ => {
                return Err(EvalError(format!(
                    "unexpected character '{c}' at position {position}"
                )));
            }
        };
        tokens.push(Token { kind, position });
        index += 1;
    }
    tokens.push(Token {
        kind: Kind::End,
        position: chars.len() + 1,
    });
    Ok(tokens)
}

/// Reads a decimal number (`12`, `1.5`, `.5`, `2.`, `1e-3`) starting at
/// `start`; returns its value and the index after it.
fn number(chars: &[char], start: usize) -> Result<(f64, usize), EvalError> {
    let mut end = start;
    while end < chars.len() && chars[end].is_ascii_digit() {
        end += 1;
    }
    if end < chars.len() && chars[end] == '.' {
        end += 1;
        while end < chars.len() && chars[end].is_ascii_digit() {
            end += 1;
        }
    }
    // An exponent only if digits follow, so `2e` stays `2` then the name `e`.
    if end < chars.len() && matches!(chars[end], 'e' | 'E') {
        let mut after = end + 1;
        if after < chars.len() && matches!(chars[after], '+' | '-') {
            after += 1;
        }
        if after < chars.len() && chars[after].is_ascii_digit() {
            end = after;
            while end < chars.len() && chars[end].is_ascii_digit() {
                end += 1;
            }
        }
    }
    let text: String = chars[start..end].iter().collect();
    match text.parse::<f64>() {
        Ok(value) if text != "." => Ok((value, end)),
        _ => Err(EvalError(format!(
            "malformed number '{text}' at position {}",
            start + 1
        ))),
    }
}

struct Parser {
    tokens: Vec<Token>,
    next: usize,
    depth: usize,
    ans: Option<f64>,
}

impl Parser {
    fn peek(&self) -> &Token {
        // `tokenize` always ends the list with `End`, and `advance` never
        // moves past it.
        &self.tokens[self.next.min(self.tokens.len() - 1)]
    }

    fn advance(&mut self) -> Token {
        let token = self.peek().clone();
        if token.kind != Kind::End {
            self.next += 1;
        }
        token
    }

    fn descend(&mut self, position: usize) -> Result<(), EvalError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(EvalError(format!(
                "the expression nests deeper than {MAX_DEPTH} levels at position {position}"
            )));
        }
        Ok(())
    }

    fn expression(&mut self) -> Result<f64, EvalError> {
        let mut value = self.term()?;
        while let Kind::Operator(op @ ('+' | '-')) = self.peek().kind {
            let position = self.advance().position;
            let right = self.term()?;
            let result = if op == '+' {
                value + right
            } else {
                value - right
            };
            value = finite(result, || format!("'{op}' at position {position}"))?;
        }
        Ok(value)
    }

    fn term(&mut self) -> Result<f64, EvalError> {
        let mut value = self.unary()?;
        while let Kind::Operator(op @ ('*' | '/' | '%')) = self.peek().kind {
            let position = self.advance().position;
            let right = self.unary()?;
            let result = match op {
                '*' => value * right,
                _ if right == 0.0 => {
                    let what = if op == '/' { "division" } else { "modulo" };
                    return Err(EvalError(format!("{what} by zero at position {position}")));
                }
                '/' => value / right,
                _ => value % right,
            };
            value = finite(result, || format!("'{op}' at position {position}"))?;
        }
        Ok(value)
    }

    fn unary(&mut self) -> Result<f64, EvalError> {
        let token = self.peek().clone();
        self.descend(token.position)?;
        let value = match token.kind {
            Kind::Operator('-') => {
                self.advance();
                -self.unary()?
            }
            Kind::Operator('+') => {
                self.advance();
                self.unary()?
            }
            _ => self.power()?,
        };
        self.depth -= 1;
        Ok(value)
    }

    fn power(&mut self) -> Result<f64, EvalError> {
        let base = self.primary()?;
        if self.peek().kind != Kind::Operator('^') {
            return Ok(base);
        }
        let position = self.advance().position;
        let exponent = self.unary()?;
        finite(base.powf(exponent), || {
            format!("'^' at position {position}")
        })
    }

    fn primary(&mut self) -> Result<f64, EvalError> {
        let token = self.advance();
        match token.kind {
            Kind::Number(value) => Ok(value),
            Kind::Open => {
                self.descend(token.position)?;
                let value = self.expression()?;
                self.expect_close(token.position)?;
                self.depth -= 1;
                Ok(value)
            }
            Kind::Name(name) if self.peek().kind == Kind::Open => {
                self.advance();
                self.descend(token.position)?;
                let mut arguments = vec![self.expression()?];
                while self.peek().kind == Kind::Comma {
                    self.advance();
                    arguments.push(self.expression()?);
                }
                self.expect_close(token.position)?;
                self.depth -= 1;
                call(&name, &arguments, token.position)
            }
            Kind::Name(name) => self.constant(&name, token.position),
            _ => Err(unexpected(&token)),
        }
    }

    fn expect_close(&mut self, open_position: usize) -> Result<(), EvalError> {
        let token = self.advance();
        match token.kind {
            Kind::Close => Ok(()),
            Kind::End => Err(EvalError(format!(
                "missing ')' for the '(' at position {open_position}"
            ))),
            _ => Err(unexpected(&token)),
        }
    }

    fn constant(&self, name: &str, position: usize) -> Result<f64, EvalError> {
        match name {
            "pi" => Ok(std::f64::consts::PI),
            "e" => Ok(std::f64::consts::E),
            "tau" => Ok(std::f64::consts::TAU),
            "ans" => self.ans.ok_or_else(|| {
                EvalError(format!(
                    "'ans' at position {position} has no value yet: it holds the result of \
                     the previous successful calculation in this session"
                ))
            }),
            _ if FUNCTIONS.iter().any(|(known, _)| *known == name) => Err(EvalError(format!(
                "function '{name}' at position {position} needs arguments in parentheses, \
                 e.g. {name}(2)"
            ))),
            _ => Err(EvalError(format!(
                "unknown name '{name}' at position {position}; constants are pi, e, tau, ans; \
                 functions are {}",
                FUNCTIONS
                    .iter()
                    .map(|(name, _)| *name)
                    .collect::<Vec<_>>()
                    .join(", ")
            ))),
        }
    }
}

/// How many arguments a function takes.
#[derive(Clone, Copy)]
enum Arity {
    One(fn(f64) -> f64),
    Two(fn(f64, f64) -> f64),
    AtLeastOne(fn(f64, f64) -> f64),
}

const FUNCTIONS: &[(&str, Arity)] = &[
    ("sqrt", Arity::One(f64::sqrt)),
    ("cbrt", Arity::One(f64::cbrt)),
    ("abs", Arity::One(f64::abs)),
    ("sin", Arity::One(f64::sin)),
    ("cos", Arity::One(f64::cos)),
    ("tan", Arity::One(f64::tan)),
    ("asin", Arity::One(f64::asin)),
    ("acos", Arity::One(f64::acos)),
    ("atan", Arity::One(f64::atan)),
    ("exp", Arity::One(f64::exp)),
    ("ln", Arity::One(f64::ln)),
    ("log10", Arity::One(f64::log10)),
    ("log2", Arity::One(f64::log2)),
    ("round", Arity::One(f64::round)),
    ("floor", Arity::One(f64::floor)),
    ("ceil", Arity::One(f64::ceil)),
    ("trunc", Arity::One(f64::trunc)),
    ("pow", Arity::Two(f64::powf)),
    ("atan2", Arity::Two(f64::atan2)),
    ("min", Arity::AtLeastOne(f64::min)),
    ("max", Arity::AtLeastOne(f64::max)),
];

fn call(name: &str, arguments: &[f64], position: usize) -> Result<f64, EvalError> {
    let Some((_, arity)) = FUNCTIONS.iter().find(|(known, _)| *known == name) else {
        return Err(EvalError(format!(
            "unknown function '{name}' at position {position}; functions are {}",
            FUNCTIONS
                .iter()
                .map(|(name, _)| *name)
                .collect::<Vec<_>>()
                .join(", ")
        )));
    };
    let wrong_count = |expected: &str| {
        EvalError(format!(
            "function '{name}' at position {position} takes {expected}, got {}",
            arguments.len()
        ))
    };
    let result = match (*arity, arguments) {
        (Arity::One(function), [x]) => function(*x),
        (Arity::One(_), _) => return Err(wrong_count("1 argument")),
        (Arity::Two(function), [x, y]) => function(*x, *y),
        (Arity::Two(_), _) => return Err(wrong_count("2 arguments")),
        (Arity::AtLeastOne(function), [first, rest @ ..]) => {
            rest.iter().fold(*first, |acc, x| function(acc, *x))
        }
        // The grammar always parses at least one argument.
        (Arity::AtLeastOne(_), []) => return Err(wrong_count("at least 1 argument")),
    };
    finite(result, || format!("{name}() at position {position}"))
}

/// Refuses NaN and infinities, naming the operation that produced them.
fn finite(value: f64, what: impl FnOnce() -> String) -> Result<f64, EvalError> {
    if value.is_finite() {
        Ok(value)
    } else {
        let kind = if value.is_nan() {
            "an undefined value"
        } else {
            "an infinite value"
        };
        Err(EvalError(format!("{} gives {kind}", what())))
    }
}

/// Formats a result for the model: whole numbers without a fraction, others
/// rounded to 15 significant digits so `0.1 + 0.2` reads `0.3`, and
/// exponent notation for very large or small magnitudes.
pub fn format_number(value: f64) -> String {
    let rounded: f64 = format!("{value:.14e}").parse().unwrap_or(value);
    let magnitude = rounded.abs();
    if rounded == 0.0 {
        "0".to_owned()
    } else if !(1e-6..1e16).contains(&magnitude) {
        format!("{rounded:e}")
    } else {
        format!("{rounded}")
    }
}
