//! Static checks of `docker-compose.yml` and `Dockerfile` at the repository root against the
//! settings the programs read. Nothing is started: the files are parsed and compared with
//! [`Settings`], so a misspelt variable, a host name that is not a service, a wrong port or a
//! value the programs would reject fails here instead of in a container.

use seckill_shared::Settings;
use secrecy::ExposeSecret;
use serde_norway::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

/// Infrastructure services; each must have a healthcheck.
const INFRA: [&str; 4] = ["redis", "mysql", "zookeeper", "kafka"];
/// Gateways and the host port each publishes.
const GATEWAYS: [(&str, u16); 2] = [("gateway-1", 8081), ("gateway-2", 8082)];
const WORKERS: [&str; 2] = ["worker-1", "worker-2"];
/// Connections every gateway and worker sets: the variable, the image (last path part,
/// without tag) of the service it must point at, and the port that service listens on.
const CONNECTIONS: [(&str, &str, u16); 4] = [
    ("SECKILL_REDIS_URL", "redis", 6379),
    ("SECKILL_MYSQL_URL", "mysql", 3306),
    ("SECKILL_KAFKA_BROKERS", "kafka", 9092),
    ("SECKILL_ZK_HOSTS", "zookeeper", 2181),
];

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn read_repo_file(name: &str) -> String {
    let path = repo_root().join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

#[derive(Clone, Copy, PartialEq)]
enum Role {
    Gateway { host_port: u16 },
    Worker,
}

impl Role {
    fn program(self) -> &'static str {
        match self {
            Role::Gateway { .. } => "gateway",
            Role::Worker => "worker",
        }
    }
}

// ---------------------------------------------------------------- the checks

/// Checks a compose file's text; `Err` lists every problem found.
fn check_compose(text: &str) -> Result<(), Vec<String>> {
    let mut doc: Value =
        serde_norway::from_str(text).map_err(|e| vec![format!("not valid YAML: {e}")])?;
    // `<<: *anchor` merge keys are not applied by serde_norway on its own.
    doc.apply_merge()
        .map_err(|e| vec![format!("merge keys: {e}")])?;
    let services = doc
        .get("services")
        .and_then(Value::as_mapping)
        .ok_or_else(|| vec!["no `services` mapping".to_string()])?;
    let services: BTreeMap<String, &Value> = services
        .iter()
        .filter_map(|(k, v)| Some((scalar(k)?, v)))
        .collect();

    let mut problems = Vec::new();
    let known: BTreeSet<String> = Settings::env_names().into_iter().collect();

    let apps = GATEWAYS
        .iter()
        .map(|&(name, host_port)| (name, Role::Gateway { host_port }))
        .chain(WORKERS.iter().map(|&name| (name, Role::Worker)));
    for name in INFRA.iter().copied().chain(apps.clone().map(|(n, _)| n)) {
        if !services.contains_key(name) {
            problems.push(format!("service `{name}` is missing"));
        }
    }

    for name in INFRA {
        if let Some(service) = services.get(name) {
            if healthcheck(service).is_none() {
                problems.push(format!("{name}: no healthcheck"));
            }
        }
    }

    // Every SECKILL_* variable anywhere must be a setting: the programs ignore unknown ones,
    // so a typo would otherwise silently fall back to a default.
    for (name, service) in &services {
        match environment(service) {
            Ok(env) => {
                for key in env.keys() {
                    if key.starts_with(seckill_shared::config::ENV_PREFIX) && !known.contains(key) {
                        problems.push(format!("{name}: {key} is not a setting"));
                    }
                }
            }
            Err(e) => problems.push(format!("{name}: {e}")),
        }
    }

    for (name, role) in apps {
        if let Some(service) = services.get(name) {
            check_app(name, role, service, &services, &mut problems);
        }
    }

    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems)
    }
}

