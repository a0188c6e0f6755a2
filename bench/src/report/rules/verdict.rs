//! A figure's mark: met, not met or INVALID, from its run's validity and its goal, and the goals
//! judged over rounds.

use super::Validity;

/// The most gateway CPU per request that HS256 verification may add: (2) − (2N), µs.
pub const HS256_MAX_US: f64 = 5.0;
/// What EdDSA verification may add beyond one Ed25519 verify (criterion): (2E) − (2N), µs.
pub const EDDSA_MARGIN_US: f64 = 5.0;

/// A goal smaller than its figure's spread is judged from at least this many rounds, each run
/// next to the figure it is compared with, in an order that turns each round (the
/// authentication costs: a few µs of gateway CPU per request, which moves by more than that
/// from one run to the next on a shared machine).
pub const MIN_ROUNDS: usize = 5;

/// The mean of per-round values, with its two-sided 95 % Student-t interval.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Interval {
    pub n: usize,
    pub mean: f64,
    pub low: f64,
    pub high: f64,
}

impl Interval {
    /// `None` with fewer than two values (no spread to measure).
    pub fn of(xs: &[f64]) -> Option<Self> {
        let n = xs.len();
        if n < 2 {
            return None;
        }
        let mean = xs.iter().sum::<f64>() / n as f64;
        let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
        let half = t975(n - 1) * (var / n as f64).sqrt();
        Some(Self {
            n,
            mean,
            low: mean - half,
            high: mean + half,
        })
    }

    /// `+3.0 µs (95 % interval +1.2 to +4.8 µs, 5 rounds)`.
    pub fn text(&self) -> String {
        format!(
            "{:+.1} µs (95 % interval {:+.1} to {:+.1} µs, {} rounds)",
            self.mean, self.low, self.high, self.n
        )
    }
}

/// Student's t quantile 0.975 for `df` degrees of freedom; past 30, 30's (which is larger
/// than the true value, so the interval only widens).
fn t975(df: usize) -> f64 {
    const T: [f64; 30] = [
        12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
        2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
        2.052, 2.048, 2.045, 2.042,
    ];
    T[df.clamp(1, 30) - 1]
}

/// A goal "at most `limit`" on a value measured once per round (`xs`, the rounds that count):
/// met when the whole 95 % interval of its mean is at or under the limit, not met when the
/// whole interval is over it. Otherwise, or with fewer than [`MIN_ROUNDS`] rounds, the run
/// cannot tell, and says why.
pub fn rounds_goal(xs: &[f64], limit: f64) -> Mark {
    let Some(i) = Interval::of(xs).filter(|_| xs.len() >= MIN_ROUNDS) else {
        return Mark::NotJudged(format!(
            "a goal this small is judged from at least {MIN_ROUNDS} alternated rounds; {} \
             counted (BENCH_AUTH_ROUNDS)",
            xs.len()
        ));
    };
    if i.high <= limit {
        Mark::Met
    } else if i.low > limit {
        Mark::NotMet
    } else {
        Mark::NotJudged(format!(
            "its 95 % interval ({:+.1} to {:+.1} µs) holds the goal ({limit:.1} µs): more \
             rounds would tell",
            i.low, i.high
        ))
    }
}

/// What the "met" column says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mark {
    Met,
    NotMet,
    /// No goal, valid run.
    NoGoal,
    /// The figure's own run does not count.
    Invalid(String),
    /// Its run counts, but the goal cannot be judged (a figure it needs is invalid or missing).
    NotJudged(String),
}

impl Mark {
    pub fn cell(&self) -> String {
        match self {
            Self::Met => "yes".into(),
            Self::NotMet => "**no**".into(),
            Self::NoGoal => String::new(),
            Self::Invalid(r) => format!("**INVALID**: {r}"),
            Self::NotJudged(r) => format!("n/a: {r}"),
        }
    }
}

/// A figure run at a rate taken from `base` (say (9) at half of (2)'s): INVALID when its base
/// is, whatever its own run says.
pub fn based_on(own: Option<Validity>, name: &str, base: Option<&Validity>) -> Option<Validity> {
    match (own, base) {
        (Some(Ok(())), Some(Err(why))) => Some(Err(format!("its base {name} is INVALID: {why}"))),
        (own, _) => own,
    }
}

