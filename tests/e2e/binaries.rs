//! The binaries' start-up: the secrets and `--dev`, `--config` and `--print-config`.

use crate::helpers::*;
use crate::logs::{events, message};
use crate::process::Proc;
use reqwest::StatusCode;
use seckill_shared::config::{DEV_ADMIN_TOKEN, DEV_ADMISSION_SECRET};
use std::time::Duration;
use tokio::process::Command;

/// Without SECKILL_ADMIN_TOKEN the process exits at once, non-zero, and says what to set.
async fn refuses_to_start(what: &str, (mut cmd, port): (Command, u16)) {
    cmd.env_remove("SECKILL_ADMIN_TOKEN");
    let p = Proc::spawn(cmd, port, true);
    let exited = p
        .exit(
            &format!("{what} without an admin token"),
            Duration::from_secs(30),
        )
        .await;
    let stderr = exited.stderr.join("\n");
    assert!(!exited.status.success(), "{what}: {stderr}");
    assert!(
        stderr.contains("SECKILL_ADMIN_TOKEN must be set") && stderr.contains("--dev"),
        "{what}: {stderr}"
    );
}

/// With `--dev` and no token the process starts, and its JSON log has the warning.
async fn starts_with_a_warning(what: &str, (mut cmd, port): (Command, u16)) -> Proc {
    cmd.env_remove("SECKILL_ADMIN_TOKEN")
        .env("SECKILL_LOG_FORMAT", "json")
        .env("RUST_LOG", "info");
    let p = Proc::spawn(cmd, port, true);
    p.wait_until(|v| v["status"] == "ok", "/livez").await;
    let warned = eventually(
        &format!("{what}'s --dev warning"),
        Duration::from_secs(10),
        || {
            let lines = p.stderr_now();
            async move {
                events(&lines)
                    .into_iter()
                    .find(|e| message(e).contains("--dev") && message(e).contains(DEV_ADMIN_TOKEN))
            }
        },
    )
    .await;
    assert_eq!(warned["level"], "WARN", "{warned}");
    p
}

#[tokio::test]
async fn both_binaries_refuse_to_start_without_an_admin_token_unless_dev() {
    let env = TestEnv::new().await;
    refuses_to_start("the gateway", Proc::gateway_command(&env, &[])).await;
    refuses_to_start("the worker", Proc::worker_command(&env, &[])).await;

    let gateway =
        starts_with_a_warning("the gateway", Proc::gateway_command(&env, &["--dev"])).await;
    // The development token opens /admin.
    let http = reqwest::Client::new();
    let res = http
        .get(format!("{}/admin/products/1", gateway.base))
        .bearer_auth(DEV_ADMIN_TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::NOT_FOUND);
    gateway.sigterm();
    gateway.exits_cleanly("the gateway").await;

    let worker = starts_with_a_warning("the worker", Proc::worker_command(&env, &["--dev"])).await;
    worker.sigterm();
    worker.exits_cleanly("the worker").await;
}

