//! What actix's extractors refuse, as our errors; and JSON bodies that must be objects.

use super::ApiError;

/// Maps body-parsing failures of actix's JSON extractor to our errors.
pub fn json_error(
    err: actix_web::error::JsonPayloadError,
    _req: &actix_web::HttpRequest,
) -> actix_web::Error {
    use actix_web::error::JsonPayloadError as E;
    match err {
        E::ContentType => ApiError::UnsupportedMediaType,
        E::Overflow { .. } | E::OverflowKnownLength { .. } => ApiError::PayloadTooLarge,
        E::Deserialize(e) => ApiError::BadRequest(format!("invalid JSON body: {e}")),
        other => ApiError::BadRequest(format!("invalid body: {other}")),
    }
    .into()
}

/// Maps path-parsing failures to 400.
pub fn path_error(
    err: actix_web::error::PathError,
    _req: &actix_web::HttpRequest,
) -> actix_web::Error {
    ApiError::BadRequest(format!("invalid path: {err}")).into()
}

/// Maps query-string failures (an unknown or repeated parameter) to 400, with the JSON body
/// every other error has.
pub fn query_error(
    err: actix_web::error::QueryPayloadError,
    _req: &actix_web::HttpRequest,
) -> actix_web::Error {
    ApiError::BadRequest(format!("invalid query: {err}")).into()
}

/// A JSON body that must be an object. serde also accepts a struct written as an array
/// (`[1]`); a public API should not.
#[derive(Debug)]
pub struct Object<T>(pub T);

impl<'de, T: serde::Deserialize<'de>> serde::Deserialize<'de> for Object<T> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visit<T>(std::marker::PhantomData<T>);
        impl<'de, T: serde::Deserialize<'de>> serde::de::Visitor<'de> for Visit<T> {
            type Value = Object<T>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                map: A,
            ) -> Result<Object<T>, A::Error> {
                T::deserialize(serde::de::value::MapAccessDeserializer::new(map)).map(Object)
            }
        }
        d.deserialize_map(Visit(std::marker::PhantomData))
    }
}