/// One gateway or worker.
fn check_app(
    name: &str,
    role: Role,
    service: &Value,
    services: &BTreeMap<String, &Value>,
    problems: &mut Vec<String>,
) {
    let mut problem = |p: String| problems.push(format!("{name}: {p}"));

    // The program: the image has no ENTRYPOINT, so the command names it.
    let argv = match service.get("entrypoint") {
        Some(entrypoint) => {
            let mut argv = words(entrypoint);
            argv.extend(service.get("command").map(words).unwrap_or_default());
            argv
        }
        None => service.get("command").map(words).unwrap_or_default(),
    };
    let program = argv.first().map(|p| p.rsplit('/').next().unwrap_or(p));
    if program != Some(role.program()) {
        problem(format!("runs {argv:?}, not `{}`", role.program()));
    } else if role == Role::Worker && argv.get(1).map(String::as_str) == Some("migrate") {
        problem("runs `worker migrate`, which exits after migrating".into());
    }

    // Built from the repository's Dockerfile.
    match build_dockerfile(service) {
        Some(path) => {
            let ours = repo_root().join("Dockerfile").canonicalize().ok();
            if path.canonicalize().ok() != ours || ours.is_none() {
                problem(format!(
                    "builds from {}, not the repository's Dockerfile",
                    path.display()
                ));
            }
        }
        None => problem("has no `build` (it must be built from ./Dockerfile)".into()),
    }

    let env = match environment(service) {
        Ok(env) => env,
        Err(_) => return, // reported already
    };
    let mut resolved = Vec::new();
    for (key, value) in &env {
        let Some(value) = value else { continue };
        match interpolate(value) {
            Ok(v) => resolved.push((key.clone(), v)),
            Err(e) => problem(format!("{key}: {e}")),
        }
    }
    let is_set = |key: &str| resolved.iter().any(|(k, _)| k == key);

    let listen_var = match role {
        Role::Gateway { .. } => "SECKILL_HTTP_ADDR",
        Role::Worker => "SECKILL_WORKER_HTTP_ADDR",
    };
    let mut required: Vec<&str> = CONNECTIONS.iter().map(|c| c.0).collect();
    required.push(listen_var);
    // Both programs refuse to start without it unless run with --dev.
    required.push("SECKILL_ADMIN_TOKEN");
    for key in required {
        if !is_set(key) {
            problem(format!("does not set {key}"));
        }
    }

    let settings = match Settings::from_sources(None, resolved.clone()) {
        Ok(s) => s,
        Err(e) => {
            problem(format!("settings do not load: {e:#}"));
            return;
        }
    };

    if settings.admin_token.expose_secret().trim().is_empty() {
        problem(format!(
            "SECKILL_ADMIN_TOKEN is empty: the {} refuses to start without --dev",
            role.program()
        ));
    }

    // Listen address: all interfaces (else nothing outside the container reaches it).
    let listen = match role {
        Role::Gateway { .. } => &settings.http_addr,
        Role::Worker => &settings.worker_http_addr,
    };
    let listen: SocketAddr = listen.parse().expect("validated by Settings");
    if !listen.ip().is_unspecified() {
        problem(format!(
            "{listen_var}={listen} is not reachable from outside the container; use 0.0.0.0"
        ));
    }

    // Healthcheck: curl on /livez at the listen port.
    match healthcheck(service) {
        Some(test) => {
            let url_part = format!(":{}/livez", listen.port());
            if !test.contains("curl") || !test.contains(&url_part) {
                problem(format!("healthcheck `{test}` does not curl {url_part}"));
            }
        }
        None => problem("no healthcheck".into()),
    }

    if let Role::Gateway { host_port } = role {
        match published_ports(service) {
            Ok(ports) => {
                if !ports.contains(&(Some(host_port), listen.port())) {
                    problem(format!(
                        "does not publish {host_port}:{} (publishes {ports:?})",
                        listen.port()
                    ));
                }
            }
            Err(e) => problem(e),
        }
    }

    // Connections: each host is a service of the right kind, on its port, and healthy first.
    let depends = depends_on(service);
    for (key, image, port) in CONNECTIONS {
        if !is_set(key) {
            continue;
        }
        let endpoints = match key {
            "SECKILL_REDIS_URL" => {
                url_host_port(settings.redis_url.expose_secret()).map(|e| vec![e])
            }
            "SECKILL_MYSQL_URL" => {
                url_host_port(settings.mysql_url.expose_secret()).map(|e| vec![e])
            }
            "SECKILL_KAFKA_BROKERS" => host_port_list(&settings.kafka_brokers),
            "SECKILL_ZK_HOSTS" => {
                // An optional chroot follows the last host: `zk1:2181,zk2:2181/app`.
                let hosts = settings.zk_hosts.split('/').next().unwrap_or_default();
                host_port_list(hosts)
            }
            _ => unreachable!(),
        };
        let endpoints = match endpoints {
            Ok(e) => e,
            Err(e) => {
                problem(format!("{key}: {e}"));
                continue;
            }
        };
        for (host, got_port) in endpoints {
            let Some(target) = services.get(&host) else {
                problem(format!(
                    "{key}: host `{host}` is not a service in this file"
                ));
                continue;
            };
            let target_image = target
                .get("image")
                .and_then(scalar)
                .map(|i| image_name(&i).to_string())
                .unwrap_or_default();
            if target_image != image {
                problem(format!(
                    "{key}: `{host}` runs image `{target_image}`, not {image}"
                ));
            }
            if got_port != Some(port) {
                let shown = got_port.map_or("no port".to_string(), |p| p.to_string());
                problem(format!("{key}: {host} listens on {port}, not {shown}"));
            }
            if depends.get(&host).map(String::as_str) != Some("service_healthy") {
                problem(format!(
                    "does not depend on `{host}` with condition: service_healthy"
                ));
            }
            if key == "SECKILL_KAFKA_BROKERS" {
                // Clients reconnect to the advertised address, so it must be the same one.
                let advertised = env_of(target, "KAFKA_ADVERTISED_LISTENERS").unwrap_or_default();
                let wanted = format!("{host}:{}", got_port.unwrap_or(port));
                if !advertised
                    .split(',')
                    .any(|l| l.trim().ends_with(&format!("://{wanted}")))
                {
                    problem(format!(
                        "{key}: {wanted} is not among the broker's advertised listeners `{advertised}`"
                    ));
                }
            }
            if key == "SECKILL_MYSQL_URL" {
                check_mysql_credentials(
                    settings.mysql_url.expose_secret(),
                    &host,
                    target,
                    &mut problem,
                );
            }
        }
    }
}

