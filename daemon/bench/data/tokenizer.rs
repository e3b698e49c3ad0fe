use std::collections::HashMap;
use std::fmt;
use std::iter::Peekable;
use std::str::CharIndices;

#[derive(Debug, Clone, PartialEq)]
pub enum Token {
    Number(f64),
    Ident(String),
    Plus,
    Minus,
    Star,
    Slash,
    LParen,
    RParen,
}

#[derive(Debug, Clone, PartialEq)]
pub enum ParseError {
    UnexpectedChar(char, usize),
    UnexpectedToken(Token),
    UnexpectedEnd,
    UnknownVariable(String),
    DivisionByZero,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParseError::UnexpectedChar(c, pos) => write!(f, "unexpected character '{}' at {}", c, pos),
            ParseError::UnexpectedToken(tok) => write!(f, "unexpected token {:?}", tok),
            ParseError::UnexpectedEnd => write!(f, "unexpected end of input"),
            ParseError::UnknownVariable(name) => write!(f, "unknown variable '{}'", name),
            ParseError::DivisionByZero => write!(f, "division by zero"),
        }
    }
}

impl std::error::Error for ParseError {}

fn read_while<F: Fn(char) -> bool>(chars: &mut Peekable<CharIndices<'_>>, first: char, pred: F) -> String {
    let mut buf = String::from(first);
    while let Some(&(_, c)) = chars.peek() {
        if !pred(c) {
            break;
        }
        buf.push(c);
        chars.next();
    }
    buf
}

/// Splits the input into tokens, skipping whitespace.
pub fn tokenize(input: &str) -> Result<Vec<Token>, ParseError> {
    let mut chars = input.char_indices().peekable();
    let mut tokens = Vec::new();
    while let Some((pos, c)) = chars.next() {
        let token = match c {
            c if c.is_whitespace() => continue,
            '+' => Token::Plus,
            '-' => Token::Minus,
            '*' => Token::Star,
            '/' => Token::Slash,
            '(' => Token::LParen,
            ')' => Token::RParen,
            c if c.is_ascii_digit() || c == '.' => {
                let text = read_while(&mut chars, c, |ch| ch.is_ascii_digit() || ch == '.');
                let value = text.parse::<f64>().map_err(|_| ParseError::UnexpectedChar(c, pos))?;
                Token::Number(value)
            }
            c if c.is_alphabetic() || c == '_' => {
                Token::Ident(read_while(&mut chars, c, |ch| ch.is_alphanumeric() || ch == '_'))
            }
            other => return Err(ParseError::UnexpectedChar(other, pos)),
        };
        tokens.push(token);
    }
    Ok(tokens)
}

/// Recursive-descent evaluator for arithmetic expressions with variables.
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
        let mut value = self.unary()?;
        loop {
            match self.peek() {
                Some(Token::Star) => {
                    self.next();
                    value *= self.unary()?;
                }
                Some(Token::Slash) => {
                    self.next();
                    let rhs = self.unary()?;
                    if rhs == 0.0 {
                        return Err(ParseError::DivisionByZero);
                    }
                    value /= rhs;
                }
                _ => return Ok(value),
            }
        }
    }

    fn unary(&mut self) -> Result<f64, ParseError> {
        if let Some(Token::Minus) = self.peek() {
            self.next();
            return Ok(-self.unary()?);
        }
        self.primary()
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
                self.vars.get(&name).copied().ok_or(ParseError::UnknownVariable(name))
            }
            Some(tok) => Err(ParseError::UnexpectedToken(tok)),
            None => Err(ParseError::UnexpectedEnd),
        }
    }
}

pub fn evaluate(input: &str, vars: &HashMap<String, f64>) -> Result<f64, ParseError> {
    let tokens = tokenize(input)?;
    Parser::new(tokens, vars).parse()
}

fn main() {
    let vars = HashMap::from([("x".to_string(), 3.0), ("rate".to_string(), 0.25)]);
    for expr in ["1 + 2 * 3", "-(x * x) + rate * 4", "16 / (x - 3)", "2 $ 3", "y + 1"] {
        match evaluate(expr, &vars) {
            Ok(value) => println!("{} = {}", expr, value),
            Err(err) => println!("{} -> error: {}", expr, err),
        }
    }
}
