//! Buyer identity end to end: every way a token can be wrong is refused with `401` and
//! reserves nothing; good tokens of every kind buy; a body or query naming another user is
//! refused; a ticket answers its owner only; `GET /v1/seckill/{p}/order` finds the caller's
//! ticket; a rotated JWKS file is picked up without a restart; the per-address limit comes
//! before the token; too many wrong admin tokens from an address lock it out of `/admin`; and
//! no mangled token is ever accepted (a property test).
//!
//! The keys are the test keys of `testdata/jwt` (see its README).
//!
//! [`tokens`] makes the tokens and [`calls`] sends them; the tests are in the other files.

mod calls;
mod tokens;

mod bad_tokens;
mod buyers;
mod limits;
mod mangled;