/// The user, password and database in the URL are the ones the MySQL container creates.
fn check_mysql_credentials(url: &str, host: &str, mysql: &Value, problem: &mut impl FnMut(String)) {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let (creds, after) = rest.rsplit_once('@').unwrap_or(("", rest));
    let (user, password) = creds.split_once(':').unwrap_or((creds, ""));
    let database = after.split_once('/').map_or("", |(_, d)| d);
    let database = database.split('?').next().unwrap_or_default();
    for (what, got, var) in [
        ("user", user, "MYSQL_USER"),
        ("password", password, "MYSQL_PASSWORD"),
        ("database", database, "MYSQL_DATABASE"),
    ] {
        let want = env_of(mysql, var).unwrap_or_default();
        if got != want {
            problem(format!(
                "SECKILL_MYSQL_URL: {what} `{got}` is not {host}'s {var} `{want}`"
            ));
        }
    }
}

/// Checks the Dockerfile builds and ships both programs.
fn check_dockerfile(text: &str, rust_version: &str) -> Result<(), Vec<String>> {
    let mut problems = Vec::new();
    // Join continuation lines, drop comments.
    let joined = text.replace("\\\n", " ");
    let lines: Vec<&str> = joined
        .lines()
        .map(str::trim)
        .filter(|l| !l.starts_with('#'))
        .collect();
    let has_flag = |line: &str, flag: &str| {
        let words: Vec<&str> = line.split_whitespace().collect();
        let parts: Vec<&str> = flag.split(' ').collect();
        words.windows(parts.len()).any(|w| w == parts.as_slice())
    };
    let builds: Vec<&&str> = lines.iter().filter(|l| l.contains("cargo build")).collect();
    if builds.is_empty() {
        problems.push("no `cargo build`".to_string());
    }
    for flag in ["--release", "--locked", "--bin gateway", "--bin worker"] {
        if !builds.iter().any(|l| has_flag(l, flag)) {
            problems.push(format!("`cargo build` lacks `{flag}`"));
        }
    }
    let froms: Vec<&&str> = lines.iter().filter(|l| l.starts_with("FROM ")).collect();
    if !froms
        .iter()
        .any(|l| l.starts_with(&format!("FROM rust:{rust_version}")))
    {
        problems.push(format!(
            "no builder `FROM rust:{rust_version}...` (the workspace's rust-version)"
        ));
    }
    if froms.len() < 2 {
        problems.push("not multi-stage".to_string());
    }
    // The runtime stage: after the last FROM.
    let last_from = lines
        .iter()
        .rposition(|l| l.starts_with("FROM "))
        .unwrap_or(0);
    let runtime = &lines[last_from..];
    for program in ["gateway", "worker"] {
        if !runtime
            .iter()
            .any(|l| l.starts_with("COPY ") && l.contains(program) && l.contains("/usr/local/bin"))
        {
            problems.push(format!(
                "the runtime stage does not copy `{program}` to /usr/local/bin"
            ));
        }
    }
    match runtime.iter().rev().find(|l| l.starts_with("USER ")) {
        Some(user) => {
            let who = user["USER ".len()..]
                .split(':')
                .next()
                .unwrap_or_default()
                .trim();
            if who == "root" || who == "0" {
                problems.push("the runtime stage runs as root".to_string());
            }
        }
        None => problems.push("the runtime stage has no USER (runs as root)".to_string()),
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems)
    }
}

