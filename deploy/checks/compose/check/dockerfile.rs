//! The Dockerfile builds and ships both programs.

/// Checks the Dockerfile builds and ships both programs.
pub(crate) fn check_dockerfile(text: &str, rust_version: &str) -> Result<(), Vec<String>> {
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
