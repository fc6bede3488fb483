//! The text of Go's `encoding/json` syntax errors. kube-apiserver quotes them verbatim in several 400 answers
//! (an unparsable create body, a malformed continue token), so kubesim reproduces the first error Go's scanner
//! (`encoding/json/scanner.go`) reports for the same bytes rather than serde_json's wording.

/// What Go's `json.Unmarshal` says about `data` when it is not valid JSON, or `None` when it is.
pub fn syntax_error(data: &[u8]) -> Option<String> {
    let mut scanner = Scanner { stack: Vec::new(), state: State::BeginValue };
    for &c in data {
        if let Err(context) = scanner.step(c) {
            return Some(format!("invalid character {} {context}", quote_char(c)));
        }
    }
    if scanner.state == State::EndTop {
        return None;
    }
    // Go's `eof` steps one space: it completes a number that ends the input, and its error (if any) is the
    // message, e.g. `invalid character ' ' in literal true (expecting 'e')` for `tru`.
    match scanner.step(b' ') {
        Err(context) => Some(format!("invalid character ' ' {context}")),
        Ok(()) if scanner.state == State::EndTop => None,
        Ok(()) => Some("unexpected end of JSON input".to_string()),
    }
}

/// Go's `quoteChar`: the byte as a rune, quoted by `strconv.Quote` but between single quotes.
fn quote_char(c: u8) -> String {
    match c {
        b'\'' => r"'\''".to_string(),
        b'"' => "'\"'".to_string(),
        _ => format!("'{}'", go_quote_rune(char::from(c))),
    }
}