// ---------------------------------------------------------------- compose helpers

/// A YAML scalar as compose reads it into a string.
fn scalar(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// `environment:` as a mapping or a list of `KEY=VALUE`; `None` for a value taken from the
/// host (`KEY:` with no value, or `- KEY`).
fn environment(service: &Value) -> Result<BTreeMap<String, Option<String>>, String> {
    let mut env = BTreeMap::new();
    match service.get("environment") {
        None | Some(Value::Null) => {}
        Some(Value::Mapping(map)) => {
            for (k, v) in map {
                let key = scalar(k).ok_or("environment: a key is not a string")?;
                let value = match v {
                    Value::Null => None,
                    v => Some(
                        scalar(v).ok_or_else(|| format!("environment: {key} is not a scalar"))?,
                    ),
                };
                env.insert(key, value);
            }
        }
        Some(Value::Sequence(items)) => {
            for item in items {
                let item = scalar(item).ok_or("environment: an entry is not a string")?;
                match item.split_once('=') {
                    Some((k, v)) => env.insert(k.to_string(), Some(v.to_string())),
                    None => env.insert(item, None),
                };
            }
        }
        Some(_) => return Err("environment is neither a mapping nor a list".into()),
    }
    Ok(env)
}

/// One environment value of a service, interpolated.
fn env_of(service: &Value, key: &str) -> Option<String> {
    let value = environment(service).ok()?.remove(key)??;
    interpolate(&value).ok()
}

/// Compose's `${VAR:-default}` interpolation, as on a host where no variable is set.
fn interpolate(raw: &str) -> Result<String, String> {
    let is_name = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let mut out = String::new();
    let mut rest = raw;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        rest = &rest[i + 1..];
        if let Some(r) = rest.strip_prefix('$') {
            out.push('$');
            rest = r;
        } else if let Some(r) = rest.strip_prefix('{') {
            let mut depth = 1;
            let end = r
                .char_indices()
                .find(|&(_, c)| {
                    match c {
                        '{' => depth += 1,
                        '}' => depth -= 1,
                        _ => {}
                    }
                    depth == 0
                })
                .map(|(j, _)| j)
                .ok_or_else(|| format!("unclosed `${{` in {raw:?}"))?;
            let expr = &r[..end];
            rest = &r[end + 1..];
            let (name, op) = expr.split_at(expr.find(|c| !is_name(c)).unwrap_or(expr.len()));
            if name.is_empty() {
                return Err(format!("bad `${{{expr}}}` in {raw:?}"));
            }
            if let Some(default) = op.strip_prefix(":-").or_else(|| op.strip_prefix('-')) {
                out.push_str(&interpolate(default)?);
            } else if op.starts_with(":?") || op.starts_with('?') {
                return Err(format!(
                    "`${{{expr}}}` needs {name} from the host; give it a default (`${{{name}:-...}}`)"
                ));
            } else if !(op.is_empty() || op.starts_with(":+") || op.starts_with('+')) {
                return Err(format!("bad `${{{expr}}}` in {raw:?}"));
            }
            // `${VAR}` and `${VAR:+alt}` with VAR unset: nothing.
        } else {
            let n = rest.find(|c| !is_name(c)).unwrap_or(rest.len());
            if n == 0 {
                return Err(format!(
                    "a lone `$` in {raw:?}; write `$$` for a literal `$`"
                ));
            }
            rest = &rest[n..];
        }
    }
    out.push_str(rest);
    Ok(out)
}

