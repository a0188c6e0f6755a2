//! The standard `OTEL_*` variables this system reads (the OpenTelemetry SDK's environment
//! specification), and the sampler they describe.

use anyhow::bail;

/// Where and how traces go. `None` from [`TraceSettings::from_vars`] means no traces: no
/// endpoint set, `OTEL_SDK_DISABLED=true`, or `OTEL_TRACES_EXPORTER=none`.
#[derive(Debug, Clone, PartialEq)]
pub struct TraceSettings {
    /// `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (used as it is), else
    /// `OTEL_EXPORTER_OTLP_ENDPOINT` (`/v1/traces` is appended): read again by the exporter.
    pub endpoint: String,
    /// `OTEL_SERVICE_NAME`, else the process's own name.
    pub service: String,
    pub sampler: Sampler,
}

/// `OTEL_TRACES_SAMPLER` and `OTEL_TRACES_SAMPLER_ARG`. A parent-based sampler follows the
/// caller's sampled flag when there is a caller, and `root` when not; `root` is the share of
/// requests traced (1 for `always_on`, 0 for `always_off`, the argument for `traceidratio`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sampler {
    pub parent_based: bool,
    pub root: f64,
}

impl Sampler {
    /// Traced or not, given the caller's sampled flag if there is a caller.
    pub fn decide(&self, parent_sampled: Option<bool>) -> bool {
        match parent_sampled {
            Some(sampled) if self.parent_based => sampled,
            _ => self.root >= 1.0 || (self.root > 0.0 && rand::random::<f64>() < self.root),
        }
    }

    fn parse(name: Option<&str>, arg: Option<&str>) -> anyhow::Result<Self> {
        let ratio = || -> anyhow::Result<f64> {
            let Some(arg) = arg.map(str::trim).filter(|a| !a.is_empty()) else {
                return Ok(1.0);
            };
            match arg.parse::<f64>() {
                Ok(r) if (0.0..=1.0).contains(&r) => Ok(r),
                _ => bail!("OTEL_TRACES_SAMPLER_ARG={arg:?}: a ratio from 0 to 1 is expected"),
            }
        };
        let (parent_based, root) = match name.map(str::trim).unwrap_or("parentbased_always_on") {
            "always_on" => (false, 1.0),
            "always_off" => (false, 0.0),
            "traceidratio" => (false, ratio()?),
            "" | "parentbased_always_on" => (true, 1.0),
            "parentbased_always_off" => (true, 0.0),
            "parentbased_traceidratio" => (true, ratio()?),
            other => bail!(
                "OTEL_TRACES_SAMPLER={other:?} is not supported: use always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off or parentbased_traceidratio"
            ),
        };
        Ok(Self { parent_based, root })
    }
}

impl TraceSettings {
    /// Reads the variables through `get`. An unsupported exporter, protocol or sampler is an
    /// error naming the variable, not a silent fallback.
    pub fn from_vars(
        default_service: &str,
        get: impl Fn(&str) -> Option<String>,
    ) -> anyhow::Result<Option<Self>> {
        let var = |k: &str| {
            get(k)
                .map(|v| v.trim().to_owned())
                .filter(|v| !v.is_empty())
        };
        if var("OTEL_SDK_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true")) {
            return Ok(None);
        }
        match var("OTEL_TRACES_EXPORTER").as_deref() {
            None | Some("otlp") => {}
            Some("none") => return Ok(None),
            Some(other) => {
                bail!("OTEL_TRACES_EXPORTER={other:?} is not supported: otlp or none")
            }
        }
        let named = [
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
            "OTEL_EXPORTER_OTLP_ENDPOINT",
        ]
        .into_iter()
        .find_map(|k| var(k).map(|v| (k, v)));
        let Some((name, endpoint)) = named else {
            return Ok(None);
        };
        check_endpoint(name, &endpoint)?;
        for protocol in [
            "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
            "OTEL_EXPORTER_OTLP_PROTOCOL",
        ] {
            match var(protocol).as_deref() {
                None | Some("http/protobuf") => {}
                Some(other) => bail!(
                    "{protocol}={other:?} is not supported: this build exports http/protobuf only"
                ),
            }
        }
        let sampler = Sampler::parse(
            var("OTEL_TRACES_SAMPLER").as_deref(),
            var("OTEL_TRACES_SAMPLER_ARG").as_deref(),
        )?;
        Ok(Some(Self {
            endpoint,
            service: var("OTEL_SERVICE_NAME").unwrap_or_else(|| default_service.to_owned()),
            sampler,
        }))
    }
}

/// An `http://` URL with a host: the exporter would take `ftp://...` or a bare `http://` and
/// then lose every span without a word. `https://` is not built in (no TLS in this build):
/// send to a collector or agent beside the process.
fn check_endpoint(name: &str, endpoint: &str) -> anyhow::Result<()> {
    if endpoint.starts_with("https://") {
        bail!("{name}={endpoint:?}: https is not built in; send to a collector over http:// (an agent beside the process)");
    }
    let authority = endpoint
        .strip_prefix("http://")
        .map(|rest| rest.split(['/', '?', '#']).next().unwrap_or_default())
        .unwrap_or_default();
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let host = if let Some(v6) = host_port.strip_prefix('[') {
        v6.split_once(']').map_or("", |(h, _)| h)
    } else {
        match host_port.rsplit_once(':') {
            Some((h, port)) if port.parse::<u16>().is_ok() => h,
            Some(_) => "",
            None => host_port,
        }
    };
    if host.is_empty() || host.contains(char::is_whitespace) {
        bail!("{name}={endpoint:?} is not an http:// URL with a host and an optional port");
    }
    Ok(())
}
