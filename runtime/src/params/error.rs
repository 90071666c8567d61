//! Why a parameter file could not be used.

/// Why a text of BSP parameters could not be used
/// ([`Params::from_json`](super::Params::from_json)).
#[derive(Debug)]
#[non_exhaustive]
pub enum ParamsError {
    /// The text is not JSON; the parser's error is the [`source`](std::error::Error::source).
    Json(serde_json::Error),
    /// The JSON does not have the expected shape or a value is out of range (the message says
    /// which key, and which entry of `"levels"`).
    Invalid(String),
}

impl ParamsError {
    pub(super) fn invalid(message: impl Into<String>) -> Self {
        ParamsError::Invalid(message.into())
    }
}

impl std::fmt::Display for ParamsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ParamsError::Json(e) => write!(f, "not JSON: {e}"),
            ParamsError::Invalid(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for ParamsError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ParamsError::Json(e) => Some(e),
            ParamsError::Invalid(_) => None,
        }
    }
}