/// A command or entrypoint as words (the string form split on whitespace).
fn words(v: &Value) -> Vec<String> {
    match v {
        Value::Sequence(items) => items.iter().filter_map(scalar).collect(),
        v => scalar(v)
            .map(|s| s.split_whitespace().map(str::to_string).collect())
            .unwrap_or_default(),
    }
}

/// The healthcheck command as one string, `None` when there is none or it is disabled.
fn healthcheck(service: &Value) -> Option<String> {
    let hc = service.get("healthcheck")?;
    if hc.get("disable").and_then(Value::as_bool) == Some(true) {
        return None;
    }
    let test = words(hc.get("test")?);
    match test.first().map(String::as_str) {
        None | Some("NONE") => None,
        Some("CMD") | Some("CMD-SHELL") => Some(test[1..].join(" ")).filter(|t| !t.is_empty()),
        Some(_) => Some(test.join(" ")),
    }
}

/// `depends_on` as service → condition (the list form means `service_started`).
fn depends_on(service: &Value) -> BTreeMap<String, String> {
    match service.get("depends_on") {
        Some(Value::Sequence(items)) => items
            .iter()
            .filter_map(scalar)
            .map(|s| (s, "service_started".to_string()))
            .collect(),
        Some(Value::Mapping(map)) => map
            .iter()
            .filter_map(|(k, v)| {
                let condition = v.get("condition").and_then(scalar);
                Some((
                    scalar(k)?,
                    condition.unwrap_or_else(|| "service_started".into()),
                ))
            })
            .collect(),
        _ => BTreeMap::new(),
    }
}

/// The Dockerfile a service builds from, if it has `build`.
fn build_dockerfile(service: &Value) -> Option<PathBuf> {
    let build = service.get("build")?;
    let (context, dockerfile) = match build {
        Value::Mapping(_) => (
            build
                .get("context")
                .and_then(scalar)
                .unwrap_or_else(|| ".".into()),
            build
                .get("dockerfile")
                .and_then(scalar)
                .unwrap_or_else(|| "Dockerfile".into()),
        ),
        v => (scalar(v)?, "Dockerfile".into()),
    };
    Some(repo_root().join(context).join(dockerfile))
}

/// Published ports as (host port, container port); `None` host port for an unpublished one.
fn published_ports(service: &Value) -> Result<Vec<(Option<u16>, u16)>, String> {
    let port = |s: &str| {
        s.trim()
            .parse::<u16>()
            .map_err(|_| format!("ports: cannot read `{s}`"))
    };
    let mut out = Vec::new();
    let Some(items) = service.get("ports") else {
        return Ok(out);
    };
    for item in items.as_sequence().ok_or("ports is not a list")? {
        match item {
            Value::Mapping(_) => {
                let target = item
                    .get("target")
                    .and_then(scalar)
                    .ok_or("ports: no target")?;
                let published = item.get("published").and_then(scalar);
                out.push((published.as_deref().map(port).transpose()?, port(&target)?));
            }
            v => {
                let s = scalar(v).ok_or("ports: an entry is not a string")?;
                let s = s.split('/').next().unwrap_or_default();
                // [IP:]HOST:CONTAINER, the IP possibly `[::1]`: split from the right.
                let mut parts = s.rsplitn(3, ':');
                let container = port(parts.next().unwrap_or_default())?;
                let host = parts
                    .next()
                    .filter(|h| !h.is_empty())
                    .map(port)
                    .transpose()?;
                out.push((host, container));
            }
        }
    }
    Ok(out)
}

