//! Weir's observability server: what a browser, `weir top` or Prometheus sees of the jobs and
//! flows running in this process.
//!
//! The JSON shapes of the REST API under `/api/v1` are the types of [`model`]; they derive
//! `utoipa::ToSchema`, so the OpenAPI document served at `/api/v1/openapi.json` is generated
//! from the same types the handlers return.

#![forbid(missing_docs)]

pub mod model;