/// The gateway refuses to start without an admission secret (nothing is derived from the admin
/// token any more), with a short admin token, or with the admin token as admission secret;
/// with `--dev` and no admission secret it starts, warns, and signs admissions.
#[tokio::test]
async fn the_gateway_refuses_to_start_without_an_admission_secret_unless_dev() {
    let env = TestEnv::new().await;
    let refused =
        |what: &'static str, tweak: fn(&mut Command), needles: &'static [&'static str]| {
            let (mut cmd, port) = Proc::gateway_command(&env, &[]);
            tweak(&mut cmd);
            async move {
                let exited = Proc::spawn(cmd, port, true)
                    .exit(&format!("the gateway {what}"), Duration::from_secs(30))
                    .await;
                let stderr = exited.stderr.join("\n");
                assert!(!exited.status.success(), "{what}: {stderr}");
                assert!(
                    needles.iter().all(|n| stderr.contains(n)),
                    "{what}: {stderr}"
                );
            }
        };
    refused(
        "without an admission secret",
        |c| {
            c.env_remove("SECKILL_ADMISSION_SECRET");
        },
        &["SECKILL_ADMISSION_SECRET must be set", "--dev"],
    )
    .await;
    refused(
        "with a short admin token",
        |c| {
            c.env("SECKILL_ADMIN_TOKEN", "test-admin-token");
        },
        &["SECKILL_ADMIN_TOKEN", "at least 32 bytes"],
    )
    .await;
    refused(
        "with the admin token as admission secret",
        |c| {
            c.env("SECKILL_ADMISSION_SECRET", ADMIN_TOKEN);
        },
        &[
            "SECKILL_ADMISSION_SECRET",
            "must differ from SECKILL_ADMIN_TOKEN",
        ],
    )
    .await;
    // The worker signs no admission: it needs none.
    let (mut cmd, port) = Proc::worker_command(&env, &[]);
    cmd.env_remove("SECKILL_ADMISSION_SECRET");
    let worker = Proc::spawn(cmd, port, false);
    worker.wait_until(|v| v["status"] == "ok", "/livez").await;
    worker.sigterm();
    worker
        .exits_cleanly("the worker without an admission secret")
        .await;

    let (mut cmd, port) = Proc::gateway_command(&env, &["--dev"]);
    cmd.env_remove("SECKILL_ADMISSION_SECRET")
        .env("SECKILL_LOG_FORMAT", "json")
        .env("RUST_LOG", "info");
    let gateway = Proc::spawn(cmd, port, true);
    gateway.wait_until(|v| v["status"] == "ok", "/livez").await;
    let warned = eventually(
        "the gateway's --dev admission warning",
        Duration::from_secs(10),
        || {
            let lines = gateway.stderr_now();
            async move {
                events(&lines)
                    .into_iter()
                    .find(|e| message(e).contains("--dev") && message(e).contains("admission"))
            }
        },
    )
    .await;
    assert_eq!(warned["level"], "WARN", "{warned}");
    assert!(!message(&warned).contains(DEV_ADMISSION_SECRET), "{warned}");
    gateway.sigterm();
    gateway.exits_cleanly("the gateway").await;
}

