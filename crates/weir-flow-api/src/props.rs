//! Typed reads of a component's properties. Validation has checked every declared property
//! against its [`PropertyKind`](crate::spec::PropertyKind) already, so a failure here means
//! a processor reads a property its spec does not declare with that kind.

use std::time::Duration;

use crate::component::Component;
use crate::expression::{ParseError, Template};
use crate::units::{UnitError, parse_duration, parse_size};

/// A property whose value cannot be read as the processor needs it.
#[derive(Debug, thiserror::Error)]
pub enum PropertyError {
    /// Not a whole number.
    #[error("{name}: `{value}` is not a whole number")]
    NotACount {
        /// The property.
        name: String,
        /// Its value.
        value: String,
    },
    /// Not a duration or size NiFi would read.
    #[error("{name}: {source}")]
    Unit {
        /// The property.
        name: String,
        /// What is wrong with the value.
        source: UnitError,
    },
    /// Not a valid expression-language template.
    #[error("{name}: {source}")]
    Template {
        /// The property.
        name: String,
        /// What is wrong with the value.
        source: ParseError,
    },
}

/// The property's value (or its declared default); empty when it has neither.
pub fn text(c: &Component, name: &str) -> String {
    c.property(name).unwrap_or_default().to_string()
}

/// The property's value (or its declared default), if it has one.
pub fn opt(c: &Component, name: &str) -> Option<String> {
    c.property(name).map(str::to_string)
}

/// True when the property is `true`.
pub fn boolean(c: &Component, name: &str) -> bool {
    c.property(name) == Some("true")
}

/// The property as a whole number.
///
/// # Errors
/// [`PropertyError::NotACount`].
pub fn count(c: &Component, name: &str) -> Result<u64, PropertyError> {
    let value = text(c, name);
    value.trim().parse().map_err(|_| PropertyError::NotACount {
        name: name.to_string(),
        value,
    })
}

/// The property as a NiFi duration (`30 sec`).
///
/// # Errors
/// [`PropertyError::Unit`].
pub fn duration(c: &Component, name: &str) -> Result<Duration, PropertyError> {
    parse_duration(&text(c, name)).map_err(|source| PropertyError::Unit {
        name: name.to_string(),
        source,
    })
}

/// The property as a NiFi size in bytes (`1 KB`).
///
/// # Errors
/// [`PropertyError::Unit`].
pub fn size(c: &Component, name: &str) -> Result<u64, PropertyError> {
    parse_size(&text(c, name)).map_err(|source| PropertyError::Unit {
        name: name.to_string(),
        source,
    })
}

/// The property as an expression-language template, parsed once.
///
/// # Errors
/// [`PropertyError::Template`].
pub fn template(c: &Component, name: &str) -> Result<Template, PropertyError> {
    Template::parse(&text(c, name)).map_err(|source| PropertyError::Template {
        name: name.to_string(),
        source,
    })
}