/// `redis`, `mysql`, `kafka` from `redis:7`, `mysql:8.0`, `apache/kafka:3.8.0`.
fn image_name(image: &str) -> &str {
    let last = image.rsplit('/').next().unwrap_or(image);
    last.split([':', '@']).next().unwrap_or(last)
}

/// Host and port of `scheme://[user[:password]@]host[:port][/path]`.
fn url_host_port(url: &str) -> Result<(String, Option<u16>), String> {
    let rest = url
        .split_once("://")
        .ok_or_else(|| format!("`{url}` is not a URL"))?
        .1;
    let authority = rest.split(['/', '?']).next().unwrap_or_default();
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    split_host_port(host_port)
}

/// `host:port,host:port`.
fn host_port_list(list: &str) -> Result<Vec<(String, Option<u16>)>, String> {
    list.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(split_host_port)
        .collect()
}

fn split_host_port(s: &str) -> Result<(String, Option<u16>), String> {
    match s.rsplit_once(':') {
        Some((host, port)) => {
            let port = port.parse().map_err(|_| format!("bad port in `{s}`"))?;
            Ok((host.to_string(), Some(port)))
        }
        None => Ok((s.to_string(), None)),
    }
}

// ---------------------------------------------------------------- the tests

fn compose_text() -> String {
    read_repo_file("docker-compose.yml")
}

/// The real compose file with one exact piece of text replaced (which must be there).
fn compose_with(from: &str, to: &str) -> String {
    let text = compose_text();
    assert!(
        text.contains(from),
        "docker-compose.yml no longer contains {from:?}; update the test"
    );
    text.replacen(from, to, 1)
}

/// The checker must reject `text` with a problem mentioning every one of `needles`.
fn assert_rejected(text: &str, needles: &[&str]) {
    let problems = check_compose(text).expect_err("the checker accepted a broken compose file");
    assert!(
        problems
            .iter()
            .any(|p| needles.iter().all(|n| p.contains(n))),
        "no problem mentions {needles:?}; got:\n{}",
        problems.join("\n")
    );
}

#[test]
fn compose_file_matches_the_settings() {
    if let Err(problems) = check_compose(&compose_text()) {
        panic!("docker-compose.yml:\n  {}", problems.join("\n  "));
    }
}

#[test]
fn dockerfile_builds_and_ships_both_programs() {
    let manifest = read_repo_file("Cargo.toml");
    let workspace: toml::Table = toml::from_str(&manifest).unwrap();
    let rust_version = workspace["workspace"]["package"]["rust-version"]
        .as_str()
        .expect("workspace.package.rust-version");
    if let Err(problems) = check_dockerfile(&read_repo_file("Dockerfile"), rust_version) {
        panic!("Dockerfile:\n  {}", problems.join("\n  "));
    }
    let ignore = read_repo_file(".dockerignore");
    for entry in ["target", ".dev", ".git"] {
        assert!(
            ignore.lines().any(|l| l.trim() == entry),
            ".dockerignore lacks {entry}"
        );
    }
}

#[test]
fn checker_catches_a_misspelled_setting() {
    let text = compose_with("  SECKILL_REDIS_URL: ", "  SECKILL_REDIS_ULR: ");
    assert_rejected(&text, &["SECKILL_REDIS_ULR is not a setting"]);
    // The real one is then missing, too.
    assert_rejected(&text, &["gateway-1", "does not set SECKILL_REDIS_URL"]);
}