/// The body of `strconv.Quote` for one rune of U+0000..U+00FF.
fn go_quote_rune(r: char) -> String {
    match r {
        '\u{7}' => r"\a".into(),
        '\u{8}' => r"\b".into(),
        '\u{c}' => r"\f".into(),
        '\n' => r"\n".into(),
        '\r' => r"\r".into(),
        '\t' => r"\t".into(),
        '\u{b}' => r"\v".into(),
        '\\' => r"\\".into(),
        c if c < ' ' || c == '\u{7f}' => format!(r"\x{:02x}", u32::from(c)),
        // Go's IsPrint: the C1 controls, NO-BREAK SPACE and SOFT HYPHEN are not printable.
        c if ('\u{80}'..='\u{a0}').contains(&c) || c == '\u{ad}' => format!(r"\u{:04x}", u32::from(c)),
        c => c.to_string(),
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Frame {
    ObjectKey,
    ObjectValue,
    ArrayValue,
}

/// The states of Go's scanner that this needs; each names the function of scanner.go it mirrors.
#[derive(Clone, Copy, PartialEq, Eq)]
enum State {
    BeginValueOrEmpty,
    BeginValue,
    BeginStringOrEmpty,
    BeginString,
    EndValue,
    EndTop,
    InString,
    InStringEsc,
    InStringEscU(u8),
    Neg,
    One,
    Zero,
    Dot,
    Dot0,
    E,
    ESign,
    E0,
    /// Inside `true`, `false` or `null`: the literal and how many bytes of it were read.
    Literal(&'static str, usize),
}

struct Scanner {
    stack: Vec<Frame>,
    state: State,
}

fn is_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\r' | b'\n')
}

impl Scanner {
    // Over 80 lines on purpose: one arm per state of Go's `encoding/json` scanner, in its order, so the two can be
    // read side by side.
    /// Consumes one byte; the error is the context of Go's message ("looking for beginning of value").
    fn step(&mut self, c: u8) -> Result<(), String> {
        match self.state {
            State::BeginValueOrEmpty => {
                if is_space(c) {
                    return Ok(());
                }
                if c == b']' {
                    return self.end_value(c);
                }
                self.begin_value(c)
            }
            State::BeginValue => self.begin_value(c),
            State::BeginStringOrEmpty => {
                if is_space(c) {
                    return Ok(());
                }
                if c == b'}' {
                    if let Some(top) = self.stack.last_mut() {
                        *top = Frame::ObjectValue;
                    }
                    return self.end_value(c);
                }
                self.begin_string(c)
            }
            State::BeginString => self.begin_string(c),
            State::EndValue => self.end_value(c),
            State::EndTop => {
                if is_space(c) {
                    Ok(())
                } else {
                    Err("after top-level value".into())
                }
            }
            State::InString => {
                match c {
                    b'"' => self.state = State::EndValue,
                    b'\\' => self.state = State::InStringEsc,
                    c if c < 0x20 => return Err("in string literal".into()),
                    _ => {}
                }
                Ok(())
            }
            State::InStringEsc => {
                match c {
                    b'b' | b'f' | b'n' | b'r' | b't' | b'\\' | b'/' | b'"' => self.state = State::InString,
                    b'u' => self.state = State::InStringEscU(0),
                    _ => return Err("in string escape code".into()),
                }
                Ok(())
            }
            State::InStringEscU(n) => {
                if !c.is_ascii_hexdigit() {
                    return Err(r"in \u hexadecimal character escape".into());
                }
                self.state = if n == 3 { State::InString } else { State::InStringEscU(n + 1) };
                Ok(())
            }
            State::Neg => match c {
                b'0' => {
                    self.state = State::Zero;
                    Ok(())
                }
                b'1'..=b'9' => {
                    self.state = State::One;
                    Ok(())
                }
                _ => Err("in numeric literal".into()),
            },
            State::One if c.is_ascii_digit() => Ok(()),
            State::One | State::Zero => match c {
                b'.' => {
                    self.state = State::Dot;
                    Ok(())
                }
                b'e' | b'E' => {
                    self.state = State::E;
                    Ok(())
                }
                _ => self.end_value(c),
            },
            State::Dot => {
                if !c.is_ascii_digit() {
                    return Err("after decimal point in numeric literal".into());
                }
                self.state = State::Dot0;
                Ok(())
            }
            State::Dot0 => match c {
                c if c.is_ascii_digit() => Ok(()),
                b'e' | b'E' => {
                    self.state = State::E;
                    Ok(())
                }
                _ => self.end_value(c),
            },
            State::E if c == b'+' || c == b'-' => {
                self.state = State::ESign;
                Ok(())
            }
            State::E | State::ESign => {
                if !c.is_ascii_digit() {
                    return Err("in exponent of numeric literal".into());
                }
                self.state = State::E0;
                Ok(())
            }
            State::E0 if c.is_ascii_digit() => Ok(()),
            State::E0 => self.end_value(c),
            State::Literal(word, read) => {
                let expected = word.as_bytes()[read];
                if c != expected {
                    return Err(format!("in literal {word} (expecting {})", quote_char(expected)));
                }
                self.state = if read + 1 == word.len() { State::EndValue } else { State::Literal(word, read + 1) };
                Ok(())
            }
        }
    }

    fn begin_value(&mut self, c: u8) -> Result<(), String> {
        self.state = match c {
            c if is_space(c) => return Ok(()),
            b'{' => {
                self.stack.push(Frame::ObjectKey);
                State::BeginStringOrEmpty
            }
            b'[' => {
                self.stack.push(Frame::ArrayValue);
                State::BeginValueOrEmpty
            }
            b'"' => State::InString,
            b'-' => State::Neg,
            b'0' => State::Zero,
            b'1'..=b'9' => State::One,
            b't' => State::Literal("true", 1),
            b'f' => State::Literal("false", 1),
            b'n' => State::Literal("null", 1),
            _ => return Err("looking for beginning of value".into()),
        };
        Ok(())
    }

    fn begin_string(&mut self, c: u8) -> Result<(), String> {
        match c {
            c if is_space(c) => Ok(()),
            b'"' => {
                self.state = State::InString;
                Ok(())
            }
            _ => Err("looking for beginning of object key string".into()),
        }
    }

    fn end_value(&mut self, c: u8) -> Result<(), String> {
        let Some(top) = self.stack.last().copied() else {
            self.state = State::EndTop;
            return self.step(c);
        };
        if is_space(c) {
            self.state = State::EndValue;
            return Ok(());
        }
        match (top, c) {
            (Frame::ObjectKey, b':') => {
                self.set_top(Frame::ObjectValue);
                self.state = State::BeginValue;
            }
            (Frame::ObjectKey, _) => return Err("after object key".into()),
            (Frame::ObjectValue, b',') => {
                self.set_top(Frame::ObjectKey);
                self.state = State::BeginString;
            }
            (Frame::ObjectValue, b'}') | (Frame::ArrayValue, b']') => self.pop(),
            (Frame::ObjectValue, _) => return Err("after object key:value pair".into()),
            (Frame::ArrayValue, b',') => self.state = State::BeginValue,
            (Frame::ArrayValue, _) => return Err("after array element".into()),
        }
        Ok(())
    }

    fn set_top(&mut self, frame: Frame) {
        if let Some(top) = self.stack.last_mut() {
            *top = frame;
        }
    }

    fn pop(&mut self) {
        self.stack.pop();
        self.state = if self.stack.is_empty() { State::EndTop } else { State::EndValue };
    }
}

#[cfg(test)]
mod tests {
    use super::syntax_error;

    #[test]
    fn valid_documents_have_no_error() {
        for ok in [r#"{"a":[1,-2.5e+3,true,false,null,"x\u00e9"]}"#, "[]", "{}", " 0 ", "12"] {
            assert_eq!(syntax_error(ok.as_bytes()), None, "{ok}");
        }
    }

    #[test]
    fn messages_are_go_encoding_json_s() {
        let cases: [(&[u8], &str); 10] = [
            (b"{not json", "invalid character 'n' looking for beginning of object key string"),
            (b"\x81\xab", r"invalid character '\u0081' looking for beginning of value"),
            (b"{\"a\" 1}", "invalid character '1' after object key"),
            (b"{\"a\":1 2}", "invalid character '2' after object key:value pair"),
            (b"[1 2]", "invalid character '2' after array element"),
            (b"tru!", "invalid character '!' in literal true (expecting 'e')"),
            (b"{} x", "invalid character 'x' after top-level value"),
            (b"{\"a\":", "unexpected end of JSON input"),
            (b"'", r"invalid character '\'' looking for beginning of value"),
            (b"tru", "invalid character ' ' in literal true (expecting 'e')"),
        ];
        for (input, want) in cases {
            assert_eq!(syntax_error(input).as_deref(), Some(want));
        }
    }
}
