//! Pieces of documented answers that several routes' own answers are built from.

use crate::error::documented;
use utoipa::openapi::schema::{ObjectBuilder, Type};
use utoipa::openapi::{ContentBuilder, HeaderBuilder, Ref, ResponseBuilder};
use utoipa::ToSchema;

/// A `Location` header: the path of what the answer is about, `template` with `{}` for the
/// pattern of what goes there.
pub fn location(template: &str, inner: &str, required: bool) -> utoipa::openapi::Header {
    let mut header = HeaderBuilder::new()
        .schema(Some(
            ObjectBuilder::new()
                .schema_type(Type::String)
                .pattern(Some(format!("^{}$", template.replace("{}", inner)))),
        ))
        .description(Some(format!("`{}`", template.replace("{}", "…"))))
        .build();
    if required {
        header.extensions = Some(documented::required_header());
    }
    header
}

/// A JSON answer whose body is the schema component `T`.
pub fn json_answer<T: ToSchema>(description: &str) -> ResponseBuilder {
    ResponseBuilder::new().description(description).content(
        "application/json",
        ContentBuilder::new()
            .schema(Some(Ref::from_schema_name(T::name())))
            .build(),
    )
}