#[test]
fn checker_catches_wrong_hosts_ports_and_values() {
    assert_rejected(
        &compose_with("redis://redis:6379/", "redis://localhost:6379/"),
        &["worker-1", "`localhost` is not a service"],
    );
    assert_rejected(
        &compose_with(
            "SECKILL_KAFKA_BROKERS: kafka:9092",
            "SECKILL_KAFKA_BROKERS: kafka:29092",
        ),
        &["gateway-2", "kafka listens on 9092, not 29092"],
    );
    assert_rejected(
        &compose_with(
            "SECKILL_ZK_HOSTS: zookeeper:2181",
            "SECKILL_ZK_HOSTS: redis:2181",
        ),
        &["worker-2", "runs image `redis`, not zookeeper"],
    );
    assert_rejected(
        &compose_with("\"8082:8080\"", "\"8082:8000\""),
        &["gateway-2", "does not publish 8082:8080"],
    );
    assert_rejected(
        &compose_with(
            "SECKILL_WORKER_BATCH_SIZE: \"500\"",
            "SECKILL_WORKER_BATCH_SIZE: lots",
        ),
        &[
            "worker-1",
            "settings do not load",
            "SECKILL_WORKER_BATCH_SIZE",
        ],
    );
    assert_rejected(
        &compose_with(
            "SECKILL_HTTP_ADDR: 0.0.0.0:8080",
            "SECKILL_HTTP_ADDR: 127.0.0.1:8080",
        ),
        &["gateway-1", "use 0.0.0.0"],
    );
    let no_token = compose_with(
        "${SECKILL_ADMIN_TOKEN:-change-me}",
        "${SECKILL_ADMIN_TOKEN}",
    );
    assert_rejected(&no_token, &["gateway-1", "SECKILL_ADMIN_TOKEN is empty"]);
    assert_rejected(
        &no_token,
        &["worker-2", "SECKILL_ADMIN_TOKEN is empty", "worker refuses"],
    );
    assert_rejected(
        &compose_with(
            "  SECKILL_ADMIN_TOKEN: ${SECKILL_ADMIN_TOKEN:-change-me}\n",
            "",
        ),
        &["worker-1", "does not set SECKILL_ADMIN_TOKEN"],
    );
    assert_rejected(
        &compose_with(
            "KAFKA_ADVERTISED_LISTENERS: PLAINTEXT://kafka:9092",
            "KAFKA_ADVERTISED_LISTENERS: PLAINTEXT://localhost:9092",
        ),
        &["advertised listeners"],
    );
    assert_rejected(
        &compose_with(
            "command: [\"worker\"]",
            "command: [\"worker\", \"migrate\"]",
        ),
        &["worker-1", "exits after migrating"],
    );
    assert_rejected(
        &compose_with("command: [\"gateway\"]", "command: [\"worker\"]"),
        &["gateway-1", "not `gateway`"],
    );
    assert_rejected(
        &compose_with("MYSQL_PASSWORD: seckill", "MYSQL_PASSWORD: other"),
        &[
            "worker-1",
            "password `seckill` is not mysql's MYSQL_PASSWORD `other`",
        ],
    );
    assert_rejected(
        &compose_with(
            "  redis:\n    image: redis:7\n",
            "  cache:\n    image: redis:7\n",
        ),
        &["service `redis` is missing"],
    );
}

#[test]
fn checker_reads_list_environments_and_merge_keys() {
    let text = "
x-env: &env
  - SECKILL_REDIS_URL=redis://r:6379/
  - SECKILL_MYSQL_URLL=mysql://x
services:
  a:
    <<: {environment: *env}
";
    let problems = check_compose(text).unwrap_err();
    assert!(
        problems
            .iter()
            .any(|p| p == "a: SECKILL_MYSQL_URLL is not a setting"),
        "{problems:?}"
    );
    assert!(
        !problems
            .iter()
            .any(|p| p.contains("SECKILL_REDIS_URL is not")),
        "{problems:?}"
    );
}

#[test]
fn checker_catches_a_broken_dockerfile() {
    let good = read_repo_file("Dockerfile");
    let bad = good.replace("--bin worker", "");
    let problems = check_dockerfile(&bad, "1.95").unwrap_err();
    assert!(
        problems.iter().any(|p| p.contains("--bin worker")),
        "{problems:?}"
    );
}

#[test]
fn interpolation_is_compose_like_with_an_empty_host_environment() {
    assert_eq!(interpolate("${A:-x}").unwrap(), "x");
    assert_eq!(interpolate("a-${A-y}-b").unwrap(), "a-y-b");
    assert_eq!(interpolate("${A:-${B:-nested}}").unwrap(), "nested");
    assert_eq!(interpolate("${A}$B.$$").unwrap(), ".$");
    assert_eq!(interpolate("${A:+set}").unwrap(), "");
    assert!(interpolate("${A:?required}").is_err());
    assert!(interpolate("${A").is_err());
    assert!(interpolate("a $ b").is_err());
}
