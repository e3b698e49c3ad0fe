use std::collections::HashMap;
use std::fmt;
use std::iter::Peekable;
use std::str::Chars;

#[derive(Debug, Clone, PartialEq)]
pub enum Token {
    Number(f64),
    Ident(String),
    Plus,
    Minus,
    Star,
    Slash,
    Caret,
    LParen,
    RParen,
    Comma,
}

#[derive(Debug, Clone, PartialEq)]
pub enum ParseError {
    UnexpectedChar(char, usize),
    UnexpectedToken(Token),
    UnexpectedEnd,
    UnknownVariable(String),
    UnknownFunction(String),
    DivisionByZero,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParseError::UnexpectedChar(c, pos) => write!(f, "unexpected character '{}' at {}", c, pos),
            ParseError::UnexpectedToken(tok) => write!(f, "unexpected token {:?}", tok),
            ParseError::UnexpectedEnd => write!(f, "unexpected end of input"),
            ParseError::UnknownVariable(name) => write!(f, "unknown variable '{}'", name),
            ParseError::UnknownFunction(name) => write!(f, "unknown function '{}'", name),
            ParseError::DivisionByZero => write!(f, "division by zero"),
        }
    }
}

impl std::error::Error for ParseError {}

pub struct Lexer<'a> {
    chars: Peekable<Chars<'a>>,
    pos: usize,
}

impl<'a> Lexer<'a> {
    pub fn new(input: &'a str) -> Self {
        Lexer { chars: input.chars().peekable(), pos: 0 }
    }

    fn bump(&mut self) -> Option<char> {
        let c = self.chars.next();
        if c.is_some() {
            self.pos += 1;
        }
        c
    }

    fn read_while<F: Fn(char) -> bool>(&mut self, first: char, pred: F) -> String {
        let mut buf = String::from(first);
        while let Some(&c) = self.chars.peek() {
            if !pred(c) {
                break;
            }
            buf.push(c);
            self.bump();
        }
        buf
    }

    pub fn tokenize(mut self) -> Result<Vec<Token>, ParseError> {
        let mut tokens = Vec::new();
        while let Some(c) = self.bump() {
            let token = match c {
                ' ' | '\t' | '\n' => continue,
                '+' => Token::Plus,
                '-' => Token::Minus,
                '*' => Token::Star,
                '/' => Token::Slash,
                '^' => Token::Caret,
                '(' => Token::LParen,
                ')' => Token::RParen,
                ',' => Token::Comma,
                c if c.is_ascii_digit() || c == '.' => {
                    let text = self.read_while(c, |ch| ch.is_ascii_digit() || ch == '.');
                    let value = text
                        .parse::<f64>()
                        .map_err(|_| ParseError::UnexpectedChar(c, self.pos))?;
                    Token::Number(value)
                }
                c if c.is_alphabetic() || c == '_' => {
                    Token::Ident(self.read_while(c, |ch| ch.is_alphanumeric() || ch == '_'))
                }
                other => return Err(ParseError::UnexpectedChar(other, self.pos - 1)),
            };
            tokens.push(token);
        }
        Ok(tokens)
    }
}

/// Recursive-descent evaluator for arithmetic expressions with variables and functions.
pub struct Parser<'v> {
    tokens: Vec<Token>,
    index: usize,
    vars: &'v HashMap<String, f64>,
}

