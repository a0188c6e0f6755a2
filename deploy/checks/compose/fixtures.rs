//! What the tests share: the real compose file (or one piece of it replaced), the hosts its
//! comments document, and the assertions that the checker rejects a broken file.

use crate::check::compose::{check_compose, check_compose_in};
use crate::documented::{documented_ha_host, documented_redis_urls};
use crate::expected::{host, read_repo_file, Host, CLUSTER_PROFILE};

pub(crate) fn compose_text() -> String {
    read_repo_file("docker-compose.yml")
}

/// The real compose file with one exact piece of text replaced (which must be there).
pub(crate) fn compose_with(from: &str, to: &str) -> String {
    let text = compose_text();
    assert!(
        text.contains(from),
        "docker-compose.yml no longer contains {from:?}; update the test"
    );
    text.replacen(from, to, 1)
}

/// The checker must reject `text` with a problem mentioning every one of `needles`.
pub(crate) fn assert_rejected(text: &str, needles: &[&str]) {
    let problems = check_compose(text).expect_err("the checker accepted a broken compose file");
    assert!(
        problems
            .iter()
            .any(|p| needles.iter().all(|n| p.contains(n))),
        "no problem mentions {needles:?}; got:\n{}",
        problems.join("\n")
    );
}
/// The host of `COMPOSE_PROFILES=cluster SECKILL_REDIS_URL=<url> docker compose up`.
pub(crate) fn cluster_host(url: &str) -> Host {
    host(&[
        ("COMPOSE_PROFILES", CLUSTER_PROFILE),
        ("SECKILL_REDIS_URL", url),
    ])
}

/// The cluster URL the compose file documents (its header, and the init's error message).
pub(crate) fn documented_cluster_url() -> String {
    let urls = documented_redis_urls(&compose_text());
    assert!(
        !urls.is_empty(),
        "docker-compose.yml documents no cluster URL"
    );
    assert!(urls.iter().all(|u| *u == urls[0]), "{urls:?}");
    urls[0].clone()
}

/// The host of the `COMPOSE_PROFILES=ha ... docker compose up` that `text` documents.
pub(crate) fn ha_host_of(text: &str) -> Host {
    documented_ha_host(text).expect("docker-compose.yml documents no `COMPOSE_PROFILES=ha` command")
}

/// The documented ha host with `var` set to `value` (or removed, for `None`).
pub(crate) fn ha_host_with(var: &str, value: Option<&str>) -> Host {
    let mut vars = ha_host_of(&compose_text());
    match value {
        Some(v) => vars.insert(var.to_string(), v.to_string()),
        None => vars.remove(var),
    };
    vars
}

/// The checker, on `vars`, must reject `text` with a problem mentioning every one of `needles`.
pub(crate) fn assert_rejected_in(text: &str, vars: &Host, needles: &[&str]) {
    let problems = check_compose_in(text, vars).expect_err("the checker accepted a broken setup");
    assert!(
        problems
            .iter()
            .any(|p| needles.iter().all(|n| p.contains(n))),
        "no problem mentions {needles:?}; got:\n{}",
        problems.join("\n")
    );
}

/// The checker, with the profile on and the variables `text` documents, must reject `text`.
pub(crate) fn assert_rejected_on_ha(text: &str, needles: &[&str]) {
    assert_rejected_in(text, &ha_host_of(text), needles);
}
