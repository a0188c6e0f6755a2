//! Prometheus scrapes exactly the gateways and workers that run.

use crate::expected::{
    read_repo_yaml, Host, Role, GATEWAYS, HA_GUARD, PROMETHEUS, PROMETHEUS_CONFIG_VAR, WORKERS,
};
use crate::yaml::{argv_of, env_of, interpolate_in, is_on, mounts, scalar};
use serde_norway::Value;
use std::collections::{BTreeMap, BTreeSet};

/// Prometheus scrapes exactly the gateways and workers that run with the host's profiles: its
/// `--config.file`, as the host interpolates it, names a file of deploy/prometheus (mounted at
/// /etc/prometheus) whose `gateway` and `worker` jobs list those services at the ports they
/// listen on. The guard, with the `ha` profile, sees the same file name.
pub(crate) fn check_prometheus(
    services: &BTreeMap<String, &Value>,
    host: &Host,
    on: &BTreeSet<String>,
    problems: &mut Vec<String>,
) {
    let Some(prometheus) = services.get(PROMETHEUS) else {
        problems.push(format!("service `{PROMETHEUS}` is missing"));
        return;
    };
    let mut problem = |p: String| problems.push(format!("{PROMETHEUS}: {p}"));
    if !mounts(prometheus)
        .iter()
        .any(|(from, to)| from == "./deploy/prometheus" && to == "/etc/prometheus")
    {
        problem("does not mount ./deploy/prometheus at /etc/prometheus".into());
    }
    let file = argv_of(prometheus).iter().find_map(|w| {
        let w = interpolate_in(w, host).ok()?;
        w.strip_prefix("--config.file=/etc/prometheus/")
            .map(str::to_string)
    });
    let Some(file) = file else {
        problem("no --config.file=/etc/prometheus/<file>".into());
        return;
    };
    let guard = services.get(HA_GUARD).filter(|g| is_on(g, on));
    if let Some(guard) = guard {
        let seen = env_of(guard, PROMETHEUS_CONFIG_VAR, host);
        if seen.as_deref() != Some(file.as_str()) {
            problem(format!(
                "reads {file}, but {HA_GUARD} checks {PROMETHEUS_CONFIG_VAR} {seen:?}"
            ));
        }
    }
    let config = match read_repo_yaml("deploy/prometheus", &file) {
        Ok(c) => c,
        Err(e) => {
            problem(format!("--config.file {file}: {e}"));
            return;
        }
    };
    let apps = [
        (
            Role::Gateway { host_port: 0 },
            GATEWAYS.map(|g| g.0).to_vec(),
        ),
        (Role::Worker, WORKERS.to_vec()),
    ];
    for (role, names) in apps {
        let job = role.program();
        let want: BTreeSet<String> = names
            .iter()
            .filter_map(|n| {
                let service = services.get(*n).filter(|s| is_on(s, on))?;
                let addr = env_of(service, role.listen_var(), host)?;
                Some(format!("{n}:{}", addr.rsplit(':').next()?))
            })
            .collect();
        let got = scrape_targets(&config, job);
        if got != want {
            problem(format!(
                "{file} scrapes {got:?} as job {job}, but {want:?} run with profiles {on:?}"
            ));
        }
    }
}

/// The static targets of a Prometheus configuration's job.
fn scrape_targets(config: &Value, job: &str) -> BTreeSet<String> {
    let jobs = config
        .get("scrape_configs")
        .and_then(Value::as_sequence)
        .map(Vec::as_slice)
        .unwrap_or_default();
    jobs.iter()
        .filter(|j| j.get("job_name").and_then(scalar).as_deref() == Some(job))
        .flat_map(|j| {
            j.get("static_configs")
                .and_then(Value::as_sequence)
                .into_iter()
                .flatten()
        })
        .flat_map(|c| {
            c.get("targets")
                .and_then(Value::as_sequence)
                .into_iter()
                .flatten()
        })
        .filter_map(scalar)
        .collect()
}