impl<'v> Parser<'v> {
    pub fn new(tokens: Vec<Token>, vars: &'v HashMap<String, f64>) -> Self {
        Parser { tokens, index: 0, vars }
    }

    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.index)
    }

    fn next(&mut self) -> Option<Token> {
        let tok = self.tokens.get(self.index).cloned();
        self.index += 1;
        tok
    }

    fn expect(&mut self, expected: Token) -> Result<(), ParseError> {
        match self.next() {
            Some(ref tok) if *tok == expected => Ok(()),
            Some(tok) => Err(ParseError::UnexpectedToken(tok)),
            None => Err(ParseError::UnexpectedEnd),
        }
    }

    pub fn parse(mut self) -> Result<f64, ParseError> {
        let value = self.expression()?;
        match self.next() {
            None => Ok(value),
            Some(tok) => Err(ParseError::UnexpectedToken(tok)),
        }
    }

    fn expression(&mut self) -> Result<f64, ParseError> {
        let mut value = self.term()?;
        while let Some(tok) = self.peek() {
            match tok {
                Token::Plus => {
                    self.next();
                    value += self.term()?;
                }
                Token::Minus => {
                    self.next();
                    value -= self.term()?;
                }
                _ => break,
            }
        }
        Ok(value)
    }

    fn term(&mut self) -> Result<f64, ParseError> {
        let mut value = self.power()?;
        loop {
            match self.peek() {
                Some(Token::Star) => {
                    self.next();
                    value *= self.power()?;
                }
                Some(Token::Slash) => {
                    self.next();
                    let rhs = self.power()?;
                    if rhs == 0.0 {
                        return Err(ParseError::DivisionByZero);
                    }
                    value /= rhs;
                }
                _ => return Ok(value),
            }
        }
    }

    fn power(&mut self) -> Result<f64, ParseError> {
        let base = self.unary()?;
        if let Some(Token::Caret) = self.peek() {
            self.next();
            let exponent = self.power()?;
            return Ok(base.powf(exponent));
        }
        Ok(base)
    }

    fn unary(&mut self) -> Result<f64, ParseError> {
        match self.peek() {
            Some(Token::Minus) => {
                self.next();
                Ok(-self.unary()?)
            }
            Some(Token::Plus) => {
                self.next();
                self.unary()
            }
            _ => self.primary(),
        }
    }

    fn primary(&mut self) -> Result<f64, ParseError> {
        match self.next() {
            Some(Token::Number(n)) => Ok(n),
            Some(Token::LParen) => {
                let value = self.expression()?;
                self.expect(Token::RParen)?;
                Ok(value)
            }
            Some(Token::Ident(name)) => {
                if let Some(Token::LParen) = self.peek() {
                    self.next();
                    let mut args = vec![self.expression()?];
                    while let Some(Token::Comma) = self.peek() {
                        self.next();
                        args.push(self.expression()?);
                    }
                    self.expect(Token::RParen)?;
                    return call_function(&name, &args);
                }
                self.vars
                    .get(&name)
                    .copied()
                    .ok_or(ParseError::UnknownVariable(name))
            }
            Some(tok) => Err(ParseError::UnexpectedToken(tok)),
            None => Err(ParseError::UnexpectedEnd),
        }
    }
}

fn call_function(name: &str, args: &[f64]) -> Result<f64, ParseError> {
    match (name, args) {
        ("sqrt", [x]) => Ok(x.sqrt()),
        ("abs", [x]) => Ok(x.abs()),
        ("sin", [x]) => Ok(x.sin()),
        ("cos", [x]) => Ok(x.cos()),
        ("min", [a, rest @ ..]) => Ok(rest.iter().fold(*a, |acc, v| acc.min(*v))),
        ("max", [a, rest @ ..]) => Ok(rest.iter().fold(*a, |acc, v| acc.max(*v))),
        _ => Err(ParseError::UnknownFunction(name.to_string())),
    }
}

pub fn evaluate(input: &str, vars: &HashMap<String, f64>) -> Result<f64, ParseError> {
    let tokens = Lexer::new(input).tokenize()?;
    Parser::new(tokens, vars).parse()
}

fn main() {
    let mut vars = HashMap::new();
    vars.insert("x".to_string(), 3.0);
    vars.insert("pi".to_string(), std::f64::consts::PI);

    for expr in ["1 + 2 * 3", "-(x ^ 2) + max(1, x, 2)", "sqrt(16) / (x - 3)", "2 $ 3"] {
        match evaluate(expr, &vars) {
            Ok(value) => println!("{} = {}", expr, value),
            Err(err) => println!("{} -> error: {}", expr, err),
        }
    }
}
