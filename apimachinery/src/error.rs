//! Errors shared by the label and field selector parsers.

/// A selector string or object that cannot be understood. The messages follow upstream
/// apimachinery so that clients (and people) see familiar text.
#[derive(thiserror::Error, Debug, Clone, PartialEq, Eq)]
pub enum SelectorError {
    /// The grammar was violated at a token, e.g. `found ')', expected: identifier`.
    #[error("found '{found}', expected: {expected}")]
    Syntax { found: String, expected: String },
    /// A requirement is well-formed but its key, operator or values are invalid.
    #[error("unable to parse requirement: {0}")]
    Requirement(String),
    /// A field selector term has no operator.
    #[error("invalid selector: '{0}'; can't understand '{0}'")]
    FieldTerm(String),
    /// A field selector value holds a backslash escape other than `\\`, `\,` or `\=`.
    #[error("invalid field selector: invalid escape sequence: {0}")]
    InvalidEscape(String),
    /// A field selector value holds a bare `,` or `=`.
    #[error("invalid field selector: unescaped character in value: {0}")]
    UnescapedRune(char),
    /// A `metav1.LabelSelector` object of the wrong shape.
    #[error("invalid label selector: {0}")]
    InvalidObject(String),
}
