//! What each built-in processor type accepts: its properties (with defaults and value
//! kinds) and its relationships, declared in the type's module and read here by validation,
//! so a property is declared once.

pub use weir_flow_api::spec::{Dynamic, ProcessorSpec, PropertyKind, PropertySpec};

/// Short for the kinds of value in the specs of the processors' modules.
pub(crate) use PropertyKind as K;

/// A [`PropertySpec`], short for the specs of the processors' modules.
pub(crate) const fn p(
    name: &'static str,
    required: bool,
    default: Option<&'static str>,
    kind: PropertyKind,
) -> PropertySpec {
    PropertySpec::new(name, required, default, kind)
}

/// Every built-in processor type's spec, in the order of `docs/flows.md`.
pub fn specs() -> impl Iterator<Item = &'static ProcessorSpec> {
    super::built_ins().map(|b| b.spec)
}

/// The spec of `kind`, if it is a built-in type.
pub fn spec(kind: &str) -> Option<&'static ProcessorSpec> {
    super::built_in(kind).map(|b| b.spec)
}