/// The floor of a ratio: the faster of two bare-HTTP runs that count, ours `(1)` and wrk's
/// `(1w)`, with its name and validity. With neither valid, `(1)`'s (its goal is then not
/// judged).
pub fn best_floor<'a>(
    ours: (Option<f64>, Option<&'a Validity>),
    wrk: (Option<f64>, Option<&'a Validity>),
) -> (Option<f64>, &'static str, Option<&'a Validity>) {
    let counts = |v: Option<&Validity>| matches!(v, Some(Ok(())));
    match (ours, wrk) {
        ((o, ov), (Some(w), wv)) if counts(wv) && (!counts(ov) || o.is_none_or(|o| w > o)) => {
            (Some(w), "(1w)", wv)
        }
        ((o, ov), _) => (o, "(1)", ov),
    }
}

/// A goal: the figures it is a ratio of (name and validity, `None` when not run), and whether
/// the ratio meets it (`None` when it cannot be computed).
pub struct Goal<'a> {
    pub needs: Vec<(&'a str, Option<&'a Validity>)>,
    pub met: Option<bool>,
}

/// A figure's mark: INVALID when its run is, otherwise met or not only when every figure the
/// goal needs is valid too.
pub fn verdict(own: &Validity, goal: Option<Goal>) -> Mark {
    if let Err(r) = own {
        return Mark::Invalid(r.clone());
    }
    let Some(goal) = goal else {
        return Mark::NoGoal;
    };
    for (name, v) in goal.needs {
        match v {
            None => return Mark::NotJudged(format!("{name} was not run")),
            Some(Err(_)) => return Mark::NotJudged(format!("{name} is INVALID")),
            Some(Ok(())) => {}
        }
    }
    match goal.met {
        Some(true) => Mark::Met,
        Some(false) => Mark::NotMet,
        None => Mark::NotJudged("no value".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_invalid_run_is_never_met() {
        let bad: Validity = Err("503 × 1".into());
        let good: Validity = Ok(());
        let goal = |met| Goal {
            needs: vec![("(1)", Some(&good))],
            met,
        };
        assert_eq!(verdict(&good, Some(goal(Some(true)))), Mark::Met);
        assert_eq!(verdict(&good, Some(goal(Some(false)))), Mark::NotMet);
        assert_eq!(
            verdict(&bad, Some(goal(Some(true)))),
            Mark::Invalid("503 × 1".into())
        );
        assert_eq!(verdict(&good, None), Mark::NoGoal);
        assert!(matches!(verdict(&bad, None), Mark::Invalid(_)));
        // The denominator is invalid or missing: not judged, never met.
        let needs_bad = Goal {
            needs: vec![("(1)", Some(&bad))],
            met: Some(true),
        };
        assert_eq!(
            verdict(&good, Some(needs_bad)),
            Mark::NotJudged("(1) is INVALID".into())
        );
        let needs_missing = Goal {
            needs: vec![("(1)", None)],
            met: Some(true),
        };
        assert!(matches!(
            verdict(&good, Some(needs_missing)),
            Mark::NotJudged(_)
        ));
        assert!(Mark::Invalid("x".into()).cell().starts_with("**INVALID**"));
    }
    #[test]
    fn a_goal_smaller_than_the_spread_is_judged_from_rounds_and_their_interval() {
        // Fewer than five rounds: not judged, however clear they look.
        let few = rounds_goal(&[1.0, 1.1, 0.9, 1.0], 5.0);
        assert!(
            matches!(&few, Mark::NotJudged(w) if w.contains("at least 5") && w.contains("4 counted")),
            "{few:?}"
        );
        assert_eq!(rounds_goal(&[2.0, 3.0, 2.5, 3.5, 2.0], 5.0), Mark::Met);
        assert_eq!(rounds_goal(&[7.0, 8.0, 7.5, 8.5, 7.0], 5.0), Mark::NotMet);
        // A mean under the goal, but a spread that holds it: the first round alone (-6) would
        // have been met, the second (12) not.
        let wide = rounds_goal(&[-6.0, 12.0, 1.0, 9.0, -4.0], 5.0);
        assert!(
            matches!(&wide, Mark::NotJudged(w) if w.contains("interval")),
            "{wide:?}"
        );
        // 1..5: mean 3, s = 1.581, s/√5 = 0.707, t(4) = 2.776: ± 1.963.
        let i = Interval::of(&[1.0, 2.0, 3.0, 4.0, 5.0]).unwrap();
        assert!((i.mean - 3.0).abs() < 1e-9, "{i:?}");
        assert!(
            (i.high - 4.963).abs() < 1e-3 && (i.low - 1.037).abs() < 1e-3,
            "{i:?}"
        );
        assert_eq!(
            i.text(),
            "+3.0 µs (95 % interval +1.0 to +5.0 µs, 5 rounds)"
        );
        assert!(Interval::of(&[1.0]).is_none());
    }
}