/// Defaults, then the `--config` file, then the environment; `--print-config` shows the
/// result with the secrets redacted.
#[tokio::test]
async fn print_config_shows_the_layered_settings_with_secrets_redacted() {
    let dir = std::env::temp_dir().join(format!("seckill-e2e-{}", rand::random::<u64>()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("seckill.toml");
    std::fs::write(
        &file,
        "worker_batch_size = 7\nworker_batch_linger_ms = 3\nadmin_token = \"from-the-file-admin-token-of-32-bytes\"\n",
    )
    .unwrap();
    let out =
        crate::process::worker_std_command(&["--config", file.to_str().unwrap(), "--print-config"])
            .env("SECKILL_WORKER_BATCH_LINGER_MS", "9")
            .env("SECKILL_MYSQL_URL", "mysql://u:hunter2@db:3306/x")
            .env_remove("SECKILL_WORKER_BATCH_SIZE")
            .env_remove("SECKILL_TICKET_TTL_SECS")
            .env_remove("SECKILL_ADMIN_TOKEN")
            .output()
            .unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stdout = crate::process::worker_stdout(&stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let printed = |key: &str| {
        stdout
            .lines()
            .find_map(|l| l.strip_prefix(key)?.strip_prefix(" = "))
            .unwrap_or_else(|| panic!("{key} is not printed: {stdout}"))
            .to_owned()
    };
    assert_eq!(printed("worker_batch_size"), "7", "the file");
    assert_eq!(
        printed("worker_batch_linger_ms"),
        "9",
        "the environment wins"
    );
    assert_eq!(
        printed("ticket_ttl_secs"),
        seckill_shared::Settings::default()
            .redis
            .ticket_ttl_secs
            .to_string(),
        "a default"
    );
    assert_eq!(printed("admin_token"), "\"<redacted>\"");
    assert_eq!(printed("mysql_url"), "\"mysql://u:<redacted>@db:3306/x\"");
    assert!(
        !stdout.contains("from-the-file") && !stdout.contains("hunter2"),
        "{stdout}"
    );
}

/// The gateway refuses to start without a key for buyer tokens, and without authentication
/// unless `--dev`; with `--dev` and `SECKILL_AUTH_MODE=none` it starts, warns, and trusts the
/// body's `user_id`. `gateway token` prints a token the gateway accepts.
#[tokio::test]
async fn the_gateway_needs_a_buyer_key_and_no_authentication_needs_dev() {
    let env = TestEnv::new().await;
    for (what, remove_secret, mode) in [
        ("without a key", true, None),
        (
            "with SECKILL_AUTH_MODE=none but no --dev",
            false,
            Some("none"),
        ),
    ] {
        let (mut cmd, port) = Proc::gateway_command(&env, &[]);
        if remove_secret {
            cmd.env_remove("SECKILL_AUTH_HS256_SECRET");
        }
        if let Some(mode) = mode {
            cmd.env("SECKILL_AUTH_MODE", mode);
        }
        let exited = Proc::spawn(cmd, port, true)
            .exit(&format!("the gateway {what}"), Duration::from_secs(30))
            .await;
        let stderr = exited.stderr.join("\n");
        assert!(!exited.status.success(), "{what}: {stderr}");
        assert!(
            stderr.contains("SECKILL_AUTH") && stderr.contains("--dev"),
            "{what}: {stderr}"
        );
    }

    let (mut cmd, port) = Proc::gateway_command(&env, &["--dev"]);
    cmd.env("SECKILL_AUTH_MODE", "none")
        .env("SECKILL_LOG_FORMAT", "json")
        .env("RUST_LOG", "info");
    let open = Proc::spawn(cmd, port, true);
    open.wait_until(|v| v["status"] == "ok", "/livez").await;
    let warned = eventually(
        "the no-authentication warning",
        Duration::from_secs(10),
        || {
            let lines = open.stderr_now();
            async move {
                events(&lines)
                    .into_iter()
                    .find(|e| message(e).contains("anyone can buy as anyone"))
            }
        },
    )
    .await;
    assert_eq!(warned["level"], "WARN", "{warned}");
    let gw = TestGateway::at(open.base.clone(), reqwest::Client::new());
    let product = env.product(&gw, 3).await;
    let url = format!("{}/v1/seckill/{product}", gw.base);
    let res = gw
        .http
        .post(&url)
        .json(&serde_json::json!({"user_id": 5}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::ACCEPTED, "no token needed");
    let res = gw
        .http
        .post(&url)
        .json(&serde_json::json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::BAD_REQUEST, "user_id is required");
    open.sigterm();
    open.exits_cleanly("the gateway without authentication")
        .await;

    // `gateway token --user 7` signs with the configured secret.
    let (cmd, port) = Proc::gateway_command(&env, &["token", "--user", "7", "--ttl", "60"]);
    let exited = Proc::spawn(cmd, port, true)
        .exit("gateway token", Duration::from_secs(30))
        .await;
    assert!(exited.status.success(), "{}", exited.stderr.join("\n"));
    // The child is the test binary: the harness prints around the token.
    let token = exited
        .stdout
        .iter()
        .flat_map(|l| l.split_whitespace())
        .find(|w| w.starts_with("eyJ") && w.matches('.').count() == 2)
        .unwrap_or_else(|| panic!("no token printed: {:?}", exited.stdout))
        .to_owned();
    let gw = env.gateway().await;
    let res = gw
        .http
        .post(format!("{}/v1/seckill/{product}", gw.base))
        .bearer_auth(&token)
        .json(&serde_json::json!({}))
        .send()
        .await
        .unwrap();
    let status = res.status();
    let body: serde_json::Value = res.json().await.unwrap();
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    assert_eq!(body["user_id"], 7);
}
